"""``citation_recall`` and ``citation_precision``: ALCE's citation quality (Gao et al., 2023).

The answer is read as statements and the contexts each cites (`ragbridge.core.citations.parse`).

* **citation_recall**: the share of statements whose cited contexts, read together, support
  them. A statement that cites nothing counts 0: an answer that cites nothing scores 0.0 ("no
  statement cites a context"), as it gives the reader nothing to check.
* **citation_precision**: the share of citations that are relevant. Per ALCE, a citation of a
  supported statement is irrelevant when it does not support the statement on its own AND the
  statement's other citations support it without it. ALCE's evaluation also counts every
  citation of an unsupported statement irrelevant (the paper's two conditions are stated for a
  supported one); we follow it, so a lone citation of an unsupported statement is irrelevant.
  Skipped when the answer cites nothing (nothing to be precise about).

A statement citing one context twice ("[1] ... [1]", or "[1]" and "[doc-a]" naming the same
context) cites it once here; ALCE counted markers. A citation that names no context (``[7]``
with four contexts) makes both measures a typed failure naming it (``invalid_input``): a
reader cannot follow it, and ALCE's reading of it as unsupported would hide the broken marker.
An answer with no statement at all is skipped with that reason.

Providers: ``llm`` (default), ONE ``citations.judge`` call per answer serving both measures
(memoised per sample under one key, and planned with that key as its share key so an estimate
counts it once); ``offline``, lexical support of each statement against the cited texts
(`ragbridge.core.metrics.providers.offline.citations`).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from ..judging.engine import JudgeCall
from ..metrics._shared import planned, versions
from ..metrics.base import Metric, MetricContext, PlannedCall, declare, usage_of
from ..prompts.citations import CITATIONS_JUDGE, CitationVerdicts
from ..results.evaluation import Failure, FailureKind, Score
from ..sample import Sample
from .check import (
    UNCITED,
    CheckedStatement,
    CitationCheck,
    distinct,
    precision_score,
    recall_score,
)
from .parse import parse_citations, unresolved_message
from .types import CitedAnswer

__all__ = [
    "CheckedStatement",
    "CitationCheck",
    "CitationPrecision",
    "CitationRecall",
    "distinct",
    "judge_values",
    "precision_score",
    "recall_score",
]


def judge_values(
    sample: Sample, statements: list[CheckedStatement]
) -> tuple[dict[str, Any], dict[int, int]]:
    """What ``citations.judge`` is shown: the question, the cited contexts numbered anew (in
    the sample's order) and the cited statements with those numbers; and the number each
    shown context (0-based index in the sample) has there."""
    shown = sorted({i for s in statements for i in s.contexts})
    number = {i: n for n, i in enumerate(shown, start=1)}
    return {
        "question": sample.question,
        "contexts": [sample.contexts[i].text for i in shown],
        "statements": [
            f"{s.text} (cites: {', '.join(str(number[i]) for i in s.contexts)})"
            for s in statements
            if s.contexts
        ],
    }, number


def _share_key(values: dict[str, Any]) -> Hashable:
    return (
        CITATIONS_JUDGE.id,
        values["question"],
        tuple(values["statements"]),
        tuple(values["contexts"]),
    )


def _apply(
    statements: list[CheckedStatement], number: dict[int, int], reply: CitationVerdicts
) -> None:
    cited = [s for s in statements if s.contexts]
    for s, verdict in zip(cited, reply.statements, strict=True):
        alone = [number[i] in verdict.alone for i in s.contexts]
        # a lone citation is needed whatever the reply says: nothing else cites the statement
        redundant = [len(s.contexts) > 1 and number[i] in verdict.redundant for i in s.contexts]
        # monotone: a context that supports the statement alone supports it among the others,
        # so the set supports it, and every other citation of it could go
        s.supported = verdict.supported or any(alone)
        s.alone = alone
        s.needed = [
            not (redundant[k] or any(a for m, a in enumerate(alone) if m != k))
            for k in range(len(s.contexts))
        ]
        s.extra = {"reason": verdict.reason}


class _CitationMeasure(Metric):
    """What both measures share: the parse, its edges, the one shared judge call."""

    requires = ("answer", "contexts")
    reads = ("question", "answer", "contexts")  # ids and metadata name contexts too
    prompt_version = versions(CITATIONS_JUDGE)

    def __init__(self, provider: str = "llm") -> None:
        """``provider="offline"``: lexical support against the cited texts (no model)."""
        self._use_provider(provider)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(provider={self.provider!r})"

    def _edge(self, sample: Sample) -> Score | None:
        cited = parse_citations(sample.answer or "", sample.contexts)
        if cited.unresolved:
            message = unresolved_message(cited, len(sample.contexts))
            return Score(failure=Failure(kind=FailureKind.INVALID_INPUT, message=message))
        if not cited.statements:
            return Score.skip("the answer has no statement to check")
        if not any(s.citations for s in cited.statements):
            return self._uncited(cited)
        return None

    def _uncited(self, cited: CitedAnswer) -> Score:
        raise NotImplementedError

    def _score_check(self, check: CitationCheck, sample: Sample) -> Score:
        raise NotImplementedError

    def _plan(self, sample: Sample, shared_tags: frozenset[str]) -> list[PlannedCall]:
        statements = distinct(parse_citations(sample.answer or "", sample.contexts))
        values, _ = judge_values(sample, statements)
        return [planned(CITATIONS_JUDGE, _share_key(values), **values)]

    async def _score(self, sample: Sample, ctx: MetricContext) -> Score:
        statements = distinct(parse_citations(sample.answer or "", sample.contexts))
        values, number = judge_values(sample, statements)
        call: JudgeCall[CitationVerdicts]
        call, owns = await ctx.shared(
            _share_key(values), lambda: ctx.ask(CITATIONS_JUDGE, **values)
        )
        usage = usage_of(call, owned=(owns,))
        if call.value is None:
            assert call.failure is not None
            return Score(failure=call.failure, usage=usage)
        _apply(statements, number, call.value)
        return self._score_check(CitationCheck(statements), sample).model_copy(
            update={"usage": usage}
        )


class CitationRecall(_CitationMeasure):
    """Share of the answer's statements supported by the contexts they cite (module doc)."""

    reads = _CitationMeasure.reads  # a kept Score's key reads the class's own declaration

    def _uncited(self, cited: CitedAnswer) -> Score:
        n = len(cited.statements)
        return Score(
            value=0.0,
            reason=UNCITED,
            details={
                "statements": [
                    {
                        "text": s.text,
                        "cited": [],
                        "contexts": [],
                        "context_ids": [],
                        "supported": False,
                    }
                    for s in cited.statements
                ],
                "citations": [],
                "supported": 0,
                "total": n,
            },
        )

    def _score_check(self, check: CitationCheck, sample: Sample) -> Score:
        return recall_score(check, sample)


class CitationPrecision(_CitationMeasure):
    """Share of the answer's citations that are relevant, per ALCE (module doc)."""

    reads = _CitationMeasure.reads  # a kept Score's key reads the class's own declaration

    def _uncited(self, cited: CitedAnswer) -> Score:
        return Score.skip(f"{UNCITED}: no citation to be precise about")

    def _score_check(self, check: CitationCheck, sample: Sample) -> Score:
        return precision_score(check, sample)


_EDGES = {
    "citation naming no context": "invalid_input failure naming the marker",
    "answer without statements": "skipped with the reason",
    "no contexts": "missing_input",
}
_HOW = (
    "one call per answer (shared by citation recall and precision): per cited statement, "
    "whether its cited contexts support it together, and which support it alone or are redundant"
)
declare(
    CitationRecall,
    meaning="share of the answer's statements that the contexts they cite support (ALCE)",
    how=_HOW,
    needs=("judge",),
    judge_calls="1 (shared with citation_precision; 0 when nothing is cited)",
    edges={**_EDGES, "answer citing nothing": "0.0 (a statement without a citation counts 0)"},
)
declare(
    CitationPrecision,
    meaning="share of the answer's citations that are relevant: each supports its statement "
    "alone or is needed for it (ALCE)",
    how=_HOW,
    needs=("judge",),
    judge_calls="1 (shared with citation_recall; 0 when nothing is cited)",
    edges={**_EDGES, "answer citing nothing": "skipped: no citation to be precise about"},
)
