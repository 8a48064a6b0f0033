"""Ranking measures as metrics, so one `evaluate` call can mix ``recall@5`` with judge metrics.

The values come from `ragbridge.core.retrieval` (the trec_eval-exact kernels); this wrapper only
gives them the `Metric` shape. Scoring one sample at a time costs a few microseconds more than
`score_samples` over a whole set, which is nothing next to a judge call.

Retrieved ids that match none of a sample's labels are flagged on its score
(``details["ids_matched"]``, a reason, or ``invalid_input`` when the labels sit in the contexts'
metadata); `ragbridge.core.evaluate` then adds one run-level line to ``metadata["warnings"]``
when none or almost none of the labelled samples match (`ragbridge.core.results.id_check`).
"""

from __future__ import annotations

from functools import partial

from ..registry import REGISTRY, MeasureSpec, ProviderSpec
from ..results.evaluation import Score
from ..retrieval import Measure, parse_measure, score_ranking
from ..sample import Sample
from .base import Metric, MetricContext

__all__ = ["CUT_MEASURES", "PLAIN_MEASURES", "RankingMetric"]

CUT_MEASURES: dict[str, str] = {
    "recall": "share of the relevant ids retrieved in the top k",
    "precision": "share of the top k ids that are relevant",
    "hit_rate": "1 when a relevant id is in the top k, else 0",
    "ndcg": "graded gain of the top k, discounted by rank, over the ideal (trec_eval ndcg_cut)",
    "ndcg_exp": "ndcg@k with exponential gain 2^grade - 1",
    "map": "average precision over the top k (trec_eval map_cut)",
    "f1": "harmonic mean of precision@k and recall@k",
}
"""Ranking measures that take a cutoff (``recall@5``), with what each means."""
PLAIN_MEASURES: dict[str, str] = {
    "mrr": "reciprocal rank of the first relevant id",
    "average_precision": "mean of precision at each relevant id (trec_eval map, per sample)",
    "r_precision": "precision at R, the number of relevant ids",
    "no_answer": "1 when a sample with no relevant id is answered with nothing retrieved",
}
"""Ranking measures over the whole ranking (``mrr``)."""


class RankingMetric(Metric):
    """``RankingMetric("recall@5")``: a ranking measure of a sample's contexts vs its relevance."""

    needs_judge = False
    provider = "retrieval"
    # ids, scores (no_answer's threshold) and metadata (labels found there) of the contexts;
    # the answer and metadata["declined"] decide no_answer
    reads = ("contexts", "relevance", "answer", "metadata.declined")

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
        scores = score_ranking(
            sample,
            [self.measure],
            relevance_level=self.relevance_level,
            no_answer_threshold=self.no_answer_threshold,
        )
        return scores[self.measure.name]

    def __repr__(self) -> str:
        return f"RankingMetric({self.measure.name!r})"


def _register() -> None:
    """List the ranking measures in the registry, so ``ragbridge metrics`` shows them beside
    the judge measures. They resolve through `RankingMetric` (a cutoff is part of the name)."""
    for names, suffix in ((CUT_MEASURES, "@k"), (PLAIN_MEASURES, "")):
        for name, meaning in names.items():
            key = name + suffix
            spec = MeasureSpec(
                name=key,
                meaning=meaning,
                requires=("contexts", "relevance"),
                kind="ranking",
                factory=None if suffix else partial(RankingMetric, name),
            )
            REGISTRY.add_measure(spec)
            REGISTRY.add_provider(
                ProviderSpec(
                    measure=key,
                    name="retrieval",
                    how="trec_eval's definition over context ids vs relevance labels",
                    needs=frozenset({"labels"}),
                )
            )


_register()
