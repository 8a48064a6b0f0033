"""``context_relevance:offline`` and ``context_relevance_ranked:offline``: each context's
relevance to the question from an embedding and a word count, no LLM.

A context's relevance score is the mean of two signals, each in [0, 1] for related text:

* **similarity**: the cosine between the question and the context's sentence closest to it
  (the ``candidates`` sentences sharing the most question words, `shortlist`, are embedded and
  the best is kept — a long context costs a few short embeddings, as in context precision);
* **coverage**: the share of the question's content terms (`ragbridge.core.text.words.terms`:
  word forms folded, numbers kept) found anywhere in the context.

The context is relevant when the score reaches ``relevance`` (`DEFAULT_CONTEXT_RELEVANCE`).
Why both: on passages of other questions that share the question's words (what a lexical
retriever brings back) the similarity separates better, on passages the embedding model itself
ranks close (what a dense retriever brings back) the word count does, and their mean holds up
on both. On the short-answer dev sample (`benchmarks/context_relevance_offline.py`: each
question's own paragraphs against other questions' — random, lexically close, close in
embedding): AUROC 0.967 against all negatives (the similarity alone 0.962, the coverage alone
0.934, context precision's per-context rule 0.959) and a balanced accuracy of 0.925 at
thresholds chosen on the other half of the questions (the similarity alone 0.906, context
precision's rule 0.911). A question with no content terms ("Who is he?") is judged on the
similarity alone.

What it cannot see: a context on the question's subject that lacks what is asked scores like
one that has it, and a context related only through world knowledge (a bridge passage of a
multi-hop question naming neither the question's entity nor its attribute) scores low. Use the
judge (``context_relevance``, the default provider) where that distinction matters.
"""

from __future__ import annotations

from ....registry import register_provider
from ....results.evaluation import Score
from ....sample import Sample
from ....text.words import sentences, terms
from ..._relevance import relevance_score
from ...base import Metric, MetricContext
from .matching import OfflineSettings, embed, shortlist

__all__ = ["DEFAULT_CONTEXT_RELEVANCE", "relevance_signals", "score_context_relevance"]

DEFAULT_CONTEXT_RELEVANCE = 0.3
"""Relevance score (mean of similarity and coverage) at which a context counts as relevant.

Chosen on the short-answer dev sample by two folds of its questions (each fold's best balanced
accuracy was at 0.286 and 0.296; `python benchmarks/context_relevance_offline.py`)."""

_HOW = "mean of question-context embedding similarity and question-word coverage per context"
_HOWS = {
    "context_relevance": f"{_HOW}, thresholded; the share relevant",
    "context_relevance_ranked": f"{_HOW}, thresholded; rank-weighted precision",
}
_READS = ["question", "contexts.text", "contexts.id"]  # ids: in details


async def relevance_signals(
    question: str, contexts: list[str], ctx: MetricContext, candidates: int
) -> list[tuple[float, float | None]]:
    """(similarity, coverage) of each context to ``question``; coverage None when the question
    has no content terms. One embedding batch for the whole sample."""
    per_context = [sentences(text) or [text] for text in contexts]
    chosen = [
        [sents[j] for j in shortlist([question], sents, candidates)[0]] for sents in per_context
    ]
    flat = [s for group in chosen for s in group]
    vectors = await embed(ctx, [question, *flat])
    sims = vectors[1:] @ vectors[0]
    wanted = terms(question)
    out: list[tuple[float, float | None]] = []
    at = 0
    for text, group in zip(contexts, chosen, strict=True):
        similarity = float(sims[at : at + len(group)].max())
        at += len(group)
        coverage = len(wanted & terms(text)) / len(wanted) if wanted else None
        out.append((similarity, coverage))
    return out


def combined(similarity: float, coverage: float | None) -> float:
    """The relevance score: the mean of the two signals (the similarity alone without terms)."""
    return similarity if coverage is None else (similarity + coverage) / 2


async def score_context_relevance(metric: Metric, sample: Sample, ctx: MetricContext) -> Score:
    settings: OfflineSettings = getattr(
        metric, "settings", OfflineSettings(relevance=DEFAULT_CONTEXT_RELEVANCE)
    )
    signals = await relevance_signals(
        sample.question, [c.text for c in sample.contexts], ctx, settings.candidates
    )
    scores = [combined(s, c) for s, c in signals]
    relevant = [score >= settings.relevance for score in scores]
    per_context = [
        {
            "score": round(score, 4),
            "similarity": round(s, 4),
            "coverage": None if c is None else round(c, 4),
        }
        for score, (s, c) in zip(scores, signals, strict=True)
    ]
    return relevance_score(
        sample,
        relevant,
        per_context,
        ranked=bool(getattr(metric, "ranked", False)),
        extra={"relevance_threshold": settings.relevance},
    )


for _measure, _how in _HOWS.items():
    register_provider(
        _measure,
        "offline",
        how=_how,
        needs=["embedder"],
        reads=_READS,
        note="a context is relevant when its similarity and word coverage reach a threshold: "
        "it sees the topic, not whether the context answers",
    )(score_context_relevance)
