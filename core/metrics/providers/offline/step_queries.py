"""The offline provider of ``step_query_relevance``: is each search an agent made about the
question, without a judge.

A query is relevant when ``max(similarity, grounding)`` reaches the metric's threshold:
``similarity`` is the embedding cosine of the query and the question (with the user's earlier
turns), ``grounding`` the share of the query's content terms found in that question or in what an
earlier step returned — so a follow-up search on a name the first search found counts. A
heuristic on words and embeddings, not calibrated on labelled searches, and said so in the
registry. It lives here, with the core's other providers; the measure is
`ragbridge.core.agent.retrieval_steps`.
"""

from __future__ import annotations

from typing import Any

from ....agent.steps import (
    DEFAULT_QUERY_RELEVANCE,
    query_score,
    retrieval_steps,
    returned_text,
    step_row,
)
from ....prompts.history import user_side
from ....registry import register_provider
from ....results.evaluation import Score
from ....sample import Sample
from ....text.words import terms
from ...base import Metric, MetricContext
from .matching import embed

__all__ = ["score_step_queries_offline"]


@register_provider(
    "step_query_relevance",
    "offline",
    how="query-question embedding similarity, or the share of the query's words found in the "
    "question or in what earlier steps returned, thresholded",
    needs=["embedder"],
    reads=["question", "trajectory"],
    note="a heuristic on words and embeddings, not calibrated on labelled searches",
)
async def score_step_queries_offline(metric: Metric, sample: Sample, ctx: MetricContext) -> Score:
    """step_query_relevance without a judge: a query is relevant when ``max(similarity,
    grounding)`` reaches the metric's ``relevance``; ``similarity`` is the embedding cosine of
    the query and the question (with the user's earlier turns, `user_side`), ``grounding`` the
    share of the query's content terms found in that question or in what an earlier step
    returned (a follow-up on a name the first search found)."""
    threshold = float(getattr(metric, "relevance", DEFAULT_QUERY_RELEVANCE))
    steps = retrieval_steps(sample, getattr(metric, "retrievers", ()))
    question = user_side(sample)
    vectors = await embed(ctx, [question, *(s.query or "-" for s in steps)])
    similarities = vectors[1:] @ vectors[0]
    known = set(terms(question))
    trajectory = sample.trajectory or []
    rows: list[dict[str, Any]] = []
    for step, similarity in zip(steps, similarities, strict=True):
        found = known.union(*(terms(returned_text(s)) for s in trajectory[: step.index]))
        wanted = terms(step.query)
        grounding = len(wanted & found) / len(wanted) if wanted else 0.0
        score = max(float(similarity), grounding)
        rows.append(
            step_row(
                step,
                relevant=score >= threshold,
                score=round(score, 4),
                similarity=round(float(similarity), 4),
                grounding=round(grounding, 4),
            )
        )
    return query_score(rows, extra={"relevance_threshold": threshold})
