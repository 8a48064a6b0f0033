"""What every adapter that loads a framework shares: the frameworks' telemetry off, their noise out.

Why it exists: RAGAS and DeepEval send usage telemetry by default (RAGAS to
``t.explodinggradients.com``, DeepEval through PostHog to ``us.i.posthog.com``), from inside the
very calls ragbridge makes on a user's behalf, and they print warnings, banners and progress bars
nobody asked for. A user who runs ``ragbridge demo`` or ``ragbridge compare`` offline should see
neither network traffic nor DeepEval's upload errors.

* `quiet_frameworks` sets the frameworks' own opt-out switches in ``os.environ`` with
  ``setdefault`` (a value the user set explicitly wins). It must run before a framework is
  imported: RAGAS caches its switch on first use and DeepEval reads its settings (and its
  ``.env`` files) when imported. Every adapter module that imports ragas, deepeval, langsmith,
  llama_index or a Hugging Face library calls it first, and so does the ``ragbridge`` command.
  ``RAGBRIDGE_FRAMEWORK_TELEMETRY=1`` leaves the telemetry switches to the frameworks' own
  defaults (an explicit opt-in).
* `framework_noise_off` is worn around ragbridge's own calls into the frameworks: their
  loggers' warnings, LangSmith's beta warnings and a ``logging.basicConfig`` some of them trigger
  stay inside the call. What matters to the user is reported by ragbridge itself (typed failures,
  edge cases, one-line warnings).

Not an adapter of its own and imports nothing optional, so sharing it keeps the rule that no
adapter imports another.
"""

from __future__ import annotations

import logging
import os
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = [
    "ALWAYS",
    "NOISY_LOGGERS",
    "TELEMETRY_OFF",
    "TELEMETRY_OPT_IN",
    "framework_noise_off",
    "quiet_frameworks",
    "telemetry_opted_in",
]

TELEMETRY_OPT_IN = "RAGBRIDGE_FRAMEWORK_TELEMETRY"
"""Set to ``1`` to leave the frameworks' telemetry switches to their own defaults."""

TELEMETRY_OFF: dict[str, str] = {
    "RAGAS_DO_NOT_TRACK": "true",  # RAGAS: usage events to t.explodinggradients.com
    "DEEPEVAL_TELEMETRY_OPT_OUT": "YES",  # DeepEval: PostHog events to us.i.posthog.com
    "HF_HUB_DISABLE_TELEMETRY": "1",  # huggingface_hub: download telemetry
}
"""The frameworks' own telemetry opt-outs, set unless `TELEMETRY_OPT_IN` is ``1``."""

ALWAYS: dict[str, str] = {
    # DeepEval merges ./.env, ./.env.local, ... into os.environ when it is imported: keys from
    # whatever folder ragbridge runs in would silently change the run.
    "DEEPEVAL_DISABLE_DOTENV": "1",
}
"""Switches set whatever the telemetry choice (not telemetry, but as surprising)."""

NOISY_LOGGERS = (
    "ragas",
    "deepeval",
    "posthog",
    "langsmith",
    "llama_index",
    "sentence_transformers",
    "transformers",
    "huggingface_hub",
    "absl",
)
"""Loggers held at ERROR while ragbridge calls into the frameworks."""

_TRUE = {"1", "true", "yes", "on"}


def telemetry_opted_in() -> bool:
    """Whether the user set ``RAGBRIDGE_FRAMEWORK_TELEMETRY=1`` (frameworks' telemetry on)."""
    return os.environ.get(TELEMETRY_OPT_IN, "").strip().lower() in _TRUE


def quiet_frameworks() -> None:
    """Set the frameworks' opt-out switches (``setdefault``: explicit user values win).

    Idempotent and cheap; call it before importing ragas, deepeval, langsmith, llama_index,
    transformers or sentence-transformers. Under ``RAGBRIDGE_FRAMEWORK_TELEMETRY=1`` only the
    `ALWAYS` switches are set.
    """
    switches = dict(ALWAYS)
    if not telemetry_opted_in():
        switches.update(TELEMETRY_OFF)
    for name, value in switches.items():
        os.environ.setdefault(name, value)


# One process-wide state: levels are global, so nested or concurrent uses share one saving.
_noise_lock = threading.Lock()
_noise_depth = 0
_saved_levels: dict[str, int] = {}
_root_guard: logging.Handler | None = None


def _enter_quiet() -> None:
    global _noise_depth, _root_guard
    with _noise_lock:
        _noise_depth += 1
        if _noise_depth > 1:
            return
        for name in NOISY_LOGGERS:
            logger = logging.getLogger(name)
            _saved_levels[name] = logger.level
            if logger.getEffectiveLevel() < logging.ERROR:
                logger.setLevel(logging.ERROR)
        root = logging.getLogger()
        if not root.handlers:
            # A handler on the root logger keeps absl (rouge-score) and RAGAS's module-level
            # ``logging.warning`` from calling ``logging.basicConfig()``, which would configure
            # the user's logging and print every library's warnings for the rest of the process.
            _root_guard = logging.NullHandler()
            root.addHandler(_root_guard)


def _exit_quiet() -> None:
    global _noise_depth, _root_guard
    with _noise_lock:
        _noise_depth -= 1
        if _noise_depth > 0:
            return
        for name, level in _saved_levels.items():
            logging.getLogger(name).setLevel(level)
        _saved_levels.clear()
        if _root_guard is not None:
            logging.getLogger().removeHandler(_root_guard)
            _root_guard = None


@contextmanager
def framework_noise_off() -> Iterator[None]:
    """Keep the frameworks' log warnings and beta/deprecation warnings inside this block.

    Worn around ragbridge's own calls into RAGAS, DeepEval, LangSmith and the model loaders.
    Errors (ERROR and above) still reach a logging setup the user configured; exceptions are
    untouched. Safe to nest and to use from several threads at once (the first entry saves the
    logger levels, the last exit restores them).
    """
    _enter_quiet()
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r".*\bis in beta\b")  # LangSmith
            for module in ("ragas", "deepeval", "langsmith", "llama_index", "langchain"):
                warnings.filterwarnings("ignore", category=DeprecationWarning, module=module)
            yield
    finally:
        _exit_quiet()
