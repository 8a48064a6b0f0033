"""ContextRecall: did retrieval bring back everything the reference answer needs?

The RAGAS documentation's LLM context recall ("Context Recall", docs.ragas.io; the RAGAS
framework of Es et al. 2023): split the reference answer into statements and count those the
retrieved contexts contain,

    context_recall = attributed statements / total statements.

Splitting and attribution happen in one ``context_recall.attribute`` call, whatever the number of
contexts. Edge policy: a missing reference is ``missing_input``; no contexts scores 0.0 without a
call (nothing retrieved can contain anything); a reference the judge splits into zero statements
is ``Failure(no_claims)`` — there is nothing to recall, and 0 or 1 would both be invented.
"""

from __future__ import annotations

from typing import Any

from ..engine import JudgeCall
from ..prompts.context_recall import CONTEXT_RECALL_ATTRIBUTE, StatementAttributions
from ..results import FailureKind, Score
from ..sample import Sample
from ._shared import cited_context, context_id, has_inputs, planned, versions
from .base import Metric, MetricContext, PlannedCall, usage_of

__all__ = ["ContextRecall"]


class ContextRecall(Metric):
    """Share of the reference's statements found in the retrieved contexts."""

    requires = ("question", "reference")
    prompt_version = versions(CONTEXT_RECALL_ATTRIBUTE)

    def plan(self, sample: Sample) -> list[PlannedCall]:
        if not has_inputs(sample, self.requires) or not sample.contexts:
            return []
        return [
            planned(
                CONTEXT_RECALL_ATTRIBUTE,
                question=sample.question,
                reference=sample.reference,
                contexts=[c.text for c in sample.contexts],
            )
        ]

    async def _score(self, sample: Sample, ctx: MetricContext) -> Score:
        if not sample.contexts:
            return Score(
                value=0.0,
                reason="no contexts were retrieved, so nothing of the reference is recalled",
                details={"statements": []},
            )
        texts = [c.text for c in sample.contexts]
        call: JudgeCall[StatementAttributions] = await ctx.ask(
            CONTEXT_RECALL_ATTRIBUTE,
            question=sample.question,
            reference=sample.reference or "",
            contexts=texts,
        )
        usage = usage_of(call)
        if call.value is None:
            assert call.failure is not None
            return Score(failure=call.failure, usage=usage)
        statements = [s for s in call.value.statements if s.statement.strip()]
        if not statements:
            return Score.fail(
                FailureKind.NO_CLAIMS,
                f"{CONTEXT_RECALL_ATTRIBUTE.id}: the reference was split into no statements",
                usage=usage,
            )
        details: list[dict[str, Any]] = []
        for i, s in enumerate(statements, start=1):
            bad = cited_context(CONTEXT_RECALL_ATTRIBUTE, s.context, len(texts), f"statement {i}")
            if bad is not None:
                return Score(failure=bad, usage=usage)
            details.append(
                {
                    "statement": s.statement,
                    "attributed": s.attributed,
                    "context": s.context,
                    "context_id": context_id(sample, s.context),
                    "reason": s.reason,
                }
            )
        attributed = sum(1 for s in statements if s.attributed)
        total = len(statements)
        return Score(
            value=attributed / total,
            reason=f"{attributed} of {total} reference statements found in the contexts",
            details={"statements": details, "attributed": attributed, "total": total},
            usage=usage,
        )
