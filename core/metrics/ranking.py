"""Ranking measures as metrics, so one `evaluate` call can mix ``recall@5`` with judge metrics.

The values come from `ragbridge.core.retrieval` (the trec_eval-exact kernels); this wrapper only
gives them the `Metric` shape. Scoring one sample at a time costs a few microseconds more than
`score_samples` over a whole set, which is nothing next to a judge call.

Retrieved ids that match none of a sample's labels are flagged on its score
(``details["ids_matched"]``, a reason, or ``invalid_input`` when the labels sit in the contexts'
metadata); `ragbridge.core.evaluate` then adds one run-level line to ``metadata["warnings"]``
when none or almost none of the labelled samples match (`ragbridge.core.id_check`).
"""

from __future__ import annotations

from ..results import Score
from ..retrieval import Measure, parse_measure, score_sample
from ..sample import Sample
from .base import Metric, MetricContext

__all__ = ["RankingMetric"]


class RankingMetric(Metric):
    """``RankingMetric("recall@5")``: a ranking measure of a sample's contexts vs its relevance."""

    needs_judge = False
    provider = "retrieval"

    def __init__(
        self,
        measure: str | Measure,
        *,
        relevance_level: int = 1,
        no_answer_threshold: float | None = None,
    ) -> None:
        self.measure = parse_measure(measure)
        self.name = self.measure.name
        if self.measure.is_count:
            raise ValueError(f"{self.measure.family} is a count, not a per-sample score")
        self.relevance_level = relevance_level
        self.no_answer_threshold = no_answer_threshold

    async def _score(self, sample: Sample, ctx: MetricContext) -> Score:
        scores = score_sample(
            sample,
            [self.measure],
            relevance_level=self.relevance_level,
            no_answer_threshold=self.no_answer_threshold,
        )
        return scores[self.measure.name]

    def __repr__(self) -> str:
        return f"RankingMetric({self.measure.name!r})"
