"""``answer_relevance:offline``: how close in meaning the answer is to the question."""

from __future__ import annotations

import numpy as np

from ...registry import register_provider
from ...results import Score
from ...sample import Sample
from ...text import sentences
from ..base import Metric, MetricContext
from .matching import embed, is_noncommittal

__all__ = ["score_answer_relevance"]


@register_provider(
    "answer_relevance",
    "offline",
    how="question-answer embedding similarity; noncommittal answers score 0",
    needs=["embedder"],
)
async def score_answer_relevance(metric: Metric, sample: Sample, ctx: MetricContext) -> Score:
    answer = sample.answer or ""
    if is_noncommittal(answer):
        return Score(value=0.0, reason="the answer is noncommittal", details={"noncommittal": True})
    # The answer is embedded as the mean of its sentences' vectors: the same sentences
    # faithfulness embeds (so they come from the cache or the same batch), and short inputs
    # keep the model from padding every text in a batch to the longest answer.
    parts = sentences(answer) or [answer]
    vectors = await embed(ctx, [sample.question, *parts])
    mean = vectors[1:].mean(axis=0)
    norm = float(np.linalg.norm(mean)) or 1.0
    similarity = max(0.0, min(1.0, float(vectors[0] @ mean) / norm))
    return Score(
        value=similarity,
        reason=f"question-answer cosine similarity {similarity:.2f}",
        details={"noncommittal": False, "similarity": round(similarity, 4)},
    )
