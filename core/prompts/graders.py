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

from pydantic import BaseModel, Field

from . import register
from .base import PromptTemplate

__all__ = [
    "GRADER_CORRECTNESS",
    "GRADER_DOCUMENT_RELEVANCE",
    "GRADER_GROUNDEDNESS",
    "GRADER_HELPFULNESS",
    "GraderVerdict",
]


class GraderVerdict(BaseModel):
    """Reply of every grader: the reasoning, then the binary verdict."""

    explanation: str = Field(description="Step-by-step reasoning that leads to the verdict.")
    verdict: bool = Field(description="The grade: true passes, false fails.")


_STEPS = """\
First reason step by step in "explanation", then give "verdict": true if the criterion is met, \
false if it is not."""

GRADER_CORRECTNESS = register(
    PromptTemplate(
        id="grader.correctness",
        version="1",
        description="Is the answer factually correct with respect to the reference?",
        system=(
            "You grade answers to questions against a reference answer that is known to be correct."
        ),
        user=f"""\
Grade whether the answer is factually correct, taking the reference answer as the truth.

$question

$answer

$reference

Criterion: the answer is correct when every fact it states agrees with the reference answer. It \
may add information the reference lacks as long as nothing it says conflicts with the \
reference. Wording does not matter, only facts. An answer that conflicts with the reference on \
any point is not correct.
{_STEPS}""",
        schema=GraderVerdict,
    )
)

GRADER_HELPFULNESS = register(
    PromptTemplate(
        id="grader.helpfulness",
        version="1",
        description="Does the answer address the question and help the person who asked?",
        system="You grade whether answers actually respond to the questions they were given.",
        user=f"""\
Grade whether the answer is helpful for the question.

$question

$answer

Criterion: the answer is helpful when it addresses what the question asks, stays on that \
subject, and would let the person who asked move forward. An answer that evades the question, \
answers a different one, or is mostly padding is not helpful. Do not judge factual accuracy here.
{_STEPS}""",
        schema=GraderVerdict,
    )
)

GRADER_GROUNDEDNESS = register(
    PromptTemplate(
        id="grader.groundedness",
        version="1",
        description="Is every fact in the answer backed by the retrieved contexts?",
        system=(
            "You grade whether an answer stays within what its source passages say, using the "
            "passages alone and no knowledge of your own."
        ),
        user=f"""\
Grade whether the answer is grounded in the numbered contexts.

$answer

Contexts:
$contexts

Criterion: the answer is grounded when every fact it states can be found in, or directly follows \
from, the contexts. One fact that the contexts do not back, or that they contradict, makes the \
answer ungrounded, even if the fact is true.
{_STEPS}""",
        schema=GraderVerdict,
    )
)

GRADER_DOCUMENT_RELEVANCE = register(
    PromptTemplate(
        id="grader.document_relevance",
        version="1",
        description="Are the retrieved contexts related to the question?",
        system="You grade whether a search system retrieved passages related to a question.",
        user=f"""\
Grade whether the numbered contexts are relevant to the question.

$question

Contexts:
$contexts

Criterion: the contexts are relevant when they contain information, terms or meaning connected \
to what the question asks; they need not answer it completely. They are not relevant when they \
are about something unrelated to the question.
{_STEPS}""",
        schema=GraderVerdict,
    )
)
