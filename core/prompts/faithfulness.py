"""Templates of the faithfulness family: ``faithfulness.verify`` (and, re-exported, the shared
``answer.analyze`` of `ragbridge.core.prompts.answer_analyze`, which reads the claims).

``faithfulness.verify`` checks *all* claims against *all* contexts in one call (RAGAS's
verification step, batched), so its cost does not grow with the number of contexts. Verdicts
are three-valued: "contradicted" and "unsupported" are both unfaithful, but Hallucination
reports them apart because a contradiction is a worse failure than a gap.

Field order in the reply schemas puts each ``reason`` before its verdict: a judge that writes its
justification first commits to the verdict after reasoning, not before.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from . import register
from .answer_analyze import ANSWER_ANALYZE, AnswerAnalysis
from .base import PromptTemplate, Reply
from .budget import per_item

__all__ = [
    "ANSWER_ANALYZE",
    "FAITHFULNESS_VERIFY",
    "AnswerAnalysis",
    "ClaimVerdict",
    "ClaimVerdicts",
]


class ClaimVerdict(Reply):
    """One claim's verdict in ``faithfulness.verify``; ``context`` is the 1-based number of the
    context that supports or contradicts the claim, or None when no context does."""

    reason: str
    verdict: Literal["supported", "contradicted", "unsupported"]
    context: int | None


class ClaimVerdicts(Reply):
    """Reply of ``faithfulness.verify``: exactly one verdict per claim, in claim order."""

    verdicts: list[ClaimVerdict] = Field(json_schema_extra={"aligned_with": "CLAIM"})


FAITHFULNESS_VERIFY = register(
    PromptTemplate(
        id="faithfulness.verify",
        version="2",
        description="Verdict for every claim of an answer against the retrieved contexts.",
        system="You are a strict fact checker: only the contexts count, not your knowledge.",
        user="""\
$claims

$contexts

Per claim, in order: "reason" (one sentence) first, then "verdict": "supported" if the contexts \
state or directly imply it, "contradicted" if they contradict it, else \
"unsupported" (even if true); "context": the deciding context's number, or null.""",
        schema=ClaimVerdicts,
        budget=per_item("claims"),
    )
)
