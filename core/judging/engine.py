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
* **Log-probabilities, when asked.** A request may ask for its reply's token log-probabilities
  (``logprobs=k``: a scored criterion weighting its score by probability). The engine tells the
  judge through `ragbridge.core.judging.judge.logprobs_wanted`, hands back those of the reply it
  used (`JudgeCall.logprobs`) and caches them with it; such a request has a key of its own.

The pieces the engine is built from live beside it, each in a module that says what it holds:
the attempt policy it shares with the embedding engine (`ragbridge.core.judging.attempts`),
reading and checking a reply (`ragbridge.core.judging.reply_parse`) and the embedding engine
itself (`ragbridge.core.judging.embedding`). This module keeps the request path: the cache,
identical requests in flight, the breaker, the attempts with their repairs, and what they cost.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from ..cache.backend import CacheBackend
from ..cache.request_key import cache_key
from ..cache.stored import CachedReply
from ..results.evaluation import Failure, FailureKind, Usage
from .attempts import CallStats, NotSent, backoff, gave_up, next_step, on_the_wire, refusal
from .error_text import describe_error
from .judge import (
    ConnectionRefused,
    Judge,
    JudgeError,
    JudgeReply,
    Message,
    TokenLogprob,
    logprobs_wanted,
)
from .limits import Outcome, Slots
from .logprobs import usable_logprobs
from .ratelimit import Permit, RateLimiter, RateLimits, rate_limiter
from .reply_format import FormatWatch, ReplyBreaker, reply_spec, spec_of
from .reply_parse import Validator, check, parse_reply, schema_instruction, schema_key_json

__all__ = ["JudgeCall", "JudgeEngine", "Price", "cost_of"]

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
    """The outcome of one logical judge request (all its attempts, the repair, the cache).

    ``logprobs`` are the used reply's tokens with their log-probabilities when the request
    asked for them and the provider gave them (from the cache too); None otherwise.
    """

    value: V | None
    failure: Failure | None
    usage: Usage
    text: str | None = None
    logprobs: tuple[TokenLogprob, ...] | None = None

    @property
    def ok(self) -> bool:
        return self.value is not None


#: The usage of a call answered from the cache (frozen, so one instance serves every hit).
_ONE_CACHED = Usage(cached_calls=1)


@dataclass(frozen=True)
class _Request:
    """One logical request as the engine's steps pass it along (``schema`` None: free text)."""

    messages: Sequence[Message]
    schema: type[BaseModel] | None
    template_id: str
    template_version: str
    validate: Validator | None
    logprobs: int | None = None


@dataclass
class _Attempts:
    """Where one request's attempts stand: what they cost, what is left, what was learnt.

    ``conversation`` is what the next attempt sends: the request's messages, or those plus the
    unusable reply and the repair re-ask quoting its problem. ``request_mark`` identifies this
    request to the format breaker, which counts replies per request.
    """

    conversation: list[Message]
    retries_left: int
    usage: Usage = field(default_factory=Usage)
    waits: int = 0
    repaired: bool = False
    refused_once: bool = False
    replied: Outcome = Outcome.NEUTRAL
    request_mark: object = field(default_factory=object)


_Resolved = tuple[JudgeCall[Any], Outcome, str | None, str | None]
"""A request's outcome: the call, what it tells the breaker, and the breaker's cause and hint."""


@dataclass
class JudgeEngine:
    """Runs judge calls for a whole evaluation. Share one engine between all metrics of a run.

    ``max_retries`` is the retry budget of one call (attempts = 1 + max_retries); ``timeout`` is
    per attempt, in seconds. ``sleep`` and ``seed`` exist so tests run backoff instantly and
    deterministically. ``slots`` is the run's in-flight cap when it is shared with an
    `EmbeddingEngine` (default: the engine's own, ``max_concurrency`` wide); ``stop_after`` is
    the number of identical unusable-provider failures after which calls are no longer sent
    (see `ragbridge.core.judging.limits.Breaker`; the engine's ``breaker``). ``rate_limits``
    turns on the provider-following limiter (`ragbridge.core.judging.ratelimit`; ``limiter``
    injects one): each call then also waits for room in the key's requests and tokens per
    minute, shared with other runs on this machine using the same key.
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
    rate_limits: RateLimits | None = None
    limiter: RateLimiter | None = None
    stats: CallStats = field(default_factory=CallStats, init=False)
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
        if self.limiter is None and self.rate_limits is not None:
            # One limiter per key in the process, its ledger shared with other runs on it.
            key = getattr(self.judge, "rate_key", None) or f"model:{self.model}"
            self.limiter = rate_limiter(str(key), self.rate_limits)
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
        logprobs: int | None = None,
    ) -> JudgeCall[T]:
        """One structured request: the cache, else attempts (see `_resolve`); never raises.

        ``validate`` checks a reply that parsed against what this request asked (see
        `Validator`); a reply it rejects is treated like one that did not parse: repaired,
        retried within the budget, never cached. Cached replies are checked too: an entry
        that fails today's check is a miss, and is replaced by the fresh reply.

        ``logprobs=k`` asks for the reply's token log-probabilities with ``k`` alternatives per
        token (a judge that cannot give them ignores it): `JudgeCall.logprobs` then carries
        those of the reply used (the repaired one after a repair), or None when the judge gave
        none. The request has its own cache key (see `ragbridge.core.cache.request_key`), and
        the cached entry keeps them, or keeps that there were none: a rerun answers from the
        cache with what the first run had, so its weighted score is the same, with no call.
        A negative ``k`` is a ValueError.
        """
        call: JudgeCall[T] = await self._request(
            _Request(messages, schema, template_id, template_version, validate, _top_k(logprobs))
        )
        return call

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        template_id: str,
        template_version: str,
        logprobs: int | None = None,
    ) -> JudgeCall[str]:
        """One free-text request, for prompts that are not ours (RAGAS's, DeepEval's).

        Their frameworks parse the text themselves, so there is nothing to validate or repair;
        the call still gets the semaphore, retries, timeout and cache of every other call, keyed
        by the caller's ``template_id``/``template_version`` (e.g. ``"deepeval"``, its version).
        An empty reply counts as unusable and is retried within the budget. Never raises.
        ``logprobs`` as in `ask`.
        """
        call: JudgeCall[str] = await self._request(
            _Request(messages, None, template_id, template_version, None, _top_k(logprobs))
        )
        return call

    async def _request(self, request: _Request) -> JudgeCall[Any]:
        """The cache, an identical request already in flight, else a request of its own."""
        if self.cache is None:
            return await self._send_request(request)
        key = cache_key(
            model=self.model,
            template_id=request.template_id,
            template_version=request.template_version,
            messages=request.messages,
            schema=None,
            schema_json=None if request.schema is None else schema_key_json(request.schema),
            params=self.params,
            logprobs=request.logprobs,
        )
        found = self._cached(self.cache, key, request)
        if found is None:
            found = await self._join(key, request)
        if found is not None:
            return found
        leader: asyncio.Future[JudgeCall[Any]] = asyncio.get_running_loop().create_future()
        self._in_flight[key] = leader
        try:
            call = await self._send_request(request, key)
        except BaseException:
            leader.cancel()
            raise
        finally:
            if self._in_flight.get(key) is leader:
                del self._in_flight[key]
        leader.set_result(call)
        return call

    def _cached(self, cache: CacheBackend, key: str, request: _Request) -> JudgeCall[Any] | None:
        """The stored reply under ``key`` when it still passes today's parse and checks.

        A stored reply that no longer does (a stricter schema or validator) counts as stale:
        the request is sent again and its fresh reply replaces the entry.
        """
        hit = cache.get_reply(key)
        if hit is None:
            return None
        value: Any
        if request.schema is None:
            value = hit.text if hit.text.strip() else None
        else:
            value, _ = parse_reply(hit.text, request.schema)
            if value is not None and check(request.validate, value) is not None:
                value = None
        if value is None:
            self.stats.stale += 1
            return None
        self.stats.cached += 1
        logprobs = hit.logprobs if request.logprobs is not None else None
        return JudgeCall(value, None, _ONE_CACHED, hit.text, logprobs)

    async def _join(self, key: str, request: _Request) -> JudgeCall[Any] | None:
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
        if first.value is None or (
            request.schema is not None and check(request.validate, first.value)
        ):
            return None
        self.stats.cached += 1
        return JudgeCall(first.value, None, _ONE_CACHED, first.text, first.logprobs)

    async def _send_request(self, request: _Request, key: str | None = None) -> JudgeCall[Any]:
        """The breaker, the attempts, and the cache write of one request that was not cached."""
        stopped = await self.breaker.admit()
        if stopped is not None:
            self.stats.refused += 1
            return JudgeCall(None, refusal(stopped), Usage())
        outcome, cause, hint = Outcome.NEUTRAL, None, None
        spec = reply_spec.set(spec_of(request.validate))  # the reply's budget, for adapters
        try:
            call, outcome, cause, hint = await self._resolve(request)
        finally:
            reply_spec.reset(spec)
            self.breaker.settle(outcome, cause, hint)
        if call.value is not None and self.cache is not None and key is not None:
            assert call.text is not None
            facts = getattr(request.validate, "facts", None)
            self.cache.put_reply(
                key,
                CachedReply(
                    call.text,
                    call.usage.prompt_tokens,
                    call.usage.completion_tokens,
                    call.logprobs,
                ),
                model=self.model,
                template_id=request.template_id,
                template_version=request.template_version,
                facts=dict(facts) if isinstance(facts, Mapping) else None,
            )
        return call

    async def _resolve(self, request: _Request) -> _Resolved:
        """Attempts until a valid reply or the retry budget is spent.

        Transient errors and unusable replies draw on the same budget (``max_retries``): an
        unusable reply (unparseable, or rejected by ``validate``) first gets one repair re-ask
        quoting the problem (free of the budget), and if the repair is unusable too, a fresh
        attempt spends a retry. Only transient errors wait (backoff with jitter) before the
        next attempt. A refused connection is retried once, then treated as permanent. Returns
        the call and what it tells the breaker. Each attempt's outcome is read by one step:
        `_after_error` for an exception, `_after_reply` for a reply; either ends the request or
        leaves `_Attempts` ready for the next attempt.
        """
        state = _Attempts(conversation=list(request.messages), retries_left=self.max_retries)
        while True:
            if self.breaker.tripped and state.usage.calls:
                stopped = refusal(self.breaker.line, "not retried")
                return JudgeCall(None, stopped, state.usage), state.replied, None, None
            try:
                reply = await self._send(state.conversation, request.schema, request.logprobs)
            except NotSent:
                outcome = state.replied if state.usage.calls else Outcome.NOT_SENT
                return JudgeCall(None, refusal(self.breaker.line), state.usage), outcome, None, None
            except asyncio.CancelledError:
                raise
            except JudgeError as exc:
                state.usage += Usage(calls=1)
                done = await self._after_error(exc, state)
            except Exception as exc:  # an adapter bug must not kill the run
                state.usage += Usage(calls=1)
                message = describe_error(exc, f"asking the judge {self.model}")
                failure = self._failed(FailureKind.JUDGE_ERROR, message)
                return JudgeCall(None, failure, state.usage), state.replied, None, None
            else:
                done = self._after_reply(reply, request, state)
            if done is not None:
                return done

    async def _after_error(self, exc: JudgeError, state: _Attempts) -> _Resolved | None:
        """A failed attempt: wait and go on (None), or the request's end (see `next_step`)."""
        step = next_step(exc, refused_once=state.refused_once, retries_left=state.retries_left)
        if step == "retry":
            state.refused_once = state.refused_once or isinstance(exc, ConnectionRefused)
            state.retries_left -= 1
            state.waits += 1
            self.stats.retries += 1
            await self.sleep(self._backoff(state.waits, exc))
            return None
        refused = ""
        if isinstance(exc, ConnectionRefused):
            refused = f" (refused {'twice' if state.refused_once else 'once'})"
        failure, outcome, cause, hint = gave_up(
            step,
            exc,
            attempts=state.usage.calls,
            replied=state.replied,
            timeout=self.timeout,
            refused=refused,
        )
        self.stats.failures += 1
        return JudgeCall(None, failure, state.usage), outcome, cause, hint

    def _after_reply(
        self, reply: JudgeReply, request: _Request, state: _Attempts
    ) -> _Resolved | None:
        """A reply: the request's value, or a repair / fresh attempt (None), or its failure."""
        state.replied = Outcome.REPLIED
        state.usage += Usage(
            calls=1,
            prompt_tokens=reply.usage.prompt_tokens,
            completion_tokens=reply.usage.completion_tokens,
        )
        value, problem, misfit = self._read(reply, request, state.request_mark)
        if value is not None:
            native = (
                request.schema is not None and reply.parsed is not None
            )  # parsed by the adapter
            text = value.model_dump_json() if native else reply.text
            logprobs = _logprobs_of(reply, native, text, request.logprobs)
            return JudgeCall(value, None, state.usage, text, logprobs), state.replied, None, None
        if self.repair and not state.repaired and request.schema is not None:
            state.conversation = [
                *request.messages,
                {"role": "assistant", "content": reply.text},
                {
                    "role": "user",
                    "content": "Your reply could not be used: "
                    f"{problem}. {schema_instruction(request.schema)}",
                },
            ]
            state.repaired = True
            return None
        if state.retries_left == 0:
            failure = self._unusable(reply, request, problem, misfit)
            return JudgeCall(None, failure, state.usage, reply.text), state.replied, None, None
        state.retries_left -= 1
        self.stats.retries += 1
        state.conversation = list(request.messages)
        state.repaired = False
        return None

    def _read(
        self, reply: JudgeReply, request: _Request, mark: object
    ) -> tuple[Any, str | None, bool]:
        """``(value, problem, misfit)`` of a reply: its value when usable, else what is wrong
        with it; ``misfit`` when it parsed but does not answer this request (``validate``).

        A structured reply's outcome is noted by the format breaker, which may trip on it (the
        request then stops at the top of its next attempt)."""
        schema = request.schema
        if schema is None:  # free text: usable unless empty
            if reply.text.strip():
                return reply.text, None, False
            return None, "the reply is empty", False
        value, problem = self._validated(reply, schema)
        misfit = False
        if value is not None:
            problem = check(request.validate, value)
            if problem is not None:
                value, misfit = None, True
        tripped = self._format.note(request.template_id, mark, problem)
        if tripped is not None:
            self.breaker.trip_format(tripped)
        return value, problem, misfit

    def _unusable(
        self, reply: JudgeReply, request: _Request, problem: str | None, misfit: bool
    ) -> Failure:
        """The parse_error of a request whose last reply was still unusable, quoting it."""
        snippet = reply.text[:200] + ("…" if len(reply.text) > 200 else "")
        if misfit:
            message = f"{request.template_id or 'judge reply'}: {problem}; reply: {snippet}"
        else:
            schema = request.schema
            wanted = "a non-empty text" if schema is None else f"the {schema.__name__} schema"
            message = f"judge reply did not match {wanted}: {problem}; reply: {snippet}"
        return self._failed(FailureKind.PARSE_ERROR, message)

    def _validated(self, reply: JudgeReply, schema: type[T]) -> tuple[T | None, str | None]:
        if reply.parsed is not None:
            if isinstance(reply.parsed, schema):
                return reply.parsed, None
            try:
                return schema.model_validate(reply.parsed), None
            except ValidationError as exc:
                return None, str(exc.errors(include_url=False)[:3])
        return parse_reply(reply.text, schema)

    def _failed(self, kind: FailureKind, message: str) -> Failure:
        self.stats.failures += 1
        return Failure(kind=kind, message=message)

    def _backoff(self, attempt: int, error: Exception | None) -> float:
        return backoff(self._rng, self.backoff_base, self.backoff_max, attempt, error)

    async def _send(
        self, messages: Sequence[Message], schema: type[BaseModel] | None, logprobs: int | None
    ) -> JudgeReply:
        """One provider call in a slot, the judge told whether to return log-probabilities
        (set either way, so a call never inherits an outer request's wish)."""
        assert self.slots is not None
        async with self.slots.hold():
            permit = await self._admitted(messages)
            wanted = logprobs_wanted.set(logprobs)
            try:
                reply = await on_the_wire(
                    self.stats,
                    self.breaker,
                    self.timeout,
                    lambda: self.judge.generate(list(messages), schema=schema),
                    "reply",
                )
            except BaseException as exc:
                if permit is not None:
                    permit.failed(exc)
                raise
            finally:
                logprobs_wanted.reset(wanted)
            if permit is not None:
                permit.replied(reply.usage, reply.headers)
            return reply

    async def _admitted(self, messages: Sequence[Message]) -> Permit | None:
        """Room for this call in the key's rate budgets (None: no limiter). Taken inside the
        slot, just before sending, so a call admitted is a call on the wire."""
        if self.limiter is None:
            return None
        spec = reply_spec.get()
        budget = spec.max_tokens if spec is not None else None
        return await self.limiter.acquire(messages, budget)


def _top_k(logprobs: int | None) -> int | None:
    """A request's ``logprobs`` checked: None, or a count of alternatives per token >= 0."""
    if logprobs is None:
        return None
    if isinstance(logprobs, bool) or not isinstance(logprobs, int) or logprobs < 0:
        raise ValueError(f"logprobs must be None or an int >= 0, got {logprobs!r}")
    return logprobs


def _logprobs_of(
    reply: JudgeReply, native: bool, text: str, wanted: int | None
) -> tuple[TokenLogprob, ...] | None:
    """The log-probabilities a call hands back for the reply it used: the reply's own, checked
    (`usable_logprobs`), when the request asked for them.

    A reply the adapter parsed itself (``native``: a tool call's arguments) is kept as the JSON
    of its value, which the reply's tokens, if any, no longer spell; its log-probabilities are
    kept only when they still do, else None, as when a request did not ask. A text reply keeps
    the adapter's tokens as they came (a character split across tokens may make their text
    differ from the reply's by a byte-escape: the score's digits are unaffected)."""
    if wanted is None or reply.logprobs is None:
        return None
    logprobs = usable_logprobs(reply.logprobs)
    if native and logprobs is not None and "".join(t.token for t in logprobs) != text:
        return None
    return logprobs
