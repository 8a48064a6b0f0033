"""AnswerSimilarity: the embedding similarity of the answer and the reference."""

from __future__ import annotations

from ....results.evaluation import Score
from ....sample import Sample
from ...base import Metric, MetricContext, declare
from .matching import embed

__all__ = ["AnswerSimilarity"]


class AnswerSimilarity(Metric):
    """Cosine similarity of the answer's and the reference's embeddings (clipped at 0).

    The "semantic similarity" half of RAGAS's answer correctness, on its own: cheap, offline,
    blind to negation and numbers — use it for drift, not for correctness.
    """

    requires = ("answer", "reference")
    reads = ("answer", "reference")
    needs_judge = False
    needs_embedder = True
    provider = "offline"

    async def _score(self, sample: Sample, ctx: MetricContext) -> Score:
        vectors = await embed(ctx, [sample.answer or "", sample.reference or ""])
        similarity = max(0.0, min(1.0, float(vectors[0] @ vectors[1])))
        return Score(
            value=similarity,
            reason=f"answer-reference cosine similarity {similarity:.2f}",
            details={"similarity": round(similarity, 4)},
        )


declare(
    AnswerSimilarity,
    how="answer-reference embedding cosine, clipped at 0",
    needs=("embedder", "reference"),
    meaning="how close in meaning the answer is to the reference (embedding cosine)",
    edges={"no reference": "missing_input"},
)
