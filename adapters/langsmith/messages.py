"""Chat messages as LangSmith traces hold them, read into roles, texts and `Turn`s.

Why a module of its own: a chat app's trace often carries messages instead of a question and
an answer — LangSmith's multi-turn evaluators even require a ``messages`` list in each trace's
top-level inputs and outputs — and a thread evaluator is handed a conversation as a message
list (openevals' trajectory shape). Both sides of the adapter read those messages the same way.

A message is accepted in every shape a trace stores it: an OpenAI Chat Completions dict
(``{"role", "content", "tool_calls", "tool_call_id"}``), an Anthropic one (content a list of
``{"type": "text", "text": ...}`` blocks), a LangChain message (live, dumped with a ``type``
of ``human``/``ai``/``system``/``tool``, or LangChain's serialised ``{"lc": 1, "kwargs": ...}``
form), or a ``(role, content)`` pair as LangGraph accepts it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ragbridge.core.turn import Role, ToolCall, Turn

__all__ = [
    "after_last",
    "last_text",
    "message_role",
    "message_text",
    "messages_in",
    "turns_from_messages",
]

_ROLES: dict[str, Role] = {
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "model": "assistant",
    "system": "system",
    "developer": "system",
    "tool": "tool",
    "function": "tool",
}


def message_fields(message: Any) -> Mapping[str, Any] | None:
    """A message's fields as a mapping (LangChain's serialised form unwrapped), or None."""
    if isinstance(message, Mapping):
        if message.get("lc") == 1 and isinstance(message.get("kwargs"), Mapping):
            kwargs = dict(message["kwargs"])
            ids = message.get("id")
            if "type" not in kwargs and isinstance(ids, list) and ids:
                kwargs["type"] = str(ids[-1])  # "HumanMessage", "AIMessage", ...
            return kwargs
        return message
    if hasattr(message, "content") and hasattr(message, "type"):  # a live LangChain message
        return {
            "type": message.type,
            "content": message.content,
            "tool_calls": getattr(message, "tool_calls", None),
            "tool_call_id": getattr(message, "tool_call_id", None),
        }
    return None


def message_pair(message: Any) -> tuple[str, Any] | None:
    """A ``(role, content)`` pair (a tuple, or a two-item list once serialised), or None."""
    if (
        isinstance(message, Sequence)
        and not isinstance(message, (str, bytes))
        and len(message) == 2
        and isinstance(message[0], str)
    ):
        return message[0], message[1]
    return None


def message_role(message: Any) -> Role | None:
    """The ragbridge role of a message (``human`` → user, ``ai`` → assistant, ...), or None
    when ``message`` is not a message."""
    pair = message_pair(message)
    if pair is not None:
        raw: Any = pair[0]
    else:
        fields = message_fields(message)
        if fields is None:
            return None
        raw = fields.get("role") or fields.get("type")
    if not isinstance(raw, str):
        return None
    name = raw.lower()
    for suffix in ("messagechunk", "message"):  # "HumanMessage", "AIMessageChunk"
        if name.endswith(suffix) and name != suffix:
            name = name[: -len(suffix)]
    return _ROLES.get(name)


def _text(content: Any) -> str | None:
    """Text of a message content: a string, or the text parts of a list of content blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            p if isinstance(p, str) else p.get("text")
            for p in content
            if isinstance(p, str) or (isinstance(p, Mapping) and p.get("type") == "text")
        ]
        texts = [p for p in parts if isinstance(p, str)]
        return "\n".join(texts) if texts else None
    return None


def message_text(message: Any) -> str | None:
    """The text a message says (text blocks joined by newlines), or None when it has none."""
    pair = message_pair(message)
    if pair is not None:
        return _text(pair[1])
    fields = message_fields(message)
    return None if fields is None else _text(fields.get("content"))


def messages_in(data: Any) -> list[Any] | None:
    """The ``messages`` list of a run's inputs or outputs (also one level down, where
    ``langsmith.evaluate`` nests a target's inputs), or None when there is none."""
    if not isinstance(data, Mapping):
        return None
    found = data.get("messages")
    if isinstance(found, list) and found and all(message_role(m) is not None for m in found):
        return found
    if len(data) == 1:
        inner = next(iter(data.values()))
        if isinstance(inner, Mapping):
            return messages_in(inner)
    return None


def last_text(messages: Sequence[Any], role: Role) -> str | None:
    """The text of the last message of ``role`` that has text, or None."""
    for message in reversed(messages):
        if message_role(message) == role:
            text = message_text(message)
            if text:
                return text
    return None


def after_last(messages: Sequence[Any], role: Role) -> list[Any]:
    """The messages after the last one of ``role`` (all of them when there is none): in a
    run's output that repeats the conversation, what this turn added after the user spoke."""
    for index in range(len(messages) - 1, -1, -1):
        if message_role(messages[index]) == role:
            return list(messages[index + 1 :])
    return list(messages)


def message_tool_call(call: Any, where: str) -> ToolCall:
    """One tool call: LangChain's ``{"name", "args", "id"}`` or OpenAI's ``{"id", "function":
    {"name", "arguments": <JSON text>}}``."""
    if not isinstance(call, Mapping):
        raise ValueError(f"{where}: a tool call is {type(call).__name__}, expected a dict")
    function = call.get("function")
    if isinstance(function, Mapping):
        name, args = function.get("name"), function.get("arguments")
        if isinstance(args, str):
            try:
                args = json.loads(args) if args.strip() else {}
            except json.JSONDecodeError:
                args = {"arguments": args}  # kept as sent rather than dropped
    else:
        name, args = call.get("name"), call.get("args")
    if not isinstance(args, Mapping):
        args = {} if args is None else {"arguments": args}
    if not isinstance(name, str) or not name:
        raise ValueError(f"{where}: a tool call has no name (keys: {', '.join(map(str, call))})")
    call_id = call.get("id")
    return ToolCall(name=name, args=dict(args), id=None if call_id is None else str(call_id))


def turns_from_messages(messages: Sequence[Any]) -> list[Turn]:
    """A message list as conversation `Turn`s, in order.

    An assistant message that only calls tools (no text) becomes an assistant turn with content
    None and its tool calls; a tool message keeps the id of the call it answers. Messages carry
    no retrievals, so the turns have no contexts. ValueError names the message that is not one.
    """
    turns: list[Turn] = []
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        role = message_role(message)
        if role is None:
            raise ValueError(f"{where}: not a chat message (no role or type): {message!r:.80}")
        text = message_text(message)
        fields = message_fields(message) or {}
        if role == "assistant":
            calls = [message_tool_call(c, where) for c in fields.get("tool_calls") or []]
            turns.append(Turn(role=role, content=text or (None if calls else ""), tool_calls=calls))
        elif role == "tool":
            call_id = fields.get("tool_call_id")
            turns.append(
                Turn(
                    role=role,
                    content=text or "",
                    tool_call_id=None if call_id is None else str(call_id),
                )
            )
        else:
            turns.append(Turn(role=role, content=text or ""))
    return turns
