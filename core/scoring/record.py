"""The one function that scores a record: every metric on one `Sample`, in order.

Every path that produces Scores goes through `score_record`: `ragbridge.core.evaluate` for a
whole set (`ragbridge.core.scoring.runner`), `Scorer` for the one-record-at-a-time sinks
(`ragbridge.core.scoring.scorer`), and through them the cluster, shadow and background paths.
Kept in a module of its own, under a name used nowhere else, so that a reader looking for "how
is a record scored" finds one place, and a change to it changes every path alike.

Whole Scores kept from an earlier run (`ragbridge.core.cache.scores.ResultReuse`) are read
first and only the missing cells are computed, then kept; without a reuse the metrics simply
run side by side on the record's own `MetricContext`, which shares sub-results (extracted
claims, embeddings) between them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from ..cache.scores import ResultReuse
from ..metrics.base import Metric, MetricContext
from ..results.evaluation import Score
from ..sample import Sample

__all__ = ["score_record"]


async def score_record(
    sample: Sample,
    metrics: Sequence[Metric],
    ctx: MetricContext,
    reuse: ResultReuse | None = None,
) -> list[Score]:
    """Every metric on ``sample``, in the order of ``metrics``.

    ``ctx`` is this sample's own context (its memo shares claims between the metrics); with
    ``reuse``, kept Scores are read first and only the missing cells are computed, then kept.
    """
    if reuse is None or not reuse.active:
        return list(await asyncio.gather(*(m.score(sample, ctx) for m in metrics)))
    every = reuse.keys(sample)  # of the run's metrics: a run may score a record with fewer
    keys = {m.name: every[m.name] for m in metrics if m.name in every}
    found = reuse.lookup(keys)
    todo = [m for m in metrics if m.name not in found]
    if todo:
        fresh = await asyncio.gather(*(m.score(sample, ctx) for m in todo))
        computed = dict(zip((m.name for m in todo), fresh, strict=True))
        reuse.store(keys, computed)
        found.update(computed)
    return [found[m.name] for m in metrics]
