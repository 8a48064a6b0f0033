"""Shadow scoring: score a sample of live requests off the request path, and record every one.

A framework wrapper (``ragbridge.adapters.langchain.shadow``, ``ragbridge.adapters.llamaindex
.shadow``) measures one served request (timings, retrieved chunks, the answer) and hands it to
`ShadowScorer.record` as a `FinishedRequest`. That call is all the request path pays: a lock,
a hash of the request id and an append to a bounded queue; it never waits, never calls a sink
and never raises for a sink's or a judge's problem. Everything else happens on two threads of
the scorer:

* the **sink thread** turns each request into a `RequestRecord` (chunk counts, retrieval miss,
  abstention), hands it to every sink (`RequestSink.request`), and passes the sampled ones to
* the **scoring worker** (`ragbridge.core.scoring.background.BackgroundScoring`, its own event loop
  and one `Scorer`), whose scores come back to the sink thread as the same record with ``scores``
  filled (`RequestSink.scored`).

Why it is built this way:

* **Sampling by request id.** A request is scored when `sampled_by_id` (a BLAKE2b hash of its
  id mapped to [0, 1)) falls below ``sample_rate``: the same id is always in or always out, in
  every process, so replicas of a service agree and a retried request is treated alike.
* **Bounded everywhere, drop newest.** At most ``max_pending`` sampled requests wait for or
  undergo scoring; a sampled request arriving when that many are waiting is not scored
  (``dropped``; its record says so in ``attributes["not_scored"]``). At most ``max_queued``
  records wait for the sink thread; a request arriving when that many are waiting is not
  recorded at all (``unrecorded``). Older work is never displaced: what is queued was promised.
  Scores are handed to the sinks and not kept (``keep=False``), so memory does not grow with
  the number of requests served.
* **Clean shutdown.** `close` stops taking requests, delivers what is queued, waits up to the
  timeout for the scoring in progress, and records what is still unscored as ``cancelled``
  cells, so no sampled request disappears without a record. An open scorer is closed at
  interpreter exit too.
"""

from __future__ import annotations

import atexit
import enum
import functools
import math
import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from typing_extensions import Unpack

from ..metrics.base import Metric
from ..results.evaluation import Score
from ..sample import Context, Sample
from ..scoring.background import BackgroundScoring, sampled_by_id
from ..scoring.scorer import Scorer
from ..settings import Settings, SettingsOptions
from ..text.words import abstention
from .records import RequestRecord, ScoreCell
from .sinks import RequestSink, StoreSink
from .store_api import ResultsStore, open_store

__all__ = [
    "DEFAULT_STORE",
    "FinishedRequest",
    "ShadowOptions",
    "ShadowScorer",
    "busy_ms",
    "score_cell",
    "shadow_scorer",
]

DEFAULT_STORE = "ragbridge-monitor.sqlite"
"""The store a shadow scorer writes to when given no sinks: this file in the working directory."""

_SINK_GRACE_S = 2.0
"""How long `close` waits, beyond its timeout, for the sink thread to deliver the last records."""


class _Default(enum.Enum):
    STORE = DEFAULT_STORE


DEFAULT: Literal[_Default.STORE] = _Default.STORE


def busy_ms(intervals: Iterable[tuple[float, float]]) -> float | None:
    """Milliseconds during which at least one of the ``(start, end)`` intervals (seconds) ran:
    the length of their union, so parallel calls count once and the gaps between sequential
    ones not at all. None when there is no interval (nothing was measured, not 0 ms)."""
    spans = sorted((s, e) for s, e in intervals if e >= s)
    if not spans:
        return None
    total = 0.0
    start, end = spans[0]
    for s, e in spans[1:]:
        if s > end:
            total += end - start
            start, end = s, e
        else:
            end = max(end, e)
    total += end - start
    return total * 1000.0


def score_cell(score: Score) -> ScoreCell:
    """A `Score` as the monitor's `ScoreCell`: its value, its failure kind, or skipped."""
    if score.failure is not None:
        return ScoreCell(failure=score.failure.kind.value)
    if score.value is None:
        return ScoreCell(skipped=True)
    return ScoreCell(value=score.value)


class ShadowOptions(SettingsOptions, total=False):
    """`ShadowScorer`'s keyword arguments, for the wrappers that build one:
    ``**options: Unpack[ShadowOptions]``."""

    sample_rate: float
    relevance_threshold: float | None
    sinks: Sequence[RequestSink] | None
    store: str | os.PathLike[str] | ResultsStore | Literal[_Default.STORE] | None
    max_pending: int
    max_queued: int
    close_timeout: float | None
    settings: Settings | None


def shadow_scorer(
    metrics: ShadowScorer | Scorer | Iterable[Metric | str], options: ShadowOptions
) -> tuple[ShadowScorer, bool]:
    """The open `ShadowScorer` a wrapper records into, and whether the wrapper owns it (built
    it here from ``metrics`` and ``options``, so closing the wrapper closes it). A
    `ShadowScorer` given is shared as it is (opened if new) and takes no options."""
    if isinstance(metrics, ShadowScorer):
        if options:
            raise ValueError(
                f"{', '.join(sorted(options))}: give these to the ShadowScorer, or give metrics "
                f"instead of a ShadowScorer"
            )
        return metrics.open(), False
    return ShadowScorer(metrics, **options).open(), True


@dataclass(frozen=True)
class FinishedRequest:
    """What a wrapper measured about one served request.

    ``contexts`` are the retrieved chunks in rank order (None when no retrieval was seen, which
    is not the same as an empty retrieval); they, and ``attributes``, may be given as a callable
    that builds them, so the conversion from framework objects runs on the sink thread instead
    of the request path. ``error`` says what the pipeline raised (such a request is recorded,
    never scored); ``not_scorable`` why its answer cannot be scored although it was served (a
    stream the caller reads), so it is recorded but not scored. Times are in milliseconds;
    ``timestamp`` is when the request started (seconds since the epoch).
    """

    request_id: str
    question: str | None = None
    answer: str | None = None
    contexts: Sequence[Context] | Callable[[], Sequence[Context]] | None = None
    retrieval_ms: float | None = None
    generation_ms: float | None = None
    latency_ms: float | None = None
    error: str | None = None
    not_scorable: str | None = None
    timestamp: float = field(default_factory=time.time)
    pipeline: str | None = None
    attributes: Mapping[str, Any] | Callable[[], Mapping[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class _Served:
    request: FinishedRequest
    chosen: bool
    admitted: bool
    not_scored: str | None


@dataclass(frozen=True)
class _Scored:
    record: RequestRecord


class ShadowScorer(BackgroundScoring):
    """Records every request a wrapped pipeline serves and scores a sample of them, off the
    request path.

    ``metrics`` (names, `Metric`s, or a ready `Scorer`) and ``settings`` (or its fields as
    keyword arguments: ``judge=``, ``embedder=``, ``cache=``, ...) mean what they mean in
    `ragbridge.core.evaluate`. ``sample_rate`` is the share of requests scored, chosen by
    `sampled_by_id` of the request id. ``relevance_threshold`` is the retriever score at or
    above which a chunk counts as used (``chunks_used``; a request where none does is a
    ``retrieval_miss``); without one, or when the retriever gives no scores, ``chunks_used`` is
    None and a retrieval is a miss only when it returned nothing. Retriever scores are on the
    retriever's own scale (cosine similarity, BM25, a distance where lower is closer): choose the
    threshold for yours.

    Records go to ``sinks``. With ``sinks=None`` (the default) that is a `StoreSink` on
    ``store``, by default `DEFAULT_STORE` in the working directory; ``store=None`` or ``sinks=[]``
    records nowhere. Given ``sinks=[...]``, those sinks are used, plus a store only when
    ``store=`` is also given. A store opened here from a path is closed by `close`.

    Bounds (see the module docstring): ``max_pending`` sampled requests scoring or waiting to
    (drop newest beyond: ``dropped``), ``max_queued`` records waiting for the sinks (drop newest
    beyond: ``unrecorded``). ``close_timeout`` is how long `close` waits for scoring by default.

    Counters: ``seen`` requests recorded while open; ``sampled`` chosen by the rule (a request
    that raised is never chosen); ``skipped`` not chosen; ``dropped`` chosen but refused (queue
    full); ``unscorable`` chosen but its answer could not be read; ``scored`` chosen and scored
    (cells may be failures, ``cancelled`` included); ``pending`` sampled but their scores not
    delivered yet; ``queued`` waiting for the sink thread; ``unrecorded`` never given to the
    sinks; ``sink_errors`` sink calls that raised (the message is in ``errors``). `stats`
    returns them all.
    """

    def __init__(
        self,
        metrics: Scorer | Iterable[Metric | str],
        *,
        sample_rate: float = 0.05,
        relevance_threshold: float | None = None,
        sinks: Sequence[RequestSink] | None = None,
        store: str | os.PathLike[str] | ResultsStore | Literal[_Default.STORE] | None = DEFAULT,
        max_pending: int = 100,
        max_queued: int = 10_000,
        close_timeout: float | None = 30.0,
        settings: Settings | None = None,
        **options: Unpack[SettingsOptions],
    ) -> None:
        if isinstance(metrics, Scorer):
            if settings is not None or options:
                raise ValueError("pass a Scorer or metrics with settings, not both")
            scorer = metrics
        else:
            scorer = Scorer(metrics, settings=settings, **options)
        if isinstance(max_queued, bool) or max_queued < 1:
            raise ValueError(f"max_queued must be >= 1, got {max_queued!r}")
        if relevance_threshold is not None and (
            isinstance(relevance_threshold, bool)
            or not isinstance(relevance_threshold, int | float)
            or not math.isfinite(relevance_threshold)
        ):
            raise TypeError(f"relevance_threshold must be a number, got {relevance_threshold!r}")
        super().__init__(
            scorer,
            sample_rate=sample_rate,
            max_pending=max_pending,
            close_timeout=close_timeout,
            id_prefix="request-",
            thread_name="ragbridge-shadow",
            sample_by="id",
            keep=False,
        )
        self.relevance_threshold = relevance_threshold
        self.max_queued = max_queued
        for sink in sinks or ():
            if not isinstance(sink, RequestSink):
                raise TypeError(
                    f"{type(sink).__name__} is not a RequestSink (it needs request(record) "
                    f"and scored(record) methods)"
                )
        self._owned_store: ResultsStore | None = None
        chosen: list[RequestSink] = []
        if sinks is None or store is not DEFAULT:
            path = DEFAULT_STORE if store is DEFAULT else store
            if isinstance(path, str | os.PathLike):  # a file, or a store's URL
                self._owned_store = open_store(path)
                chosen.append(StoreSink(self._owned_store))
            elif path is not None:
                chosen.append(StoreSink(path))
        chosen.extend(sinks or ())
        self.sinks: tuple[RequestSink, ...] = tuple(chosen)
        self._cv = threading.Condition(self._lock)
        self._queue: deque[_Served | _Scored] = deque()
        self._queued = 0  # _Served items in the queue
        self._unfinished = 0  # items appended and not yet fully handled by the sink thread
        self._reserved = 0  # scoring slots: admitted requests until their scores are delivered
        self._awaiting: dict[str, RequestRecord] = {}
        self._stopping = False
        self._sink_thread: threading.Thread | None = None
        self._exit_hook: Callable[[], None] | None = None
        self._sampled = 0
        self._unscorable = 0
        self._unrecorded = 0
        self._sink_errors = 0

    # -- counters
    @property
    def sampled(self) -> int:
        return self._sampled

    @property
    def unscorable(self) -> int:
        return self._unscorable

    @property
    def unrecorded(self) -> int:
        return self._unrecorded

    @property
    def sink_errors(self) -> int:
        return self._sink_errors

    @property
    def queued(self) -> int:
        return self._queued

    @property
    def pending(self) -> int:
        """Sampled requests whose scores are not delivered yet (queued, scoring, or scored)."""
        return self._reserved

    def stats(self) -> dict[str, int]:
        """Every counter, read at once."""
        with self._lock:
            return {
                "seen": self._counts.seen,
                "sampled": self._sampled,
                "skipped": self._counts.skipped,
                "dropped": self._counts.dropped,
                "unscorable": self._unscorable,
                "scored": self._counts.scored,
                "pending": self._reserved,
                "queued": self._queued,
                "unrecorded": self._unrecorded,
                "sink_errors": self._sink_errors,
            }

    def __repr__(self) -> str:
        counts = ", ".join(f"{k}={v}" for k, v in self.stats().items())
        return f"ShadowScorer({self.scorer.names}, sample_rate={self.sample_rate}, {counts})"

    # -- the request path
    def record(self, request: FinishedRequest) -> bool:
        """Take one served request; True when it will be scored. Returns at once: no sink is
        called and nothing is waited for here. A closed (or never opened) scorer records
        nothing and counts the request as ``unrecorded``."""
        if not request.request_id:
            raise ValueError("a request needs a non-empty request_id")
        with self._cv:
            if self._state != "open":
                self._unrecorded += 1
                return False
            counts = self._counts
            counts.seen += 1
            chosen = request.error is None and sampled_by_id(request.request_id, self.sample_rate)
            if chosen:
                self._sampled += 1
            else:
                counts.skipped += 1
            if self._queued >= self.max_queued:
                self._unrecorded += 1
                counts.dropped += chosen
                return False
            admitted = False
            not_scored: str | None = None
            if chosen and request.not_scorable is not None:
                self._unscorable += 1
                not_scored = request.not_scorable
            elif chosen and self._reserved >= self.max_pending:
                counts.dropped += 1
                not_scored = (
                    f"dropped: {self.max_pending} sampled requests were already waiting to be "
                    f"scored (max_pending)"
                )
            elif chosen:
                self._reserved += 1
                admitted = True
            self._queue.append(_Served(request, chosen, admitted, not_scored))
            self._queued += 1
            self._unfinished += 1
            self._cv.notify_all()
        return admitted

    # -- lifecycle
    def _start_listening(self) -> None:
        thread = threading.Thread(target=self._deliver, name="ragbridge-shadow-sinks", daemon=True)
        self._sink_thread = thread
        thread.start()
        self._exit_hook = functools.partial(_close_at_exit, weakref.ref(self))
        atexit.register(self._exit_hook)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until every request taken so far is recorded and every sampled one's scores
        are delivered; False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cv:
            while self._unfinished or self._reserved:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._cv.wait(left)
        return True

    def close(self, timeout: float | None = None) -> bool:
        """Stop taking requests, deliver the queued records, wait up to ``timeout`` (default
        ``close_timeout``) for scoring, record what is still unscored as ``cancelled`` cells,
        and stop both threads. True when everything finished in time."""
        limit = self.close_timeout if timeout is None else timeout
        deadline = None if limit is None else time.monotonic() + limit
        finished = super().close(limit)
        with self._lock:
            left = [item.sample for item in self._pending.values()]
        for sample in left:  # handed over while the worker was stopping
            self._cancelled(sample, "scoring did not start before close()")
        with self._cv:
            self._stopping = True
            self._cv.notify_all()
        thread = self._sink_thread
        if thread is not None:
            remaining = None if deadline is None else deadline - time.monotonic()
            thread.join(None if remaining is None else max(remaining, 0.0) + _SINK_GRACE_S)
            if thread.is_alive():
                finished = False
                with self._cv:
                    lost = self._queued
                    self._unrecorded += lost
                self.note_error(
                    f"the sinks did not take the last records in time: {lost} request(s) "
                    f"unrecorded (a sink is stuck)"
                )
        if self._exit_hook is not None:
            atexit.unregister(self._exit_hook)
            self._exit_hook = None
        if self._owned_store is not None and (thread is None or not thread.is_alive()):
            self._owned_store.close()
        return finished

    # -- the sink thread
    def _deliver(self) -> None:
        while True:
            with self._cv:
                while not self._queue and not self._stopping:
                    self._cv.wait()
                if not self._queue:
                    return
                item = self._queue.popleft()
                if isinstance(item, _Served):
                    self._queued -= 1
            try:
                if isinstance(item, _Served):
                    self._served(item)
                else:
                    self._call_sinks("scored", item.record)
            except Exception as exc:  # a bug here must not stop the thread
                self.note_error(f"recording failed: {type(exc).__name__}: {exc}")
            finally:
                with self._cv:
                    self._unfinished -= 1
                    if isinstance(item, _Scored):
                        self._reserved -= 1
                    self._cv.notify_all()
            del item  # hold nothing of a request while waiting for the next one

    def _release(self) -> None:
        with self._cv:
            self._reserved -= 1
            self._cv.notify_all()

    def _served(self, item: _Served) -> None:
        request = item.request
        admitted, not_scored = item.admitted, item.not_scored
        try:
            if admitted:
                with self._lock:
                    duplicate = request.request_id in self._awaiting
                if duplicate:
                    admitted = False
                    self._release()
                    with self._lock:
                        self._counts.dropped += 1
                    not_scored = "dropped: a request with the same id is still being scored"
            record, contexts = self._request_record(
                request, sampled=admitted, chosen=item.chosen, not_scored=not_scored
            )
        except Exception as exc:
            if admitted:
                self._release()
            self.note_error(
                f"request {request.request_id!r} could not be recorded: {type(exc).__name__}: {exc}"
            )
            return
        self._call_sinks("request", record)
        if not admitted:
            return
        try:
            sample = Sample(
                id=request.request_id,
                question=request.question or "",
                answer=request.answer,
                contexts=contexts or [],
                metadata={"pipeline": request.pipeline} if request.pipeline else {},
            )
        except Exception as exc:
            self._release()
            self.note_error(
                f"request {request.request_id!r} could not be scored: {type(exc).__name__}: {exc}"
            )
            return
        with self._lock:
            self._awaiting[sample.id] = record
        self.submit(sample)

    def _request_record(
        self, request: FinishedRequest, *, sampled: bool, chosen: bool, not_scored: str | None
    ) -> tuple[RequestRecord, list[Context] | None]:
        found = request.contexts() if callable(request.contexts) else request.contexts
        contexts = None if found is None else list(found)
        attributes = dict(
            request.attributes() if callable(request.attributes) else request.attributes
        )
        if request.latency_ms is not None:
            attributes["latency_ms"] = round(request.latency_ms, 3)
        if chosen and not_scored is not None:
            attributes["not_scored"] = not_scored
        if contexts:
            ids = [c.id for c in contexts[:10] if c.id is not None]
            if ids:
                attributes.setdefault("context_ids", ids)
        used, miss = self._usage(contexts)
        answer = request.answer
        record = RequestRecord(
            request_id=request.request_id,
            timestamp=request.timestamp,
            pipeline=request.pipeline,
            question=request.question,
            retrieval_ms=_ms(request.retrieval_ms),
            generation_ms=_ms(request.generation_ms),
            chunks_retrieved=None if contexts is None else len(contexts),
            chunks_used=used,
            retrieval_miss=miss,
            answer_chars=None if answer is None else len(answer),
            abstained=None if answer is None else abstention(answer) is not None,
            sampled=sampled,
            error=request.error,
            attributes=attributes,
        )
        return record, contexts

    def _usage(self, contexts: list[Context] | None) -> tuple[int | None, bool | None]:
        """``(chunks_used, retrieval_miss)`` of a retrieval (see the class docstring)."""
        if contexts is None:
            return None, None
        if not contexts:
            return 0, True
        threshold = self.relevance_threshold
        if threshold is None or any(c.score is None for c in contexts):
            return None, None
        used = sum(1 for c in contexts if c.score is not None and c.score >= threshold)
        return used, used == 0

    def _call_sinks(self, method: Literal["request", "scored"], record: RequestRecord) -> None:
        for sink in self.sinks:
            try:
                getattr(sink, method)(record)
            except Exception as exc:  # counted and kept; never allowed to stop the others
                with self._lock:
                    self._sink_errors += 1
                self.note_error(
                    f"{type(sink).__name__}.{method}({record.request_id!r}) failed: "
                    f"{type(exc).__name__}: {exc}"
                )

    # -- the scoring worker (or close, for what it cancels)
    def _recorded(self, sample: Sample, scores: Mapping[str, Score]) -> None:
        with self._lock:
            base = self._awaiting.pop(sample.id, None)
        if base is None:  # not reached: every submitted sample has its record waiting
            self._release()
            raise RuntimeError(f"no record was waiting for {sample.id!r}")
        try:
            cells = {name: score_cell(score) for name, score in scores.items()}
        except Exception as exc:
            self.note_error(f"scores of {sample.id!r} unreadable: {type(exc).__name__}: {exc}")
            cells = {}
        with self._cv:
            self._queue.append(_Scored(base.model_copy(update={"scores": cells})))
            self._unfinished += 1
            self._cv.notify_all()


def _ms(value: float | None) -> float | None:
    return None if value is None else max(0.0, float(value))


def _close_at_exit(ref: weakref.ref[ShadowScorer]) -> None:
    scorer = ref()
    if scorer is not None and scorer.active:
        scorer.close()
