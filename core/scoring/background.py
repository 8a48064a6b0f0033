"""`BackgroundScoring`: score live traffic off the caller's path, on a worker of its own.

Scoring a framework's requests as they happen (shadow scoring) must never slow down or break
the request itself: judge calls take seconds, and a framework's callback that raises is often
swallowed without a trace. So the callback only decides whether a request is scored (sampling,
a bound on the requests waiting) and hands its `Sample` to a background thread running its own
event loop, where one `Scorer` scores it; it never waits. Every outcome becomes rows of
``evaluation``: a sample that could not be read or scored is a failure row, not a lost request.

What is framework-specific (which event means "a request ended", how its sample is built)
lives in the adapter, which subclasses this and overrides `_start_listening` and
`_stop_listening`; the LlamaIndex live scoring is one (`ragbridge.adapters.llamaindex`).

Two choices matter for a service that runs for weeks:

* **Which requests are scored.** ``sample_by="random"`` draws each request with probability
  ``sample_rate`` (``seed`` makes the sequence reproducible). ``sample_by="id"`` decides from the
  request's id alone (`sampled_by_id`): the same id is always in or always out, in every process
  and on every machine, so a replayed or retried request is scored (or not) again, and raising the
  rate only adds requests to the ones already chosen.
* **What is kept.** ``keep=True`` (the default) keeps every sample and row in ``samples`` and
  ``evaluation``, for a run that reads them back. ``keep=False`` keeps nothing once a sample's
  scores are recorded: they are handed to `_recorded` (a subclass sends them on, e.g. to the
  shadow scorer's sinks) and memory stays bounded by ``max_pending`` however long it runs.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import random
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from typing_extensions import Self

from ..results.evaluation import Evaluation, FailureKind, Score
from ..sample import Sample
from .scorer import Scorer

__all__ = ["BackgroundScoring", "SampleBy", "id_fraction", "sampled_by_id"]

SampleBy = Literal["random", "id"]

_MAX_ERRORS = 100
"""Problems kept by a scorer that keeps nothing else (``keep=False``): the latest ones."""


def id_fraction(request_id: str) -> float:
    """Where ``request_id`` falls in [0, 1): the top 53 bits of the 8-byte BLAKE2b digest of
    its UTF-8 bytes (big-endian), divided by 2**53 (exact in a float, so never 1.0).

    A cryptographic hash, not Python's `hash` (salted per process), so every process agrees.
    """
    digest = hashlib.blake2b(request_id.encode("utf-8"), digest_size=8).digest()
    return (int.from_bytes(digest, "big") >> 11) / 2.0**53


def sampled_by_id(request_id: str, rate: float) -> bool:
    """Whether the request ``request_id`` is scored at ``rate``: ``id_fraction(id) < rate``.

    Deterministic: the same id gives the same answer in every process; rate 0 chooses nothing,
    rate 1 everything, and the ids chosen at a rate are among those chosen at any higher rate.
    Over many distinct ids the share chosen is ``rate`` (the digest is uniform).
    """
    return id_fraction(request_id) < rate


@dataclass
class _Pending:
    sample: Sample
    future: concurrent.futures.Future[None] | None = None


@dataclass
class _Counts:
    seen: int = 0
    skipped: int = 0
    dropped: int = 0
    scored: int = 0
    ids: set[str] = field(default_factory=set)


class BackgroundScoring:
    """Scores the samples handed to it on a background thread; its scores land in
    ``evaluation``, the samples in ``samples``.

    Each request that ends is counted (``seen``) and sampled with probability ``sample_rate``
    (``seed`` makes the choice reproducible; with ``sample_by="id"`` the choice is
    `sampled_by_id` of the request's id instead; ``skipped`` counts the others). At most
    ``max_pending`` samples wait to be scored: more are refused (``dropped``) rather than
    queued without bound. ``scored`` counts the samples whose rows are recorded and ``pending``
    those still being scored. ``close`` waits for pending scoring (up to ``close_timeout``;
    what is left is recorded as ``cancelled`` failures) and stops the worker.

    A sink calls `admit` when a request ends (quick, from the framework's thread or task), then
    `submit` with the sample, or `settle` with rows decided without scoring (a skip, a request
    that could not be read). Calls the judge makes while scoring run on the worker thread:
    `on_worker_thread` lets a sink's callback ignore them.

    ``keep=False`` keeps no samples, rows or ids: each sample's scores go to `_recorded` (which
    a subclass overrides) and are forgotten, ids are not made unique, and only the latest
    problems stay in ``errors``.
    """

    def __init__(
        self,
        scorer: Scorer,
        *,
        sample_rate: float = 1.0,
        seed: int | None = None,
        max_pending: int = 1000,
        close_timeout: float | None = None,
        id_prefix: str = "sample-",
        thread_name: str = "ragbridge-background",
        sample_by: SampleBy = "random",
        keep: bool = True,
    ) -> None:
        if isinstance(sample_rate, bool) or not 0.0 <= sample_rate <= 1.0:
            raise ValueError(f"sample_rate must lie within [0, 1], got {sample_rate!r}")
        if isinstance(max_pending, bool) or max_pending < 1:
            raise ValueError(f"max_pending must be >= 1, got {max_pending!r}")
        if sample_by not in ("random", "id"):
            raise ValueError(f"sample_by must be 'random' or 'id', got {sample_by!r}")
        self.scorer = scorer
        self.sample_rate = float(sample_rate)
        self.seed = seed
        self.sample_by: SampleBy = sample_by
        self.keep = keep
        self.max_pending = max_pending
        self.close_timeout = close_timeout
        self.id_prefix = id_prefix
        self.thread_name = thread_name
        self.evaluation = Evaluation(
            metadata={
                "metrics": {
                    m.name: {"class": type(m).__name__, "provider": m.provider}
                    for m in scorer.metrics
                },
                "judge_model": scorer.judge.model if scorer.judge else None,
                "sample_rate": self.sample_rate,
                "sample_by": sample_by,
                "seed": seed,
            }
        )
        self.samples: list[Sample] = []
        self.errors: list[str] = []
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._counts = _Counts()
        self._pending: dict[str, _Pending] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._worker_ident: int | None = None
        self._state = "new"  # new -> open -> closed

    # -- counters
    @property
    def seen(self) -> int:
        return self._counts.seen

    @property
    def skipped(self) -> int:
        return self._counts.skipped

    @property
    def dropped(self) -> int:
        return self._counts.dropped

    @property
    def scored(self) -> int:
        return self._counts.scored

    @property
    def pending(self) -> int:
        return len(self._pending)

    @property
    def active(self) -> bool:
        return self._state == "open"

    def on_worker_thread(self) -> bool:
        """Whether the caller runs on the worker (e.g. a judge call made while scoring)."""
        return threading.get_ident() == self._worker_ident

    # -- lifecycle
    def open(self) -> Self:
        """Start the worker and listen (idempotent while open; a closed one cannot reopen)."""
        with self._lock:
            if self._state == "open":
                return self
            if self._state == "closed":
                raise RuntimeError(f"this {type(self).__name__} is closed; start a new one")
            loop = asyncio.new_event_loop()
            started = threading.Event()
            thread = threading.Thread(
                target=self._work, args=(loop, started), name=self.thread_name, daemon=True
            )
            thread.start()
            started.wait()
            self._loop, self._thread = loop, thread
            self._state = "open"
        self._start_listening()
        return self

    def _start_listening(self) -> None:
        """Where a sink subscribes to its framework's events (after the worker started)."""

    def _stop_listening(self) -> None:
        """Where a sink unsubscribes (before the pending scoring is waited for)."""

    def _work(self, loop: asyncio.AbstractEventLoop, started: threading.Event) -> None:
        self._worker_ident = threading.get_ident()
        asyncio.set_event_loop(loop)
        started.set()
        try:
            loop.run_forever()
        finally:
            tasks = asyncio.all_tasks(loop)
            for task in tasks:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the scoring of every sample handed over so far is recorded; False on
        timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._pending:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            with self._lock:
                futures = [p.future for p in self._pending.values() if p.future is not None]
            if futures:
                concurrent.futures.wait(
                    futures, timeout=left, return_when=concurrent.futures.FIRST_COMPLETED
                )
            else:  # a sample is between being admitted and being handed to the worker
                time.sleep(0.005)
        return True

    def close(self, timeout: float | None = None) -> bool:
        """Stop listening, wait for pending scoring (``timeout`` defaults to ``close_timeout``)
        and stop the worker. Returns False when scoring was cut short by the timeout."""
        with self._lock:
            if self._state != "open":
                self._state = "closed"
                return not self._pending
            self._state = "closed"
        self._stop_listening()
        finished = self.wait(self.close_timeout if timeout is None else timeout)
        if not finished:
            with self._lock:
                left = list(self._pending.values())
            for item in left:
                if item.future is not None:
                    item.future.cancel()
                self._cancelled(item.sample, "scoring did not finish before close(timeout=...)")
        loop, thread = self._loop, self._thread
        if loop is not None and thread is not None:
            loop.call_soon_threadsafe(loop.stop)
            thread.join()
        self._finish_metadata()
        return finished

    async def aclose(self, timeout: float | None = None) -> bool:
        """`close` without blocking the running event loop."""
        return await asyncio.to_thread(self.close, timeout)

    def __enter__(self) -> Self:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _finish_metadata(self) -> None:
        meta = self.evaluation.metadata
        meta.update(seen=self.seen, skipped=self.skipped, dropped=self.dropped, scored=self.scored)
        engine = self.scorer.judge
        if engine is not None:
            meta["judge_stats"] = {
                "calls": engine.stats.calls,
                "cached": engine.stats.cached,
                "retries": engine.stats.retries,
                "failures": engine.stats.failures,
            }
        if self.errors:
            meta["errors"] = list(self.errors)

    # -- called from the framework's callback (the user's thread or task): quick, never blocks
    def note_error(self, message: str) -> None:
        """Keep a problem of the sink's callback (frameworks often swallow what it raises)."""
        with self._lock:
            self.errors.append(message)
            if not self.keep and len(self.errors) > _MAX_ERRORS:
                del self.errors[0]

    def admit(self, tagged_id: object = None) -> str | None:
        """Count one request that ended and decide whether it is scored: its new sample id,
        or None (closed, not sampled, or ``max_pending`` already waiting).

        The id is ``tagged_id`` when the request carried one, else ``<id_prefix><n>`` in the
        order requests ended; a repeated id gets ``#2``, ``#3``, ... (not with ``keep=False``,
        which remembers no ids). With ``sample_by="id"`` that id (before any ``#n``) decides.
        """
        with self._lock:
            if self._state != "open" or self._loop is None:
                return None
            counts = self._counts
            counts.seen += 1
            named = str(tagged_id) if tagged_id is not None else ""
            base = named or f"{self.id_prefix}{counts.seen}"
            if self.sample_by == "id":
                chosen = sampled_by_id(base, self.sample_rate)
            else:
                chosen = self.sample_rate >= 1.0 or self._rng.random() < self.sample_rate
            if not chosen:
                counts.skipped += 1
                return None
            if len(self._pending) >= self.max_pending:
                counts.dropped += 1
                return None
            if not self.keep:
                return base
            sample_id, n = base, 1
            while sample_id in counts.ids:
                n += 1
                sample_id = f"{base}#{n}"
            counts.ids.add(sample_id)
            return sample_id

    def submit(self, sample: Sample) -> None:
        """Score ``sample`` (its id from `admit`) on the worker; returns at once."""
        self._start(sample)
        loop, scoring = self._loop, self._score(sample)
        try:
            if loop is None:
                raise RuntimeError("the worker was never started")
            future = asyncio.run_coroutine_threadsafe(scoring, loop)
        except RuntimeError as exc:  # the worker stopped in between: closed
            scoring.close()
            self._cancelled(sample, f"not scored: {exc}")
            return
        with self._lock:
            item = self._pending.get(sample.id)
            if item is not None:
                item.future = future

    def settle(self, sample: Sample, scores: Mapping[str, Score]) -> None:
        """Record ``sample`` with rows decided without scoring (a skip, unreadable input)."""
        self._start(sample)
        self._record(sample.id, scores)

    def _start(self, sample: Sample) -> None:
        with self._lock:
            if self.keep:
                self.samples.append(sample)
            self._pending[sample.id] = _Pending(sample)

    def _cancelled(self, sample: Sample, message: str) -> None:
        failure = Score.fail(FailureKind.CANCELLED, message)
        self._record(sample.id, dict.fromkeys(self.scorer.names, failure))

    # -- on the worker loop
    async def _score(self, sample: Sample) -> None:
        try:
            scores = await self.scorer.ascore(sample)
        except Exception as exc:  # a bug must become rows, not a lost request
            failure = Score.fail(FailureKind.JUDGE_ERROR, f"{type(exc).__name__}: {exc}")
            scores = dict.fromkeys(self.scorer.names, failure)
        self._record(sample.id, scores)

    def _record(self, sample_id: str, scores: Mapping[str, Score]) -> None:
        with self._lock:
            item = self._pending.pop(sample_id, None)
            if item is None:
                return  # already recorded (e.g. cancelled at close)
            if self.keep:
                for name, score in scores.items():
                    self.evaluation.add(sample_id, name, score)
            self._counts.scored += 1
        try:
            self._recorded(item.sample, scores)
        except Exception as exc:  # a subclass's hand-off must not lose the worker
            self.note_error(f"recording {sample_id!r} failed: {type(exc).__name__}: {exc}")

    def _recorded(self, sample: Sample, scores: Mapping[str, Score]) -> None:
        """Where a subclass takes a sample's scores once recorded (on the worker when scored;
        on the caller's thread for `settle` and for what `close` cancels)."""
