"""A framework's own model, passed where ragbridge expects a `Judge` or an `Embedder`.

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
judge or embedder that is not an engine.
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

    if obj is None or isinstance(obj, JudgeEngine):
        return obj
    # Frameworks first: a LangChain chat model has a (sync) ``generate`` and may have a
    # ``model`` field, so the protocol check alone would let it through to fail per call.
    wrapped = _wrapped(obj, "judge")
    if wrapped is not None:
        return wrapped
    if isinstance(obj, Judge) and _is_async(obj.generate):
        return obj
    if isinstance(obj, str):
        raise TypeError(
            f"judge={obj!r}: a model name is not a judge; pass a model object, e.g. "
            f"OpenAIJudge({obj!r}) from ragbridge.adapters.openai (any OpenAI-compatible server)"
        )
    raise TypeError(
        f"judge={_describe(obj)} is not a ragbridge Judge (a `model` name and an async "
        "`generate(messages, schema=None)`) and no installed adapter wraps it; ragbridge "
        "accepts LangChain chat models, LlamaIndex LLMs, DeepEval models and OpenAI clients "
        "directly" + _plugin_errors()
    )


def as_embedder(obj: Any) -> Any:
    """``obj`` as something the embedding engine can call (see `as_judge`)."""
    from .engine import EmbeddingEngine

    if obj is None or isinstance(obj, EmbeddingEngine):
        return obj
    wrapped = _wrapped(obj, "embedder")
    if wrapped is not None:
        return wrapped
    if isinstance(obj, Embedder) and _is_async(obj.embed):
        return obj
    raise TypeError(
        f"embedder={_describe(obj)} is not a ragbridge Embedder (a `model` name and an async "
        "`embed(texts)`) and no installed adapter wraps it; ragbridge accepts LangChain "
        "embeddings, LlamaIndex embedding models, DeepEval embedding models and OpenAI clients "
        "directly" + _plugin_errors()
    )


def _plugin_errors() -> str:
    return f" (model plugins that failed to load: {'; '.join(_errors)})" if _errors else ""
