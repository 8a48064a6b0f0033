"""``faithfulness:offline`` and ``hallucination:offline``.

A long answer: its sentences are matched to context sentences (`match_sentences`); a sentence
is supported when it is close enough in meaning AND every number and name in it occurs in the
contexts.

A short answer (at most two sentences and `SHORT_WORDS` words: "American", "It was finished
in 1889."): a sentence is not a claim on its own, only together with its question, and an
embedding of "American" says nothing. So the question is folded in: a sentence is supported
when every term it adds to the question (`terms`: content words with possessives, word endings
and accents folded, and numbers) occurs in the contexts; the closest context sentence is still
reported. A sentence that adds no term (it restates the question) keeps the matcher's verdict.
"""

from __future__ import annotations

from ...registry import register_provider
from ...results import FailureKind, Score
from ...sample import Sample
from ...text import sentences, terms
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


SHORT_WORDS = 30
"""An answer of at most two sentences and this many words is scored as a short answer."""


async def _claims(
    metric: Metric, sample: Sample, ctx: MetricContext, *, hallucination: bool
) -> Score:
    settings: OfflineSettings = getattr(metric, "settings", OfflineSettings())
    claims = sentences(sample.answer or "")
    if not claims:
        return Score.fail(FailureKind.NO_CLAIMS, "the answer has no sentence to check")
    contexts = [c.text for c in sample.contexts]
    short = len(claims) <= 2 and len((sample.answer or "").split()) <= SHORT_WORDS
    checks = await match_sentences(
        claims, contexts, ctx, settings.similarity, candidates=settings.candidates
    )
    rows = [c.detail() for c in checks]
    if short and contexts:
        asked = terms(sample.question)
        pool = set().union(*(terms(text) for text in contexts))
        for claim, row in zip(claims, rows, strict=True):
            added = sorted(terms(claim) - asked)
            if added:  # what the sentence adds to its question must all be in the contexts
                row["terms"] = added
                row["missing_terms"] = [t for t in added if t not in pool]
                row["supported"] = not row["missing_terms"]
    supported = sum(bool(row["supported"]) for row in rows)
    total = len(rows)
    faithful = supported / total
    details = {
        "claims": rows,
        "supported": supported,
        "total": total,
        "similarity_threshold": settings.similarity,
        "short_answer": short,
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
