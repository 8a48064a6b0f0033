"""The one model registry: whatever names a judge, an embedder or an NLI model, made into the model.

Models reach ragbridge in two forms, and every entry point takes both through here, so the same
source builds the same model whether the command line, a Dask worker or a Python caller names it:

* **Specs**, strings that fit on a command line, in CI config and in a cluster task (a string
  travels to a worker where an HTTP client or loaded weights cannot):

  - ``openai:MODEL`` — any OpenAI-compatible endpoint (``base_url``, else ``OPENAI_BASE_URL``,
    else OpenAI's); the key is read from ``RAGBRIDGE_API_KEY`` or ``OPENAI_API_KEY`` and is never
    printed or written anywhere.
  - ``langchain:MODULE:FACTORY`` / ``llamaindex:MODULE:FACTORY`` — a callable (or an object) in an
    importable module returning a LangChain chat model / LlamaIndex LLM (or embedding model),
    wrapped with that adapter's judge (or embedder).
  - ``python:MODULE:FACTORY`` — anything implementing ragbridge's `Judge` (`Embedder`) protocol
    (tests use ``python:ragbridge.core.testing:CountingJudge``).
  - embedders only: ``local`` (the packaged all-MiniLM-L6-v2), ``local:MODEL``, ``hash`` (a
    model-free test embedder). NLI models: a local folder or a model id in the Hugging Face cache.

* **Objects** a framework gave the user (a LangChain chat model, a LlamaIndex LLM, a DeepEval
  model, an OpenAI client with ``model=``, and the matching embeddings), or a ragbridge model.
  They go through the core's hook (`ragbridge.core.judging.model_objects`), whose wrappers the
  ``ragbridge.models`` entry point registers (ragbridge's own:
  `ragbridge.adapters.framework_models`).

A spec that cannot be built raises `ModelSpecError` (a ValueError) in one line that starts with
the spec's label — ``what``: ``"judge"`` by default, ``"--judge"`` when the command line asks — so
the command line shows it as it is. Importing this module imports no framework and none of the
core: it is on the path of ``ragbridge --help``.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from ragbridge.adapters._extras import install_hint

if TYPE_CHECKING:
    from ragbridge.core.judging.judge import Embedder, EntailmentModel, Judge
    from ragbridge.core.judging.model_objects import Kind
    from ragbridge.core.metrics.base import Metric

__all__ = [
    "API_KEY_VARS",
    "LOCAL_HINT",
    "ModelSpecError",
    "Role",
    "api_key",
    "embedder_for",
    "embedder_from",
    "import_object",
    "judge_from",
    "made",
    "model_from",
    "nli_from",
    "object_as",
    "wrapper_class",
]

Role = Literal["judge", "embedder", "nli"]
"""What a model is for: the judge, the embedder or the NLI model of a run."""

API_KEY_VARS = ("RAGBRIDGE_API_KEY", "OPENAI_API_KEY")
"""Where the key of an ``openai:`` spec is read from, first found first."""

LOCAL_HINT = install_hint("local")
"""What installs the default embedder (``--embedder local``)."""

_EXAMPLES = {"judge": "openai:gpt-4o-mini", "embedder": "local or openai:MODEL"}
_KINDS = {
    "judge": "openai, langchain, llamaindex or python",
    "embedder": "local, hash, openai, langchain, llamaindex or python",
}
_PROTOCOLS = {
    "judge": (("generate", "model"), "a ragbridge Judge"),
    "embedder": (("embed",), "an Embedder"),
}

_WRAPPER_CLASSES = {
    ("langchain", "judge"): ("ragbridge.adapters.langchain", "LangChainJudge"),
    ("langchain", "embedder"): ("ragbridge.adapters.langchain", "LangChainEmbedder"),
    ("llamaindex", "judge"): ("ragbridge.adapters.llamaindex.capture", "LlamaIndexJudge"),
    ("llamaindex", "embedder"): ("ragbridge.adapters.llamaindex.capture", "LlamaIndexEmbedder"),
    ("openai", "judge"): ("ragbridge.adapters.openai", "OpenAIJudge"),
    ("openai", "embedder"): ("ragbridge.adapters.openai", "OpenAIEmbedder"),
}
"""The adapter class that wraps a framework's model for each role (imported when used, so only
the framework a source belongs to is imported)."""


class ModelSpecError(ValueError):
    """A spec that names no model ragbridge can build; the message says why in one line."""


def wrapper_class(framework: str, role: Kind) -> Any:
    """ragbridge's adapter class wrapping a ``framework`` model (``langchain``, ``llamaindex``,
    ``openai``) as a judge or an embedder."""
    module, name = _WRAPPER_CLASSES[(framework, role)]
    return getattr(importlib.import_module(module), name)


def api_key() -> str | None:
    """The first non-empty key among `API_KEY_VARS`, or None (local servers want none)."""
    return next((os.environ[var] for var in API_KEY_VARS if os.environ.get(var)), None)


def import_object(spec: str, what: str) -> Any:
    """The object ``MODULE:OBJECT`` names (``OBJECT`` may be dotted); the current folder is
    searched too, so a user can name a module next to their eval set."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ModelSpecError(f"{what} must look like MODULE:OBJECT, got {spec!r}")
    sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ModelSpecError(f"cannot import {module_name!r} for {what}: {exc}") from None
    finally:
        sys.path.pop(0)
    try:
        obj = module
        for part in attr.split("."):
            obj = getattr(obj, part)
    except AttributeError:
        raise ModelSpecError(f"module {module_name!r} has no {attr!r} (for {what})") from None
    return obj


def made(spec: str, what: str) -> Any:
    """The object a ``MODULE:OBJECT`` spec names; classes and functions are called with no args.

    A factory that fails is one line naming it and its first error line, not a traceback of the
    user's code inside ragbridge's.
    """
    obj = import_object(spec, what)
    if not (isinstance(obj, type) or inspect.isroutine(obj)):
        return obj
    try:
        return obj()
    except TypeError as exc:
        raise ModelSpecError(
            f"{spec} must be callable with no arguments for {what}: {exc}"
        ) from None
    except Exception as exc:  # the user's factory failed: say so in one line
        first = (str(exc).strip().splitlines() or [""])[0]
        raise ModelSpecError(f"{spec}() raised {type(exc).__name__} for {what}: {first}") from None


def judge_from(
    source: Any, *, base_url: str | None = None, model: str | None = None, what: str = "judge"
) -> Judge | None:
    """The judge ``source`` names: a spec (see the module docs), a framework's model object or a
    ragbridge `Judge`; None stays None. ``model`` names the model of an OpenAI client object."""
    judge: Judge | None = _resolved("judge", source, base_url, model, what)
    return judge


def embedder_from(
    source: Any, *, base_url: str | None = None, model: str | None = None, what: str = "embedder"
) -> Embedder | None:
    """The embedder ``source`` names (see `judge_from`)."""
    embedder: Embedder | None = _resolved("embedder", source, base_url, model, what)
    return embedder


def nli_from(source: Any, *, what: str = "nli") -> EntailmentModel | None:
    """The NLI model of the ``:nli`` providers: a spec (a model folder or a cached model id)
    becomes an `NLIModel`; an `EntailmentModel` object (or None) is taken as it is."""
    if not isinstance(source, str):
        return source  # type: ignore[no-any-return]
    from ragbridge.adapters.nli import NLIModel

    try:
        return NLIModel(source)
    except ValueError as exc:
        raise ModelSpecError(f"{what} {source!r}: {exc}") from None


def model_from(role: Role, source: Any, *, base_url: str | None = None) -> Any:
    """The ``role`` model ``source`` names (`judge_from`, `embedder_from`, `nli_from`)."""
    if role == "nli":
        return nli_from(source)
    return _resolved(role, source, base_url, None, role)


def embedder_for(
    source: Any, metrics: Sequence[Metric], *, base_url: str | None = None, what: str = "embedder"
) -> Embedder | None:
    """``source``'s embedder, or the local default when a metric needs one and none is named.

    The default is built here, before a run, so a missing ``local`` extra is one line naming
    ``what`` and the extra before anything is paid, not a failure deep inside the run.
    """
    if source is not None:
        return embedder_from(source, base_url=base_url, what=what)
    needing = [m.name for m in metrics if m.needs_embedder]
    if not needing:
        return None
    try:
        from ragbridge.adapters.local import LocalEmbedder

        return LocalEmbedder()
    except ImportError:
        raise ModelSpecError(
            f"{', '.join(needing)} {'needs' if len(needing) == 1 else 'need'} an embedder and "
            f"the default one ({what} local) is not installed: {LOCAL_HINT}, or pass "
            f"{what} SPEC (e.g. {what} openai:text-embedding-3-small)"
        ) from None


def object_as(role: Kind, obj: Any, *, model: str | None = None) -> Any:
    """A model object as something the engines call (the object form of `judge_from`).

    An OpenAI SDK client names no model, so ``model`` does: it becomes an `OpenAIJudge` (or
    `OpenAIEmbedder`) at the client's base URL with its key. Anything else goes through the
    core's hook, `ragbridge.core.judging.model_objects`: wrapped, taken as it is, or refused
    with one TypeError saying what is accepted.
    """
    from ragbridge.adapters.framework_models import is_openai_client
    from ragbridge.core.judging import model_objects

    if model is not None and is_openai_client(obj):
        return _openai(role, model, str(obj.base_url).rstrip("/"), obj.api_key)
    return model_objects.as_judge(obj) if role == "judge" else model_objects.as_embedder(obj)


def _resolved(
    role: Kind,
    source: Any,
    base_url: str | None,
    model: str | None,
    what: str,
) -> Any:
    """A spec built (`_from_spec`), an object taken (`object_as`), or None for None."""
    if source is None:
        return None
    if isinstance(source, str):
        return _from_spec(role, source, base_url, what)
    return object_as(role, source, model=model)


def _openai(role: Kind, model: str, base_url: str | None, key: str | None) -> Any:
    from ragbridge.adapters.openai import DEFAULT_BASE_URL

    url = base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
    return wrapper_class("openai", role)(model, base_url=url, api_key=key)


def _from_spec(role: Kind, spec: str, base_url: str | None, what: str) -> Any:
    """A ``KIND:REST`` spec built for ``role``; every refusal names ``what`` and the spec."""
    kind, _, rest = spec.partition(":")
    if role == "embedder" and kind in ("local", "hash"):
        return _offline_embedder(kind, rest, spec, what)
    if not rest:
        raise ModelSpecError(f"{what} {spec!r}: expected KIND:…, e.g. {_EXAMPLES[role]}")
    if kind == "openai":
        return _openai(role, rest, base_url, api_key())
    if kind in ("langchain", "llamaindex"):
        return wrapper_class(kind, role)(made(rest, what))
    if kind == "python":
        built = made(rest, what)
        needs, protocol = _PROTOCOLS[role]
        if not all(hasattr(built, attribute) for attribute in needs):
            raise ModelSpecError(f"{what} {spec}: {type(built).__name__} is not {protocol}")
        return built
    raise ModelSpecError(f"{what} {spec!r}: unknown kind {kind!r}; use {_KINDS[role]}")


def _offline_embedder(kind: str, rest: str, spec: str, what: str) -> Any:
    """``local[:MODEL]`` (the extra missing is one line) or ``hash``."""
    if kind == "hash":
        from ragbridge.core.testing import HashEmbedder

        return HashEmbedder()
    try:
        from ragbridge.adapters.local import LocalEmbedder

        return LocalEmbedder(rest or None)
    except ImportError as exc:
        raise ModelSpecError(f"{what} {spec}: {exc}") from None
