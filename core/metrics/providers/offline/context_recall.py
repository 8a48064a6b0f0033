"""``context_recall:offline``: reference sentences attributed to the contexts by the offline
matcher (`match_sentences`)."""

from __future__ import annotations

from ....registry import register_provider
from ....results.evaluation import FailureKind, Score
from ....sample import Sample
from ...base import Metric, MetricContext
from .matching import OfflineSettings, claims_of, match_sentences

__all__ = ["score_context_recall"]


@register_provider(
    "context_recall",
    "offline",
    how="reference sentences matched to context sentences (embeddings + exact names and numbers)",
    needs=["embedder", "reference"],
    reads=["reference", "contexts.text"],
)
async def score_context_recall(metric: Metric, sample: Sample, ctx: MetricContext) -> Score:
    settings: OfflineSettings = getattr(metric, "settings", OfflineSettings())
    statements, preambles = claims_of(sample.reference or "")
    if not statements:
        said = "only announces what follows" if preambles else "has no sentence"
        return Score.fail(FailureKind.NO_CLAIMS, f"the reference {said}: nothing to attribute")
    checks = await match_sentences(
        statements,
        [c.text for c in sample.contexts],
        ctx,
        settings.similarity,
        candidates=settings.candidates,
    )
    attributed = sum(c.supported for c in checks)
    details = {
        "statements": [{**c.detail(), "attributed": c.supported} for c in checks],
        "attributed": attributed,
        "total": len(checks),
        "preambles_skipped": preambles,
    }
    reason = f"{attributed} of {len(checks)} reference sentences found in the contexts"
    return Score(value=attributed / len(checks), reason=reason, details=details)
