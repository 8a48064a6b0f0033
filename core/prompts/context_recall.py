"""Template of context recall: ``context_recall.attribute``.

Context recall asks whether the retrieved contexts contain what the reference answer says. The
RAGAS documentation ("Context Recall", docs.ragas.io) defines it as the share of reference
statements attributable to the retrieved contexts. Splitting the reference and attributing each
statement happen in the same call here, so the cost is one call whatever the number of contexts
or statements; the judge also names the context that holds each statement, which makes a low
score inspectable.
"""

from __future__ import annotations

from . import register
from .base import PromptTemplate, Reply
from .budget import VERDICT, restating

__all__ = [
    "CONTEXT_RECALL_ATTRIBUTE",
    "STATEMENT_RULES",
    "StatementAttribution",
    "StatementAttributions",
]


class StatementAttribution(Reply):
    """One reference statement (standalone), the reason for the decision, whether the contexts
    contain it, and the 1-based number of a context that does (None when none does)."""

    statement: str
    reason: str
    attributed: bool
    context: int | None


class StatementAttributions(Reply):
    """Reply of ``context_recall.attribute``."""

    statements: list[StatementAttribution]


#: Shared with ``context.assess``, which asks for the same statements.
STATEMENT_RULES = """\
split the reference into short standalone facts (pronouns replaced; all of it, each \
fact once); for each: "statement", "reason" (one sentence), "attributed": true if a context \
states or directly implies it, "context": that context's number, or null."""

CONTEXT_RECALL_ATTRIBUTE = register(
    PromptTemplate(
        id="context_recall.attribute",
        version="2",
        description="Reference split into statements, each attributed to the contexts or not.",
        system=(
            "You check whether retrieved passages cover what a reference answer says, using the "
            "passages alone, never your own knowledge."
        ),
        user=f"""\
$question

$reference

$contexts

"statements": {STATEMENT_RULES}""",
        schema=StatementAttributions,
        # the reference restated as statements, each with a reason and a verdict
        budget=restating("reference", per_fact=VERDICT),
    )
)
