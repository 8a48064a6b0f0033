"""What the model-loading adapters (``local``, ``nli``, ``strings``) share: offline and quiet.

Not an adapter of its own and imports nothing optional, so sharing it keeps the rule that no
adapter imports another.

Why `hub_offline` exists next to `disable_hub`: huggingface_hub reads ``HF_HUB_OFFLINE`` once,
when it is first imported, into a module constant. RAGAS, DeepEval (through ``datasets``) and
LangChain import it long before a model is loaded, so setting the variable afterwards changes
nothing, and a model name that is not on this machine would be looked up on huggingface.co.
The loaders therefore pass ``local_files_only=hub_offline()`` to every ``from_pretrained``-style
call: the decision is made at load time, whatever was imported first.

Why `disable_runtime_telemetry` lives here too: ONNX Runtime's Linux wheels from 1.29 on (1.28
has none) upload usage events to ``mobile.events.data.microsoft.com`` from native code. ``import
onnxruntime`` alone resolves that host within seconds and again later (seen with ``strace``: DNS
queries to the resolver on port 53), and writes a device identifier and an event database under
``~/.cache/Microsoft/DeveloperTools``. Python's audit hooks and socket patches never see it, and
``onnxruntime.disable_telemetry_events()`` comes too late (the runtime's environment was created
at import). The switch it honours is ``ORT_DISABLE_TELEMETRY=1``, read once, at that import;
set then, nothing is resolved, sent or written (checked on 1.29.0, 1.31.1 and 1.32.0). CI
machines escape it anyway (ORT stays quiet when ``CI``, ``GITHUB_ACTIONS`` and the like are
set), which is why a user saw it and CI did not. So the variable must be in ``os.environ``
before the first ``import onnxruntime``.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from ragbridge.adapters._frameworks import telemetry_opted_in

__all__ = [
    "OFFLINE_ENV",
    "RUNTIME_TELEMETRY_OFF",
    "disable_hub",
    "disable_runtime_telemetry",
    "hub_offline",
    "installed",
    "quiet_model_loading",
]

OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}

RUNTIME_TELEMETRY_OFF = {"ORT_DISABLE_TELEMETRY": "1"}
"""ONNX Runtime's own opt-out: no uploader, no device identifier, no DNS lookup (module docs)."""

_TRUE = {"1", "on", "yes", "true"}


def installed(module: str) -> bool:
    """Whether ``module`` can be imported, found without importing it (so without torch)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a broken parent package or a None entry in sys.modules
        return False


def disable_hub() -> None:
    """Keep huggingface_hub and transformers offline unless the user decided otherwise.

    ``setdefault``: a user who set ``HF_HUB_OFFLINE=0`` on purpose keeps downloads.
    """
    for name, value in OFFLINE_ENV.items():
        os.environ.setdefault(name, value)


def disable_runtime_telemetry() -> None:
    """Turn ONNX Runtime's native telemetry off before onnxruntime is imported (module docs).

    ``setdefault``, as for the frameworks' switches: a value the user set wins, and
    ``RAGBRIDGE_FRAMEWORK_TELEMETRY=1`` leaves it to ONNX Runtime's default. Too late once
    onnxruntime is imported (it reads the variable once), so the loaders call it first: the
    ``local`` adapter when imported and when it loads the onnx backend, `._bert_onnx` right
    before its own import of onnxruntime.
    """
    if telemetry_opted_in():
        return
    for name, value in RUNTIME_TELEMETRY_OFF.items():
        os.environ.setdefault(name, value)


def hub_offline() -> bool:
    """Whether downloads are disabled, read now from the environment (not at import).

    The same rule as huggingface_hub's: ``HF_HUB_OFFLINE``, or when it is unset or empty
    ``TRANSFORMERS_OFFLINE``, is one of 1/on/yes/true. After `disable_hub` that is true unless
    the user set ``HF_HUB_OFFLINE=0`` (or another false value) explicitly.
    """
    value = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return value.strip().lower() in _TRUE


@contextmanager
def quiet_model_loading() -> Iterator[None]:
    """No ``Loading weights`` progress bar and no transformers advisory warnings while loading.

    transformers draws a progress bar on stderr for every model it loads; ragbridge loads its
    models as a side effect of scoring, so the bar is noise. The bar and the verbosity are
    restored afterwards, so a user's own transformers calls look as they did. A no-op when
    transformers is not installed.
    """
    if "transformers" not in sys.modules and importlib.util.find_spec("transformers") is None:
        yield
        return
    tf_logging = importlib.import_module("transformers.utils.logging")
    bars_were_on = bool(tf_logging.is_progress_bar_enabled())
    verbosity = tf_logging.get_verbosity()
    tf_logging.disable_progress_bar()
    tf_logging.set_verbosity_error()
    try:
        yield
    finally:
        tf_logging.set_verbosity(verbosity)
        if bars_were_on:
            tf_logging.enable_progress_bar()
