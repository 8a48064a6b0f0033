"""RAGAS's ``MultiTurnSample`` and ragbridge's `Conversation`, both ways.

Why: teams keep chat and agent evaluation sets as RAGAS multi-turn samples (RAGAS's
``ToolCallAccuracy``, ``AgentGoalAccuracy`` and ``TopicAdherence`` read them), while ragbridge
scores each assistant turn of a conversation as a sample (`Conversation.turn_sample`). A
conversation must go out to RAGAS and come back *equal*, and a sample written by RAGAS users,
who know nothing of ragbridge, must read too.

What RAGAS holds, and where the rest goes:

* **Messages.** A user turn is a ``HumanMessage``, an assistant turn an ``AIMessage`` (its tool
  calls as RAGAS's ``ToolCall(name, args)``; no content is RAGAS's ``""``), a tool turn a
  ``ToolMessage``. A turn's ``metadata`` is its message's ``metadata`` (a turn key named
  ``ragbridge``, which the record below takes, is kept inside the record instead).
* **System turns.** RAGAS has no system message (its metrics read human, AI and tool messages
  only). A system turn rides in the ``ragbridge`` record of the message after it
  (``system_before``; system turns at the end in the last message's ``system_after``), out of
  sight of RAGAS's metrics and back in place on the way in. A conversation of system turns only
  has no message to ride on and is refused.
* **Per turn.** What a message has no field for — the turn id, its contexts (with their ids,
  scores and metadata), reference, reference contexts, relevance, its tool calls' ids, the id
  of the call a tool turn answers — goes into ``message.metadata["ragbridge"]["turn"]``, in the
  form the turn has in a conversations file. RAGAS's metrics ignore message metadata, and the
  record survives ``EvaluationDataset.to_jsonl``/``from_jsonl``.
* **Reference tool calls.** RAGAS's ``reference_tool_calls`` are the calls expected on the way
  to the answer, which is the answering turn's ``reference_tool_calls``: the last assistant
  turn's (`Conversation.turn_sample` gives them to the tool-call measures with its trajectory).
  RAGAS's ``ToolCall`` has no id, so the calls' ids ride in that turn's record. A sample with no
  AI message keeps them in ``Conversation.metadata["ragas"]["reference_tool_calls"]``
  (``{"name", "args"}`` objects), where conversations written before turns had the field hold
  them too: such a conversation writes them from there when its last assistant turn has none,
  and reads them back there.
* **Per conversation.** ``expected_outcome`` is RAGAS's ``reference``. RAGAS's
  ``reference_topics`` and ``rubrics`` have no ragbridge field: they live in
  ``Conversation.metadata["ragas"]``, as the single-turn fields ragbridge lacks do
  (`ragbridge.adapters.ragas.rows`), and are written back from there. The conversation's id and
  the rest of its metadata ride in the first message's record (``conversation``).

Reading a sample that has no ``ragbridge`` records makes up only what a `Conversation` needs and
RAGAS does not record, and lists each made-up field in ``metadata["ragas"]["generated"]`` (paths
such as ``"turns[2].tool_call_id"``):

* the conversation id: the ``id`` given, else the row index in a dataset (``"0"``, ``"1"``, as
  `from_ragas_dataset` does), else ``"ragas-"`` and a hash of the sample;
* tool call ids: a RAGAS ``ToolMessage`` does not name the call it answers. The tool messages
  after an AI message answer its calls in order (how RAGAS's docs build them); an answered call
  with no id gets ``"call-<turn>-<k>"`` and the tool turn that id. A tool message left with no
  call to answer is refused.

An ``AIMessage`` with content ``""`` (how RAGAS writes one that only calls tools) becomes an
assistant turn with no content (None), as ragbridge records such a turn; an assistant turn
whose content really is ``""`` is marked in its record and comes back as ``""``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import Any

from . import _framework  # noqa: F401  (first: RAGAS through the one guard)

# isort: split
from pydantic import ValidationError
from ragas.dataset_schema import EvaluationDataset, MultiTurnSample
from ragas.messages import AIMessage, HumanMessage, ToolMessage
from ragas.messages import ToolCall as RagasToolCall

from ragbridge.core.conversation import Conversation, Turn
from ragbridge.core.sample import Sample, validation_problems

from .rows import EXTRAS_KEY

__all__ = [
    "RAGAS_CONVERSATION_FIELDS",
    "conversation_from_multi_turn",
    "from_multi_turn_dataset",
    "to_multi_turn_dataset",
    "to_multi_turn_sample",
]

Message = HumanMessage | AIMessage | ToolMessage

RAGAS_CONVERSATION_FIELDS = ("reference_topics", "rubrics")
"""``MultiTurnSample`` fields with no ragbridge slot: kept in ``Conversation.metadata["ragas"]``."""

_CALLS = "reference_tool_calls"
_CALL_IDS = "reference_tool_call_ids"
_FROM_METADATA = "reference_tool_calls_in_metadata"

_RAGAS_META = "ragas"
_GENERATED = "generated"
_ROLES = {"human": "user", "ai": "assistant", "tool": "tool"}
# Turn fields a message itself holds; the rest of the turn goes into the message's record.
_ON_MESSAGE = {"role", "content", "tool_calls", "metadata"}

# --------------------------------------------------------------------------- out to RAGAS


def to_multi_turn_sample(conversation: Conversation) -> MultiTurnSample:
    """``conversation`` as a RAGAS ``MultiTurnSample`` that `conversation_from_multi_turn` reads
    back to an equal conversation (see the module docstring for where each field goes).

    Raises ValueError for what RAGAS cannot hold: a tool turn that does not follow the assistant
    turn calling tools (or another tool turn), a conversation of system turns only, RAGAS fields
    in ``metadata["ragas"]`` that RAGAS refuses or would not give back equal.
    """
    if not isinstance(conversation, Conversation):
        hint = " (Conversation.from_sample makes one)" if isinstance(conversation, Sample) else ""
        raise TypeError(f"expected a Conversation, got {type(conversation).__name__}{hint}")
    where = f"conversation {conversation.id!r}"
    answering = _answering(conversation.turns)
    on_turn = answering is not None and answering.reference_tool_calls is not None
    fields, metadata = _split_ragas_fields(conversation.metadata, take_calls=not on_turn)
    in_metadata = _CALLS in fields
    if on_turn:
        assert answering is not None
        assert answering.reference_tool_calls is not None
        fields[_CALLS] = [
            {"name": c.name, "args": dict(c.args)} for c in answering.reference_tool_calls
        ]
    turns: list[Turn] = []
    records: list[dict[str, Any]] = []
    systems: list[dict[str, Any]] = []
    for position, turn in enumerate(conversation.turns):
        if turn.role == "system":
            systems.append(turn.model_dump(exclude_defaults=True))
            continue
        if turn.role == "tool":
            _check_tool_follows_call(turns, position, where)
        record: dict[str, Any] = {}
        if systems:
            record["system_before"], systems = systems, []
        extras = _turn_extras(turn, answering=on_turn and turn is answering)
        if extras:
            record["turn"] = extras
        turns.append(turn)
        records.append(record)
    if not turns:
        raise ValueError(
            f"{where}: has only system turns, and RAGAS has no system message: a multi-turn "
            "sample needs a human, AI or tool message to carry them"
        )
    if systems:
        records[-1]["system_after"] = systems
    records[0]["conversation"] = {
        "id": conversation.id,
        **({"metadata": metadata} if metadata else {}),
        **({_FROM_METADATA: True} if in_metadata and answering is not None else {}),
    }
    messages = [_message(t, r) for t, r in zip(turns, records, strict=True)]
    try:
        sample = MultiTurnSample(
            user_input=messages, reference=conversation.expected_outcome, **fields
        )
    except ValidationError as exc:
        raise ValueError(f"{where}: RAGAS refuses it: {validation_problems(exc)[0]}") from None
    for name, value in fields.items():
        back = _plain(name, getattr(sample, name))
        if back != value:
            raise ValueError(
                f"{where}: metadata.ragas.{name}: RAGAS would give it back as {back!r}, "
                "not as it is"
            )
    return sample


def to_multi_turn_dataset(conversations: Iterable[Conversation]) -> EvaluationDataset:
    """An ``EvaluationDataset`` of ``MultiTurnSample``s, one per conversation, in order.

    Everything rides inside the samples, so ``dataset.to_jsonl(path)`` and
    ``EvaluationDataset.from_jsonl(path)`` keep it; `from_multi_turn_dataset` reads it back.
    """
    samples = []
    for index, conversation in enumerate(conversations):
        try:
            samples.append(to_multi_turn_sample(conversation))
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"conversations[{index}]: {exc}") from None
    return EvaluationDataset(samples=list(samples))


def _answering(turns: Sequence[Turn]) -> Turn | None:
    """The turn that answers: the last assistant turn (None when there is none)."""
    return next((t for t in reversed(turns) if t.role == "assistant"), None)


def _split_ragas_fields(
    metadata: Mapping[str, Any], *, take_calls: bool
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The RAGAS fields kept in ``metadata["ragas"]`` (the reference tool calls only when
    ``take_calls``: the answering turn has none), and the metadata without them."""
    ragas = metadata.get(_RAGAS_META)
    if not isinstance(ragas, Mapping):
        return {}, dict(metadata)
    names = (*RAGAS_CONVERSATION_FIELDS, _CALLS) if take_calls else RAGAS_CONVERSATION_FIELDS
    fields = {k: ragas[k] for k in names if ragas.get(k) is not None}
    if not fields:
        return {}, dict(metadata)
    rest = {k: v for k, v in ragas.items() if k not in fields}
    kept = {k: v for k, v in metadata.items() if k != _RAGAS_META}
    if rest:
        kept[_RAGAS_META] = rest
    return fields, kept


def _check_tool_follows_call(before: Sequence[Turn], position: int, where: str) -> None:
    """RAGAS's rule: a tool message follows the AI message that called tools, or another tool
    message (system turns in between do not count: they are no messages there)."""
    last = before[-1] if before else None
    if last is not None and (last.role == "tool" or last.tool_calls):
        return
    after = "with no message before it"
    if last is not None:
        after = f"after a{'n' * (last.role == 'assistant')} {last.role} turn"
    raise ValueError(
        f"{where}: turns[{position}] is a tool turn {after}; RAGAS needs each tool "
        "message right after the AI message that called tools, or after another tool message"
    )


def _turn_extras(turn: Turn, *, answering: bool = False) -> dict[str, Any]:
    """What ``turn``'s message has no field for, in the turn's own (conversations-file) form;
    the answering turn's reference tool calls are the sample's, all but their ids."""
    extras = turn.model_dump(exclude_defaults=True, exclude=_ON_MESSAGE)
    ids = [call.id for call in turn.tool_calls]
    if any(i is not None for i in ids):
        extras["tool_call_ids"] = ids
    if answering:
        del extras[_CALLS]
        expected_ids = [call.id for call in turn.reference_tool_calls or []]
        if any(i is not None for i in expected_ids):
            extras[_CALL_IDS] = expected_ids
    if turn.role == "assistant" and turn.content == "":
        extras["empty_content"] = True
    if EXTRAS_KEY in turn.metadata:  # the message's own key is taken: keep the turn's apart
        extras["metadata"] = dict(turn.metadata)
    return extras


def _message(turn: Turn, record: dict[str, Any]) -> Message:
    own = {k: v for k, v in turn.metadata.items() if k != EXTRAS_KEY}
    metadata = {**own, EXTRAS_KEY: record} if record else own
    if turn.role == "user":
        assert turn.content is not None  # a user turn always has content
        return HumanMessage(content=turn.content, metadata=metadata or None)
    if turn.role == "tool":
        assert turn.content is not None  # a tool turn always has content
        return ToolMessage(content=turn.content, metadata=metadata or None)
    calls = [RagasToolCall(name=call.name, args=call.args) for call in turn.tool_calls]
    return AIMessage(
        content=turn.content or "", tool_calls=calls or None, metadata=metadata or None
    )


def _plain(name: str, value: Any) -> Any:
    """A RAGAS field's value as plain data, as ``metadata["ragas"]`` holds it."""
    if name == _CALLS and value is not None:
        return [call.model_dump() for call in value]
    return value


# --------------------------------------------------------------------------- in from RAGAS


def conversation_from_multi_turn(sample: MultiTurnSample, *, id: str | None = None) -> Conversation:
    """The `Conversation` a RAGAS ``MultiTurnSample`` holds.

    A sample `to_multi_turn_sample` wrote comes back equal. One written by RAGAS users reads
    too; its id is ``id`` (else ``"ragas-"`` and a hash of the sample), and the ids made up for
    it are listed in ``metadata["ragas"]["generated"]`` (see the module docstring). The id of a
    sample ragbridge wrote wins over ``id``, as in `from_ragas_dataset`.
    """
    return _conversation(sample, "MultiTurnSample", id, lambda: _hashed_id(sample))


def from_multi_turn_dataset(
    dataset: EvaluationDataset | Iterable[MultiTurnSample],
    *,
    ids: Sequence[str] | None = None,
) -> list[Conversation]:
    """`Conversation`s from a RAGAS ``EvaluationDataset`` of multi-turn samples (also one read
    by ``EvaluationDataset.from_jsonl``).

    Conversation ids come from the samples' ``ragbridge`` records, else ``ids``, else the row
    index (``"0"``, ``"1"``, ...); they must be unique. Single-turn samples are refused with a
    pointer to `from_ragas_dataset`.
    """
    items = list(dataset)
    if ids is not None and len(ids) != len(items):
        raise ValueError(f"ids has {len(ids)} entries for {len(items)} rows")
    conversations: list[Conversation] = []
    seen: dict[str, int] = {}
    for index, item in enumerate(items):
        where = f"row {index}"
        if not isinstance(item, MultiTurnSample):
            raise ValueError(
                f"{where}: expected a MultiTurnSample, got {type(item).__name__} (read "
                "single-turn samples with ragbridge.adapters.ragas.from_ragas_dataset)"
            )
        given = ids[index] if ids is not None else None
        conversation = _conversation(item, where, given, partial(str, index))
        if conversation.id in seen:
            raise ValueError(
                f"{where}: id: duplicate conversation id {conversation.id!r} "
                f"(first in row {seen[conversation.id]})"
            )
        seen[conversation.id] = index
        conversations.append(conversation)
    return conversations


def _conversation(
    sample: Any, where: str, given_id: str | None, default_id: Callable[[], str]
) -> Conversation:
    if not isinstance(sample, MultiTurnSample):
        raise TypeError(f"expected a RAGAS MultiTurnSample, got {type(sample).__name__}")
    turns: list[dict[str, Any]] = []
    origin: list[int] = []  # the message each turn came from
    head: Mapping[str, Any] = {}
    for index, message in enumerate(sample.user_input):
        at = f"{where}: user_input[{index}]"
        own, record = _split_message_metadata(message, at)
        if index == 0:
            head = _mapping(record.get("conversation"), at, "conversation")
        before = _systems(record.get("system_before"), at, "system_before")
        after = _systems(record.get("system_after"), at, "system_after")
        for turn in (*before, _turn_of(message, own, record.get("turn"), at), *after):
            turns.append(turn)
            origin.append(index)
    generated: list[str] = []
    _pair_tool_turns(turns, origin, where, generated)
    calls_in_metadata = _place_reference_calls(sample, turns, head, where)
    conversation_id = head.get("id")
    if conversation_id is None:
        conversation_id = given_id
    if conversation_id is None:
        conversation_id = default_id()
        generated.insert(0, "id")
    metadata = _metadata(head, sample, where, generated, calls_in_metadata)
    checked = [
        _checked_turn(t, f"{where}: user_input[{i}]") for t, i in zip(turns, origin, strict=True)
    ]
    try:
        return Conversation(
            id=conversation_id,
            turns=checked,
            expected_outcome=sample.reference,
            metadata=metadata,
        )
    except ValidationError as exc:
        raise ValueError(f"{where}: {validation_problems(exc)[0]}") from None


def _split_message_metadata(message: Message, at: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A message's own metadata, and its ``ragbridge`` record ({} when it has none)."""
    metadata = dict(message.metadata or {})
    record = _mapping(metadata.pop(EXTRAS_KEY, None), at, None)
    return metadata, dict(record)


def _mapping(value: Any, at: str, key: str | None) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        name = f"metadata.{EXTRAS_KEY}" + (f".{key}" if key else "")
        raise ValueError(f"{at}: {name}: expected an object, got {type(value).__name__}")
    return value


def _systems(value: Any, at: str, key: str) -> list[dict[str, Any]]:
    if value is None:
        return []
    name = f"metadata.{EXTRAS_KEY}.{key}"
    if not isinstance(value, list) or not all(isinstance(v, Mapping) for v in value):
        raise ValueError(f"{at}: {name}: expected a list of turns (objects)")
    return [dict(v) for v in value]


def _turn_of(message: Message, own: dict[str, Any], record: Any, at: str) -> dict[str, Any]:
    """One message as a turn's fields (checked later, with the conversation's pairing done)."""
    extras = dict(_mapping(record, at, "turn"))
    clash = sorted(set(extras) & (_ON_MESSAGE - {"metadata"}))
    if clash:
        raise ValueError(
            f"{at}: metadata.{EXTRAS_KEY}.turn.{clash[0]}: the message itself holds it"
        )
    role = _ROLES[message.type]
    turn: dict[str, Any] = {"role": role, "content": message.content, "metadata": own}
    empty = extras.pop("empty_content", False)
    call_ids = extras.pop("tool_call_ids", None)
    expected_ids = extras.pop(_CALL_IDS, None)
    if expected_ids is not None:
        turn[_CALL_IDS] = expected_ids  # for _place_reference_calls
    if isinstance(message, AIMessage):
        if message.content == "" and not empty:
            turn["content"] = None
        calls = message.tool_calls or []
        if call_ids is not None and (not isinstance(call_ids, list) or len(call_ids) != len(calls)):
            raise ValueError(
                f"{at}: metadata.{EXTRAS_KEY}.turn.tool_call_ids: expected one id per tool call "
                f"({len(calls)}); were the tool calls edited after conversion?"
            )
        ids = call_ids or [None] * len(calls)
        turn["tool_calls"] = [
            {"name": call.name, "args": call.args, "id": call_id}
            for call, call_id in zip(calls, ids, strict=True)
        ]
    turn.update(extras)  # a kept "metadata" (the turn's own held a "ragbridge" key) wins
    return turn


def _pair_tool_turns(
    turns: list[dict[str, Any]], origin: list[int], where: str, generated: list[str]
) -> None:
    """Give each tool turn without a call id the next unanswered call of the AI message before
    it, making up the call's id when it has none (RAGAS's messages name no call)."""
    taken = {c["id"] for t in turns for c in t.get("tool_calls", ()) if c.get("id") is not None}
    named = {t["tool_call_id"] for t in turns if t.get("tool_call_id") is not None}
    open_calls: list[tuple[int, int, dict[str, Any]]] = []
    for position, turn in enumerate(turns):
        role = turn.get("role")
        if role == "assistant":
            calls = turn.get("tool_calls") or []
            open_calls = [(position, k, c) for k, c in enumerate(calls) if c.get("id") not in named]
        elif role == "user":
            open_calls = []
        elif role == "tool" and turn.get("tool_call_id") is not None:
            continue
        elif role == "tool":
            if not open_calls:
                raise ValueError(
                    f"{where}: user_input[{origin[position]}]: a tool message with no tool call "
                    "left to answer (the tool messages after an AI message answer its tool "
                    "calls, one each, in order)"
                )
            at, k, call = open_calls.pop(0)
            if call.get("id") is None:
                call["id"] = _fresh(f"call-{at}-{k}", taken)
                generated.append(f"turns[{at}].tool_calls[{k}].id")
            turn["tool_call_id"] = call["id"]
            generated.append(f"turns[{position}].tool_call_id")


def _fresh(name: str, taken: set[str]) -> str:
    candidate, n = name, 1
    while candidate in taken:
        n += 1
        candidate = f"{name}-{n}"
    taken.add(candidate)
    return candidate


def _place_reference_calls(
    sample: MultiTurnSample, turns: list[dict[str, Any]], head: Mapping[str, Any], where: str
) -> bool:
    """Put the sample's reference tool calls on the answering (last assistant) turn, with the
    ids its record kept; True when they belong in the conversation's metadata instead (no
    assistant turn, or written from there: see the module)."""
    answering = next((t for t in reversed(turns) if t.get("role") == "assistant"), None)
    ids = answering.pop(_CALL_IDS, None) if answering is not None else None
    calls = sample.reference_tool_calls
    if calls is None:
        return False
    if answering is None or head.get(_FROM_METADATA):
        return True
    if ids is not None and (not isinstance(ids, list) or len(ids) != len(calls)):
        raise ValueError(
            f"{where}: metadata.{EXTRAS_KEY}.turn.{_CALL_IDS}: expected one id per reference "
            f"tool call ({len(calls)}); were the reference tool calls edited after conversion?"
        )
    if answering.get(_CALLS) is not None:
        raise ValueError(
            f"{where}: the answering turn's record holds reference tool calls, and the sample "
            "has its own: RAGAS's reference_tool_calls are that turn's"
        )
    answering[_CALLS] = [
        {"name": call.name, "args": call.args, "id": call_id}
        for call, call_id in zip(calls, ids or [None] * len(calls), strict=True)
    ]
    return False


def _metadata(
    head: Mapping[str, Any],
    sample: MultiTurnSample,
    where: str,
    generated: list[str],
    calls_in_metadata: bool,
) -> dict[str, Any]:
    """The conversation's metadata: its kept metadata, RAGAS's fields that ragbridge has no
    slot for (under ``"ragas"``, the sample's values winning), and what was made up."""
    kept = head.get("metadata")
    if kept is not None and not isinstance(kept, Mapping):
        raise ValueError(
            f"{where}: metadata.{EXTRAS_KEY}.conversation.metadata: expected an object"
        )
    metadata = dict(kept or {})
    names = (*RAGAS_CONVERSATION_FIELDS, _CALLS) if calls_in_metadata else RAGAS_CONVERSATION_FIELDS
    fields = {
        name: _plain(name, getattr(sample, name))
        for name in names
        if getattr(sample, name) is not None
    }
    if generated:
        fields[_GENERATED] = generated
    if fields:
        ragas = metadata.get(_RAGAS_META)
        ragas = dict(ragas) if isinstance(ragas, Mapping) else {}
        if _GENERATED in fields and isinstance(ragas.get(_GENERATED), list):
            fields[_GENERATED] = [*ragas[_GENERATED], *generated]
        metadata[_RAGAS_META] = {**ragas, **fields}
    return metadata


def _checked_turn(fields: dict[str, Any], at: str) -> Turn:
    try:
        return Turn.model_validate(fields)
    except ValidationError as exc:
        raise ValueError(f"{at}: {validation_problems(exc)[0]}") from None


def _hashed_id(sample: MultiTurnSample) -> str:
    """A stable id for a sample that names none: two reads of one sample agree."""
    try:
        text = json.dumps(sample.model_dump(), default=repr, ensure_ascii=False)
    except (TypeError, ValueError):  # keys JSON cannot hold
        text = repr(sample)
    return "ragas-" + hashlib.sha256(text.encode()).hexdigest()[:12]
