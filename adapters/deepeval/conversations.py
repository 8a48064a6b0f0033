"""DeepEval's ``ConversationalTestCase`` and ragbridge's `Conversation`, both ways.

Why: teams keep chat evaluation sets as DeepEval conversational test cases (its Turn* RAG
metrics, ``KnowledgeRetentionMetric`` and ``ConversationCompletenessMetric`` read them), while
ragbridge scores each assistant turn of a conversation as a sample
(`Conversation.turn_sample`). A conversation must go out to DeepEval and come back *equal*,
and a test case written by DeepEval users, who know nothing of ragbridge, must read too.

What DeepEval holds, and where the rest goes:

* **Turns.** DeepEval's ``Turn`` has two roles, ``"user"`` and ``"assistant"``; a ragbridge
  user or assistant turn is one, with its ``content`` (an assistant turn with none, one that
  only calls tools, is DeepEval's ``""``), its contexts' texts as ``retrieval_context`` and its
  tool calls as ``tools_called`` (``ToolCall(name, input_parameters=args)``).
* **System and tool turns** have no DeepEval role, so they are not DeepEval turns: DeepEval's
  metrics never see them. Each rides, whole, in the ragbridge record of the DeepEval turn after
  it (``before``; those at the end in the last turn's ``after``) and is put back in place on the
  way in. What a tool turn returned also becomes the ``output`` of the DeepEval ``ToolCall`` it
  answers, where DeepEval's tool metrics look for it. A conversation of system and tool turns
  only has no DeepEval turn and is refused.
* **Per turn.** What a DeepEval turn has no field for — the turn id, each context's id, score
  and metadata, the turn's reference, reference contexts and relevance labels, its tool calls'
  ids — goes into ``turn.metadata["ragbridge"]["turn"]`` (`META_KEY`). The rest of a turn's
  metadata is its DeepEval metadata, and DeepEval's turn fields ragbridge has no slot for
  (``user_id``, ``latency_ms``, ``interrupted``, ``provider_transcript``, and a tool call's
  ``description``, ``reasoning``, ``output`` and non-function ``type``) live in
  ``Turn.metadata["deepeval"]`` (`DEEPEVAL_KEY`) and are written back from there.
* **Per conversation.** ``expected_outcome`` is ``Conversation.expected_outcome``. DeepEval's
  ``scenario``, ``context``, ``user_description``, ``chatbot_role``, ``comments`` and ``tags``
  (`CONVERSATION_FIELDS`) have no ragbridge field: they live in
  ``Conversation.metadata["deepeval"]`` and are written back from there (``chatbot_role`` is
  not a system turn: DeepEval's RoleAdherence reads it as a description of the assistant, and a
  system turn stays a turn). The conversation's id is the test case's ``name`` (and rides in
  ``metadata["ragbridge"]``); the rest of its metadata is the test case's metadata.

Not carried: voice and MCP turns (``audio``, ``mcp_*_called``) are refused, since ragbridge
judges text; DeepEval's run settings on a test case (``flaky``, ``expectations``,
``expected_labels``, ``mcp_servers``) are left out.

Reading a test case without ragbridge records: the id is the ``id`` given, else the test
case's ``name``, else ``"deepeval-"`` and a hash of its turns; a ``RetrievedContextData``
passage becomes a context whose metadata holds its ``source``; an assistant turn whose
content is ``""`` (how DeepEval writes a turn that only calls tools) is a turn without content
(None), which turn measures leave alone — an assistant turn whose content really is ``""`` is
marked in its record and comes back as ``""``. A malformed test case raises ValueError naming
the test case and the turn.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from . import _framework  # noqa: F401  (first: DeepEval through the one guard)

# isort: split
from deepeval.test_case import ConversationalTestCase
from deepeval.test_case import ToolCall as DeepEvalToolCall
from deepeval.test_case import Turn as DeepEvalTurn
from deepeval.test_case.llm_test_case import RetrievedContextData, ToolCallType
from pydantic import ValidationError

from ragbridge.core.conversation import Conversation, Turn
from ragbridge.core.sample import Sample, validation_problems

from .test_cases import META_KEY

__all__ = [
    "CONVERSATION_FIELDS",
    "DEEPEVAL_KEY",
    "TURN_FIELDS",
    "from_conversational_test_case",
    "from_conversational_test_cases",
    "to_conversational_test_case",
    "to_conversational_test_cases",
]

DEEPEVAL_KEY = "deepeval"
"""The metadata key (of a conversation, or of a turn) holding DeepEval's fields that ragbridge
has no slot for."""

CONVERSATION_FIELDS = (
    "scenario",
    "context",
    "user_description",
    "chatbot_role",
    "comments",
    "tags",
)
"""``ConversationalTestCase`` fields kept in ``Conversation.metadata["deepeval"]``."""

TURN_FIELDS = ("user_id", "latency_ms", "interrupted", "provider_transcript")
"""DeepEval ``Turn`` fields kept in ``Turn.metadata["deepeval"]`` (with ``tools_called``: what
DeepEval's tool calls hold beyond name and arguments, one object per call)."""

_CALL_FIELDS = ("description", "reasoning", "output", "type")
_UNSUPPORTED = ("audio", "mcp_tools_called", "mcp_resources_called", "mcp_prompts_called")
_FORMAT = 1


# --------------------------------------------------------------------------- ragbridge -> DeepEval


def to_conversational_test_case(conversation: Conversation) -> ConversationalTestCase:
    """The DeepEval test case of ``conversation``; `from_conversational_test_case` gives the
    conversation back unchanged. Raises ValueError for a conversation with no user or
    assistant turn, or whose metadata uses the reserved key ``"ragbridge"``."""
    if not isinstance(conversation, Conversation):
        hint = " (Conversation.from_sample makes one)" if isinstance(conversation, Sample) else ""
        raise TypeError(f"expected a Conversation, got {type(conversation).__name__}{hint}")
    label = f"conversation {conversation.id!r}"
    outputs = {t.tool_call_id: t.content for t in conversation.turns if t.role == "tool"}
    pending: list[dict[str, Any]] = []
    kept: list[tuple[int, Turn, dict[str, Any]]] = []
    for position, turn in enumerate(conversation.turns):
        if turn.role in ("system", "tool"):
            pending.append(turn.model_dump(exclude_defaults=True))
            continue
        own_record = _turn_record(turn, outputs)
        record: dict[str, Any] = {"turn": own_record} if own_record else {}
        if pending:
            record["before"], pending = pending, []
        kept.append((position, turn, record))
    if not kept:
        raise ValueError(
            f"{label} has no user or assistant turn: DeepEval's turns are user and assistant "
            "messages only, so there is nothing to write"
        )
    if pending:
        kept[-1][2]["after"] = pending
    turns = [
        _deepeval_turn(turn, record, outputs, f"{label}: turns[{position}]")
        for position, turn, record in kept
    ]
    own, fields = _split_deepeval(conversation.metadata, CONVERSATION_FIELDS, label)
    extras = {"format": _FORMAT, "id": conversation.id}
    try:
        return ConversationalTestCase(
            turns=turns,
            name=conversation.id,
            expected_outcome=conversation.expected_outcome,
            metadata={**own, META_KEY: extras},
            **fields,
        )
    except (ValidationError, TypeError) as exc:
        raise ValueError(f"{label}: DeepEval refused the test case: {exc}") from None


def to_conversational_test_cases(
    conversations: Iterable[Conversation],
) -> list[ConversationalTestCase]:
    """`to_conversational_test_case` of each conversation (ids must be unique), for
    ``deepeval.evaluate(test_cases=...)`` or an ``EvaluationDataset``."""
    out: list[ConversationalTestCase] = []
    seen: set[str] = set()
    for conversation in conversations:
        case = to_conversational_test_case(conversation)
        if conversation.id in seen:
            raise ValueError(f"duplicate conversation id {conversation.id!r}")
        seen.add(conversation.id)
        out.append(case)
    return out


def _turn_record(turn: Turn, outputs: Mapping[str | None, str | None]) -> dict[str, Any]:
    """What a DeepEval turn has no field for, in the form the turn has in a conversations file."""
    record: dict[str, Any] = {}
    if turn.id is not None:
        record["id"] = turn.id
    if turn.role == "assistant" and turn.content == "":
        record["empty"] = True  # really "", not a turn without content
    if any(c.id is not None or c.score is not None or c.metadata for c in turn.contexts):
        record["contexts"] = [
            c.model_dump(exclude={"text"}, exclude_defaults=True) for c in turn.contexts
        ]
    for name in ("reference", "reference_contexts", "relevance"):
        value = getattr(turn, name)
        if value is not None:
            record[name] = value
    if any(call.id is not None for call in turn.tool_calls):
        record["call_ids"] = [call.id for call in turn.tool_calls]
    answered = [
        k for k, call in enumerate(turn.tool_calls) if call.id is not None and call.id in outputs
    ]
    if answered:
        record["answered"] = answered
    return record


def _deepeval_turn(
    turn: Turn, record: dict[str, Any], outputs: Mapping[str | None, str | None], where: str
) -> DeepEvalTurn:
    answered = set(record.get("turn", {}).get("answered", []))
    own, only = _split_deepeval(
        turn.metadata,
        (*TURN_FIELDS, "tools_called"),
        where,
        calls=turn.tool_calls,
        answered=answered,
    )
    call_extras: list[Mapping[str, Any]] = only.pop("tools_called", None) or [{}] * len(
        turn.tool_calls
    )
    calls = []
    for k, call in enumerate(turn.tool_calls):
        extra = dict(call_extras[k])
        kind = extra.pop("type", None)
        if k in answered:
            extra["output"] = outputs[call.id]
        if kind is not None:
            extra["type"] = ToolCallType(kind)
        calls.append(
            DeepEvalToolCall(name=call.name, input_parameters=dict(call.args) or None, **extra)
        )
    role: Literal["user", "assistant"] = "user" if turn.role == "user" else "assistant"
    try:
        return DeepEvalTurn(
            role=role,
            content=turn.content if turn.content is not None else "",
            retrieval_context=[c.text for c in turn.contexts] or None,
            tools_called=calls or None,
            metadata=({**own, META_KEY: record} if record else own) or None,
            **only,
        )
    except (ValidationError, TypeError) as exc:
        raise ValueError(f"{where}: DeepEval refused the turn: {exc}") from None


def _split_deepeval(
    metadata: Mapping[str, Any],
    fields: Sequence[str],
    where: str,
    *,
    calls: Sequence[Any] = (),
    answered: set[int] | frozenset[int] = frozenset(),
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``metadata`` without `DEEPEVAL_KEY`, and apart from it DeepEval's own fields.

    Only a ``"deepeval"`` object that `from_conversational_test_case` could have written (its
    keys DeepEval fields; per tool call one object, none giving the output of a call a tool turn
    answers) becomes fields; anything else under that key stays plain metadata, so it comes back
    as it was either way.
    """
    if META_KEY in metadata:
        raise ValueError(
            f"{where}: metadata key {META_KEY!r} is reserved for ragbridge's record in DeepEval; "
            "rename it"
        )
    own = dict(metadata)
    found = own.get(DEEPEVAL_KEY)
    if not isinstance(found, Mapping) or not found or not set(found) <= set(fields):
        return own, {}
    per_call = found.get("tools_called")
    if per_call is not None and not _calls_fit(per_call, calls, answered):
        return own, {}
    del own[DEEPEVAL_KEY]
    return own, dict(found)


def _calls_fit(per_call: Any, calls: Sequence[Any], answered: set[int] | frozenset[int]) -> bool:
    if not isinstance(per_call, list) or len(per_call) != len(calls):
        return False
    for k, extra in enumerate(per_call):
        if not isinstance(extra, Mapping) or not set(extra) <= set(_CALL_FIELDS):
            return False
        if k in answered and "output" in extra:
            return False
    return True


# --------------------------------------------------------------------------- DeepEval -> ragbridge


def from_conversational_test_case(
    test_case: ConversationalTestCase, *, id: str | None = None, where: str | None = None
) -> Conversation:
    """The `Conversation` a DeepEval ``ConversationalTestCase`` describes.

    ``id`` overrides the conversation id; ``where`` (e.g. ``"test_cases[3]"``) is added to error
    messages. See the module docstring for what goes where; a test case written by
    `to_conversational_test_case` comes back equal to the conversation it was written from.
    """
    if not isinstance(test_case, ConversationalTestCase):
        raise TypeError(f"expected a ConversationalTestCase, got {type(test_case).__name__}")
    label = _label(test_case, where)
    metadata = _mapping(test_case.metadata, f"{label}: metadata")
    extras = _mapping(metadata.pop(META_KEY, None), f"{label}: metadata[{META_KEY!r}]")
    fields = {
        name: getattr(test_case, name)
        for name in CONVERSATION_FIELDS
        if getattr(test_case, name) is not None
    }
    if fields:
        _claim_key(metadata, f"{label}: metadata")
        metadata[DEEPEVAL_KEY] = fields
    turns: list[Turn] = []
    for index, turn in enumerate(test_case.turns):
        at = f"{label}: turns[{index}]"
        own = _mapping(turn.metadata, f"{at}.metadata")
        record = _mapping(own.pop(META_KEY, None), f"{at}.metadata[{META_KEY!r}]")
        turns += _hidden(record.get("before"), f"{at}: before")
        turns.append(_turn_of(turn, own, record.get("turn"), at))
        turns += _hidden(record.get("after"), f"{at}: after")
    chosen = id if id is not None else extras.get("id", None) or _own_id(test_case)
    try:
        return Conversation(
            id=chosen,
            turns=turns,
            expected_outcome=test_case.expected_outcome,
            metadata=metadata,
        )
    except ValidationError as exc:
        problems = "; ".join(validation_problems(exc))
        raise ValueError(f"{label}: {problems} (turns counted as ragbridge's)") from None


def from_conversational_test_cases(
    test_cases: Iterable[ConversationalTestCase],
) -> list[Conversation]:
    """`from_conversational_test_case` of each (``where`` is the position); ids must come out
    unique."""
    out: list[Conversation] = []
    seen: dict[str, int] = {}
    for index, case in enumerate(test_cases):
        conversation = from_conversational_test_case(case, where=f"test_cases[{index}]")
        if conversation.id in seen:
            raise ValueError(
                f"test_cases[{index}]: duplicate conversation id {conversation.id!r} "
                f"(also test_cases[{seen[conversation.id]}])"
            )
        seen[conversation.id] = index
        out.append(conversation)
    return out


def _label(test_case: ConversationalTestCase, where: str | None) -> str:
    parts = [where] if where else []
    if test_case.name:
        parts.append(f"name={test_case.name!r}")
    else:
        parts.append(f"first turn={test_case.turns[0].content[:40]!r}")
    return "test case " + " ".join(parts)


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"{where}: expected an object, got {type(value).__name__}")
    return dict(value)


def _claim_key(metadata: Mapping[str, Any], where: str) -> None:
    if DEEPEVAL_KEY in metadata:
        raise ValueError(
            f"{where}: key {DEEPEVAL_KEY!r} is where ragbridge keeps DeepEval's fields that it "
            "has no slot for, and this test case sets some of them: rename the key"
        )


def _hidden(value: Any, where: str) -> list[Turn]:
    """The system and tool turns riding in a turn's record, as turns again."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError(f"{where}: expected a list of turns")
    out: list[Turn] = []
    for k, item in enumerate(value):
        try:
            out.append(Turn.model_validate(item))
        except ValidationError as exc:
            problems = "; ".join(validation_problems(exc))
            raise ValueError(f"{where}[{k}]: {problems}") from None
    return out


def _turn_of(turn: DeepEvalTurn, own: dict[str, Any], raw: Any, where: str) -> Turn:
    for name in _UNSUPPORTED:
        if getattr(turn, name, None) is not None:
            raise ValueError(
                f"{where}: {name} is set; ragbridge judges text, so voice and MCP turns are not "
                "converted"
            )
    record = _mapping(raw, f"{where}.metadata[{META_KEY!r}]['turn']")
    contexts = _contexts(turn.retrieval_context, record.get("contexts"), where)
    answered = set(record.get("answered", []))
    call_ids = record.get("call_ids")
    raw_calls = list(turn.tools_called or [])
    if call_ids is not None and (not isinstance(call_ids, list) or len(call_ids) != len(raw_calls)):
        raise ValueError(
            f"{where}: the ragbridge record's call ids do not line up with tools_called"
        )
    calls: list[dict[str, Any]] = []
    call_extras: list[dict[str, Any]] = []
    for k, call in enumerate(raw_calls):
        calls.append(
            {
                "name": call.name,
                "args": dict(call.input_parameters or {}),
                "id": call_ids[k] if call_ids is not None else None,
            }
        )
        extra = {
            name: getattr(call, name)
            for name in ("description", "reasoning", "output")
            if getattr(call, name) is not None and not (name == "output" and k in answered)
        }
        if call.type != ToolCallType.FUNCTION:
            extra["type"] = call.type.value
        call_extras.append(extra)
    only: dict[str, Any] = {
        name: getattr(turn, name) for name in TURN_FIELDS if getattr(turn, name) is not None
    }
    if any(call_extras):
        only["tools_called"] = call_extras
    if only:
        _claim_key(own, f"{where}.metadata")
        own[DEEPEVAL_KEY] = only
    fields: dict[str, Any] = {
        "role": turn.role,
        "content": _content(turn, record),
        "contexts": contexts,
        "tool_calls": calls,
        "metadata": own,
    }
    for name in ("id", "reference", "reference_contexts", "relevance"):
        if name in record:
            fields[name] = record[name]
    try:
        return Turn.model_validate(fields)
    except ValidationError as exc:
        problems = "; ".join(validation_problems(exc))
        raise ValueError(f"{where}: {problems}") from None


def _content(turn: DeepEvalTurn, record: Mapping[str, Any]) -> str | None:
    """DeepEval's ``""`` on an assistant turn is a turn without content (one that only calls
    tools), unless the record says the content really was ``""``."""
    if turn.role == "assistant" and turn.content == "" and not record.get("empty"):
        return None
    return turn.content


def _contexts(raw: Any, extras: Any, where: str) -> list[dict[str, Any]]:
    """``retrieval_context`` as contexts: texts, with their ids, scores and metadata from the
    record, or a ``RetrievedContextData``'s source as metadata."""
    items = list(raw or [])
    if extras is not None and (not isinstance(extras, list) or len(extras) != len(items)):
        listed = len(extras) if isinstance(extras, list) else "?"
        raise ValueError(
            f"{where}: the ragbridge record lists {listed} contexts but retrieval_context has "
            f"{len(items)}; the turn was edited, so the contexts' ids cannot be matched"
        )
    out: list[dict[str, Any]] = []
    for k, item in enumerate(items):
        if isinstance(item, RetrievedContextData):
            context: dict[str, Any] = {"text": item.context, "metadata": {"source": item.source}}
        elif isinstance(item, str):
            context = {"text": item}
        else:
            raise ValueError(f"{where}: retrieval_context[{k}]: expected a string")
        if extras is not None:
            context.update(_mapping(extras[k], f"{where}: record contexts[{k}]"))
        out.append(context)
    return out


def _own_id(test_case: ConversationalTestCase) -> str:
    """The id of a test case that carries none: its ``name``, else a hash of its turns."""
    if test_case.name:
        return str(test_case.name)
    payload = {
        "turns": [
            [
                t.role,
                t.content,
                [
                    c if isinstance(c, str) else [c.source, c.context]
                    for c in t.retrieval_context or []
                ],
            ]
            for t in test_case.turns
        ],
        "expected_outcome": test_case.expected_outcome,
        "scenario": test_case.scenario,
    }
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, default=str)
    return "deepeval-" + hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]
