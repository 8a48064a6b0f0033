"""LangChain models on ragbridge's side: a chat model as a `Judge` (`LangChainJudge`), an
``Embeddings`` as an `Embedder` (`LangChainEmbedder`).

Why it is built this way: structured output is the model's own (``with_structured_output``),
tried by method once per schema and cached, with the engine's text parsing as the fallback; a
structured call that parses to nothing comes back as text, so the engine repairs it rather than
taking it for an answer. Provider errors go through core's `classify_error`, like every other
adapter's, so all of them retry the same errors.

Token log-probabilities (asked for by a scored criterion through `logprobs_wanted`) are read from
a reply's ``response_metadata["logprobs"]``, the OpenAI object ChatOpenAI passes on, by the reader
`ragbridge.adapters.openai` uses. They are asked for only of a chat model that declares OpenAI's
``logprobs``/``top_logprobs`` fields (ChatOpenAI and its kin), by binding them to a plain call;
another model would send the unknown fields to its provider. A model that refuses them gets the
call again without, and is not asked again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from ragbridge.adapters.openai_dialect import MAX_TOP_LOGPROBS, refuses_logprobs
from ragbridge.core.judging.judge import (
    JudgeReply,
    Message,
    PermanentJudgeError,
    TokenLogprob,
    classify_error,
    logprobs_wanted,
)
from ragbridge.core.judging.logprobs import openai_logprobs
from ragbridge.core.results.evaluation import Usage

from ._framework import AIMessage, BaseMessage, HumanMessage, SystemMessage

__all__ = [
    "LangChainEmbedder",
    "LangChainJudge",
    "map_error",
    "message_text",
    "to_langchain_messages",
]


def message_text(message: BaseMessage) -> str:
    """A message's text; content may be a list of blocks (Anthropic-style)."""
    content = message.content
    if isinstance(content, str):
        return content
    return str(message.text)


def _model_name(obj: Any) -> str:
    for attr in ("model_name", "model", "model_id", "deployment_name"):
        value = getattr(obj, attr, None)
        if isinstance(value, str) and value:
            return value
    return type(obj).__name__


def map_error(exc: Exception) -> Exception | None:
    """The ragbridge judge error for a provider exception, or None to re-raise it as is.

    The mapping is core's `classify_error` (status codes and class names, no SDK imports), shared
    by every adapter so they all retry the same errors.
    """
    return classify_error(exc)


@contextlib.contextmanager
def _provider_errors() -> Iterator[None]:
    """Around a call into a LangChain model: an exception `map_error` knows leaves as the
    judge error it maps to (the provider's own as its cause), any other as it came.
    Cancellation is never mapped."""
    try:
        yield
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        mapped = map_error(exc)
        if mapped is None:
            raise
        raise mapped from exc


_ROLES: dict[str, type[BaseMessage]] = {
    "system": SystemMessage,
    "user": HumanMessage,
    "human": HumanMessage,
    "assistant": AIMessage,
    "ai": AIMessage,
}


def to_langchain_messages(messages: Sequence[Message]) -> list[BaseMessage]:
    """ragbridge's ``{"role", "content"}`` dicts as LangChain messages."""
    out: list[BaseMessage] = []
    for message in messages:
        role = message.get("role", "user")
        cls = _ROLES.get(role)
        if cls is None:
            raise ValueError(f"unknown message role {role!r}")
        out.append(cls(content=message.get("content", "")))
    return out


def _usage(message: Any) -> Usage:
    meta = getattr(message, "usage_metadata", None) or {}
    return Usage(
        prompt_tokens=int(meta.get("input_tokens") or 0),
        completion_tokens=int(meta.get("output_tokens") or 0),
    )


def _raw_text(message: Any) -> str:
    """The text of a raw reply; for a tool call, its arguments as JSON (so a repair can quote
    what was wrong)."""
    if not isinstance(message, BaseMessage):
        return "" if message is None else str(message)
    calls = getattr(message, "tool_calls", None) or []
    if calls:
        return json.dumps(calls[0].get("args", {}))
    return message_text(message)


def _logprobs(message: Any) -> tuple[TokenLogprob, ...] | None:
    """The reply's token log-probabilities, when asked for and its metadata holds them."""
    if logprobs_wanted.get() is None:
        return None
    metadata = getattr(message, "response_metadata", None)
    return openai_logprobs(metadata.get("logprobs")) if isinstance(metadata, Mapping) else None


_STRUCTURED_METHODS = ("function_calling", "json_mode")


class LangChainJudge:
    """A LangChain chat model as a ragbridge `Judge`.

    With a schema it uses the model's structured output (``function_calling``, then
    ``json_mode``; or only ``method`` when given), falling back to a plain prompt whose text the
    engine parses. A structured call that parses to ``None`` (a model answering in prose instead
    of calling the tool) is returned as text with ``parsed=None``, so the engine repairs it
    instead of taking it for an answer. Provider errors are mapped to the engine's retry classes.
    """

    def __init__(self, chat_model: Any, *, method: str | None = None) -> None:
        self.chat_model = chat_model
        self.method = method
        self.model: str = _model_name(chat_model)
        self._structured: dict[type[BaseModel], tuple[str | None, Any]] = {}
        self._lock = threading.Lock()
        fields = getattr(type(chat_model), "model_fields", {})
        # OpenAI's fields (ChatOpenAI): log-probabilities can be asked for; cleared on a refusal.
        self._asks_logprobs = "logprobs" in fields and "top_logprobs" in fields

    def _runnable_for(self, schema: type[BaseModel]) -> tuple[str | None, Any]:
        """The structured runnable for ``schema`` (built once), or ``(None, None)`` for plain."""
        with self._lock:
            cached = self._structured.get(schema)
        if cached is not None:
            return cached
        methods = (self.method,) if self.method is not None else _STRUCTURED_METHODS
        chosen: tuple[str | None, Any] = (None, None)
        for method in methods:
            try:
                runnable = self.chat_model.with_structured_output(
                    schema, method=method, include_raw=True
                )
            except (NotImplementedError, ValueError, TypeError, AttributeError):
                continue
            chosen = (method, runnable)
            break
        with self._lock:
            self._structured[schema] = chosen
        return chosen

    async def generate(
        self, messages: Sequence[Message], *, schema: type[BaseModel] | None = None
    ) -> JudgeReply:
        lc_messages = to_langchain_messages(messages)
        with _provider_errors():
            if schema is not None:
                _, runnable = self._runnable_for(schema)
                if runnable is not None:
                    result = await runnable.ainvoke(lc_messages)
                    return self._structured_reply(result, schema)
            reply = await self._plain(lc_messages)
        return JudgeReply(text=_raw_text(reply), usage=_usage(reply), logprobs=_logprobs(reply))

    async def _plain(self, lc_messages: list[BaseMessage]) -> Any:
        """A plain call, asking for log-probabilities when wanted and the model takes them;
        refused (a 400 naming them), made once more without and not asked again."""
        wanted = logprobs_wanted.get()
        if wanted is None or not self._asks_logprobs:
            return await self.chat_model.ainvoke(lc_messages)
        top = min(wanted, MAX_TOP_LOGPROBS)
        try:
            bound = self.chat_model.bind(logprobs=True, top_logprobs=top)
            return await bound.ainvoke(lc_messages)
        except Exception as exc:
            status = getattr(exc, "status_code", None)
            refused = isinstance(map_error(exc), PermanentJudgeError) and refuses_logprobs(
                status if isinstance(status, int) else 400, str(exc)
            )
            if not refused:
                raise
        self._asks_logprobs = False
        return await self.chat_model.ainvoke(lc_messages)

    @staticmethod
    def _structured_reply(result: Any, schema: type[BaseModel]) -> JudgeReply:
        raw = result.get("raw") if isinstance(result, Mapping) else result
        parsed = result.get("parsed") if isinstance(result, Mapping) else None
        usage = _usage(raw)
        if parsed is None:
            return JudgeReply(
                text=_raw_text(raw), parsed=None, usage=usage, logprobs=_logprobs(raw)
            )
        if isinstance(parsed, BaseModel):
            return JudgeReply(text=parsed.model_dump_json(), parsed=parsed, usage=usage)
        return JudgeReply(text=json.dumps(parsed, default=str), parsed=parsed, usage=usage)


class LangChainEmbedder:
    """A LangChain ``Embeddings`` as a ragbridge `Embedder` (``aembed_documents``)."""

    def __init__(self, embeddings: Any, *, model: str | None = None) -> None:
        self.embeddings = embeddings
        self.model: str = model or _model_name(embeddings)

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        with _provider_errors():
            vectors = await self.embeddings.aembed_documents(list(texts))
        return [list(map(float, v)) for v in vectors]
