"""Templates of context relevance: is each retrieved context relevant to the question?

Relevance is judged against the question alone — what the retriever was given — where context
precision judges usefulness for an answer or a reference. The two are different questions
("does it bear on what was asked?" vs "did it help reach this answer?"), and a retriever can fail
one and pass the other, so both verdicts are kept; but they read the same numbered contexts, so
a run that asks for both asks one call:

* ``context_relevance.judge`` — relevance alone: one verdict per context, in context order.
* ``context.relevant_useful.with_reference`` / ``.with_answer`` — relevance *and* context
  precision's usefulness (for the reference, or for the answer when there is no reference) per
  context, in one call; used when a run has a context-relevance measure and ContextPrecision.
* ``context.assess_relevance`` — ``context.assess`` (precision's usefulness for the reference
  and recall's attributed statements) plus relevance per context; used when a run has all three,
  so the three measures still cost one call.

The usefulness wording of the combined templates is context precision's own, so a precision
value does not depend on whether relevance shares its call. Every context is judged in the same
call, whatever their number; the verdict list is positional and checked for its length
(``aligned_with``), like context precision's.
"""

from __future__ import annotations

from pydantic import Field

from . import register
from .base import PromptTemplate, Reply
from .budget import VERDICT, per_item, restating, summed
from .context_recall import STATEMENT_RULES, StatementAttribution

__all__ = [
    "CONTEXT_ASSESS_RELEVANCE",
    "CONTEXT_RELEVANCE",
    "CONTEXT_RELEVANT_USEFUL_WITH_ANSWER",
    "CONTEXT_RELEVANT_USEFUL_WITH_REFERENCE",
    "ContextAssessmentWithRelevance",
    "ContextJudgement",
    "ContextJudgements",
    "ContextRelevanceVerdict",
    "ContextRelevanceVerdicts",
]


class ContextRelevanceVerdict(Reply):
    """One context's verdict: the reason (one sentence), then whether it is relevant."""

    reason: str
    relevant: bool


class ContextRelevanceVerdicts(Reply):
    """Reply of ``context_relevance.judge``: one verdict per context, in context order."""

    verdicts: list[ContextRelevanceVerdict] = Field(json_schema_extra={"aligned_with": "CONTEXT"})


class ContextJudgement(Reply):
    """One context's combined verdict: the reason, relevance to the question, usefulness."""

    reason: str
    relevant: bool
    useful: bool


class ContextJudgements(Reply):
    """Reply of both ``context.relevant_useful`` templates: one verdict per context, in order."""

    verdicts: list[ContextJudgement] = Field(json_schema_extra={"aligned_with": "CONTEXT"})


class ContextAssessmentWithRelevance(Reply):
    """Reply of ``context.assess_relevance``: ``context.assess``'s reply with relevance per
    context (same field names, so precision and recall read it as they read that one)."""

    contexts: list[ContextJudgement] = Field(json_schema_extra={"aligned_with": "CONTEXT"})
    statements: list[StatementAttribution]


_RELEVANT = (
    "it holds information that answers the question or a part of it, or a fact a full answer needs"
)
_NOT_RELEVANT = "off-topic, or on the subject without anything the question asks for"

CONTEXT_RELEVANCE = register(
    PromptTemplate(
        id="context_relevance.judge",
        version="1",
        description="Relevance of each retrieved context to the question.",
        system=(
            "You judge, one passage at a time, whether what a search system retrieved bears on "
            "the question it was asked; judge each passage on its own, whatever its rank."
        ),
        user=f"""\
$question

$contexts

Is each context relevant to the question? Relevant: {_RELEVANT}; not relevant: {_NOT_RELEVANT}.
For each context, in order: "reason" (one sentence) first, then "relevant". One verdict per \
context.""",
        schema=ContextRelevanceVerdicts,
        budget=per_item("contexts"),
    )
)

_SYSTEM = (
    "You judge each passage a search system retrieved on its own merits, twice: whether it bears "
    "on the question, and whether it was useful; being on-topic is not enough to be useful."
)


def _both(useful: str) -> str:
    """The combined instruction: relevance as ``context_relevance.judge`` words it, usefulness
    as context precision's template for the same target does."""
    return (
        f'For each context, in order: "reason" (one sentence) first; then "relevant": true if '
        f'{_RELEVANT} (not if it is {_NOT_RELEVANT}); then "useful": true if {useful}. One '
        "verdict per context."
    )


_USEFUL_FOR_REFERENCE = _both(
    "it holds information the reference states or that directly helps derive it (not if it is "
    "on the subject but silent on what the reference says)"
)
_USEFUL_FOR_ANSWER = _both(
    "it holds information the answer states or relies on (not if it is on the subject but "
    "contributes nothing the answer uses)"
)

CONTEXT_RELEVANT_USEFUL_WITH_REFERENCE = register(
    PromptTemplate(
        id="context.relevant_useful.with_reference",
        version="1",
        description="Relevance of each context to the question and usefulness for the reference.",
        system=_SYSTEM,
        user=f"""\
$question

$reference

$contexts

{_USEFUL_FOR_REFERENCE}""",
        schema=ContextJudgements,
        budget=per_item("contexts"),
    )
)

CONTEXT_RELEVANT_USEFUL_WITH_ANSWER = register(
    PromptTemplate(
        id="context.relevant_useful.with_answer",
        version="1",
        description="Relevance of each context to the question and usefulness for the answer.",
        system=_SYSTEM,
        user=f"""\
$question

$answer

$contexts

{_USEFUL_FOR_ANSWER}""",
        schema=ContextJudgements,
        budget=per_item("contexts"),
    )
)

CONTEXT_ASSESS_RELEVANCE = register(
    PromptTemplate(
        id="context.assess_relevance",
        version="1",
        description="Per-context relevance to the question and usefulness for the reference, and "
        "reference statements attributed to the contexts, in one call.",
        system="You assess retrieved contexts against a question and a reference answer.",
        user=f"""\
$question

$reference

$contexts

1. "contexts": per context, in order: "reason" (one sentence) first, then "relevant": true if \
{_RELEVANT} (not if it is {_NOT_RELEVANT}); then "useful": true if it holds facts the \
reference states or needs.
2. "statements": {STATEMENT_RULES}""",
        schema=ContextAssessmentWithRelevance,
        budget=summed(per_item("contexts"), restating("reference", per_fact=VERDICT)),
    )
)
