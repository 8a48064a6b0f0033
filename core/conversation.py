"""A conversation: the multi-turn record, for RAG chat assistants and agents that call tools.

Most RAG systems in production answer a follow-up ("and for part-timers?") in the light of the
turns before it. A `Conversation` keeps those turns in the message shape every framework maps to
(OpenAI's: LangChain/LangGraph messages, RAGAS's ``ragas.messages``, agentevals' trajectories):
a ``role``, its ``content``, an assistant turn's ``tool_calls`` and a tool turn's
``tool_call_id``. What RAG evaluation adds sits on the assistant turn that used it: the
``contexts`` retrieved for that turn, its expected answer (``reference``) and, for retrieval
measures, ``reference_contexts`` and graded ``relevance`` — the fields of a `Sample`, so one
assistant turn *is* a sample (`Conversation.turn_sample`) and a sample is a one-exchange
conversation (`Conversation.from_sample`, `Conversation.to_sample`), not a second code path.

The checks say what is wrong and where, as `load_samples` does (``convs.jsonl:3:
turns[2].reference: a reference belongs to an assistant turn``): records put retrievals and
expected answers on the turn that answers, so a reference on a user turn is a misplaced column,
not something to guess about.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .files import atomic_write
from .record_fields import _id_to_str
from .sample import RecordReader, Sample
from .trajectory import steps_of, turns_of
from .turn import FieldProblem, Role, ToolCall, Turn

__all__ = [
    "Conversation",
    "ConversationReader",
    "FieldProblem",
    "IndexedTurn",
    "Role",
    "ToolCall",
    "Turn",
    "conversation_json_schema",
    "load_conversations",
    "save_conversations",
]

SCHEMA_ID = "https://ragbridge.dev/schema/conversation-1.json"


class IndexedTurn(NamedTuple):
    """A turn with its ``position`` in the conversation (counted from 0; ``turns[position]``)."""

    position: int
    turn: Turn


class Conversation(BaseModel):
    """A conversation: its ``turns`` in order, an ``id``, what it should achieve
    (``expected_outcome``, for conversation-level measures), and ``metadata``.

    Turn ids are optional and unique within the conversation; tool turns answer the id of a
    tool call made by an earlier assistant turn, once.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    id: str = Field(min_length=1)
    turns: list[Turn]
    expected_outcome: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _a_sample_is_named(cls, data: Any) -> Any:
        # The likeliest wrong line in a conversations file is a sample; say so instead of
        # listing "question: unknown field" under a missing "turns".
        if isinstance(data, dict) and "turns" not in data and "question" in data:
            raise FieldProblem(
                ("turns",),
                "required field is missing; this is a sample (it has 'question'): read it with "
                "load_samples or load_records, or make it a conversation with "
                "Conversation.from_sample",
            )
        return data

    @field_validator("id", mode="before")
    @classmethod
    def _coerce_id(cls, value: Any) -> Any:
        return _id_to_str(value)

    @field_validator("turns")
    @classmethod
    def _some_turns(cls, value: list[Turn]) -> list[Turn]:
        if not value:
            raise ValueError("a conversation needs at least one turn")
        return value

    @model_validator(mode="after")
    def _ids_and_calls_line_up(self) -> Conversation:
        turn_ids: dict[str, int] = {}
        calls: dict[str, tuple[int, int]] = {}  # call id -> (turn, position in its tool_calls)
        answered: dict[str, int] = {}
        for index, turn in enumerate(self.turns):
            if turn.id is not None:
                if turn.id in turn_ids:
                    raise FieldProblem(
                        ("turns", index, "id"),
                        f"duplicate turn id {turn.id!r} (first at turns[{turn_ids[turn.id]}])",
                    )
                turn_ids[turn.id] = index
            for position, call in enumerate(turn.tool_calls):
                if call.id is None:
                    continue
                if call.id in calls:
                    first, at = calls[call.id]
                    raise FieldProblem(
                        ("turns", index, "tool_calls", position, "id"),
                        f"duplicate tool call id {call.id!r} "
                        f"(first at turns[{first}].tool_calls[{at}])",
                    )
                calls[call.id] = (index, position)
            if turn.role == "tool" and turn.tool_call_id is not None:
                _check_answer(turn.tool_call_id, index, calls, answered)
                answered[turn.tool_call_id] = index
        return self

    # ------------------------------------------------------------------ views

    def assistant_turns(self) -> list[IndexedTurn]:
        """The assistant turns with their positions: what per-turn measures score."""
        return [IndexedTurn(i, t) for i, t in enumerate(self.turns) if t.role == "assistant"]

    def history(self, index: int) -> list[Turn]:
        """The turns before turn ``index`` (all of them for ``index == len(turns)``): what a
        judge reads to resolve a follow-up's "it"."""
        if not 0 <= index <= len(self.turns):
            raise IndexError(
                f"conversation {self.id!r} has {len(self.turns)} turns; no turn {index}"
            )
        return self.turns[:index]

    def question_for(self, index: int) -> IndexedTurn | None:
        """The user turn that turn ``index`` answers: the last user turn before it, or None."""
        self._turn(index)
        for i in range(index - 1, -1, -1):
            if self.turns[i].role == "user":
                return IndexedTurn(i, self.turns[i])
        return None

    def turn_sample(self, index: int) -> Sample:
        """Assistant turn ``index`` as a `Sample`, so a single-turn measure can score it.

        The question is the last user turn before it, the answer its content; its contexts,
        reference, reference contexts and relevance come along, and ``history`` holds the turns
        before that question (``[]`` for the first), so a judge reads the conversation so far
        and the turn's scores are cached per conversation prefix. The tool calls made between
        the question and the answer (and the tool turns answering them) are its ``trajectory``
        (`ragbridge.core.trajectory.steps_of`), with the turn's ``reference_tool_calls``. The
        sample's id is
        ``"<conversation id>#<index>"`` (unique in a file of conversations, and unchanged when
        the conversation grows); its metadata is the conversation's, then the turn's, and under
        ``"conversation"`` the conversation id, the turn index and the turn id.
        """
        turn = self._turn(index)
        if turn.role != "assistant":
            raise ValueError(
                f"conversation {self.id!r}: turns[{index}] is a {turn.role} turn; only an "
                "assistant turn is scored as a sample"
            )
        asked = self.question_for(index)
        if asked is None:
            raise ValueError(
                f"conversation {self.id!r}: turns[{index}] answers no question (there is no "
                "user turn before it)"
            )
        assert asked.turn.content is not None  # a user turn always has content
        where = {"id": self.id, "turn": index, "turn_id": turn.id}
        return Sample(
            id=f"{self.id}#{index}",
            question=asked.turn.content,
            answer=turn.content,
            contexts=list(turn.contexts),
            reference=turn.reference,
            reference_contexts=turn.reference_contexts,
            relevance=turn.relevance,
            metadata={**self.metadata, **turn.metadata, "conversation": where},
            history=list(self.turns[: asked.position]),
            trajectory=steps_of(self.turns[asked.position + 1 : index + 1]) or None,
            reference_tool_calls=turn.reference_tool_calls,
        )

    @classmethod
    def from_sample(cls, sample: Sample) -> Conversation:
        """A sample as a conversation: a user turn asking ``question`` and an assistant turn
        holding the answer, contexts and labels, after the sample's ``history`` if it has one and
        with an agent's ``trajectory`` as the tool calls and tool turns before the answer
        (`ragbridge.core.trajectory.turns_of`).
        `to_sample` gives a sample without history back exactly."""
        answer = Turn(
            role="assistant",
            content=sample.answer,
            contexts=list(sample.contexts),
            reference=sample.reference,
            reference_contexts=sample.reference_contexts,
            relevance=sample.relevance,
            reference_tool_calls=sample.reference_tool_calls,
        )
        return cls(
            id=sample.id,
            turns=[
                *(sample.history or []),
                Turn(role="user", content=sample.question),
                *turns_of(sample.trajectory or []),
                answer,
            ],
            metadata=dict(sample.metadata),
        )

    def to_sample(self) -> Sample:
        """The `Sample` of a one-exchange conversation, exactly (``from_sample``'s inverse).

        Raises ValueError naming what a sample cannot hold (more turns, turn ids or metadata,
        tool calls, an expected outcome) rather than dropping it; `turn_sample` is the view of
        one turn of any conversation.
        """
        roles = [t.role for t in self.turns]
        if roles != ["user", "assistant"]:
            raise ValueError(
                f"conversation {self.id!r} is not one exchange (a user turn, then an assistant "
                f"turn) but {roles}; use turn_sample(i) to score one of its turns as a sample"
            )
        question, answer = self.turns
        lost = [
            *(f"turns[{i}].id" for i, t in enumerate(self.turns) if t.id is not None),
            *(f"turns[{i}].metadata" for i, t in enumerate(self.turns) if t.metadata),
            *(["turns[1].tool_calls"] if answer.tool_calls else []),
            *(["expected_outcome"] if self.expected_outcome is not None else []),
        ]
        if lost:
            raise ValueError(
                f"conversation {self.id!r}: a sample has no place for {', '.join(lost)}; use "
                "turn_sample(1) for a view of its answer that leaves them out"
            )
        assert question.content is not None  # a user turn always has content
        return Sample(
            id=self.id,
            question=question.content,
            answer=answer.content,
            contexts=list(answer.contexts),
            reference=answer.reference,
            reference_contexts=answer.reference_contexts,
            relevance=answer.relevance,
            metadata=dict(self.metadata),
        )

    def _turn(self, index: int) -> Turn:
        if not 0 <= index < len(self.turns):
            raise IndexError(
                f"conversation {self.id!r} has {len(self.turns)} turns; no turn {index}"
            )
        return self.turns[index]


def _check_answer(
    call_id: str, index: int, calls: dict[str, tuple[int, int]], answered: dict[str, int]
) -> None:
    """A tool turn answers a call an earlier assistant turn made, and no call twice."""
    where = ("turns", index, "tool_call_id")
    if call_id in answered:
        raise FieldProblem(
            where, f"tool call {call_id!r} was already answered at turns[{answered[call_id]}]"
        )
    if call_id not in calls:
        known = ", ".join(repr(c) for c in list(calls)[:5]) or "none"
        raise FieldProblem(
            where,
            f"{call_id!r} answers no tool call of an earlier assistant turn (calls so far: "
            f"{known})",
        )


def conversation_json_schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of one line of a ragbridge conversations file."""
    schema = Conversation.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = SCHEMA_ID
    any_id = {"anyOf": [{"type": "string", "minLength": 1}, {"type": "integer"}]}
    schema["properties"]["id"] = any_id
    schema["properties"]["turns"]["minItems"] = 1
    defs = schema["$defs"]
    turn = defs["Turn"]["properties"]
    # The validator also accepts bare strings as contexts and integers as ids; say so.
    turn["contexts"]["items"] = {"anyOf": [turn["contexts"]["items"], {"type": "string"}]}
    for props, key in (
        (turn, "id"),
        (turn, "tool_call_id"),
        (defs["ToolCall"]["properties"], "id"),
    ):
        props[key] = {"anyOf": [*any_id["anyOf"], {"type": "null"}], "default": None}
    return schema


# --------------------------------------------------------------------------- files


class ConversationReader(RecordReader[Conversation]):
    """Streams conversations from a JSONL file, one per line, with `SampleReader`'s checks and
    ``file:line: field: problem`` errors (`SampleValidationError`): UTF-8, blank lines ignored,
    conversation ids unique within the file."""

    noun = "conversation"

    def _validate(self, raw: str, number: int) -> Conversation:
        return Conversation.model_validate_json(raw)


def load_conversations(
    path: str | os.PathLike[str], *, skip_invalid: bool = False
) -> ConversationReader:
    """Stream `Conversation`s from a JSONL file.

    With ``skip_invalid=True`` bad lines are collected in ``reader.report`` instead of raising;
    otherwise the first bad line raises `SampleValidationError`
    (``convs.jsonl:3: turns[2].reference: a reference belongs to an assistant turn ...``).
    """
    return ConversationReader(path, skip_invalid=skip_invalid)


def save_conversations(conversations: Iterable[Conversation], path: str | os.PathLike[str]) -> int:
    """Write conversations as JSONL atomically, one per line; returns the count.

    Fields at their defaults are left out, as `save_samples` does; `load_conversations` reads the
    file back to equal conversations.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with atomic_write(target) as handle:
        for conversation in _checked(conversations):
            handle.write(conversation.model_dump_json(exclude_defaults=True))
            handle.write("\n")
            count += 1
    return count


def _checked(conversations: Iterable[Conversation]) -> Iterator[Conversation]:
    for conversation in conversations:
        if not isinstance(conversation, Conversation):
            hint = (
                " (Conversation.from_sample makes one)" if isinstance(conversation, Sample) else ""
            )
            raise TypeError(f"expected a Conversation, got {type(conversation).__name__}{hint}")
        yield conversation
