"""ContextRecall: did retrieval bring back everything the reference answer needs?

The RAGAS documentation's LLM context recall ("Context Recall", docs.ragas.io; the RAGAS
framework of Es et al. 2023): split the reference answer into statements and count those the
retrieved contexts contain,

    context_recall = attributed statements / total statements.

Splitting and attribution happen in one ``context_recall.attribute`` call, whatever the number of
contexts (and shared with ContextPrecision through ``context.assess`` when a run has both).
Edge policy: a missing reference is ``missing_input``; no contexts scores 0.0 without a
call (nothing retrieved can contain anything); a reference the judge splits into zero statements
is ``Failure(no_claims)`` — there is nothing to recall, and 0 or 1 would both be invented.
A conversation's turn is judged with the conversation so far
(`ragbridge.core.prompts.history.asked`), and one that retrieved nothing is skipped with that
reason rather than scored 0 (a chat turn may need no documents; `missed_retrieval` asks).
"""

from __future__ import annotations

from typing import Any

from ..judging.engine import JudgeCall
from ..prompts.context_recall import (
    CONTEXT_RECALL_ATTRIBUTE,
    StatementAttribution,
    StatementAttributions,
)
from ..prompts.history import asked
from ..results.evaluation import Failure, FailureKind, Score
from ..sample import Sample
from ._context_share import assess_template
from ._shared import (
    ASSESS_TAG,
    assess_contexts,
    context_id,
    has_inputs,
    plan_assess,
    planned,
    versions,
)
from .base import Metric, MetricContext, PlannedCall, declare, usage_of
from .providers.offline.matching import DEFAULT_SIMILARITY, OfflineSettings
from .turn_sources import no_retrieval_skip, turn_without_retrieval

__all__ = ["ContextRecall"]


class ContextRecall(Metric):
    """Share of the reference's statements found in the retrieved contexts."""

    requires = ("question", "reference")
    reads = ("question", "reference", "contexts.text", "contexts.id")  # ids: in details
    prompt_version = versions(CONTEXT_RECALL_ATTRIBUTE)

    def __init__(self, provider: str = "llm", *, similarity: float = DEFAULT_SIMILARITY) -> None:
        """``provider="offline"``: reference sentences attributed by the offline matcher."""
        self._use_provider(provider)
        self.settings = OfflineSettings(similarity=similarity)

    def __repr__(self) -> str:
        return f"ContextRecall(provider={self.provider!r})"

    def _share_tags(self) -> frozenset[str]:
        return frozenset({ASSESS_TAG})

    def _plan(self, sample: Sample, shared_tags: frozenset[str]) -> list[PlannedCall]:
        if not has_inputs(sample, self.requires):
            return []
        if ASSESS_TAG in shared_tags:
            return [plan_assess(sample, assess_template(shared_tags))]
        return [
            planned(
                CONTEXT_RECALL_ATTRIBUTE,
                question=asked(sample),
                reference=sample.reference,
                contexts=[c.text for c in sample.contexts],
            )
        ]

    def missing_input(self, sample: Sample, ctx: MetricContext) -> Failure | None:
        if turn_without_retrieval(sample):
            return None  # skipped by `_edge`, whatever else it lacks
        return super().missing_input(sample, ctx)

    def _edge(self, sample: Sample) -> Score | None:
        if sample.contexts:
            return None
        if turn_without_retrieval(sample):
            return no_retrieval_skip(sample)
        return Score(
            value=0.0,
            reason="no contexts were retrieved, so nothing of the reference is recalled",
            details={"statements": []},
        )

    async def _score(self, sample: Sample, ctx: MetricContext) -> Score:
        texts = [c.text for c in sample.contexts]
        template = CONTEXT_RECALL_ATTRIBUTE
        found: list[StatementAttribution]
        if ASSESS_TAG in ctx.shared_tags:
            # context.assess, with relevance per context when a relevance measure shares it
            template = assess_template(ctx.shared_tags)
            assessed, owner = await assess_contexts(sample, ctx, template)
            usage = usage_of(assessed, owned=(owner,))
            if assessed.value is None:
                assert assessed.failure is not None
                return Score(
                    failure=assessed.failure, usage=usage, prompt_version=versions(template)
                )
            found = assessed.value.statements
        else:
            call: JudgeCall[StatementAttributions] = await ctx.ask(
                template,
                question=asked(sample),
                reference=sample.reference or "",
                contexts=texts,
            )
            usage = usage_of(call)
            if call.value is None:
                assert call.failure is not None
                return Score(failure=call.failure, usage=usage)
            found = call.value.statements
        statements = [s for s in found if s.statement.strip()]
        if not statements:
            return Score.fail(
                FailureKind.NO_CLAIMS,
                f"{template.id}: the reference was split into no statements",
                usage=usage,
                prompt_version=versions(template),
            )
        details: list[dict[str, Any]] = []
        for s in statements:  # cited context numbers exist: the engine checked the reply
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
            prompt_version=versions(template),
        )


declare(
    ContextRecall,
    meaning="share of the reference's statements found in the retrieved contexts",
    how="one call splits the reference into statements and attributes each to a context",
    needs=("judge", "reference"),
    judge_calls="1 (shared with context_precision)",
    edges={
        "no contexts": "0.0",
        "no statements": "failure no_claims",
        "turn without retrieval": "skipped with the reason",
    },
)
