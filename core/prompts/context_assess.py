"""Template ``context.assess``: context precision and context recall in one call.

Both measures read the same inputs — the question, the reference and the numbered contexts — so
when a run asks for both, one call judges each context's usefulness *and* attributes each
reference statement. That keeps the four RAGAS-style metrics at three judge calls per sample
(answer analysis, claim verification, context assessment) instead of four. Either metric alone
still uses its own, smaller template.
"""

from __future__ import annotations

from pydantic import Field

from . import register
from .base import PromptTemplate, Reply
from .budget import VERDICT, per_item, restating, summed
from .context_precision import ContextUsefulness
from .context_recall import STATEMENT_RULES, StatementAttribution

__all__ = ["CONTEXT_ASSESS", "ContextAssessment"]


class ContextAssessment(Reply):
    """Reply of ``context.assess``: one verdict per context, in context order; then the
    reference's statements, each attributed or not."""

    contexts: list[ContextUsefulness] = Field(json_schema_extra={"aligned_with": "CONTEXT"})
    statements: list[StatementAttribution]


CONTEXT_ASSESS = register(
    PromptTemplate(
        id="context.assess",
        version="2",
        description="Per-context usefulness for the reference, and reference statements "
        "attributed to the contexts, in one call.",
        system="You assess retrieved contexts against a reference answer.",
        user=f"""\
$question

$reference

$contexts

1. "contexts": per context, in order: "reason" (one sentence) first, then "useful": true if it \
holds facts the reference states or needs.
2. "statements": {STATEMENT_RULES}""",
        schema=ContextAssessment,
        budget=summed(per_item("contexts"), restating("reference", per_fact=VERDICT)),
    )
)
