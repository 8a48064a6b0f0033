"""The two model protocols ragbridge needs — a `Judge` and an `Embedder` — and the errors
adapters raise through them.

Adapters (LangChain chat models, LlamaIndex LLMs, OpenAI-compatible endpoints) implement these;
everything else in ragbridge talks only to them. The error classes are how an adapter tells the
engine what a failure means: a `TransientJudgeError` (timeout, rate limit, 5xx) is worth retrying
with backoff, a `PermanentJudgeError` (bad request, authentication, context too long) is not.
Any other exception escaping a judge is treated as permanent; none ever kills a run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel

from ..results.evaluation import Usage
from .error_text import describe_error

__all__ = [
    "ConnectionRefused",
    "Embedder",
    "Entailment",
    "EntailmentModel",
    "Judge",
    "JudgeError",
    "JudgeReply",
    "JudgeTimeout",
    "Message",
    "PermanentJudgeError",
    "ProviderUnusable",
    "RateLimited",
    "ServerError",
    "TokenLogprob",
    "TransientJudgeError",
    "Usage",
    "attempt_timeout",
    "classify_error",
    "logprobs_wanted",
]

Message = dict[str, str]
"""One chat message: ``{"role": "system" | "user" | "assistant", "content": "..."}``."""


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token with its log-probability and the most likely alternatives at its
    position (OpenAI-compatible ``logprobs.content[i]``: ``token``, ``logprob``,
    ``top_logprobs``). ``top`` maps each alternative token to its log-probability and includes
    the chosen token when the provider lists it."""

    token: str
    logprob: float
    top: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class JudgeReply:
    """What a judge returns for one call.

    ``parsed`` is an instance of the requested schema when the adapter produced one natively
    (function calling, JSON mode); otherwise ``None`` and the engine parses ``text`` itself.
    ``usage`` carries the call's prompt and completion tokens (``calls`` is counted by the engine).
    ``logprobs`` are the reply's tokens with their log-probabilities, in order, when the call
    asked for them (`logprobs_wanted`) and the provider returns them; None otherwise. Their
    concatenated ``token``s are the reply's text (but for how a provider spells a character
    split between two tokens); `ragbridge.core.judging.logprobs` reads and checks them.
    """

    text: str
    parsed: Any = None
    usage: Usage = field(default_factory=Usage)
    logprobs: tuple[TokenLogprob, ...] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    """The reply's rate-limit headers (``x-ratelimit-*``, lower-case names) when the adapter
    has them: the engine's `ragbridge.core.judging.ratelimit.RateLimiter` learns from them."""


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
    """Base of the errors an adapter raises to say how a judge call failed.

    ``cause`` is a short, stable name of what went wrong ("401 Unauthorized", "connection
    refused at http://127.0.0.1:8000/v1"), equal for equal failures, so the engine can tell
    that many calls failed *alike*; ``hint`` says what to do about it ("check OPENAI_API_KEY").
    Both are optional; the message stays the full diagnosis.
    """

    def __init__(self, message: str = "", *, cause: str | None = None, hint: str | None = None):
        super().__init__(message)
        self.cause = cause
        self.hint = hint


class TransientJudgeError(JudgeError):
    """Worth retrying after a backoff: the same call may well succeed."""


class JudgeTimeout(TransientJudgeError):
    """The call took longer than allowed."""


class RateLimited(TransientJudgeError):
    """The provider asked us to slow down; ``retry_after`` (seconds) is honoured when given.

    ``headers``: the 429's rate-limit headers (lower-case names), for the engine's limiter."""

    def __init__(
        self,
        message: str = "rate limited",
        *,
        retry_after: float | None = None,
        cause: str | None = None,
        hint: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message, cause=cause, hint=hint)
        self.retry_after = retry_after
        self.headers: Mapping[str, str] = dict(headers or {})


class ServerError(TransientJudgeError):
    """A 5xx-like provider error."""


class ConnectionRefused(ServerError):
    """Nothing listens at the endpoint (ECONNREFUSED).

    Transient once, permanent after: a server that is restarting refuses for a moment, so the
    engine retries a refused call once; a second refusal in the same call means nothing is
    running there (a local server never started, a wrong port), which no backoff will heal, and
    it is then treated as `ProviderUnusable`. A connection *reset* is a plain `ServerError`.
    """


class PermanentJudgeError(JudgeError):
    """Retrying cannot help (bad request, authentication, context length exceeded)."""


class ProviderUnusable(PermanentJudgeError):
    """Retrying cannot help, and no other call will fare better: the provider is unusable.

    Wrong or missing key (401), no access (403), unknown model or wrong path (404), a base URL
    without a scheme, a host that does not resolve. The engine does not retry these, and after
    ``stop_after`` identical ones (same ``cause``) with no success in between it stops sending
    calls: the run ends early with one line naming the cause and the fix. A permanent error that
    belongs to one request (a prompt too long for the model: HTTP 400) is a plain
    `PermanentJudgeError`: it fails that call only.
    """


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


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and the exceptions it wraps (``__cause__``/``__context__``), innermost last.

    SDKs wrap transport errors (the openai SDK's ``APIConnectionError`` wraps httpx's
    ``ConnectError``, which wraps ``ConnectionRefusedError``): the useful fact is often inside.
    """
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen and len(seen) < 10:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


_REFUSED = ("connection refused", "errno 111", "econnrefused", "actively refused")
_UNRESOLVED = (
    "name or service not known",
    "nodename nor servname",
    "temporary failure in name resolution",
    "getaddrinfo failed",
    "no address associated",
)
_NO_SCHEME = ("missing an 'http://' or 'https://' protocol", "unsupportedprotocol")

_UNUSABLE: dict[int, tuple[str, str]] = {
    401: ("401 Unauthorized", "check the API key"),
    403: ("403 Forbidden", "the API key has no access to this model or endpoint"),
    404: ("404 Not Found", "check the base URL (it usually ends in /v1) and the model name"),
}


@dataclass(frozen=True)
class _Evidence:
    """What can be read off a provider exception without importing its SDK."""

    exc: BaseException
    names: frozenset[str]
    """Lower-case names of the classes (and their bases) along the exception chain."""
    text: str
    """``Type: message`` of each exception along the chain, lower-case, joined."""
    status: int | None
    message: str
    """The message every classified error carries (`describe_error`)."""

    @classmethod
    def of(cls, exc: BaseException) -> _Evidence:
        chain = _chain(exc)
        return cls(
            exc=exc,
            names=frozenset(k.__name__.lower() for e in chain for k in type(e).__mro__),
            text=" | ".join(f"{type(e).__name__}: {e}" for e in chain).lower(),
            status=_status_of(exc),
            message=describe_error(exc, "calling the provider"),
        )

    def shows(self, names: Iterable[str], phrases: Iterable[str]) -> bool:
        """Whether a class along the chain has one of ``names``, or its text one of
        ``phrases``."""
        return not self.names.isdisjoint(names) or any(p in self.text for p in phrases)


_TRANSPORT: tuple[tuple[frozenset[str], tuple[str, ...], Callable[[str], JudgeError]], ...] = (
    (
        frozenset({"unsupportedprotocol", "invalidurl"}),
        _NO_SCHEME,
        lambda message: ProviderUnusable(
            message,
            cause="the base URL is not a valid http(s) URL",
            hint="the base URL must start with http:// or https://",
        ),
    ),
    (
        frozenset({"gaierror"}),
        _UNRESOLVED,
        lambda message: ProviderUnusable(
            message, cause="the host name does not resolve", hint="check the host in the base URL"
        ),
    ),
    (
        frozenset({"connectionrefusederror"}),
        _REFUSED,
        lambda message: ConnectionRefused(
            message, cause="connection refused", hint="is the server at the base URL running?"
        ),
    ),
)
"""Failures before any HTTP status, in the order they are told apart: (class names, phrases,
the error they make). A status on the exception rules these out: the server was reached."""


def _transport_failure(found: _Evidence) -> JudgeError | None:
    if found.status is not None:
        return None
    for names, phrases, error in _TRANSPORT:
        if found.shows(names, phrases):
            return error(found.message)
    return None


def _timeout(found: _Evidence) -> JudgeError | None:
    if isinstance(found.exc, TimeoutError) or any("timeout" in n for n in found.names):
        return JudgeTimeout(found.message, cause="timeout", hint="the server is slow or hung")
    return None


def _rate_limit(found: _Evidence) -> JudgeError | None:
    """A 429 (or an SDK's rate-limit error): retried after a wait, unless the quota is gone."""
    named = any("ratelimit" in n for n in found.names) or "rate limit" in found.text
    if not (found.status == 429 or (found.status is None and named) or "rate_limit" in found.text):
        return None
    if "insufficient_quota" in found.text or "exceeded your current quota" in found.text:
        return ProviderUnusable(
            found.message, cause="429 quota exceeded", hint="the account has no quota left"
        )
    return RateLimited(
        found.message,
        retry_after=_retry_after_of(found.exc),
        cause="429 rate limited",
        hint="lower the concurrency, or check the account's rate limits",
    )


def _by_status(found: _Evidence) -> JudgeError | None:
    """5xx → `ServerError`; 401/403/404 → `ProviderUnusable`; other 4xx → permanent."""
    status = found.status
    if status is None:
        return None
    if status >= 500:
        return ServerError(found.message, cause=f"HTTP {status}", hint="the provider keeps failing")
    if status in _UNUSABLE:
        cause, hint = _UNUSABLE[status]
        if status == 404 and "model" in found.text:
            cause, hint = "404 unknown model", "unknown model: check the model name"
        return ProviderUnusable(found.message, cause=cause, hint=hint)
    if 400 <= status < 500:
        return PermanentJudgeError(found.message)
    return None


def _connection_lost(found: _Evidence) -> JudgeError | None:
    lost = isinstance(found.exc, ConnectionError) or any(
        "connection" in n or n in {"connecterror", "remoteprotocolerror"} for n in found.names
    )
    if lost:
        return ServerError(
            found.message, cause="connection lost", hint="the connection keeps failing"
        )
    return None


_RULES: tuple[Callable[[_Evidence], JudgeError | None], ...] = (
    _transport_failure,
    _timeout,
    _rate_limit,
    _by_status,
    _connection_lost,
)
"""`classify_error`'s rules, first match wins: the order is the policy (a timeout with a 5xx
status is a timeout; a rate limit is told apart before its status)."""


def classify_error(exc: BaseException) -> JudgeError | None:
    """The engine's error class for a provider exception, or None when it cannot tell.

    Framework adapters (LangChain, LlamaIndex, ...) see exceptions from SDKs ragbridge does not
    import (openai, anthropic, httpx, ...), so they are told apart by duck typing: a status code
    on the exception or its ``response`` (429 → `RateLimited` with the ``Retry-After`` header,
    5xx → `ServerError`, 401/403/404 → `ProviderUnusable`, other 4xx → `PermanentJudgeError`),
    and class names and messages along the exception chain for timeouts, rate limits, refused
    connections, unresolvable hosts and lost connections. One mapping for every adapter, so they
    retry — and stop — alike. Each result carries a ``cause`` and a ``hint`` (see `JudgeError`).
    The mapping is the ordered table `_RULES`; the first rule that recognises the exception
    decides.
    """
    found = _Evidence.of(exc)
    for rule in _RULES:
        error = rule(found)
        if error is not None:
            return error
    return None


attempt_timeout: ContextVar[float | None] = ContextVar("ragbridge_attempt_timeout", default=None)
"""Seconds the engine allows the current call attempt (None: no engine, or no limit).

The engine sets it around every provider call, so an adapter with its own transport timeout
(an HTTP client's) can follow the engine's instead of outliving it: ``timeout=None`` in
`ragbridge.adapters.openai` means exactly that.
"""


logprobs_wanted: ContextVar[int | None] = ContextVar("ragbridge_logprobs_wanted", default=None)
"""How many alternatives per token the current call asks the provider for (``top_logprobs``),
or None when it wants no log-probabilities.

The engine sets it around a provider call whose request asked for them (a scored criterion
weighting its score by probability, after G-Eval). A context variable rather than a new keyword
of `Judge.generate`, so every judge written against the protocol keeps working: one that cannot
return log-probabilities ignores it, and the caller then falls back to the integer it parsed.
"""
