"""LlamaIndex LLMs and embedding models as ragbridge's `Judge` and `Embedder`.

Why it looks the way it does: a LlamaIndex user already has an ``llm`` and an ``embed_model``
configured (often as ``Settings.llm``); ragbridge judges with them as they are. Errors are
mapped to ragbridge's judge errors so the engine retries what is transient and gives up on what
is not, and token usage is read from wherever the provider's integration put it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ValidationError

from ragbridge.core.judging.judge import JudgeReply, Message, classify_error
from ragbridge.core.results.evaluation import Usage

from ._framework import ChatMessage, MessageRole

__all__ = ["LlamaIndexEmbedder", "LlamaIndexJudge", "map_error", "usage_of"]


def _get(obj: Any, name: str) -> Any:
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


def _int(value: Any) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def usage_of(response: Any) -> Usage:
    """Token usage from a ChatResponse: OpenAI-style ``raw.usage``, Anthropic-style input/output
    tokens, or the ``prompt_tokens``/``completion_tokens`` some integrations put in
    ``additional_kwargs``. Zero when the provider reports nothing."""
    places = [_get(_get(response, "raw"), "usage"), _get(response, "raw"),
              _get(response, "additional_kwargs")]  # fmt: skip
    for place in places:
        if place is None:
            continue
        prompt = _get(place, "prompt_tokens") or _get(place, "input_tokens")
        completion = _get(place, "completion_tokens") or _get(place, "output_tokens")
        if prompt is not None or completion is not None:
            return Usage(prompt_tokens=_int(prompt), completion_tokens=_int(completion))
    return Usage()


def map_error(exc: BaseException) -> BaseException:
    """The ragbridge judge error for a provider exception, so the engine retries what is
    transient (timeouts, 429, 5xx) and gives up on what is not (other 4xx). Unknown errors are
    returned unchanged (the engine treats them as permanent). The mapping is core's
    `classify_error`, shared by every adapter."""
    return classify_error(exc) or exc


def _to_chat(messages: Sequence[Message]) -> list[ChatMessage]:
    return [ChatMessage(role=MessageRole(m["role"]), content=m["content"]) for m in messages]


class LlamaIndexJudge:
    """A LlamaIndex LLM as ragbridge's `Judge`.

    With a schema, function-calling LLMs (``llm.metadata.is_function_calling_model``) are asked
    for structured output through ``as_structured_llm``; if that fails to parse, or for other
    LLMs, a plain ``achat`` is made and the engine parses (and repairs) the text.
    ``structured=False`` always uses plain text; ``True`` forces the structured attempt.
    """

    def __init__(self, llm: Any, *, model: str | None = None, structured: bool | None = None):
        self.llm = llm
        meta = getattr(llm, "metadata", None)
        self.model = model or getattr(meta, "model_name", None) or type(llm).__name__
        self.structured = structured

    def _wants_structured(self) -> bool:
        if self.structured is not None:
            return self.structured
        return bool(getattr(getattr(self.llm, "metadata", None), "is_function_calling_model", 0))

    async def generate(
        self, messages: Sequence[Message], *, schema: type[BaseModel] | None = None
    ) -> JudgeReply:
        chat = _to_chat(messages)
        try:
            if schema is not None and self._wants_structured():
                reply = await self._structured(chat, schema)
                if reply is not None:
                    return reply
            response = await self.llm.achat(chat)
        except Exception as exc:
            mapped = map_error(exc)
            if mapped is exc:
                raise
            raise mapped from exc
        text = response.message.content or ""
        return JudgeReply(text=text, usage=usage_of(response))

    async def _structured(
        self, chat: list[ChatMessage], schema: type[BaseModel]
    ) -> JudgeReply | None:
        try:
            response = await self.llm.as_structured_llm(schema).achat(chat)
        except (ValidationError, ValueError, TypeError):
            return None  # a reply that did not parse: fall back to text the engine can repair
        parsed = response.raw if isinstance(response.raw, schema) else None
        return JudgeReply(
            text=response.message.content or "", parsed=parsed, usage=usage_of(response)
        )


class LlamaIndexEmbedder:
    """A LlamaIndex embedding model (``BaseEmbedding``) as ragbridge's `Embedder`."""

    def __init__(self, embed_model: Any, *, model: str | None = None) -> None:
        self.embed_model = embed_model
        self.model = model or getattr(embed_model, "model_name", None) or type(embed_model).__name__

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not a single string")
        batch = list(texts)
        if not batch:
            return []
        vectors = await self.embed_model.aget_text_embedding_batch(batch)
        return [[float(x) for x in v] for v in vectors]
