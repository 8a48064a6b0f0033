"""Templates of test-set generation (`ragbridge.core.testset`): the judge writes questions.

Five tasks, one template each:

* ``testset.single`` — one question answered by a single fact of one chunk;
* ``testset.reasoning`` — one question whose answer follows from a chunk by a step of inference
  (a comparison, a condition applied, a small calculation), not by reading one sentence back;
* ``testset.multi`` — one question that needs two related chunks together;
* ``testset.no_answer`` — one question on the corpus's topic that the corpus does not answer;
* ``testset.answerable`` — the check of a no-answer candidate: do the passages retrieved for it
  answer it after all?

Why the reply puts the quoted ``passage`` first: a judge that copies its evidence before writing
the question writes a question that evidence answers, and the copy is what
`ragbridge.core.testset.passages` checks against the source — a reply whose "quote" is not in
the chunk is dropped, so a question invented from the judge's own knowledge cannot enter the set.

These templates are not in the `ragbridge.core.prompts` registry: that registry is the contract
of the *scoring* judge tasks (their ids, versions and fingerprints are pinned by
tests/test_prompts.py and tests/data/prompt_fingerprints.json). `TESTSET_TEMPLATES` lists these,
and tests/test_testset_prompts.py pins their fingerprints the same way: rewording one without
bumping its version fails there. The version enters the cache key, so a reworded prompt is
never answered with replies given to the old one.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from .base import Facts, PromptTemplate, Reply

__all__ = [
    "TESTSET_ANSWERABLE",
    "TESTSET_MULTI",
    "TESTSET_NO_ANSWER",
    "TESTSET_REASONING",
    "TESTSET_SINGLE",
    "TESTSET_TEMPLATES",
    "AnswerableVerdict",
    "NoAnswerQuestion",
    "WrittenMultiQuestion",
    "WrittenQuestion",
]


class WrittenQuestion(Reply):
    """Reply of ``testset.single`` and ``testset.reasoning``: the verbatim quote that supports
    the answer, the question, the reference answer."""

    passage: str
    question: str
    answer: str


class WrittenMultiQuestion(Reply):
    """Reply of ``testset.multi``: one verbatim quote per chunk shown (in chunk order), the
    question that needs both, the reference answer."""

    passages: list[str] = Field(json_schema_extra={"aligned_with": "CONTEXT"})
    question: str
    answer: str


class NoAnswerQuestion(Reply):
    """Reply of ``testset.no_answer``: why the question is on topic, then the question."""

    reason: str
    question: str


class AnswerableVerdict(Reply):
    """Reply of ``testset.answerable``: reasoning first, then whether the passages answer the
    question; ``context`` is the passage that answers it (1-based), or None."""

    reason: str
    verdict: Literal["answered", "partly", "not_answered"]
    context: int | None


def _has_question(reply: BaseModel, facts: Facts) -> str | None:
    """Empty fields are not a question: ask again rather than keep a blank sample."""
    for name in ("question", "answer", "passage"):
        value = getattr(reply, name, None)
        if isinstance(value, str) and not value.strip():
            return f'"{name}" is empty; write it'
    passages = getattr(reply, "passages", None)
    if isinstance(passages, list) and any(not p.strip() for p in passages):
        return "a passage is empty; quote one from each context"
    return None


_STANDALONE = """\
The question must stand on its own, as a user who never saw this text would ask it: never \
refer to "the passage", "the text", "the document" or "the context", and do not copy the \
passage's wording."""

_QUOTE = """\
"passage": copy one to three consecutive sentences from the TEXT block character for \
character (no paraphrase, no title, no ellipsis) that hold the answer."""

_AVOID = (
    "Questions already written from this text are in the AVOID block: ask about something else."
)

TESTSET_SINGLE = PromptTemplate(
    id="testset.single",
    version="1",
    description="A question one fact of one chunk answers, with its quote and answer.",
    system="You write questions for testing a document search system, from one text.",
    user=f"""\
$title

$text

$avoid

Write one question that a single fact of the text answers. First {_QUOTE} Then "question": \
specific enough that this fact, and no other part of the collection, answers it. \
{_STANDALONE} Then "answer": one or two sentences stating only what the passage says.
{_AVOID}""",
    schema=WrittenQuestion,
    extra_check=_has_question,
)

TESTSET_REASONING = PromptTemplate(
    id="testset.reasoning",
    version="1",
    description="A question the chunk answers only by a step of inference.",
    system="You write questions for testing a document search system, from one text.",
    user=f"""\
$title

$text

$avoid

Write one question that the text answers only through a step of reasoning: applying a rule \
to a concrete case, comparing two stated values, combining two conditions or doing a small \
calculation. Reading one sentence back must not be enough, and nothing outside the text may be \
needed. First {_QUOTE} Then "question". {_STANDALONE} Then "answer": the conclusion and the \
step that leads to it, in one to three sentences.
{_AVOID}""",
    schema=WrittenQuestion,
    extra_check=_has_question,
)

TESTSET_MULTI = PromptTemplate(
    id="testset.multi",
    version="1",
    description="A question that needs two related chunks together.",
    system="You write questions for testing a document search system, from two related texts.",
    user=f"""\
$contexts

$avoid

Write one question whose full answer needs a fact from EACH context: neither context alone \
answers it. "passages": for each context, in order, copy one to three consecutive sentences \
from it character for character (no paraphrase, no ellipsis) that hold its part \
of the answer. Then "question". {_STANDALONE} Then "answer": one to three sentences combining \
both facts.
{_AVOID}""",
    schema=WrittenMultiQuestion,
    extra_check=_has_question,
)

TESTSET_NO_ANSWER = PromptTemplate(
    id="testset.no_answer",
    version="1",
    description="An on-topic question the document collection does not answer.",
    system="You write questions for testing whether a document search system admits ignorance.",
    user="""\
$contexts

$avoid

The contexts are samples of a document collection. Write one question a real user of this \
collection could plausibly ask, on its subject, that these documents do NOT answer and that \
such a collection would likely not answer either: a neighbouring detail, a case the rules do \
not cover, a number that is never given. Not a trick, not general knowledge, not about the \
documents themselves. "reason": one sentence on why it is on topic yet unanswered; then \
"question". The questions in the AVOID block exist already: write a different one.""",
    schema=NoAnswerQuestion,
    extra_check=_has_question,
)

TESTSET_ANSWERABLE = PromptTemplate(
    id="testset.answerable",
    version="1",
    description="Do the retrieved passages answer this question (no-answer check)?",
    system="You check whether documents answer a question: only the contexts count.",
    user="""\
$question

$contexts

Do these contexts answer the question? "reason" (one or two sentences) first, then "verdict": \
"answered" if a context states the answer or lets a careful reader derive it, "partly" if \
they answer part of it or something very close, "not_answered" if a reader of these contexts \
could not answer it; "context": the number of the context that answers it, or null.""",
    schema=AnswerableVerdict,
)

TESTSET_TEMPLATES: tuple[PromptTemplate, ...] = (
    TESTSET_ANSWERABLE,
    TESTSET_MULTI,
    TESTSET_NO_ANSWER,
    TESTSET_REASONING,
    TESTSET_SINGLE,
)
"""Every test-set template, sorted by id (their fingerprints are pinned by a test)."""
