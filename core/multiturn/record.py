"""The records a conversation is scored as: one per answering turn, and one for the whole.

A turn row is `Conversation.turn_sample` (id ``"<conversation id>#<position>"``); the
conversation row is `conversation_record` (id ``"<conversation id>"``): the last question and
its answer with everything before as ``history``, so a measure that reads a sample with its
history — knowledge retention, conversation completeness — reads the whole conversation.
Both are plain `Sample`s, marked under ``metadata["conversation"]``; `record_level` and
`split_row_id` read those marks back, for the run and for the roll-ups.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Literal

from ..conversation import Conversation
from ..metrics.base import Metric
from ..results.evaluation import Evaluation
from ..sample import Sample

__all__ = [
    "LEVELS_KEY",
    "Level",
    "conversation_record",
    "conversation_rows",
    "levels_of",
    "record_level",
    "split_row_id",
    "turn_applies",
    "turn_rows",
]

Level = Literal["turn", "conversation"]

LEVELS_KEY = "conversation_levels"
"""``evaluation.metadata[LEVELS_KEY]``: ``{metric: "turn" | "conversation"}`` of the run."""


_TURN_ID = re.compile(r"^(?P<conversation>.+)#(?P<position>\d+)$")


def conversation_record(conversation: Conversation) -> Sample:
    """The whole ``conversation`` as one `Sample`, for conversation-level measures.

    ``question`` is the last user turn, ``answer`` the last assistant turn with text after it
    (None when the conversation ends unanswered), ``history`` every turn before that question.
    Metadata: the conversation's, and under ``"conversation"`` its ``id``, ``level``
    (``"conversation"``), ``expected_outcome`` and ``turn`` (the position of the answer turn,
    or None). Raises ValueError for a conversation with no user turn: there is nothing asked.
    """
    asked = next(
        (i for i in range(len(conversation.turns) - 1, -1, -1) if _role(conversation, i) == "user"),
        None,
    )
    if asked is None:
        raise ValueError(
            f"conversation {conversation.id!r} has no user turn, so nothing was asked: a "
            "conversation-level measure has nothing to score"
        )
    question = conversation.turns[asked].content
    assert question is not None  # a user turn always has content
    answered = next(
        (
            i
            for i in range(len(conversation.turns) - 1, asked, -1)
            if _role(conversation, i) == "assistant" and conversation.turns[i].content is not None
        ),
        None,
    )
    where = {
        "id": conversation.id,
        "level": "conversation",
        "expected_outcome": conversation.expected_outcome,
        "turn": answered,
    }
    return Sample(
        id=conversation.id,
        question=question,
        answer=None if answered is None else conversation.turns[answered].content,
        metadata={**conversation.metadata, "conversation": where},
        history=list(conversation.turns[:asked]),
    )


def _role(conversation: Conversation, index: int) -> str:
    return conversation.turns[index].role


def record_level(sample: Sample) -> Level | None:
    """``"conversation"`` for a `conversation_record`, ``"turn"`` for a turn row, None for a
    sample that belongs to no conversation."""
    where = sample.metadata.get("conversation")
    if not isinstance(where, dict):
        return None
    return "conversation" if where.get("level") == "conversation" else "turn"


def split_row_id(sample_id: str) -> tuple[str, int | None]:
    """``"c7#3"`` -> ``("c7", 3)`` (a turn row); ``"c7"`` -> ``("c7", None)``.

    A turn row's id always ends in ``#<position>``, so the split is exact for turn rows even
    when a conversation id itself holds a ``#``; use it on a turn metric's rows.
    """
    match = _TURN_ID.match(sample_id)
    if match is None:
        return sample_id, None
    return match["conversation"], int(match["position"])


def turn_applies(sample: Sample, metric: Metric) -> bool:
    """Whether ``metric`` scores this turn row: every turn metric when the turn has an answer;
    only those that do not read the answer (the retrieval measures) when it has contexts only."""
    return sample.answer is not None or "answer" not in metric.requires


def turn_rows(conversation: Conversation) -> Iterator[Sample]:
    """The turn rows of ``conversation``: each assistant turn that answers a user turn and has
    text or contexts, as `Conversation.turn_sample`."""
    for position, turn in conversation.assistant_turns():
        if turn.content is None and not turn.contexts:
            continue  # a turn that only calls tools: nothing a turn measure reads
        if conversation.question_for(position) is None:
            continue  # an opening assistant turn (a greeting) answers nothing
        yield conversation.turn_sample(position)


def conversation_rows(
    conversations: Iterable[Conversation], *, turns: bool, whole: bool
) -> Iterator[Sample]:
    """Every record to score, conversation by conversation: its turn rows (``turns``), then
    its conversation row (``whole``). Ids must be unique across them all: a conversation id
    ending in ``#<n>`` can collide with turn n of another conversation, said here by name."""
    seen: dict[str, str] = {}
    for conversation in conversations:
        if not isinstance(conversation, Conversation):
            hint = (
                " (Conversation.from_sample makes one)" if isinstance(conversation, Sample) else ""
            )
            raise TypeError(f"expected a Conversation, got {type(conversation).__name__}{hint}")
        batch: Sequence[Sample] = [
            *(turn_rows(conversation) if turns else ()),
            *([conversation_record(conversation)] if whole else []),
        ]
        for record in batch:
            first = seen.get(record.id)
            if first is not None:
                raise ValueError(
                    f"row id {record.id!r} of conversation {conversation.id!r} is also a row of "
                    f"conversation {first!r}: conversation ids must be unique, and one ending in "
                    "'#<n>' must not name turn n of another conversation"
                )
            seen[record.id] = conversation.id
        yield from batch


def levels_of(evaluation: Evaluation) -> dict[str, Level]:
    """The level of each metric of a run of `evaluate_conversations` (empty for another run)."""
    table = evaluation.metadata.get(LEVELS_KEY)
    if not isinstance(table, dict):
        return {}
    return {
        str(name): "conversation" if level == "conversation" else "turn"
        for name, level in table.items()
    }
