"""``context_precision:offline``: each context's similarity to the question decides whether it
is useful, then the same rank-aware average precision as the judged measure."""

from __future__ import annotations

from ....registry import register_provider
from ....results.evaluation import Score
from ....sample import Sample
from ....text.words import sentences
from ..._shared import average_precision
from ...base import Metric, MetricContext
from .matching import OfflineSettings, embed, shortlist

__all__ = ["score_context_precision"]


@register_provider(
    "context_precision",
    "offline",
    how="question-context embedding similarity per context, then rank-weighted precision",
    needs=["embedder"],
    reads=["question", "contexts.text", "contexts.id"],  # ids: in details
)
async def score_context_precision(metric: Metric, sample: Sample, ctx: MetricContext) -> Score:
    settings: OfflineSettings = getattr(metric, "settings", OfflineSettings())
    # Each context is represented by its sentence closest in wording to the question (see
    # `_shortlist`), so a long context costs one short embedding, not a long one.
    per_context = [sentences(c.text) or [c.text] for c in sample.contexts]
    chosen = [
        [sents[j] for j in shortlist([sample.question], sents, 1)[0]] for sents in per_context
    ]
    flat = [s for group in chosen for s in group]
    vectors = await embed(ctx, [sample.question, *flat])
    flat_sims = vectors[1:] @ vectors[0]
    sims: list[float] = []
    at = 0
    for group in chosen:
        sims.append(float(flat_sims[at : at + len(group)].max()))
        at += len(group)
    useful = [s >= settings.relevance for s in sims]
    value = average_precision(useful)
    details = {
        "contexts": [
            {"rank": k, "context_id": c.id, "similarity": round(s, 4), "useful": u}
            for k, (c, s, u) in enumerate(zip(sample.contexts, sims, useful, strict=True), 1)
        ],
        "relevance_threshold": settings.relevance,
    }
    n_useful = sum(useful)
    reason = (
        f"{n_useful} of {len(useful)} contexts similar to the question; "
        f"rank-weighted precision {value:.2f}"
    )
    return Score(value=value, reason=reason, details=details)
