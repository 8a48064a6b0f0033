"""Model-free measures scored a chunk of samples at a time, inside `evaluate`.

A ranking measure (``recall@4``, ``mrr``, ``ndcg@4``) or a string measure (``token_f1``,
``exact_match``, ``context_usage``) calls no model: its cost is its arithmetic, plus whatever
the run spends around each cell. Scored one sample at a time as a `Metric`, the second part was
most of it: a `score_samples` call per sample and measure (a `GradeMatrix`, a block of numpy
operations, an `Evaluation`, for one number), and an event-loop task per sample. 100,000 samples
× 6 such measures took 115 s through ``ragbridge eval``.

So `evaluate` takes the metrics this module can score (`Batched.of`) out of the per-sample
path and scores them a chunk of samples at once (`Batched.score_chunk`):

* the ranking measures of one relevance level and no-answer threshold go through
  `ragbridge.core.retrieval.score_samples` together, one call per chunk: the vectorised kernels
  of `evaluate_run` over a block of queries, the same per-sample policy (missing labels, no
  relevant document, ids that match no label), the same values to the last bit;
* a metric whose class declares `Metric.scores_inline` (its ``_score`` never awaits: token F1,
  exact match, context usage) is scored by running its own `Metric.score` coroutine to its end
  without an event loop (`drive`): the same checks, edge cases and stamp, with no task.

Every cell is the `Score` the one-at-a-time path gives, except ``latency_s``, which for a
vectorised cell is its share of its chunk's time. Cells still reach ``on_result`` sample by
sample in input order; a chunk (`CHUNK` samples) is the most held at once, so memory stays
flat. The metrics that call a model still go through `score_record` per sample, in the same
window as before; a sample's cells are put back in the run's metric order. None of these
metrics is kept by the result cache (`ResultReuse` keeps only model-scored cells), so its
behaviour does not change.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Coroutine,
    Iterable,
    Iterator,
    Sequence,
)
from dataclasses import dataclass, field
from typing import Any

from ..metrics.base import Metric, MetricContext
from ..metrics.ranking_metric import RankingMetric
from ..results.evaluation import FailureKind, Score
from ..retrieval.per_sample import ranking_rows
from ..sample import Sample

__all__ = ["CHUNK", "Batched", "drive"]

CHUNK = 512
"""Samples scored together: large enough that numpy's per-call cost is spread thin (a block
of 512 queries costs about what 5 cost one at a time), small enough to hold at once."""

Applies = Callable[[Sample, Metric], bool]
Item = tuple[Sample, list[Metric], list[Score]]
ScoreRest = Callable[[Sample, list[Metric]], Awaitable[list[Score]]]
Ordered = Callable[..., AsyncIterator[Any]]


def drive(coro: Coroutine[Any, Any, Score]) -> Score:
    """Run ``coro`` (a `Metric.score` of a `Metric.scores_inline` class) to its end now.

    Such a coroutine never awaits, so its first step returns. One that does suspend breaks
    its class's promise: it is closed and the cell is a ``judge_error`` saying so (nothing a
    metric does may stop a run).
    """
    try:
        coro.send(None)
    except StopIteration as done:
        result: Score = done.value
        return result
    coro.close()
    return Score.fail(
        FailureKind.JUDGE_ERROR,
        "the metric declares scores_inline but awaited: it cannot be scored in a batch",
    )


def _inline(metric: Metric) -> bool:
    """Whether ``metric``'s own class promises a ``_score`` that never awaits (a subclass
    that does not restate it may await), scoring with its own code and no model."""
    declared = type(metric).__dict__.get("scores_inline", False) is True
    models = metric.needs_judge or metric.needs_embedder or metric.needs_nli
    return declared and metric.own_provider and not models


def _vectorised(metric: Metric) -> bool:
    """A ranking measure scored by `RankingMetric` itself (not a subclass that may differ)."""
    return type(metric) is RankingMetric and metric.own_provider


@dataclass
class Batched:
    """Which of a run's metrics are scored a chunk at a time, and how."""

    metrics: list[Metric]
    """The run's metrics, in its order."""
    groups: list[list[RankingMetric]] = field(default_factory=list)
    """Ranking metrics that share a relevance level and a no-answer threshold."""
    inline: list[Metric] = field(default_factory=list)
    names: frozenset[str] = frozenset()
    size: int = CHUNK

    @classmethod
    def of(cls, metrics: Sequence[Metric], size: int | None = None) -> Batched | None:
        """The batched part of ``metrics`` (``size`` samples a chunk, `CHUNK` by default), or
        None when none can be batched."""
        groups: dict[tuple[int, float | None], list[RankingMetric]] = {}
        inline: list[Metric] = []
        for metric in metrics:
            if isinstance(metric, RankingMetric) and _vectorised(metric):
                key = (metric.relevance_level, metric.no_answer_threshold)
                groups.setdefault(key, []).append(metric)
            elif _inline(metric):
                inline.append(metric)
        names = frozenset(m.name for g in groups.values() for m in g) | {m.name for m in inline}
        if not names:
            return None
        return cls(list(metrics), list(groups.values()), inline, names, size or CHUNK)

    @property
    def everything(self) -> bool:
        """Whether every metric of the run is batched (no per-sample task is needed)."""
        return all(m.name in self.names for m in self.metrics)

    def score_chunk(
        self, samples: Sequence[Sample], applies: Applies | None = None
    ) -> list[dict[str, Score]]:
        """The batched metrics' Scores of each sample (those that apply to it), by name."""
        ctx = MetricContext()  # these metrics use no model and no shared sub-result
        out: list[dict[str, Score]] = [{} for _ in samples]
        for group in self.groups:
            self._ranking(group, samples, applies, ctx, out)
        for metric in self.inline:
            for i, sample in enumerate(samples):
                if applies is None or applies(sample, metric):
                    out[i][metric.name] = drive(metric.score(sample, ctx))
        return out

    def _ranking(
        self,
        group: list[RankingMetric],
        samples: Sequence[Sample],
        applies: Applies | None,
        ctx: MetricContext,
        out: list[dict[str, Score]],
    ) -> None:
        """One `ranking_rows` call (`score_samples`'s cells) for ``group`` over the chunk;
        each cell stamped as `Metric.score` stamps it, with its share of the call's time as
        its latency."""
        members = [
            i
            for i, sample in enumerate(samples)
            if applies is None or any(applies(sample, m) for m in group)
        ]
        if not members:
            return
        first = group[0]
        started = time.perf_counter()
        try:
            rows = ranking_rows(
                [samples[i] for i in members],
                [m.measure for m in group],
                relevance_level=first.relevance_level,
                no_answer_threshold=first.no_answer_threshold,
            )
        except Exception:  # a bug in the batch must cost no cell: score them one at a time
            for i in members:
                for metric in group:
                    if applies is None or applies(samples[i], metric):
                        out[i][metric.name] = drive(metric.score(samples[i], ctx))
            return
        share = (time.perf_counter() - started) / (len(members) * len(group))
        where = {samples[i].id: i for i in members}
        by_name = {m.name: m for m in group}
        for sample_id, name, score in rows:
            i = where[sample_id]
            metric = by_name[name]
            if applies is None or applies(samples[i], metric):
                out[i][name] = metric._stamp(score, ctx, time.perf_counter() - share)

    async def stream(
        self,
        samples: Iterable[Sample],
        *,
        applies: Applies | None,
        score_rest: ScoreRest,
        ordered: Ordered,
        limit: int,
        stop: Callable[[], bool] | None,
    ) -> AsyncIterator[Item]:
        """``(sample, its metrics, their Scores)`` in input order, as `evaluate` consumes them.

        With every metric batched, chunk after chunk with no task per sample; otherwise the
        other metrics go through ``score_rest`` in ``ordered``'s window (`_ordered`), each
        sample's batched cells computed with its chunk just before its first sample starts.
        An error raised by ``samples`` (a duplicate id) comes after the samples before it.
        """
        if self.everything:
            for chunk, error in _chunks(samples, self.size):
                cells = self.score_chunk(chunk, applies)
                for sample, mine in zip(chunk, cells, strict=True):
                    chosen = self._chosen(sample, applies)
                    yield sample, chosen, [mine[m.name] for m in chosen]
                if error is not None:
                    raise error
                await asyncio.sleep(0)  # a chance to be cancelled between chunks
            return

        async def one(sample: Sample, mine: dict[str, Score]) -> Item:
            chosen = self._chosen(sample, applies)
            rest = [m for m in chosen if m.name not in mine]
            fresh = dict(zip((m.name for m in rest), await score_rest(sample, rest), strict=True))
            return (
                sample,
                chosen,
                [mine[m.name] if m.name in mine else fresh[m.name] for m in chosen],
            )

        def coroutines() -> Iterator[Coroutine[Any, Any, Item]]:
            for chunk, error in _chunks(samples, self.size):
                cells = self.score_chunk(chunk, applies)
                for sample, mine in zip(chunk, cells, strict=True):
                    yield one(sample, mine)
                if error is not None:
                    raise error

        async for item in ordered(coroutines(), limit, stop=stop):
            yield item

    def _chosen(self, sample: Sample, applies: Applies | None) -> list[Metric]:
        if applies is None:
            return self.metrics
        return [m for m in self.metrics if applies(sample, m)]


def _chunks(
    samples: Iterable[Sample], size: int
) -> Iterator[tuple[list[Sample], Exception | None]]:
    """``samples`` in lists of ``size``; an error raised while reading them comes with the
    samples read before it (the last chunk), so they are still scored and reported."""
    chunk: list[Sample] = []
    iterator = iter(samples)
    while True:
        try:
            sample = next(iterator)
        except StopIteration:
            break
        except Exception as exc:  # a duplicate id, not a Sample, a bad line
            yield chunk, exc
            return
        chunk.append(sample)
        if len(chunk) >= size:
            yield chunk, None
            chunk = []
    if chunk:
        yield chunk, None
