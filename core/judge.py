"""The two model protocols ragbridge needs — a `Judge` and an `Embedder` — and the errors
adapters raise through them.

Adapters (LangChain chat models, LlamaIndex LLMs, OpenAI-compatible endpoints) implement these;
everything else in ragbridge talks only to them. The error classes are how an adapter tells the
engine what a failure means: a `TransientJudgeError` (timeout, rate limit, 5xx) is worth retrying
with backoff, a `PermanentJudgeError` (bad request, authentication, context too long) is not.
Any other exception escaping a judge is treated as permanent; none ever kills a run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel

from .results import Usage

__all__ = [
    "Embedder",
    "Entailment",
    "EntailmentModel",
    "Judge",
    "JudgeError",
    "JudgeReply",
    "JudgeTimeout",
    "Message",
    "PermanentJudgeError",
    "RateLimited",
    "ServerError",
    "TransientJudgeError",
    "Usage",
    "classify_error",
]

Message = dict[str, str]
"""One chat message: ``{"role": "system" | "user" | "assistant", "content": "..."}``."""


@dataclass(frozen=True)
class JudgeReply:
    """What a judge returns for one call.

    ``parsed`` is an instance of the requested schema when the adapter produced one natively
    (function calling, JSON mode); otherwise ``None`` and the engine parses ``text`` itself.
    ``usage`` carries the call's prompt and completion tokens (``calls`` is counted by the engine).
    """

    text: str
    parsed: Any = None
    usage: Usage = field(default_factory=Usage)


@runtime_checkable
class Judge(Protocol):
    """An LLM that answers chat messages, optionally constrained to a pydantic schema."""

    model: str

    async def generate(
        self, messages: Sequence[Message], *, schema: type[BaseModel] | None = None
    ) -> JudgeReply: ...


@runtime_checkable
class Embedder(Protocol):
    """A text embedding model; vectors need not be normalised."""

    model: str

    async def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


@dataclass(frozen=True)
class Entailment:
    """An NLI model's probabilities that a premise entails, is neutral to, or contradicts a
    hypothesis (they sum to 1)."""

    entailment: float
    neutral: float
    contradiction: float


@runtime_checkable
class EntailmentModel(Protocol):
    """An NLI (MNLI-style) cross-encoder: scores (premise, hypothesis) pairs.

    The offline ``nli`` provider of faithfulness and hallucination uses it; adapters wrap
    transformers sequence-classification models (``ragbridge.adapters.nli``).
    """

    model: str

    async def predict(self, pairs: Sequence[tuple[str, str]]) -> list[Entailment]: ...


class JudgeError(Exception):
    """Base of the errors an adapter raises to say how a judge call failed."""


class TransientJudgeError(JudgeError):
    """Worth retrying after a backoff: the same call may well succeed."""


class JudgeTimeout(TransientJudgeError):
    """The call took longer than allowed."""


class RateLimited(TransientJudgeError):
    """The provider asked us to slow down; ``retry_after`` (seconds) is honoured when given."""

    def __init__(self, message: str = "rate limited", *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ServerError(TransientJudgeError):
    """A 5xx-like provider error."""


class PermanentJudgeError(JudgeError):
    """Retrying cannot help (bad request, authentication, context length exceeded)."""


def _status_of(exc: BaseException) -> int | None:
    for holder in (exc, getattr(exc, "response", None)):
        if holder is None:
            continue
        for attr in ("status_code", "status", "http_status", "code"):
            value = getattr(holder, attr, None)
            if isinstance(value, int) and not isinstance(value, bool) and 100 <= value < 600:
                return value
    return None


def _retry_after_of(exc: BaseException) -> float | None:
    headers = getattr(getattr(exc, "response", None), "headers", None)
    if not headers:
        return None
    try:
        value = headers.get("retry-after")
        return None if value is None else float(value)
    except (TypeError, ValueError, AttributeError):
        return None


def classify_error(exc: BaseException) -> JudgeError | None:
    """The engine's error class for a provider exception, or None when it cannot tell.

    Framework adapters (LangChain, LlamaIndex, ...) see exceptions from SDKs ragbridge does not
    import (openai, anthropic, httpx, ...), so they are told apart by duck typing: a status code
    on the exception or its ``response`` (429 → `RateLimited` with the ``Retry-After`` header,
    5xx → `ServerError`, other 4xx → `PermanentJudgeError`), and class names for timeouts,
    rate limits and lost connections. One mapping for every adapter, so they retry alike.
    """
    names = {cls.__name__.lower() for cls in type(exc).__mro__}
    message = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, TimeoutError) or any("timeout" in n for n in names):
        return JudgeTimeout(message)
    status = _status_of(exc)
    text = str(exc).lower()
    rate_limited = any("ratelimit" in n for n in names) or "rate limit" in text
    if status == 429 or (status is None and rate_limited) or "rate_limit" in text:
        return RateLimited(message, retry_after=_retry_after_of(exc))
    if status is not None and status >= 500:
        return ServerError(message)
    if status is not None and 400 <= status < 500:
        return PermanentJudgeError(message)
    if isinstance(exc, ConnectionError) or any(
        "connection" in n or n in {"connecterror", "remoteprotocolerror"} for n in names
    ):
        return ServerError(message)
    return None
