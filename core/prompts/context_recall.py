"""Template of context recall: ``context_recall.attribute``.

Context recall asks whether the retrieved contexts contain what the reference answer says. The
RAGAS documentation ("Context Recall", docs.ragas.io) defines it as the share of reference
statements attributable to the retrieved contexts. Splitting the reference and attributing each
statement happen in the same call here, so the cost is one call whatever the number of contexts
or statements; the judge also names the context that holds each statement, which makes a low
score inspectable.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from . import register
from .base import PromptTemplate

__all__ = ["CONTEXT_RECALL_ATTRIBUTE", "StatementAttribution", "StatementAttributions"]


class StatementAttribution(BaseModel):
    """One reference statement and whether the contexts contain it."""

    statement: str = Field(description="One factual statement of the reference, standalone.")
    reason: str = Field(description="One sentence explaining the decision.")
    attributed: bool
    context: int | None = Field(
        description="1-based number of a context containing the statement, or null."
    )


class StatementAttributions(BaseModel):
    """Reply of ``context_recall.attribute``."""

    statements: list[StatementAttribution]


CONTEXT_RECALL_ATTRIBUTE = register(
    PromptTemplate(
        id="context_recall.attribute",
        version="1",
        description="Reference split into statements, each attributed to the contexts or not.",
        system=(
            "You check whether a set of retrieved passages covers everything a reference answer "
            "says. You rely on the passages alone, not on your own knowledge."
        ),
        user="""\
Break the reference answer to the question into its individual factual statements, then \
decide for each statement whether the numbered contexts contain it.

$question

$reference

Contexts:
$contexts

For every statement:
- "statement": the fact as one short sentence that makes sense on its own (replace pronouns \
with what they refer to). Together the statements must cover the whole reference, each fact \
once.
- "reason": one sentence explaining your decision.
- "attributed": true when the fact is stated in, or directly follows from, at least one \
context; false otherwise.
- "context": the number of a context that contains the fact, or null when none does.""",
        schema=StatementAttributions,
    )
)
