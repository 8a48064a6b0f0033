"""``citations.judge``: do the passages an answer cites support what it says, and is each needed?

One call per answer serves both citation measures (`ragbridge.core.citations.measures`). The
judge sees the question, the contexts the answer cites (numbered anew, only those: a context
nobody cites has nothing to say here) and the answer's cited statements, each followed by the
numbers of the contexts it cites. Per statement it says whether those contexts together support
it (citation recall), which of them support it on their own, and which could be dropped with the
rest still supporting it (citation precision, ALCE's two conditions). The reason comes first, so
the verdicts follow the reading rather than precede it.
"""

from __future__ import annotations

from pydantic import Field

from . import register
from .base import PromptTemplate, Reply
from .budget import per_item

__all__ = ["CITATIONS_JUDGE", "CitationVerdicts", "StatementVerdict"]


class StatementVerdict(Reply):
    """One statement's verdict: ``supported`` by its cited contexts read together; ``alone``,
    the numbers of its cited contexts that each support it on their own; ``redundant``, those
    it would still be fully supported without (by its other cited contexts)."""

    reason: str
    supported: bool
    alone: list[int]
    redundant: list[int]


class CitationVerdicts(Reply):
    """Reply of ``citations.judge``: one verdict per statement, in statement order."""

    statements: list[StatementVerdict] = Field(json_schema_extra={"aligned_with": "STATEMENT"})


CITATIONS_JUDGE = register(
    PromptTemplate(
        id="citations.judge",
        version="1",
        description="Are an answer's statements supported by the contexts they cite, and is "
        "each citation needed?",
        system="You check an answer's citations: only the cited contexts count, not your "
        "knowledge.",
        user="""\
$question

$contexts

$statements

Each statement ends with "(cites: ...)", the numbers of the contexts it cites. Per statement, \
in order:
- "reason": one sentence.
- "supported": true if the contexts it cites, read together, state or directly imply all it \
says; false otherwise, even if it is true.
- "alone": the numbers of its cited contexts that each state or imply all of it on their own; \
[] if none.
- "redundant": the numbers of its cited contexts it would still be fully supported without, \
by its other cited contexts; [] if none.""",
        schema=CitationVerdicts,
        budget=per_item("statements"),
    )
)
