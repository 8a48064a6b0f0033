"""The four binary graders of the LangSmith RAG evaluation tutorial ("Evaluate a RAG
application", docs.smith.langchain.com): correctness (answer vs reference), helpfulness (answer vs
question; the tutorial calls it relevance), groundedness (answer vs retrieved documents) and
document relevance (retrieved documents vs question).

Each is one call returning an explanation and a yes/no verdict. The explanation comes first in
the schema and the instructions ask for step-by-step reasoning before the verdict: a grader that
has to justify itself first is more consistent than one that blurts a boolean. The explanation is
kept as the Score's reason, so a failing grade says why.
"""

from __future__ import annotations

from . import register
from .base import PromptTemplate, Reply
from .budget import flat

__all__ = [
    "GRADER_CORRECTNESS",
    "GRADER_DOCUMENT_RELEVANCE",
    "GRADER_GROUNDEDNESS",
    "GRADER_HELPFULNESS",
    "GraderVerdict",
]


class GraderVerdict(Reply):
    """Reply of every grader: step-by-step reasoning, then the grade (true passes)."""

    explanation: str
    verdict: bool


_STEPS = """\
Reason step by step in "explanation" first, then give "verdict": true if the criterion is met."""

GRADER_CORRECTNESS = register(
    PromptTemplate(
        id="grader.correctness",
        version="2",
        description="Is the answer factually correct with respect to the reference?",
        system="You grade answers against a reference answer that is known to be correct.",
        user=f"""\
$question

$answer

$reference

Is the answer factually correct, taking the reference as the truth? Criterion: every fact it \
states agrees with the reference; it may add information the reference lacks if nothing \
conflicts with it. Facts matter, not wording; any conflict makes it incorrect.
{_STEPS}""",
        schema=GraderVerdict,
        budget=flat(3),
    )
)

GRADER_HELPFULNESS = register(
    PromptTemplate(
        id="grader.helpfulness",
        version="2",
        description="Does the answer address the question and help the person who asked?",
        system="You grade whether answers actually respond to the questions they were given.",
        user=f"""\
$question

$answer

Is the answer helpful for the question? Criterion: it addresses what the question asks, stays on \
that subject, and would let the asker move forward. Evading, answering a different question or \
mostly padding is not helpful. Do not judge factual accuracy here.
{_STEPS}""",
        schema=GraderVerdict,
        budget=flat(3),
    )
)

GRADER_GROUNDEDNESS = register(
    PromptTemplate(
        id="grader.groundedness",
        version="2",
        description="Is every fact in the answer backed by the retrieved contexts?",
        system=(
            "You grade whether an answer stays within its source passages, using the passages "
            "alone, never your own knowledge."
        ),
        user=f"""\
$answer

$contexts

Is the answer grounded in the contexts? Criterion: every fact it states is found in, or directly \
follows from, the contexts. One fact they do not back, or contradict, makes it ungrounded, even \
if the fact is true.
{_STEPS}""",
        schema=GraderVerdict,
        budget=flat(3),
    )
)

GRADER_DOCUMENT_RELEVANCE = register(
    PromptTemplate(
        id="grader.document_relevance",
        version="2",
        description="Are the retrieved contexts related to the question?",
        system="You grade whether a search system retrieved passages related to a question.",
        user=f"""\
$question

$contexts

Are the contexts relevant to the question? Criterion: they contain information, terms or \
meaning connected to what it asks; they need not answer it completely. They are not relevant \
when about something unrelated.
{_STEPS}""",
        schema=GraderVerdict,
        budget=flat(3),
    )
)
