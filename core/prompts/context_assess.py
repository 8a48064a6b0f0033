"""Template ``context.assess``: context precision and context recall in one call.

Both measures read the same inputs — the question, the reference and the numbered contexts — so
when a run asks for both, one call judges each context's usefulness *and* attributes each
reference statement. That keeps the four RAGAS-style metrics at three judge calls per sample
(answer analysis, claim verification, context assessment) instead of four. Either metric alone
still uses its own, smaller template.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from . import register
from .base import PromptTemplate
from .context_precision import ContextUsefulness
from .context_recall import StatementAttribution

__all__ = ["CONTEXT_ASSESS", "ContextAssessment"]


class ContextAssessment(BaseModel):
    """Reply of ``context.assess``."""

    contexts: list[ContextUsefulness] = Field(
        description="Exactly one verdict per context, in context order.",
        json_schema_extra={"aligned_with": "CONTEXT"},
    )
    statements: list[StatementAttribution]


CONTEXT_ASSESS = register(
    PromptTemplate(
        id="context.assess",
        version="1",
        description="Per-context usefulness for the reference, and reference statements "
        "attributed to the contexts, in one call.",
        system=(
            "You assess retrieved passages against a reference answer: which passages help to "
            "reach that answer, and which parts of the answer the passages cover. You rely on "
            "the passages alone, not on your own knowledge."
        ),
        user="""\
Two tasks on the same material.

$question

$reference

Contexts:
$contexts

Task 1, "contexts": for each numbered context, in order, give
- "reason": one sentence on whether it helps to arrive at the reference answer;
- "useful": true when it contains information used in, or needed for, the reference answer.

Task 2, "statements": break the reference answer into its individual factual statements \
(each one short sentence that makes sense on its own, pronouns replaced; together covering the \
whole reference, each fact once) and for each give
- "statement": the fact;
- "reason": one sentence explaining your decision;
- "attributed": true when the fact is stated in, or directly follows from, at least one context;
- "context": the number of a context that contains the fact, or null when none does.""",
        schema=ContextAssessment,
    )
)
