"""``answer.analyze``: the one judge call that reads the answer on its own.

It returns three things at once because four measures need them and a judge call is the unit of
cost, so it has its own module rather than living with one of them:

* ``claims`` — atomic, self-contained factual statements (Faithfulness, Hallucination,
  AnswerCorrectness). This is the statement-extraction step of Es et al. 2023, "RAGAS: Automated
  Evaluation of Retrieval Augmented Generation", §3 (faithfulness), with pronouns resolved so a
  claim can be checked without the answer beside it.
* ``questions`` — questions the answer would be a fitting reply to (AnswerRelevance; the
  question-generation step of the same paper's answer relevance).
* ``noncommittal`` — whether the answer evades the question (an "I don't know" is relevant-looking
  text that answers nothing; AnswerRelevance scores it 0).
"""

from __future__ import annotations

from pydantic import BaseModel

from . import register
from .base import Facts, PromptTemplate, Reply
from .budget import SENTENCE, restating

__all__ = ["ANSWER_ANALYZE", "AnswerAnalysis"]


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
        # the claims restate the answer; 3 questions and the flag come on top
        budget=restating("answer", extra=3 * SENTENCE),
    )
)
