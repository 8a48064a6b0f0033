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
from .base import Facts, PromptTemplate

__all__ = [
    "ANSWER_ANALYZE",
    "FAITHFULNESS_VERIFY",
    "AnswerAnalysis",
    "ClaimVerdict",
    "ClaimVerdicts",
]


class AnswerAnalysis(BaseModel):
    """Reply of ``answer.analyze``."""

    claims: list[str] = Field(
        description="Atomic, self-contained factual statements made by the answer "
        "(pronouns replaced by what they refer to); empty when it asserts nothing factual."
    )
    questions: list[str] = Field(
        description="Exactly 3 distinct questions to which the answer would be a fitting reply."
    )
    noncommittal: bool = Field(
        description="True when the answer avoids answering (does not know, evades, hedges)."
    )


class ClaimVerdict(BaseModel):
    """One claim's verdict in ``faithfulness.verify``."""

    reason: str = Field(description="One sentence explaining the verdict.")
    verdict: Literal["supported", "contradicted", "unsupported"]
    context: int | None = Field(
        description="1-based number of the context that supports or contradicts the claim, "
        "or null when no context does."
    )


class ClaimVerdicts(BaseModel):
    """Reply of ``faithfulness.verify``: one verdict per claim, in claim order."""

    verdicts: list[ClaimVerdict] = Field(
        description="Exactly one verdict per claim, in claim order.",
        json_schema_extra={"aligned_with": "CLAIM"},
    )


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
        version="1",
        description="Claims, generated questions and noncommittal flag of an answer.",
        system=(
            "You review answers written by a question-answering system. You take an answer "
            "apart into the facts it asserts, and you work out which questions it replies to."
        ),
        user="""\
Analyse the answer below. The question it was written for is given for context only.

$question

$answer

Return three things.
1. "claims": every factual assertion the answer makes, each rewritten as one short sentence \
that can be judged true or false on its own. Replace pronouns and vague references ("it", \
"they", "this product", "the latter") with the names they stand for, so a claim still makes \
sense without the answer next to it. Split a sentence that asserts several things into several \
claims. Leave out greetings, hedges, opinions and mere restatements of the question. If the \
answer asserts nothing factual, return an empty list.
2. "questions": exactly 3 different questions to which this answer, as written, would be a \
fitting reply. Derive them from the answer alone, not from the question above.
3. "noncommittal": true if the answer dodges the question (it says it does not know or cannot \
tell, or it talks around the question without answering it); otherwise false.""",
        schema=AnswerAnalysis,
        extra_check=_questions_given,
    )
)

FAITHFULNESS_VERIFY = register(
    PromptTemplate(
        id="faithfulness.verify",
        version="1",
        description="Verdict for every claim of an answer against the retrieved contexts.",
        system=(
            "You are a strict fact checker. You decide whether statements are backed by a set "
            "of source passages, using the passages alone and no knowledge of your own."
        ),
        user="""\
Check every numbered claim against the numbered contexts.

Claims:
$claims

Contexts:
$contexts

For each claim, in the order given, decide:
- "supported" when the contexts state the claim or it follows directly from what they state;
- "contradicted" when the contexts state something that cannot be true together with the claim;
- "unsupported" when the contexts neither establish nor refute the claim. Do not fill gaps \
with your own knowledge: a true claim that the contexts do not back is unsupported.
Write the reason (one sentence) before the verdict. Set "context" to the number of the context \
that supports or contradicts the claim, or null when there is none. Return exactly one verdict \
per claim, in claim order: the list must have as many entries as there are claims.""",
        schema=ClaimVerdicts,
    )
)
