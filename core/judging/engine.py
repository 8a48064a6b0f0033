"""The judge engine: the one object every metric calls a judge through.

It exists because the failure modes users hit in other frameworks all live at this layer:

* **A true cap on in-flight calls.** A slot of the run's cap
  (`ragbridge.core.judging.limits.Slots`) is held only around the provider call itself, so
  ``max_concurrency`` bounds calls in flight across every metric and sample of a run — and across
  the judge and the embedder, which share it — not jobs, which can each fan out into several calls.
* **Timeouts and retries.** Each attempt has a timeout (told to adapters through
  `ragbridge.core.judging.judge.attempt_timeout`, so an HTTP client's own timeout follows it);
  transient errors (`TransientJudgeError`: timeouts, rate limits, 5xx, resets) are retried with
  exponential backoff and full jitter, honouring a provider's ``retry_after``; the slot is released
  while waiting. When the retry budget is spent, or on a permanent error, the call returns a typed
  `Failure` — it never raises into the run.
* **Stopping early.** An unusable provider (`ProviderUnusable`: 401, 403, unknown model, no
  scheme, a host that does not resolve; a connection refused twice) is not retried, and after
  ``stop_after`` identical failures with no reply in between the engine's `Breaker` trips: later
  calls return ``Failure(cancelled, "not sent: judge: 401 Unauthorized on 5/5 calls — ...")``
  at once, and the runner starts no further samples. ``stop_after`` replies in a row that fail
  their task's format trip it too (`ragbridge.core.judging.reply_format`: a judge too weak to
  follow it).
* **Structured output, checked against the request.** The reply is validated against a pydantic
  schema (fenced JSON and prose around the object are tolerated), then against the request by
  the caller's `Validator` (one verdict per claim, cited contexts that exist). A reply that fails
  either gets one repair re-ask quoting the problem, then retries within the budget; after that
  the result is ``Failure(parse_error)``. Such a reply is never cached, and a cached reply that
  fails today's check is treated as a miss.
* **Cost.** Every call's tokens are counted, cached answers are counted separately, and an
  optional price table turns usage into money.
* **Cache.** Replies are stored content-addressed (model, template id + version, messages,
  schema, params), so a second run makes no calls and an interrupted run resumes.
"""

from __future__ import annotations

import asyncio
import functools
import random
import re
import sys
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

import numpy as np
from pydantic import BaseModel, ValidationError

from ..cache.backend import CacheBackend
from ..cache.disk import CachedReply, cache_key, canonical_json
from ..results.evaluation import Failure, FailureKind, Usage
from .error_text import describe_error
from .judge import (
    ConnectionRefused,
    Embedder,
    Judge,
    JudgeError,
    JudgeReply,
    JudgeTimeout,
    Message,
    ProviderUnusable,
    RateLimited,
    ServerError,
    TransientJudgeError,
    attempt_timeout,
    classify_error,
)
from .limits import Breaker, Outcome, Slots
from .reply_format import FormatWatch, ReplyBreaker, reply_spec, spec_of

__all__ = [
    "EmbeddingEngine",
    "EmbeddingFailed",
    "JudgeCall",
    "JudgeEngine",
    "Price",
    "Validator",
    "cost_of",
    "extract_json",
    "parse_reply",
    "schema_key_json",
]

T = TypeVar("T", bound=BaseModel)


@dataclass(frozen=True)
class Price:
    """US dollars per million prompt and completion tokens of one model."""

    prompt_per_million: float
    completion_per_million: float


def cost_of(usage: Usage, price: Price | None) -> float | None:
    """Money spent on ``usage`` (sent calls only; cached answers cost nothing)."""
    if price is None:
        return None
    return (
        usage.prompt_tokens * price.prompt_per_million
        + usage.completion_tokens * price.completion_per_million
    ) / 1e6


V = TypeVar("V")


@dataclass
class JudgeCall(Generic[V]):
    """The outcome of one logical judge request (all its attempts, the repair, the cache)."""

    value: V | None
    failure: Failure | None
    usage: Usage
    text: str | None = None

    @property
    def ok(self) -> bool:
        return self.value is not None


_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)


def extract_json(text: str) -> str | None:
    """The JSON object in a reply: a fenced block, or the first balanced ``{...}`` in prose."""
    for match in _FENCE.finditer(text):
        inner = match.group(1).strip()
        if inner.startswith("{"):
            return inner
    start = text.find("{")
    while start != -1:
        depth = 0
        in_string = False
        escaped = False
        for i in range(start, len(text)):
            ch = text[i]
            if in_string:
                if escaped:
                    escaped = False
                elif ch == "\\":
                    escaped = True
                elif ch == '"':
                    in_string = False
            elif ch == '"':
                in_string = True
            elif ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    return text[start : i + 1]
        start = text.find("{", start + 1)
    return None


def parse_reply(text: str, schema: type[T]) -> tuple[T | None, str | None]:
    """Validate a reply against ``schema``; on failure return the error to show in a repair.

    Tolerates fences and prose around the object (`extract_json`). Public so that tools that
    read stored replies (``ragbridge cache prune --failed``) parse exactly as the engine does.
    """
    stripped = text.strip()
    if stripped.startswith("{") and "```" not in stripped:
        # The common case (and every reply the engine stores): the text is the object itself.
        # `extract_json` would return exactly this text, so validating it directly gives the
        # same value without scanning it character by character in Python; any failure takes
        # the general path below, so the error a repair quotes is unchanged.
        try:
            return schema.model_validate_json(stripped), None
        except ValidationError:
            pass
    candidate = extract_json(text)
    if candidate is None:
        return None, "the reply contains no JSON object"
    try:
        return schema.model_validate_json(candidate), None
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'object'}: {err['msg']}"
            for err in exc.errors(include_url=False)[:5]
        )
        return None, problems


_parse = parse_reply


S = TypeVar("S")

# Per schema class, computed once: `model_json_schema()` costs ~2 ms and leaves cyclic garbage,
# and it used to be rebuilt for every prompt and every cache key. Keyed by the class object (held
# weakly, so classes built in tests can go), never by its name: two classes named alike with
# different fields are two entries. A class whose fields change after first use (a later
# `model_rebuild`) is not supported: a schema class is fixed once its prompts are in use.
_PER_SCHEMA: weakref.WeakKeyDictionary[type[BaseModel], dict[str, Any]] = (
    weakref.WeakKeyDictionary()
)


def _per_schema(func: Callable[[type[BaseModel]], S]) -> Callable[[type[BaseModel]], S]:
    """Memoise ``func(schema)`` per schema class (see `_PER_SCHEMA`)."""
    name = func.__qualname__

    @functools.wraps(func)
    def memoised(schema: type[BaseModel]) -> S:
        slot = _PER_SCHEMA.get(schema)
        if slot is None:
            slot = _PER_SCHEMA[schema] = {}
        if name not in slot:
            slot[name] = func(schema)
        value: S = slot[name]
        return value

    return memoised


@_per_schema
def schema_key_json(schema: type[BaseModel]) -> str:
    """The schema as the cache key hashes it: canonical JSON of ``model_json_schema()``.

    The key covers the full schema the reply is validated against (not just the text the judge
    is shown), so a change to the parser's schema is a miss even if the prompt stayed the same.
    """
    return canonical_json(schema.model_json_schema(), "schema")


def schema_instruction(schema: type[BaseModel]) -> str:
    """The sentence every structured prompt ends with: the reply's shape, stated in the prompt.

    The compact shape the judge needs (keys in declaration order, types, literals); memoised
    per schema class there, see `ragbridge.core.prompts.compact_schema`.
    """
    from ..prompts.compact_schema import schema_instruction as instruction

    return instruction(schema)


Validator = Callable[[Any], "str | None"]
"""A per-request check of a parsed reply: the problem as one sentence, or None when it fits.

Schema validation says a reply is well-formed; a validator says it answers *this* request (one
verdict per claim asked, context numbers that exist). A validator may carry a ``facts``
attribute (a JSON-able mapping of what it checked against, e.g. ``{"CLAIM": 3}``), which the
engine stores next to the cached reply so `ragbridge cache prune --failed` can check it again.
"""


@dataclass
class _Stats:
    in_flight: int = 0
    max_in_flight: int = 0
    calls: int = 0
    cached: int = 0
    retries: int = 0
    failures: int = 0
    refused: int = 0
    stale: int = 0
    """Cache entries that no longer pass validation (re-asked, then replaced)."""


#: The usage of a call answered from the cache (frozen, so one instance serves every hit).
_ONE_CACHED = Usage(cached_calls=1)


class _NotSent(Exception):
    """Internal: the breaker tripped while this call waited for a slot."""


def _cause_of(exc: JudgeError, timeout: float | None) -> tuple[str, str | None]:
    """The breaker's (cause, hint) of a failure the error class alone describes."""
    if exc.cause is not None:
        return exc.cause, exc.hint
    if isinstance(exc, JudgeTimeout):
        limit = f" within {timeout:g} s" if timeout is not None else ""
        return f"no reply{limit}", "the server is slow or hung: check it, or raise the timeout"
    if isinstance(exc, RateLimited):
        return "429 rate limited", "lower the concurrency, or check the account's rate limits"
    if isinstance(exc, ConnectionRefused):
        return "connection refused", "is the server running?"
    if isinstance(exc, ServerError):
        return f"server error ({type(exc).__name__})", "the provider keeps failing"
    return f"{type(exc).__name__}: {exc}", None


def _exhausted(replied: Outcome, attempts: int) -> Outcome:
    """What a call that spent its retry budget on transient errors tells the breaker.

    Every attempt failed (timeouts, 429s, 5xx): after ``stop_after`` such calls in a row, with
    no reply in between, the provider is as good as down (a hung server, an exhausted quota),
    so they count. A call with a single attempt (``max_retries=0``) does not: at a high fault
    rate, single failures line up by chance.
    """
    if replied is Outcome.REPLIED:
        return replied
    return Outcome.UNUSABLE if attempts > 1 else Outcome.NEUTRAL


Step = Literal["retry", "unusable", "permanent", "exhausted"]


def _next_step(error: JudgeError, *, refused_once: bool, retries_left: int) -> Step:
    """What a failed attempt leads to: the one retry policy of the judge and embedding engines.

    ``unusable``: the provider cannot be used (a wrong key, an unknown model, no scheme, a
    refused connection that a retry did not cure) — not retried, and counted by the breaker.
    ``permanent``: this request cannot succeed (e.g. a 400), the provider may be fine.
    ``exhausted``: a transient error with no retry left. ``retry``: try again after a backoff.
    """
    if isinstance(error, ProviderUnusable):
        return "unusable"
    if isinstance(error, ConnectionRefused):
        return "unusable" if refused_once or retries_left == 0 else "retry"
    if isinstance(error, TransientJudgeError):
        return "retry" if retries_left else "exhausted"
    return "permanent"


async def _on_the_wire(
    stats: _Stats,
    breaker: Breaker,
    timeout: float | None,
    start: Callable[[], Awaitable[V]],
    what: str,
) -> V:
    """One provider call, holding a slot already: counted in flight, bounded by ``timeout``.

    ``start`` makes the call only once it is certain to be sent: a call whose breaker tripped
    while it waited for its slot is not sent at all (`_NotSent`).
    """
    if breaker.tripped:
        raise _NotSent
    stats.in_flight += 1
    stats.calls += 1
    stats.max_in_flight = max(stats.max_in_flight, stats.in_flight)
    token = attempt_timeout.set(timeout)
    try:
        return await _within(start(), timeout, what)
    finally:
        attempt_timeout.reset(token)
        stats.in_flight -= 1


def _with_fix(message: str, hint: str | None) -> str:
    """A failure message that ends with what to do about it (when the error says)."""
    return f"{message} — {hint}" if hint and hint not in message else message


def _transient_kind(exc: JudgeError) -> FailureKind:
    if isinstance(exc, JudgeTimeout):
        return FailureKind.TIMEOUT
    if isinstance(exc, RateLimited):
        return FailureKind.RATE_LIMITED
    return FailureKind.JUDGE_ERROR


def _refusal(line: str | None, verb: str = "not sent") -> Failure:
    return Failure(kind=FailureKind.CANCELLED, message=f"{verb}: {line}")


@dataclass
class JudgeEngine:
    """Runs judge calls for a whole evaluation. Share one engine between all metrics of a run.

    ``max_retries`` is the retry budget of one call (attempts = 1 + max_retries); ``timeout`` is
    per attempt, in seconds. ``sleep`` and ``seed`` exist so tests run backoff instantly and
    deterministically. ``slots`` is the run's in-flight cap when it is shared with an
    `EmbeddingEngine` (default: the engine's own, ``max_concurrency`` wide); ``stop_after`` is
    the number of identical unusable-provider failures after which calls are no longer sent
    (see `ragbridge.core.judging.limits.Breaker`; the engine's ``breaker``).
    """

    judge: Judge
    max_concurrency: int = 8
    timeout: float | None = 60.0
    max_retries: int = 4
    backoff_base: float = 0.5
    backoff_max: float = 30.0
    repair: bool = True
    cache: CacheBackend | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    price: Price | None = None
    sleep: Callable[[float], Any] = asyncio.sleep
    seed: int | None = None
    slots: Slots | None = None
    stop_after: int = 5
    stats: _Stats = field(default_factory=_Stats, init=False)
    breaker: ReplyBreaker = field(init=False)

    def __post_init__(self) -> None:
        if self.max_concurrency < 1:
            raise ValueError("max_concurrency must be >= 1")
        if self.max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        if self.timeout is not None and not self.timeout > 0:
            raise ValueError("timeout must be > 0 seconds (or None for no timeout)")
        self._rng = random.Random(self.seed)
        if self.slots is None:
            self.slots = Slots(self.max_concurrency)
        self.breaker = ReplyBreaker("judge", self.stop_after)
        # Replies that never fit their format trip the same breaker
        # (`ragbridge.core.judging.reply_format`).
        self._format = FormatWatch(self.stop_after, str(getattr(self.judge, "model", "judge")))
        # Identical requests in flight at once, by cache key: the second waits for the first.
        self._in_flight: dict[str, asyncio.Future[JudgeCall[Any]]] = {}

    @property
    def model(self) -> str:
        return self.judge.model

    async def ask(
        self,
        messages: Sequence[Message],
        schema: type[T],
        *,
        template_id: str,
        template_version: str,
        validate: Validator | None = None,
    ) -> JudgeCall[T]:
        """One structured request: the cache, else attempts (see `_resolve`); never raises.

        ``validate`` checks a reply that parsed against what this request asked (see
        `Validator`); a reply it rejects is treated like one that did not parse: repaired,
        retried within the budget, never cached. Cached replies are checked too: an entry
        that fails today's check is a miss, and is replaced by the fresh reply.
        """
        call: JudgeCall[T] = await self._request(
            messages, schema, template_id, template_version, validate
        )
        return call

    async def complete(
        self, messages: Sequence[Message], *, template_id: str, template_version: str
    ) -> JudgeCall[str]:
        """One free-text request, for prompts that are not ours (RAGAS's, DeepEval's).

        Their frameworks parse the text themselves, so there is nothing to validate or repair;
        the call still gets the semaphore, retries, timeout and cache of every other call, keyed
        by the caller's ``template_id``/``template_version`` (e.g. ``"deepeval"``, its version).
        An empty reply counts as unusable and is retried within the budget. Never raises.
        """
        call: JudgeCall[str] = await self._request(
            messages, None, template_id, template_version, None
        )
        return call

    async def _request(
        self,
        messages: Sequence[Message],
        schema: type[BaseModel] | None,
        template_id: str,
        template_version: str,
        validate: Validator | None,
    ) -> JudgeCall[Any]:
        key = None
        if self.cache is not None:
            key = cache_key(
                model=self.model,
                template_id=template_id,
                template_version=template_version,
                messages=messages,
                schema=None,
                schema_json=None if schema is None else schema_key_json(schema),
                params=self.params,
            )
            hit = self.cache.get_reply(key)
            if hit is not None:
                value: Any
                if schema is None:
                    value = hit.text if hit.text.strip() else None
                else:
                    value, _ = _parse(hit.text, schema)
                    if value is not None and _check(validate, value) is not None:
                        value = None
                if value is not None:
                    self.stats.cached += 1
                    return JudgeCall(value, None, _ONE_CACHED, hit.text)
                self.stats.stale += 1
            shared = await self._join(key, schema, validate)
            if shared is not None:
                return shared
        if key is None:
            return await self._send_request(
                messages, schema, template_id, template_version, validate
            )
        leader: asyncio.Future[JudgeCall[Any]] = asyncio.get_running_loop().create_future()
        self._in_flight[key] = leader
        try:
            call = await self._send_request(
                messages, schema, template_id, template_version, validate, key
            )
        except BaseException:
            leader.cancel()
            raise
        finally:
            if self._in_flight.get(key) is leader:
                del self._in_flight[key]
        leader.set_result(call)
        return call

    async def _join(
        self, key: str, schema: type[BaseModel] | None, validate: Validator | None
    ) -> JudgeCall[Any] | None:
        """The answer of an identical request already in flight, as a cached call.

        Without this, whether two identical prompts sent at once cost one call or two depends
        on which finishes first, and a run's call count would not be reproducible. Only a
        usable answer is shared; when the first request failed, the second makes its own.
        """
        leader = self._in_flight.get(key)
        if leader is None or leader.get_loop() is not asyncio.get_running_loop():
            return None
        try:
            first = await asyncio.shield(leader)
        except asyncio.CancelledError:
            if leader.cancelled():
                return None
            raise
        if first.value is None or (schema is not None and _check(validate, first.value)):
            return None
        self.stats.cached += 1
        return JudgeCall(first.value, None, _ONE_CACHED, first.text)

    async def _send_request(
        self,
        messages: Sequence[Message],
        schema: type[BaseModel] | None,
        template_id: str,
        template_version: str,
        validate: Validator | None,
        key: str | None = None,
    ) -> JudgeCall[Any]:
        """The breaker, the attempts, and the cache write of one request that was not cached."""
        refusal = await self.breaker.admit()
        if refusal is not None:
            self.stats.refused += 1
            return JudgeCall(None, _refusal(refusal), Usage())
        outcome, cause, hint = Outcome.NEUTRAL, None, None
        spec = reply_spec.set(spec_of(validate))  # the reply's budget, for adapters that use it
        try:
            call, outcome, cause, hint = await self._resolve(
                messages, schema, validate, template_id
            )
        finally:
            reply_spec.reset(spec)
            self.breaker.settle(outcome, cause, hint)
        if call.value is not None and self.cache is not None and key is not None:
            assert call.text is not None
            facts = getattr(validate, "facts", None)
            self.cache.put_reply(
                key,
                CachedReply(call.text, call.usage.prompt_tokens, call.usage.completion_tokens),
                model=self.model,
                template_id=template_id,
                template_version=template_version,
                facts=dict(facts) if isinstance(facts, Mapping) else None,
            )
        return call

    async def _resolve(
        self,
        messages: Sequence[Message],
        schema: type[Any] | None,
        validate: Validator | None = None,
        template_id: str = "",
    ) -> tuple[JudgeCall[Any], Outcome, str | None, str | None]:
        """Attempts until a valid reply or the retry budget is spent.

        Transient errors and unusable replies draw on the same budget (``max_retries``): an
        unusable reply (unparseable, or rejected by ``validate``) first gets one repair re-ask
        quoting the problem (free of the budget), and if the repair is unusable too, a fresh
        attempt spends a retry. Only transient errors wait (backoff with jitter) before the
        next attempt. A refused connection is retried once, then treated as permanent. Returns
        the call and what it tells the breaker.
        """
        usage = Usage()
        retries_left = self.max_retries
        waits = 0
        conversation = list(messages)
        repaired = False
        refused_once = False
        replied = Outcome.NEUTRAL
        request = object()  # this request, for the format breaker's count
        while True:
            if self.breaker.tripped and usage.calls:
                stopped = _refusal(self.breaker.line, "not retried")
                return JudgeCall(None, stopped, usage), replied, None, None
            try:
                reply = await self._send(conversation, schema)
            except _NotSent:
                outcome = replied if usage.calls else Outcome.NOT_SENT
                return JudgeCall(None, _refusal(self.breaker.line), usage), outcome, None, None
            except asyncio.CancelledError:
                raise
            except JudgeError as exc:
                usage += Usage(calls=1)
                step = _next_step(exc, refused_once=refused_once, retries_left=retries_left)
                if step == "retry":
                    refused_once = refused_once or isinstance(exc, ConnectionRefused)
                    retries_left -= 1
                    waits += 1
                    self.stats.retries += 1
                    await self.sleep(self._backoff(waits, exc))
                    continue
                if step == "permanent":
                    failure = self._failed(FailureKind.JUDGE_ERROR, str(exc))
                    return JudgeCall(None, failure, usage), replied, None, None
                cause, hint = _cause_of(exc, self.timeout)
                if step == "unusable":
                    message = str(exc)
                    if isinstance(exc, ConnectionRefused):
                        message += f" (refused {'twice' if refused_once else 'once'})"
                    failure = self._failed(FailureKind.JUDGE_ERROR, _with_fix(message, hint))
                    return JudgeCall(None, failure, usage), Outcome.UNUSABLE, cause, hint
                message = f"{exc} (gave up after {usage.calls} attempts)"
                failure = self._failed(_transient_kind(exc), message)
                outcome = _exhausted(replied, usage.calls)
                return JudgeCall(None, failure, usage), outcome, cause, hint
            except Exception as exc:  # an adapter bug must not kill the run
                usage += Usage(calls=1)
                message = describe_error(exc, f"asking the judge {self.model}")
                failure = self._failed(FailureKind.JUDGE_ERROR, message)
                return JudgeCall(None, failure, usage), replied, None, None
            replied = Outcome.REPLIED
            usage += Usage(
                calls=1,
                prompt_tokens=reply.usage.prompt_tokens,
                completion_tokens=reply.usage.completion_tokens,
            )
            value: Any
            problem: str | None
            misfit = False  # parsed, but wrong for this request
            if schema is None:  # free text: usable unless empty
                if reply.text.strip():
                    return JudgeCall(reply.text, None, usage, reply.text), replied, None, None
                value, problem = None, "the reply is empty"
            else:
                value, problem = self._validated(reply, schema)
                if value is not None:
                    problem = _check(validate, value)
                    if problem is not None:
                        value, misfit = None, True
                tripped = self._format.note(template_id, request, problem)
                if tripped is not None:
                    self.breaker.trip_format(tripped)  # this request stops at the loop's top
            if value is not None:
                text = value.model_dump_json() if reply.parsed is not None else reply.text
                return JudgeCall(value, None, usage, text), replied, None, None
            if self.repair and not repaired and schema is not None:
                conversation = [
                    *messages,
                    {"role": "assistant", "content": reply.text},
                    {
                        "role": "user",
                        "content": "Your reply could not be used: "
                        f"{problem}. {schema_instruction(schema)}",
                    },
                ]
                repaired = True
                continue
            if retries_left == 0:
                snippet = reply.text[:200] + ("…" if len(reply.text) > 200 else "")
                wanted = "a non-empty text" if schema is None else f"the {schema.__name__} schema"
                if misfit:
                    message = f"{template_id or 'judge reply'}: {problem}; reply: {snippet}"
                else:
                    message = f"judge reply did not match {wanted}: {problem}; reply: {snippet}"
                failure = self._failed(FailureKind.PARSE_ERROR, message)
                return JudgeCall(None, failure, usage, reply.text), replied, None, None
            retries_left -= 1
            self.stats.retries += 1
            conversation = list(messages)
            repaired = False

    def _validated(self, reply: JudgeReply, schema: type[T]) -> tuple[T | None, str | None]:
        if reply.parsed is not None:
            if isinstance(reply.parsed, schema):
                return reply.parsed, None
            try:
                return schema.model_validate(reply.parsed), None
            except ValidationError as exc:
                return None, str(exc.errors(include_url=False)[:3])
        return _parse(reply.text, schema)

    def _failed(self, kind: FailureKind, message: str) -> Failure:
        self.stats.failures += 1
        return Failure(kind=kind, message=message)

    def _backoff(self, attempt: int, error: Exception | None) -> float:
        return _backoff(self._rng, self.backoff_base, self.backoff_max, attempt, error)

    async def _send(
        self, messages: Sequence[Message], schema: type[BaseModel] | None
    ) -> JudgeReply:
        assert self.slots is not None
        async with self.slots.hold():
            return await _on_the_wire(
                self.stats,
                self.breaker,
                self.timeout,
                lambda: self.judge.generate(list(messages), schema=schema),
                "reply",
            )


async def _within(call: Awaitable[V], timeout: float | None, what: str) -> V:
    """Await one provider call, bounded by the per-attempt ``timeout`` (None: unbounded)."""
    if timeout is None:
        return await call
    if _HAS_TIMEOUT_SCOPE:
        # Python 3.11+: a deadline on this task, instead of `wait_for`'s extra task and its
        # scheduling per call (measurable at thousands of calls a second).
        try:
            async with asyncio.timeout(timeout):  # type: ignore[attr-defined,unused-ignore]
                return await call
        except TimeoutError:
            raise JudgeTimeout(f"no {what} within {timeout:g} s") from None
    try:
        return await asyncio.wait_for(call, timeout)
    except asyncio.TimeoutError:
        raise JudgeTimeout(f"no {what} within {timeout:g} s") from None


_HAS_TIMEOUT_SCOPE = sys.version_info >= (3, 11)


def _check(validate: Validator | None, value: Any) -> str | None:
    """Run a validator; one that raises rejects the reply (with the error) instead of the run."""
    if validate is None:
        return None
    try:
        return validate(value)
    except Exception as exc:  # a reply odd enough to break the check is not usable
        return f"the reply could not be checked ({type(exc).__name__}: {exc})"


def _backoff(
    rng: random.Random, base: float, ceiling_max: float, attempt: int, error: Exception | None
) -> float:
    if isinstance(error, RateLimited) and error.retry_after is not None:
        return min(ceiling_max, error.retry_after)
    ceiling = min(ceiling_max, base * 2 ** (attempt - 1))
    return rng.uniform(0, ceiling)  # "full jitter": spreads a thundering herd


class EmbeddingFailed(Exception):
    """An embedding request that failed for good; ``failure`` is the typed cause.

    `EmbeddingEngine.embed` raises it (vectors are all-or-nothing for a metric), and
    `Metric.score` turns it into the cell's `Failure` — timeout, rate_limited, judge_error,
    parse_error or cancelled, like a judge call's.
    """

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.message)
        self.failure = failure


@dataclass
class EmbeddingEngine:
    """Embeds texts through the cache, coalescing concurrent requests into full batches.

    Embedding models are cheap per text only in batches: a forward pass over 5 sentences costs
    nearly what 64 do. Metrics ask for a handful of texts each, from many samples at once, so
    requests are queued for ``linger`` seconds (or until ``batch_size`` texts wait) and sent
    together; a text already queued or in flight is not sent twice.

    A batch gets the judge's discipline: a timeout per attempt, retries with backoff for
    transient errors and unusable replies (a vector missing, a NaN, a changed dimension), the
    same error classification (`classify_error` for exceptions an adapter did not classify),
    a `Breaker` that stops sending after ``stop_after`` identical unusable-provider failures,
    and a slot of the run's in-flight cap (``slots``, shared with the judge engine) while on
    the wire. ``max_concurrency`` further limits this engine's own batches in flight (an
    in-process model gains nothing from parallel batches). A batch that fails for good raises
    `EmbeddingFailed` in every request waiting on it.
    """

    embedder: Embedder
    cache: CacheBackend | None = None
    batch_size: int = 256
    max_concurrency: int = 1
    timeout: float | None = 120.0
    linger: float = 0.002
    max_retries: int = 4
    backoff_base: float = 0.5
    backoff_max: float = 30.0
    sleep: Callable[[float], Any] = asyncio.sleep
    seed: int | None = None
    slots: Slots | None = None
    stop_after: int = 5
    batches: int = field(default=0, init=False)
    stats: _Stats = field(default_factory=_Stats, init=False)
    breaker: Breaker = field(init=False)
    _state: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Batcher] = field(
        default_factory=weakref.WeakKeyDictionary, init=False
    )

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        if self.timeout is not None and not self.timeout > 0:
            raise ValueError("timeout must be > 0 seconds (or None for no timeout)")
        self._own = Slots(self.max_concurrency)
        self._rng = random.Random(self.seed)
        self._dim: int | None = None
        self.breaker = Breaker("embedder", self.stop_after)

    @property
    def model(self) -> str:
        return self.embedder.model

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors aligned with ``texts``; cached ones are not recomputed.

        Raises `EmbeddingFailed` when a batch fails for good.
        """
        found: list[list[float] | None] = (
            self.cache.get_embeddings(self.model, list(texts))
            if self.cache is not None
            else [None] * len(texts)
        )
        missing = list(dict.fromkeys(t for t, v in zip(texts, found, strict=True) if v is None))
        if missing:
            batcher = self._batcher()
            vectors = await asyncio.gather(*(batcher.request(t) for t in missing))
            computed = dict(zip(missing, vectors, strict=True))
        else:
            computed = {}
        self.stats.cached += len(texts) - len(missing)
        return [v if v is not None else computed[t] for t, v in zip(texts, found, strict=True)]

    def _batcher(self) -> _Batcher:
        loop = asyncio.get_running_loop()
        batcher = self._state.get(loop)
        if batcher is None:
            batcher = self._state[loop] = _Batcher(self)
        return batcher

    async def _embed_batch(self, batch: list[str]) -> list[list[float]]:
        """One batch through the breaker, retries and cap; raises `EmbeddingFailed`."""
        self.batches += 1
        refusal = await self.breaker.admit()
        if refusal is not None:
            self.stats.refused += 1
            raise EmbeddingFailed(_refusal(refusal))
        outcome, cause, hint = Outcome.NEUTRAL, None, None
        try:
            result, outcome, cause, hint = await self._attempts(batch)
        finally:
            self.breaker.settle(outcome, cause, hint)
        if isinstance(result, Failure):
            self.stats.failures += 1
            raise EmbeddingFailed(result)
        if self.cache is not None:
            self.cache.put_embeddings(self.model, batch, result)
        return result

    async def _attempts(
        self, batch: list[str]
    ) -> tuple[list[list[float]] | Failure, Outcome, str | None, str | None]:
        retries_left = self.max_retries
        attempts = 0
        refused_once = False
        replied = Outcome.NEUTRAL
        while True:
            if self.breaker.tripped and attempts:
                return _refusal(self.breaker.line, "not retried"), replied, None, None
            attempts += 1
            error: JudgeError | None = None
            problem: str | None = None
            try:
                result = await self._send(batch)
            except _NotSent:
                outcome = replied if attempts > 1 else Outcome.NOT_SENT
                return _refusal(self.breaker.line), outcome, None, None
            except asyncio.CancelledError:
                raise
            except JudgeError as exc:
                error = exc
            except Exception as exc:
                error = classify_error(exc)
                if error is None:  # unknown: an adapter bug, or a cause we cannot tell
                    failure = Failure(
                        kind=FailureKind.JUDGE_ERROR,
                        message="embedding failed: "
                        + describe_error(exc, f"embedding {len(batch)} texts"),
                    )
                    return failure, replied, None, None
            else:
                replied = Outcome.REPLIED
                vectors, problem = self._checked(result, len(batch))
                if vectors is not None:
                    return vectors, replied, None, None
            if error is not None:
                step = _next_step(error, refused_once=refused_once, retries_left=retries_left)
                if step == "permanent":
                    message = f"embedding failed: {error}"
                    return (
                        Failure(kind=FailureKind.JUDGE_ERROR, message=message),
                        replied,
                        None,
                        None,
                    )
                if step != "retry":
                    cause, hint = _cause_of(error, self.timeout)
                    if step == "unusable":
                        message = _with_fix(f"embedding failed: {error}", hint)
                        failure = Failure(kind=FailureKind.JUDGE_ERROR, message=message)
                        return failure, Outcome.UNUSABLE, cause, hint
                    message = f"embedding failed: {error} (gave up after {attempts} attempts)"
                    failure = Failure(kind=_transient_kind(error), message=message)
                    return failure, _exhausted(replied, attempts), cause, hint
                refused_once = refused_once or isinstance(error, ConnectionRefused)
            elif retries_left == 0:
                message = f"embedder reply unusable: {problem} (gave up after {attempts} attempts)"
                return Failure(kind=FailureKind.PARSE_ERROR, message=message), replied, None, None
            retries_left -= 1
            self.stats.retries += 1
            if error is not None:  # an unusable reply is asked again at once
                await self.sleep(
                    _backoff(self._rng, self.backoff_base, self.backoff_max, attempts, error)
                )

    async def _send(self, batch: list[str]) -> Any:
        async with self._own.hold():
            shared = self.slots.hold() if self.slots is not None else _nothing()
            async with shared:
                return await _on_the_wire(
                    self.stats,
                    self.breaker,
                    self.timeout,
                    lambda: self.embedder.embed(batch),
                    "embeddings",
                )

    def _checked(self, result: Any, expected: int) -> tuple[list[list[float]] | None, str | None]:
        """The reply as float vectors rounded to float32, or the reason it cannot be used.

        Rounded to float32 (what models compute, and what the cache stores), so a cold run and
        a cached rerun give bit-identical scores.
        """
        try:
            count = len(result)
        except TypeError:
            return None, f"expected a list of {expected} vectors, got {type(result).__name__}"
        if count != expected:
            return None, f"{count} vectors for {expected} texts"
        vectors: list[list[float]] = []
        dim = self._dim
        for i, raw in enumerate(result):
            try:
                array = np.asarray(raw, dtype=np.float64)
            except (TypeError, ValueError):
                return None, f"vector {i} is not a list of numbers"
            if array.ndim != 1 or array.size == 0:
                return None, f"vector {i} is not a non-empty list of numbers"
            with np.errstate(over="ignore"):
                rounded = array.astype(np.float32)
            if not np.all(np.isfinite(rounded)):
                return None, f"vector {i} holds NaN or infinite values"
            if dim is None:
                dim = int(array.size)
            if array.size != dim:
                return None, f"vector {i} has {array.size} dimensions, earlier ones {dim}"
            vectors.append(rounded.astype(np.float64).tolist())
        if vectors and self._dim is None:
            self._dim = len(vectors[0])
        return vectors, None


@asynccontextmanager
async def _nothing() -> AsyncIterator[None]:
    yield


class _Batcher:
    """Per-event-loop queue of texts waiting to be embedded."""

    def __init__(self, engine: EmbeddingEngine) -> None:
        self.engine = engine
        self.waiting: dict[str, asyncio.Future[list[float]]] = {}
        self.in_flight: dict[str, asyncio.Future[list[float]]] = {}
        self.flusher: asyncio.Task[None] | None = None
        self.tasks: set[asyncio.Task[None]] = set()

    def request(self, text: str) -> asyncio.Future[list[float]]:
        known = self.waiting.get(text) or self.in_flight.get(text)
        if known is not None:
            return known
        future: asyncio.Future[list[float]] = asyncio.get_running_loop().create_future()
        self.waiting[text] = future
        if len(self.waiting) >= self.engine.batch_size:
            self._send(self._take())
        elif self.flusher is None or self.flusher.done():
            self.flusher = asyncio.ensure_future(self._flush_soon())
        return future

    def _take(self) -> dict[str, asyncio.Future[list[float]]]:
        batch = dict(list(self.waiting.items())[: self.engine.batch_size])
        for text in batch:
            del self.waiting[text]
        self.in_flight.update(batch)
        return batch

    async def _flush_soon(self) -> None:
        await asyncio.sleep(self.engine.linger)
        while self.waiting:
            self._send(self._take())

    def _send(self, batch: dict[str, asyncio.Future[list[float]]]) -> None:
        task = asyncio.ensure_future(self._run(batch))
        self.tasks.add(task)  # a reference, so the task is not garbage-collected mid-flight
        task.add_done_callback(self.tasks.discard)

    async def _run(self, batch: dict[str, asyncio.Future[list[float]]]) -> None:
        texts = list(batch)
        try:
            vectors = await self.engine._embed_batch(texts)
        except Exception as exc:  # every waiting metric gets the error, none hangs
            for future in batch.values():
                if not future.done():
                    future.set_exception(exc)
        else:
            for text, vector in zip(texts, vectors, strict=True):
                if not batch[text].done():
                    batch[text].set_result(vector)
        finally:
            for text in texts:
                self.in_flight.pop(text, None)
