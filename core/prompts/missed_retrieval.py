"""``missed_retrieval.judge``: did a turn that retrieved nothing need documents?

A chat assistant decides per turn whether to search: "thanks!" needs no documents, "and for
part-timers?" does. A turn that answers from nothing retrieved either needed nothing, or stated
facts it had no source for (the model's memory, or invented), or left a question unanswered that
a search would have answered. The judge reads the question with the conversation so far
(`ragbridge.core.prompts.history.asked`) and the answer, and lists the facts the answer states
that the conversation does not hold, then says whether a good answer needed such facts. Facts
come first: a judge that has written them down decides the verdict on them.
"""

from __future__ import annotations

from . import register
from .base import PromptTemplate, Reply
from .budget import restating

__all__ = ["MISSED_RETRIEVAL", "RetrievalNeed"]


class RetrievalNeed(Reply):
    """Reply of ``missed_retrieval.judge``: the answer's facts the conversation does not hold
    (``new_facts``), a one-sentence ``reason``, and whether answering ``needed`` documents."""

    new_facts: list[str]
    reason: str
    needed: bool


MISSED_RETRIEVAL = register(
    PromptTemplate(
        id="missed_retrieval.judge",
        version="1",
        description="Did a turn that retrieved no documents need some to answer?",
        system="You judge whether a chat assistant should have looked documents up before "
        "answering.",
        user="""\
$question

$answer

No documents were retrieved for this answer: it could draw only on what the question block \
shows (the conversation so far, if any) and on common knowledge.
- "new_facts": each specific fact the answer states that the question block does not already \
hold (names, numbers, dates, rules, policies, details of a product or an organisation), as a \
short sentence; common knowledge any adult has does not count; [] if none.
- "reason": one sentence.
- "needed": true if a good answer to the latest question requires such facts, whether or not \
the answer gives them; false for greetings, thanks, rewording, or a question the conversation \
already answers.""",
        schema=RetrievalNeed,
        budget=restating("answer", extra=64),
    )
)
