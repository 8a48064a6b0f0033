"""``citation_recall:offline`` and ``citation_precision:offline``: citations checked lexically.

No model: a statement is supported by a set of contexts when the lexical support of
`.faithfulness`'s short-answer check, graded by `.support`, exceeds 0.5 against those
contexts' texts alone — how much of what the statement adds to the question the texts hold
(``coverage``), how much of its vocabulary one of their sentences holds together
(``co_support``), less the words none of them holds (`.support.unexplained`), and a first-person
statement the texts do not speak in is unsupported. Each statement is checked against its
cited set, against each cited context alone, and against the set without each context, which
is exactly what ALCE's two precision conditions ask (`ragbridge.core.citations.measures`).

What it cannot see: a paraphrase in other words than the context's reads as unsupported, and a
statement that copies a context's words while changing what they say (a negation) reads as
supported. A statement with no term of its own ("Yes [1].") cannot be checked and is left out of
both measures (its details say so); the judge reads it with the question.
"""

from __future__ import annotations

from collections.abc import Sequence

from ....citations.check import (
    CheckedStatement,
    CitationCheck,
    distinct,
    precision_score,
    recall_score,
)
from ....citations.parse import parse_citations
from ....registry import register_provider
from ....results.evaluation import Score
from ....sample import Sample
from ....text.words import terms, unframed
from ...base import Metric, MetricContext
from .faithfulness import short_answer_features, short_support
from .matching import TermIndex
from .support import (
    ANSWER_WORDS,
    claim_support,
    says_nothing,
    source_words,
    speaks_for_itself,
    unexplained,
    unopened,
)

__all__ = ["lexical_check", "score_citation_precision", "score_citation_recall", "support"]


def support(question: str, statement: str, texts: Sequence[str]) -> float | None:
    """How far ``texts`` support ``statement`` (above 0.5: supported); None when the statement
    holds no term to check."""
    if not texts:
        return 0.0
    claim = unframed(unopened(statement))
    if says_nothing(claim):
        return None
    index = TermIndex(texts)
    features = short_answer_features(question, claim, index)
    if features is None:
        return None
    base = short_support(features)
    known = source_words(texts)
    if speaks_for_itself(claim, known):
        base = min(base, 0.5)
    _, weight = unexplained(claim, index, known, known)
    return claim_support(base, weight)


def _checkable(statement: str) -> bool:
    claim = unframed(unopened(statement))
    return not says_nothing(claim) and bool(terms(claim) - ANSWER_WORDS)


def _check(question: str, statement: CheckedStatement, texts: Sequence[str]) -> None:
    cited = [texts[i] for i in statement.contexts]
    together = support(question, statement.text, cited)
    if together is None:
        statement.extra = {"checkable": False}
        return
    alone = [support(question, statement.text, [t]) or 0.0 for t in cited]
    without = [
        support(question, statement.text, cited[:k] + cited[k + 1 :]) or 0.0
        for k in range(len(cited))
    ]
    statement.supported = together > 0.5
    statement.alone = [a > 0.5 for a in alone]
    statement.needed = [w <= 0.5 for w in without]
    statement.extra = {
        "support": round(together, 4),
        "alone_support": [round(a, 4) for a in alone],
    }


def lexical_check(sample: Sample) -> CitationCheck:
    """Every statement of the answer checked against its cited contexts, lexically."""
    statements = distinct(parse_citations(sample.answer or "", sample.contexts))
    texts = [c.text for c in sample.contexts]
    for statement in statements:
        if statement.contexts:
            _check(sample.question, statement, texts)
        elif not _checkable(statement.text):
            statement.extra = {"checkable": False}
    return CitationCheck(statements)


_HOW = (
    "lexical: each statement's terms found in its cited contexts (together, alone, and "
    "without each), graded by the words they lack"
)
_READS = ["question", "answer", "contexts"]


@register_provider("citation_recall", "offline", how=_HOW, reads=_READS)
async def score_citation_recall(metric: Metric, sample: Sample, ctx: MetricContext) -> Score:
    """Share of the statements their cited contexts support, lexically (module doc)."""
    return recall_score(lexical_check(sample), sample)


@register_provider("citation_precision", "offline", how=_HOW, reads=_READS)
async def score_citation_precision(metric: Metric, sample: Sample, ctx: MetricContext) -> Score:
    """Share of the citations that are relevant per ALCE, lexically (module doc)."""
    return precision_score(lexical_check(sample), sample)
