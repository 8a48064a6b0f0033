"""A model object where ragbridge expects a `Judge` or an `Embedder`: taken, wrapped or refused.

Users come with the model object their framework gave them: a LangChain chat model, a
LlamaIndex LLM, a DeepEval model, an OpenAI client, and the matching embeddings. Before, such
an object reached the engine unchanged and failed per call with an ``AttributeError`` about a
missing ``model``; now `Settings` hands it to `as_judge` / `as_embedder` when it is built, and
either gets a ragbridge wrapper back or raises one ``TypeError`` that says what was passed and
what is accepted.

The core imports no framework, so the wrapping is done by plugins: callables registered
under the ``ragbridge.models`` entry-point group (ragbridge's own is
`ragbridge.adapters.framework_models.wrap`), each called as ``wrap(obj, kind)`` with ``kind``
"judge" or "embedder" and returning a wrapper, or None for an object it does not know. A
third-party package adds its framework the same way. Plugins are loaded once, on the first
judge or embedder that is not an engine. (Model *specs*, strings such as ``openai:gpt-4o-mini``,
are the adapters' `ragbridge.adapters.model_registry`, which hands objects to this hook.)
"""

from __future__ import annotations

import importlib.metadata
import inspect
import threading
from collections.abc import Callable
from typing import Any, Literal

from .judge import Embedder, Judge

__all__ = ["ENTRY_POINT_GROUP", "as_embedder", "as_judge", "register_wrapper"]

ENTRY_POINT_GROUP = "ragbridge.models"

Kind = Literal["judge", "embedder"]
Wrapper = Callable[[Any, Kind], Any]

_wrappers: list[Wrapper] = []
_loaded = False
_lock = threading.Lock()
_errors: list[str] = []

_PROTOCOLS: dict[Kind, tuple[type, str, str, str]] = {
    # kind: (protocol, its async method, what it needs, what ragbridge takes directly)
    "judge": (
        Judge,
        "generate",
        "a `model` name and an async `generate(messages, schema=None)`",
        "LangChain chat models, LlamaIndex LLMs, DeepEval models and OpenAI clients",
    ),
    "embedder": (
        Embedder,
        "embed",
        "a `model` name and an async `embed(texts)`",
        "LangChain embeddings, LlamaIndex embedding models, DeepEval embedding models and "
        "OpenAI clients",
    ),
}


def register_wrapper(wrapper: Wrapper) -> None:
    """Add ``wrapper`` (tried after those already registered)."""
    with _lock:
        if wrapper not in _wrappers:
            _wrappers.append(wrapper)


def _plugins() -> list[Wrapper]:
    global _loaded
    with _lock:
        if not _loaded:
            _loaded = True
            for point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
                try:
                    loaded = point.load()
                except Exception as exc:  # a broken plugin must not break every run
                    _errors.append(f"{point.name} ({point.value}): {exc}")
                    continue
                if callable(loaded) and loaded not in _wrappers:
                    _wrappers.append(loaded)
        return list(_wrappers)


def _wrapped(obj: Any, kind: Kind) -> Any:
    for wrapper in _plugins():
        result = wrapper(obj, kind)
        if result is not None:
            return result
    return None


def _describe(obj: Any) -> str:
    cls = type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


def _is_async(method: Any) -> bool:
    """False only for a plain ``def`` method: the engine awaits it. Other callables (a mock,
    a partial) are taken on trust."""
    return inspect.iscoroutinefunction(method) or not inspect.ismethod(method)


def as_judge(obj: Any) -> Any:
    """``obj`` as something the judge engine can call: a `JudgeEngine` or ragbridge `Judge` as
    it is, a framework model wrapped, anything else a ``TypeError``."""
    from .engine import JudgeEngine

    return _taken(obj, "judge", JudgeEngine)


def as_embedder(obj: Any) -> Any:
    """``obj`` as something the embedding engine can call (see `as_judge`)."""
    from .embedding import EmbeddingEngine

    return _taken(obj, "embedder", EmbeddingEngine)


def _taken(obj: Any, kind: Kind, engine: type) -> Any:
    """None and engines as they are, then a plugin's wrapper, then the protocol, else refused.

    Frameworks come before the protocol check: a LangChain chat model has a (sync) ``generate``
    and may have a ``model`` field, so the protocol check alone would let it through to fail
    per call.
    """
    if obj is None or isinstance(obj, engine):
        return obj
    wrapped = _wrapped(obj, kind)
    if wrapped is not None:
        return wrapped
    protocol, method, needs, direct = _PROTOCOLS[kind]
    if isinstance(obj, protocol) and _is_async(getattr(obj, method)):
        return obj
    if kind == "judge" and isinstance(obj, str):
        raise TypeError(
            f"judge={obj!r}: a model name is not a judge; pass a model object, e.g. "
            f"OpenAIJudge({obj!r}) from ragbridge.adapters.openai (any OpenAI-compatible server)"
        )
    name = "Judge" if kind == "judge" else "Embedder"
    raise TypeError(
        f"{kind}={_describe(obj)} is not a ragbridge {name} ({needs}) and no installed adapter "
        f"wraps it; ragbridge accepts {direct} directly" + _plugin_errors()
    )


def _plugin_errors() -> str:
    return f" (model plugins that failed to load: {'; '.join(_errors)})" if _errors else ""
