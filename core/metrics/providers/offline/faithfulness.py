"""``faithfulness:offline`` and ``hallucination:offline``.

Two regimes, because a short answer is not a claim on its own:

* **A long answer**: its sentences are its claims, each matched to the contexts
  (`match_sentences`): supported when close enough in meaning to a context sentence, when the
  contexts hold enough of its vocabulary, and when every number and name in it occurs there.
  A supported claim starts at 1, an unsupported one at 0.5 (the boundary).
* **A short answer** (at most two sentences and `SHORT_WORDS` words: "American", "It was
  finished in 1889."): an embedding of "American" says nothing, so the question is folded in.
  Each sentence gets a support in [0, 1] (`short_support`), from two lexical
  pieces of evidence: how much of what it adds to the question the contexts hold (``coverage``),
  and how much of its vocabulary one context sentence holds together (``co_support``).

In both regimes each claim's support is then graded within its verdict by the words it holds
that no context does, a first-person sentence ("I love dogs") is unsupported unless the
contexts speak in the first person too, and discourse markers ("Well, ...") are not read
(`.support`). A short answer's value is its weakest sentence's support; a long answer's is its
mean claim support, graded within its verdict by its weakest claim. The verdict is the same in
both regimes: faithful above 0.5, hallucinated from 0.5 on (``hallucination`` = 1 −
``faithfulness``). A bare "yes" or "no" holds no term to check: it is
skipped, and an answer made only of such sentences is a ``no_claims`` failure that says a
judge or the ``nli`` provider is needed, never a made-up 0 or 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ....registry import register_provider
from ....results.evaluation import FailureKind, Score
from ....sample import Sample
from ....text.words import terms
from ...base import Metric, MetricContext
from ...turn_sources import Source, TurnSource, extend_contexts, name_sources
from .matching import OfflineSettings, TermIndex, claims_of, match_sentences
from .support import (
    ANSWER_WORDS,
    answer_support,
    claim_support,
    says_nothing,
    source_words,
    speaks_for_itself,
    unexplained,
)

__all__ = [
    "SHORT_ANSWER_MODEL",
    "SHORT_WORDS",
    "score_faithfulness",
    "score_hallucination",
    "short_answer_features",
    "short_support",
]

_HOW = (
    "answer sentences matched to context sentences (embeddings + term coverage + exact names "
    "and numbers); short answers with their question folded in"
)


_READS = ("question", "answer", "contexts.text")  # the question: short answers fold it in


_GRADED = (
    "graded: the value is the answer's graded claim support (a short answer: its weakest "
    "sentence; a long one: its mean claim support), not the share of supported claims; a "
    "faithful paraphrase scores a little below 1"
)


@register_provider(
    "faithfulness", "offline", how=_HOW, needs=["embedder"], reads=_READS, note=_GRADED
)
async def score_faithfulness(metric: Metric, sample: Sample, ctx: MetricContext) -> Score:
    return await _claims(metric, sample, ctx, hallucination=False)


@register_provider(
    "hallucination", "offline", how=_HOW, needs=["embedder"], reads=_READS, note=_GRADED
)
async def score_hallucination(metric: Metric, sample: Sample, ctx: MetricContext) -> Score:
    return await _claims(metric, sample, ctx, hallucination=True)


SHORT_WORDS = 30
"""An answer of at most two sentences and this many words is scored as a short answer."""

SHORT_ANSWER_MODEL = (-7.06, 3.0, 5.01, -0.89)
"""Logistic coefficients: intercept, coverage, co-support, adds-nothing flag.

Fitted by ``python benchmarks/offline_fit.py`` (L2-regularised logistic regression, one row
per answer sentence, right answers 1 and fabricated ones 0) on the 100 public dev questions of
``../shared/data/short_answer_dev``; its 10-fold cross-validated AUROC is printed beside them.
The cosine to the best context sentence was tried as a fourth input and came out with a
NEGATIVE weight (fabricated answers restate the question and the contexts, right ones are
short spans): rewarding dissimilarity would fit how that data set was written, not what
faithfulness means, so it is left out. Refitted when numbers, number words, dates and units
got one written form (`ragbridge.core.text.quantities`; 6 fabricated sentences' features moved): it
was (-7.07, 3.01, 5.01, -0.89)."""


def short_answer_features(
    question: str, sentence: str, index: TermIndex
) -> tuple[float, ...] | None:
    """(coverage, co-support, adds-nothing) of one short-answer sentence; None when it holds no
    term to check (a bare "yes")."""
    own = terms(sentence) - ANSWER_WORDS
    if not own:
        return None
    added = own - terms(question)
    # Words repeated from the question count in co-support too: "Neil Gaiman directed Beowulf"
    # must find "directed" beside "Gaiman". A question word no context holds ("How tall ...?"
    # against "elevation") therefore lowers it; dropping such words was measured and cost 0.06
    # of cross-validated AUROC on the dev data (`benchmarks/offline_fit.py`).
    return (index.coverage(added), index.co_support(own), float(not added))


def _logit(features: tuple[float, ...]) -> float:
    intercept, *weights = SHORT_ANSWER_MODEL
    return intercept + sum(w * x for w, x in zip(weights, features, strict=True))


_FULL = _logit((1.0, 1.0, 0.0))
"""The model's score for a sentence whose every term one context sentence holds."""
_LOWEST = SHORT_ANSWER_MODEL[0] + sum(min(0.0, w) for w in SHORT_ANSWER_MODEL[1:])
"""The model's lowest score: no term held, nothing added to the question."""


def short_support(features: tuple[float, ...]) -> float:
    """A short-answer sentence's support in [0, 1]: the model's score mapped linearly so that
    its decision boundary is 0.5, a sentence whose every term one context sentence holds is
    1.0 (clipped beyond) and its lowest possible score is 0.

    Not the logistic probability itself: fitted on data where a third of the fabrications are
    fully covered too, that probability tops out at 0.72, and a faithful "American" would read
    as 72% faithful. The ranking and the 0.5 verdict are the model's; only the scale differs.
    Below the boundary it was clipped to 0 until scores were measured on dialogue (BEGIN dev):
    236 of 430 turns tied at exactly 0 there, and the tie cost 0.06 of AUROC.
    """
    logit = _logit(features)
    if logit >= 0.0:
        return min(1.0, 0.5 + logit / (2.0 * _FULL))
    return max(0.0, 0.5 - 0.5 * logit / _LOWEST)


def _retrieved(sources: Sequence[Source]) -> list[str]:
    """The texts of the extra sources that are documents (a passage retrieved by an earlier
    turn or an agent's step), not what a user said (`TurnSource` with role "user")."""
    return [
        source.text
        for source in sources
        if not (isinstance(source, TurnSource) and source.role == "user")
    ]


async def _claims(
    metric: Metric, sample: Sample, ctx: MetricContext, *, hallucination: bool
) -> Score:
    settings: OfflineSettings = getattr(metric, "settings", OfflineSettings())
    claims, preambles = claims_of(sample.answer or "")
    if not claims:
        said = "only announces what follows" if preambles else "has no sentence"
        return Score.fail(FailureKind.NO_CLAIMS, f"the answer {said}: nothing to check")
    contexts = [c.text for c in sample.contexts]
    sources = extend_contexts(metric, sample, contexts)  # a turn: the conversation's sources
    short = len(claims) <= 2 and len((sample.answer or "").split()) <= SHORT_WORDS
    index = TermIndex(contexts)
    checks = await match_sentences(
        claims,
        contexts,
        ctx,
        settings.similarity,
        candidates=settings.candidates,
        coverage=settings.coverage,
        index=index,
    )
    rows: list[dict[str, Any]] = [c.detail() for c in checks]
    name_sources(rows, len(sample.contexts), sources)
    known = source_words(contexts)
    # who speaks: a user turn's "I" is the user, never the answerer, so only documents count
    documents = source_words([*contexts[: len(sample.contexts)], *_retrieved(sources)])
    support: list[float] = []
    for claim, row in zip(claims, rows, strict=True):
        if says_nothing(claim):  # "Sure!": a discourse marker alone states nothing
            row.update(supported=None, checkable=False)
            continue
        if short and contexts:
            features = short_answer_features(sample.question, claim, index)
            if features is None:
                row.update(supported=None, checkable=False)
                continue
            base = short_support(features)
            added = sorted(terms(claim) - ANSWER_WORDS - terms(sample.question))
            row.update(
                terms=added,
                missing_terms=[t for t in added if t not in index.pool],
                term_coverage=round(features[0], 4),
                co_support=round(features[1], 4),
            )
        else:
            base = 1.0 if row["supported"] else 0.5
        first_person = speaks_for_itself(claim, documents)
        if first_person:
            base = min(base, 0.5)
        words_lacking, weight = unexplained(claim, index, known, documents)
        p = claim_support(base, weight)
        row.update(
            support=round(p, 4),
            supported=p > 0.5,
            unexplained=list(words_lacking),
            unexplained_weight=weight,
            first_person=first_person,
        )
        support.append(p)
    if not support:
        return Score.fail(
            FailureKind.NO_CLAIMS,
            "a bare yes/no answer states no term the offline provider can check; "
            "use a judge or the nli provider",
        )
    faithful = answer_support(support, short=short) if contexts else 0.0
    supported = sum(row["supported"] is True for row in rows)
    total = sum(row.get("checkable", True) for row in rows)
    details = {
        "claims": rows,
        "supported": supported,
        "total": total,
        "similarity_threshold": settings.similarity,
        "coverage_threshold": settings.coverage,
        "short_answer": short,
        "preambles_skipped": preambles,
    }
    if not contexts:
        reason = "no contexts were retrieved, so no sentence of the answer is supported"
    elif hallucination:
        reason = f"{total - supported} of {total} answer sentences not supported by the contexts"
    else:
        reason = f"{supported} of {total} answer sentences supported by the contexts"
    value = 1.0 - faithful if hallucination else faithful
    return Score(value=value, reason=reason, details=details)
