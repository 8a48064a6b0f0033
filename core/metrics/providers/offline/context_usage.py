"""ContextUsage: how much of the answer's wording comes from the contexts."""

from __future__ import annotations

import functools

from ....results.evaluation import FailureKind, Score
from ....sample import Sample
from ....text.quantities import canonical
from ....text.words import content_words
from ...base import Metric, MetricContext, declare

__all__ = ["ContextUsage"]


@functools.lru_cache(maxsize=1 << 14)
def _context_words(text: str) -> tuple[str, ...]:
    """The distinct content words of a context, memoised: in a run the same passages come
    back for many questions, and these words were most of this measure's cost. A tuple, not
    a frozenset: a quarter of the memory for the same words (16,384 passages: under 10 MB;
    a corpus of 10,000 passages fits, where 8,192 missed one lookup in five)."""
    return tuple(dict.fromkeys(content_words(canonical(text))))


class ContextUsage(Metric):
    """How much of the answer's wording comes from the contexts.

    ``value`` = overlap rate = share of the answer's content words (stop words removed) that
    occur in the contexts; ``details["novel_rate"]`` = 1 − overlap: words the answer brought in
    itself. A high novel rate flags answers written from the model's memory rather than the
    retrieved text — a cue, not a verdict (paraphrase is novel too). Words are counted in the
    `canonical` form, so "8,849 metres" is two words that "8849 m" holds.
    """

    requires = ("answer",)
    reads = ("answer", "contexts.text")
    needs_judge = False
    provider = "offline"
    scores_inline = True  # `_score` never awaits: batched by `evaluate`

    async def _score(self, sample: Sample, ctx: MetricContext) -> Score:
        answer_words = content_words(canonical(sample.answer or ""))
        if not answer_words:
            return Score.fail(FailureKind.NO_CLAIMS, "the answer has no content words")
        pool: set[str] = set().union(*(_context_words(c.text) for c in sample.contexts))
        used = sum(1 for w in answer_words if w in pool)
        overlap = used / len(answer_words)
        novel = sorted({w for w in answer_words if w not in pool})
        return Score.trusted(  # plain values made here: no pydantic validation needed
            value=overlap,
            reason=f"{overlap:.0%} of the answer's content words occur in the contexts",
            details={
                "overlap_rate": round(overlap, 4),
                "novel_rate": round(1.0 - overlap, 4),
                "novel_words": novel[:50],
                "content_words": len(answer_words),
            },
        )


declare(
    ContextUsage,
    how="share of content words found in the contexts",
    needs=(),
    meaning="share of the answer's content words that occur in the contexts",
    edges={"no content words": "failure no_claims", "no contexts": "0.0"},
)
