"""The embedding engine: texts to vectors through the cache, in full batches, with the judge's
discipline.

A module of its own beside the judge engine (`ragbridge.core.judging.engine`) because it shares
none of the judge's request handling (prompts, schemas, repairs, validators), only the attempt
policy both follow (`ragbridge.core.judging.attempts`: timeouts, retries, backoff, the breaker,
the in-flight count), and batching is its own concern: embedding models are cheap per text only
in batches, so concurrent requests from many metrics and samples are coalesced here.
"""

from __future__ import annotations

import asyncio
import random
import weakref
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..cache.backend import CacheBackend
from ..results.evaluation import Failure, FailureKind
from .attempts import CallStats, NotSent, backoff, gave_up, next_step, on_the_wire, refusal
from .error_text import describe_error
from .judge import ConnectionRefused, Embedder, JudgeError, classify_error
from .limits import Breaker, Outcome, Slots

__all__ = ["EmbeddingEngine", "EmbeddingFailed"]


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
    stats: CallStats = field(default_factory=CallStats, init=False)
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
        stopped = await self.breaker.admit()
        if stopped is not None:
            self.stats.refused += 1
            raise EmbeddingFailed(refusal(stopped))
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
                return refusal(self.breaker.line, "not retried"), replied, None, None
            attempts += 1
            error: JudgeError | None = None
            problem: str | None = None
            try:
                result = await self._send(batch)
            except NotSent:
                outcome = replied if attempts > 1 else Outcome.NOT_SENT
                return refusal(self.breaker.line), outcome, None, None
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
                step = next_step(error, refused_once=refused_once, retries_left=retries_left)
                if step != "retry":
                    return gave_up(
                        step,
                        error,
                        attempts=attempts,
                        replied=replied,
                        timeout=self.timeout,
                        what="embedding failed: ",
                    )
                refused_once = refused_once or isinstance(error, ConnectionRefused)
            elif retries_left == 0:
                message = f"embedder reply unusable: {problem} (gave up after {attempts} attempts)"
                return Failure(kind=FailureKind.PARSE_ERROR, message=message), replied, None, None
            retries_left -= 1
            self.stats.retries += 1
            if error is not None:  # an unusable reply is asked again at once
                await self.sleep(
                    backoff(self._rng, self.backoff_base, self.backoff_max, attempts, error)
                )

    async def _send(self, batch: list[str]) -> Any:
        async with self._own.hold():
            shared = self.slots.hold() if self.slots is not None else _nothing()
            async with shared:
                return await on_the_wire(
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
