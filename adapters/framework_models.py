"""Recognise the frameworks' own model objects and wrap them as ragbridge judges and embedders.

Registered under the ``ragbridge.models`` entry point, so ``Settings(judge=ChatOpenAI(...))``,
``evaluators([...], judge=FakeListChatModel(...))`` or ``RagbridgeEvaluator(..., llm=MockLLM())``
work as written (the core's hook, `ragbridge.core.judging.model_objects`, calls `wrap`). An object
is recognised by the modules of its classes (``type(obj).__mro__``), never by importing a
framework: importing this module imports none, and each wrapper's adapter is imported only for
an object of its framework, which is therefore installed.

* LangChain chat models / LLMs → `LangChainJudge`; ``Embeddings`` → `LangChainEmbedder`.
* LlamaIndex LLMs → `LlamaIndexJudge`; ``BaseEmbedding`` → `LlamaIndexEmbedder`.
* DeepEval models (``DeepEvalBaseLLM``) → `DeepEvalModelJudge`; embedding models →
  `DeepEvalModelEmbedder`; ragbridge's own `DeepEvalJudge` is unwrapped to its engine.
* RAGAS's wrappers of LangChain / LlamaIndex models are unwrapped to the model inside;
  ragbridge's `RagasJudge` / `RagasEmbedder` to their engines.
* OpenAI SDK clients (``openai.OpenAI`` / ``AsyncOpenAI``) name no model, so they need one:
  ``as_judge(client, model="gpt-4o-mini")`` (an `OpenAIJudge` at the client's base URL and key);
  without it the error says exactly that.

`as_judge` / `as_embedder` are the object form of the model registry
(`ragbridge.adapters.model_registry`, which also reads specs such as ``openai:gpt-4o-mini``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel

from ragbridge.adapters.model_registry import object_as, wrapper_class
from ragbridge.core.judging.judge import JudgeReply, Message

__all__ = [
    "DeepEvalModelEmbedder",
    "DeepEvalModelJudge",
    "as_embedder",
    "as_judge",
    "is_openai_client",
    "wrap",
]

Kind = Literal["judge", "embedder"]

_CLASS_NAMES: dict[str, dict[Kind, frozenset[str]]] = {
    # framework: the class names (anywhere in an object's MRO) that make it a judge / an embedder
    "langchain": {
        "judge": frozenset({"BaseChatModel", "BaseLanguageModel", "BaseLLM"}),
        "embedder": frozenset({"Embeddings"}),
    },
    "llamaindex": {
        "judge": frozenset({"LLM", "BaseLLM"}),
        "embedder": frozenset({"BaseEmbedding"}),
    },
}


def _roots(obj: Any) -> set[str]:
    return {cls.__module__.split(".")[0] for cls in type(obj).__mro__}


def _names(obj: Any) -> set[str]:
    return {cls.__name__ for cls in type(obj).__mro__}


def is_openai_client(obj: Any) -> bool:
    """Whether ``obj`` is an OpenAI SDK client (``openai.OpenAI`` / ``AsyncOpenAI``), which
    names no model of its own."""
    return "openai" in _roots(obj) and hasattr(obj, "base_url")


def wrap(obj: Any, kind: Kind) -> Any:
    """A ragbridge wrapper for ``obj``, or None when it is no framework model of ``kind``."""
    roots = _roots(obj)
    if "ragbridge" in roots:
        return _unwrap_own(obj, kind)
    if "ragas" in roots:
        return _unwrap_ragas(obj, kind)
    if roots & {"langchain_core", "langchain", "langchain_community"}:
        return _adapted(obj, kind, "langchain")
    if "llama_index" in roots:
        return _adapted(obj, kind, "llamaindex")
    if "deepeval" in roots:
        return _deepeval(obj, kind)
    if is_openai_client(obj):
        raise TypeError(
            f"{kind}={type(obj).__name__}: an OpenAI client names no model; pass "
            f"ragbridge.adapters.framework_models.as_{kind}(client, model='MODEL')"
        )
    return None


def as_judge(obj: Any, *, model: str | None = None) -> Any:
    """``obj`` as a ragbridge judge; ``model`` names the model of an OpenAI client."""
    return object_as("judge", obj, model=model)


def as_embedder(obj: Any, *, model: str | None = None) -> Any:
    """``obj`` as a ragbridge embedder; ``model`` names the model of an OpenAI client."""
    return object_as("embedder", obj, model=model)


def _unwrap_own(obj: Any, kind: Kind) -> Any:
    """ragbridge's wrappers of its own engine for a framework, passed back to ragbridge."""
    names = _names(obj)
    if kind == "judge" and names & {"DeepEvalJudge", "RagasJudge", "RagasInstructorJudge"}:
        ledger = getattr(obj, "_ledger", None)
        return getattr(ledger, "engine", None) or getattr(obj, "engine", None)
    if kind == "embedder" and names & {"RagasEmbedder", "RagasModernEmbedder"}:
        return getattr(obj, "engine", None) or getattr(
            getattr(obj, "_ledger", None), "engine", None
        )
    return None


def _unwrap_ragas(obj: Any, kind: Kind) -> Any:
    for attribute in ("langchain_llm", "llm", "langchain_embeddings", "embeddings", "embed_model"):
        inner = getattr(obj, attribute, None)
        if inner is not None and inner is not obj and "ragas" not in _roots(inner):
            return object_as(kind, inner)
    return None


def _adapted(obj: Any, kind: Kind, framework: str) -> Any:
    """``framework``'s adapter wrapping ``obj``, when its classes make it a model of ``kind``."""
    if _names(obj) & _CLASS_NAMES[framework][kind]:
        return wrapper_class(framework, kind)(obj)
    return None


def _deepeval(obj: Any, kind: Kind) -> Any:
    if kind == "judge" and hasattr(obj, "a_generate"):
        return DeepEvalModelJudge(obj)
    if kind == "embedder" and hasattr(obj, "a_embed_texts"):
        return DeepEvalModelEmbedder(obj)
    return None


def _prompt(messages: Sequence[Message]) -> str:
    """DeepEval models take one prompt string: the messages in order, the system part first."""
    return "\n\n".join(str(m["content"]) for m in messages)


class _DeepEvalModel:
    """A DeepEval model held by a ragbridge wrapper, under the name it gives itself."""

    def __init__(self, deepeval_model: Any) -> None:
        self.deepeval_model = deepeval_model
        name = getattr(deepeval_model, "get_model_name", None)
        self.model: str = str(name()) if callable(name) else type(deepeval_model).__name__


class DeepEvalModelJudge(_DeepEvalModel):
    """A DeepEval model (``DeepEvalBaseLLM``) as a ragbridge `Judge`.

    DeepEval models answer one prompt string, optionally with a pydantic ``schema`` (its own
    models return the schema instance, custom ones often ignore it), and some return a
    ``(reply, cost)`` pair. Anything that is not an instance of the schema goes back as text
    for the engine to parse and repair, as for any judge.
    """

    async def generate(
        self, messages: Sequence[Message], *, schema: type[BaseModel] | None = None
    ) -> JudgeReply:
        prompt = _prompt(messages)
        if schema is None:
            reply = await self.deepeval_model.a_generate(prompt)
        else:
            try:
                reply = await self.deepeval_model.a_generate(prompt, schema=schema)
            except TypeError:  # a custom model whose a_generate takes no schema
                reply = await self.deepeval_model.a_generate(prompt)
        if isinstance(reply, tuple):  # DeepEval's (reply, cost)
            reply = reply[0]
        if schema is not None and isinstance(reply, schema):
            return JudgeReply(text=json.dumps(reply.model_dump()), parsed=reply)
        if isinstance(reply, BaseModel):
            return JudgeReply(text=json.dumps(reply.model_dump()))
        return JudgeReply(text=str(reply))


class DeepEvalModelEmbedder(_DeepEvalModel):
    """A DeepEval embedding model (``a_embed_texts``) as a ragbridge `Embedder`."""

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        vectors = await self.deepeval_model.a_embed_texts(list(texts))
        return [list(map(float, v)) for v in vectors]
