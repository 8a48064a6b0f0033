"""The judge engine: the one object every metric calls a judge through.

It exists because the failure modes users hit in other frameworks all live at this layer:

* **A true cap on in-flight calls.** One semaphore per engine is held only around the provider
  call itself, so ``max_concurrency`` bounds calls in flight across every metric and sample of a
  run — not jobs, which can each fan out into several calls.
* **Timeouts and retries.** Each attempt has a timeout; transient errors (`TransientJudgeError`:
  timeouts, rate limits, 5xx) are retried with exponential backoff and full jitter, honouring a
  provider's ``retry_after``; the slot is released while waiting. When the retry budget is spent,
  or on a permanent error, the call returns a typed `Failure` — it never raises into the run.
* **Structured output.** The reply is validated against a pydantic schema; fenced JSON and prose
  around the object are tolerated; an invalid reply gets one repair re-ask that quotes the
  validation error; after that the result is ``Failure(parse_error)``.
* **Cost.** Every call's tokens are counted, cached answers are counted separately, and an
  optional price table turns usage into money.
* **Cache.** Replies are stored content-addressed (model, template id + version, messages,
  schema, params), so a second run makes no calls and an interrupted run resumes.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import numpy as np
from pydantic import BaseModel, ValidationError

from .cache import Cache, CachedReply, cache_key
from .judge import (
    Embedder,
    Judge,
    JudgeReply,
    JudgeTimeout,
    Message,
    PermanentJudgeError,
    RateLimited,
    TransientJudgeError,
)
from .results import Failure, FailureKind, Usage

__all__ = ["EmbeddingEngine", "JudgeCall", "JudgeEngine", "Price", "cost_of", "extract_json"]

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


def _parse(text: str, schema: type[T]) -> tuple[T | None, str | None]:
    """Validate a reply against ``schema``; on failure return the error to show in a repair."""
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


def schema_instruction(schema: type[BaseModel]) -> str:
    """The sentence every structured prompt ends with: the schema, stated in the prompt."""
    # Declaration order, not sorted: schemas list the reasoning field before the verdict.
    spec = json.dumps(schema.model_json_schema(), separators=(",", ":"))
    return (
        "Reply with a single JSON object and nothing else. It must validate against this "
        f"JSON Schema:\n{spec}"
    )


@dataclass
class _Stats:
    in_flight: int = 0
    max_in_flight: int = 0
    calls: int = 0
    cached: int = 0
    retries: int = 0
    failures: int = 0


@dataclass
class JudgeEngine:
    """Runs judge calls for a whole evaluation. Share one engine between all metrics of a run.

    ``max_retries`` is the retry budget of one call (attempts = 1 + max_retries); ``timeout`` is
    per attempt, in seconds. ``sleep`` and ``seed`` exist so tests run backoff instantly and
    deterministically.
    """

    judge: Judge
    max_concurrency: int = 8
    timeout: float | None = 60.0
    max_retries: int = 4
    backoff_base: float = 0.5
    backoff_max: float = 30.0
    repair: bool = True
    cache: Cache | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    price: Price | None = None
    sleep: Callable[[float], Any] = asyncio.sleep
    seed: int | None = None
    stats: _Stats = field(default_factory=_Stats, init=False)

    def __post_init__(self) -> None:
        if self.max_concurrency < 1:
            raise ValueError("max_concurrency must be >= 1")
        if self.max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        self._rng = random.Random(self.seed)
        # Keyed by the loop object, weakly: an id() can be reused by the next asyncio.run's loop.
        self._semaphores: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, asyncio.Semaphore
        ] = weakref.WeakKeyDictionary()

    @property
    def model(self) -> str:
        return self.judge.model

    def _semaphore(self) -> asyncio.Semaphore:
        # A semaphore belongs to one event loop; sync evaluate() may run on a fresh loop.
        loop = asyncio.get_running_loop()
        sem = self._semaphores.get(loop)
        if sem is None:
            sem = self._semaphores[loop] = asyncio.Semaphore(self.max_concurrency)
        return sem

    async def ask(
        self,
        messages: Sequence[Message],
        schema: type[T],
        *,
        template_id: str,
        template_version: str,
    ) -> JudgeCall[T]:
        """One structured request: the cache, else attempts (see `_resolve`); never raises."""
        call: JudgeCall[T] = await self._request(messages, schema, template_id, template_version)
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
        call: JudgeCall[str] = await self._request(messages, None, template_id, template_version)
        return call

    async def _request(
        self,
        messages: Sequence[Message],
        schema: type[BaseModel] | None,
        template_id: str,
        template_version: str,
    ) -> JudgeCall[Any]:
        key = None
        if self.cache is not None:
            key = cache_key(
                model=self.model,
                template_id=template_id,
                template_version=template_version,
                messages=list(messages),
                schema=None if schema is None else schema.model_json_schema(),
                params=dict(self.params),
            )
            hit = self.cache.get_reply(key)
            if hit is not None:
                if schema is None:
                    value: Any = hit.text if hit.text.strip() else None
                else:
                    value, _ = _parse(hit.text, schema)
                if value is not None:
                    self.stats.cached += 1
                    return JudgeCall(value, None, Usage(cached_calls=1), hit.text)
        call = await self._resolve(messages, schema)
        if call.value is not None and self.cache is not None and key is not None:
            assert call.text is not None
            self.cache.put_reply(
                key,
                CachedReply(call.text, call.usage.prompt_tokens, call.usage.completion_tokens),
                model=self.model,
                template_id=template_id,
            )
        return call

    async def _resolve(
        self, messages: Sequence[Message], schema: type[Any] | None
    ) -> JudgeCall[Any]:
        """Attempts until a valid reply or the retry budget is spent.

        Transient errors and unusable replies draw on the same budget (``max_retries``): an
        unusable reply first gets one repair re-ask quoting the problem (free of the budget),
        and if the repair is unusable too, a fresh attempt spends a retry. Only transient errors
        wait (backoff with jitter) before the next attempt.
        """
        usage = Usage()
        retries_left = self.max_retries
        waits = 0
        conversation = list(messages)
        repaired = False
        while True:
            try:
                reply = await self._send(conversation, schema)
            except TransientJudgeError as exc:
                usage += Usage(calls=1)
                if retries_left == 0:
                    kind = (
                        FailureKind.TIMEOUT
                        if isinstance(exc, JudgeTimeout)
                        else FailureKind.RATE_LIMITED
                        if isinstance(exc, RateLimited)
                        else FailureKind.JUDGE_ERROR
                    )
                    message = f"{exc} (gave up after {usage.calls} attempts)"
                    return JudgeCall(None, self._failed(kind, message), usage)
                retries_left -= 1
                waits += 1
                self.stats.retries += 1
                await self.sleep(self._backoff(waits, exc))
                continue
            except PermanentJudgeError as exc:
                usage += Usage(calls=1)
                return JudgeCall(None, self._failed(FailureKind.JUDGE_ERROR, str(exc)), usage)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # an adapter bug must not kill the run
                usage += Usage(calls=1)
                message = f"{type(exc).__name__}: {exc}"
                return JudgeCall(None, self._failed(FailureKind.JUDGE_ERROR, message), usage)
            usage += Usage(
                calls=1,
                prompt_tokens=reply.usage.prompt_tokens,
                completion_tokens=reply.usage.completion_tokens,
            )
            value: Any
            problem: str | None
            if schema is None:  # free text: usable unless empty
                if reply.text.strip():
                    return JudgeCall(reply.text, None, usage, reply.text)
                value, problem = None, "the reply is empty"
            else:
                value, problem = self._validated(reply, schema)
            if value is not None:
                text = value.model_dump_json() if reply.parsed is not None else reply.text
                return JudgeCall(value, None, usage, text)
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
                message = f"judge reply did not match {wanted}: {problem}; reply: {snippet}"
                failure = self._failed(FailureKind.PARSE_ERROR, message)
                return JudgeCall(None, failure, usage, reply.text)
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
        if isinstance(error, RateLimited) and error.retry_after is not None:
            return min(self.backoff_max, error.retry_after)
        ceiling = min(self.backoff_max, self.backoff_base * 2 ** (attempt - 1))
        return self._rng.uniform(0, ceiling)  # "full jitter": spreads a thundering herd

    async def _send(
        self, messages: Sequence[Message], schema: type[BaseModel] | None
    ) -> JudgeReply:
        async with self._semaphore():
            self.stats.in_flight += 1
            self.stats.calls += 1
            self.stats.max_in_flight = max(self.stats.max_in_flight, self.stats.in_flight)
            try:
                call = self.judge.generate(list(messages), schema=schema)
                if self.timeout is None:
                    return await call
                try:
                    return await asyncio.wait_for(call, self.timeout)
                except asyncio.TimeoutError:
                    raise JudgeTimeout(f"no reply within {self.timeout:g} s") from None
            finally:
                self.stats.in_flight -= 1


@dataclass
class EmbeddingEngine:
    """Embeds texts through the cache, coalescing concurrent requests into full batches.

    Embedding models are cheap per text only in batches: a forward pass over 5 sentences costs
    nearly what 64 do. Metrics ask for a handful of texts each, from many samples at once, so
    requests are queued for ``linger`` seconds (or until ``batch_size`` texts wait) and sent
    together; a text already queued or in flight is not sent twice.
    """

    embedder: Embedder
    cache: Cache | None = None
    batch_size: int = 256
    max_concurrency: int = 1
    timeout: float | None = 120.0
    linger: float = 0.002
    batches: int = field(default=0, init=False)
    _state: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Batcher] = field(
        default_factory=weakref.WeakKeyDictionary, init=False
    )

    @property
    def model(self) -> str:
        return self.embedder.model

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors aligned with ``texts``; cached ones are not recomputed."""
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
        return [v if v is not None else computed[t] for t, v in zip(texts, found, strict=True)]

    def _batcher(self) -> _Batcher:
        loop = asyncio.get_running_loop()
        batcher = self._state.get(loop)
        if batcher is None:
            batcher = self._state[loop] = _Batcher(self)
        return batcher

    async def _embed_batch(self, batch: list[str]) -> list[list[float]]:
        self.batches += 1
        call = self.embedder.embed(batch)
        result = await (call if self.timeout is None else asyncio.wait_for(call, self.timeout))
        if len(result) != len(batch):
            raise ValueError(
                f"embedder {self.model!r} returned {len(result)} vectors for {len(batch)} texts"
            )
        # Rounded to float32 (what models compute, and what the cache stores), so a cold run
        # and a cached rerun give bit-identical scores.
        vectors = [np.asarray(v, dtype=np.float32).astype(np.float64).tolist() for v in result]
        if self.cache is not None:
            self.cache.put_embeddings(self.model, batch, vectors)
        return vectors


class _Batcher:
    """Per-event-loop queue of texts waiting to be embedded."""

    def __init__(self, engine: EmbeddingEngine) -> None:
        self.engine = engine
        self.waiting: dict[str, asyncio.Future[list[float]]] = {}
        self.in_flight: dict[str, asyncio.Future[list[float]]] = {}
        self.flusher: asyncio.Task[None] | None = None
        self.slots = asyncio.Semaphore(engine.max_concurrency)
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
            async with self.slots:
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
