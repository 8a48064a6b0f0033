"""Templates of the faithfulness family: ``answer.analyze`` and ``faithfulness.verify``.

``answer.analyze`` is the one call that reads the answer on its own. It returns three things at
once because four metrics need them and a judge call is the unit of cost:

* ``claims`` — atomic, self-contained factual statements (Faithfulness, Hallucination,
  AnswerCorrectness). This is the statement-extraction step of Es et al. 2023, "RAGAS: Automated
  Evaluation of Retrieval Augmented Generation", §3 (faithfulness), with pronouns resolved so a
  claim can be checked without the answer beside it.
* ``questions`` — questions the answer would be a fitting reply to (AnswerRelevance; the
  question-generation step of the same paper's answer relevance).
* ``noncommittal`` — whether the answer evades the question (an "I don't know" is relevant-looking
  text that answers nothing; AnswerRelevance scores it 0).

``faithfulness.verify`` checks *all* claims against *all* contexts in one call (RAGAS's
verification step, batched), so its cost does not grow with the number of contexts. Verdicts
are three-valued: "contradicted" and "unsupported" are both unfaithful, but Hallucination
reports them apart because a contradiction is a worse failure than a gap.

Field order in the reply schemas puts each ``reason`` before its verdict: a judge that writes its
justification first commits to the verdict after reasoning, not before.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from . import register
from .base import Facts, PromptTemplate, Reply

__all__ = [
    "ANSWER_ANALYZE",
    "FAITHFULNESS_VERIFY",
    "AnswerAnalysis",
    "ClaimVerdict",
    "ClaimVerdicts",
]


class AnswerAnalysis(Reply):
    """Reply of ``answer.analyze``.

    ``claims``: atomic, self-contained factual statements of the answer (pronouns resolved);
    empty when it asserts nothing factual. ``questions``: 3 distinct questions the answer would
    fittingly reply to. ``noncommittal``: the answer avoids answering. (What each field means is
    told to the judge by the template, not by the schema: see `compact_schema`.)
    """

    claims: list[str]
    questions: list[str]
    noncommittal: bool


class ClaimVerdict(Reply):
    """One claim's verdict in ``faithfulness.verify``; ``context`` is the 1-based number of the
    context that supports or contradicts the claim, or None when no context does."""

    reason: str
    verdict: Literal["supported", "contradicted", "unsupported"]
    context: int | None


class ClaimVerdicts(Reply):
    """Reply of ``faithfulness.verify``: exactly one verdict per claim, in claim order."""

    verdicts: list[ClaimVerdict] = Field(json_schema_extra={"aligned_with": "CLAIM"})


def _questions_given(reply: BaseModel, facts: Facts) -> str | None:
    """``answer.analyze`` asks for 3 questions; a committal answer with none is not a reply.

    (A noncommittal answer scores 0 for relevance whatever its questions, so none are needed.)
    """
    if not isinstance(reply, AnswerAnalysis) or reply.noncommittal:
        return None
    if any(q.strip() for q in reply.questions):
        return None
    return "expected 3 generated questions, got 0"


ANSWER_ANALYZE = register(
    PromptTemplate(
        id="answer.analyze",
        version="2",
        description="Claims, generated questions and noncommittal flag of an answer.",
        system="You split answers into their facts and the questions they answer.",
        user="""\
$question

$answer

From the answer (the question is context only):
- "claims": each factual assertion as a short standalone sentence (names for pronouns and vague \
references, compound sentences split; no greetings, hedges, opinions, restated \
question); [] if none.
- "questions": 3 different questions this answer would fittingly reply to.
- "noncommittal": true if it dodges the question (does not know, talks around it).""",
        schema=AnswerAnalysis,
        extra_check=_questions_given,
    )
)

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
    )
)
