"""``faithfulness:offline`` and ``hallucination:offline``: answer sentences matched to context
sentences (`match_sentences`); a sentence is supported when it is close enough in meaning AND
every number and name in it occurs in the contexts."""

from __future__ import annotations

from ...registry import register_provider
from ...results import FailureKind, Score
from ...sample import Sample
from ...text import sentences
from ..base import Metric, MetricContext
from .matching import OfflineSettings, match_sentences

__all__ = ["score_faithfulness", "score_hallucination"]

_HOW = "answer sentences matched to context sentences (embeddings + exact names and numbers)"


@register_provider("faithfulness", "offline", how=_HOW, needs=["embedder"])
async def score_faithfulness(metric: Metric, sample: Sample, ctx: MetricContext) -> Score:
    return await _claims(metric, sample, ctx, hallucination=False)


@register_provider("hallucination", "offline", how=_HOW, needs=["embedder"])
async def score_hallucination(metric: Metric, sample: Sample, ctx: MetricContext) -> Score:
    return await _claims(metric, sample, ctx, hallucination=True)


async def _claims(
    metric: Metric, sample: Sample, ctx: MetricContext, *, hallucination: bool
) -> Score:
    settings: OfflineSettings = getattr(metric, "settings", OfflineSettings())
    claims = sentences(sample.answer or "")
    if not claims:
        return Score.fail(FailureKind.NO_CLAIMS, "the answer has no sentence to check")
    contexts = [c.text for c in sample.contexts]
    checks = await match_sentences(
        claims, contexts, ctx, settings.similarity, candidates=settings.candidates
    )
    supported = sum(c.supported for c in checks)
    total = len(checks)
    faithful = supported / total
    details = {
        "claims": [c.detail() for c in checks],
        "supported": supported,
        "total": total,
        "similarity_threshold": settings.similarity,
    }
    if not contexts:
        reason = "no contexts were retrieved, so no sentence of the answer is supported"
    elif hallucination:
        reason = f"{total - supported} of {total} answer sentences not supported by the contexts"
    else:
        reason = f"{supported} of {total} answer sentences supported by the contexts"
    return Score(
        value=1.0 - faithful if hallucination else faithful, reason=reason, details=details
    )
