"""One message of a conversation (`Turn`) and a tool call an assistant turn makes (`ToolCall`).

A turn is in the message shape every framework maps to (OpenAI's: LangChain/LangGraph messages,
RAGAS's ``ragas.messages``, agentevals' trajectories), plus what RAG evaluation adds on the
assistant turn that used it: the contexts retrieved for it and its expected answer. Turns are
what a `Conversation` is made of, and what a `Sample` carries as ``history``: the conversation
before its question.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from .record_fields import Context, Grade, _id_to_str, _texts_as_contexts

__all__ = ["FieldProblem", "Role", "ToolCall", "Turn"]

Role = Literal["user", "assistant", "system", "tool"]


class FieldProblem(ValueError):
    """A check that knows which part of its input is wrong: ``field_path`` (as pydantic locates
    fields, e.g. ``("turns", 3, "tool_call_id")``) is appended to the error's location, so the
    message names ``turns[3].tool_call_id`` and not just the record."""

    def __init__(self, field_path: tuple[str | int, ...], message: str) -> None:
        super().__init__(message)
        self.field_path = field_path


class ToolCall(BaseModel):
    """One call an assistant turn asks for: a tool's ``name`` and its ``args`` (a JSON object, as
    LangChain and RAGAS hold them; OpenAI's ``arguments`` string is that object serialised).
    ``id`` is what the tool turn answering the call names as its ``tool_call_id``."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    name: str = Field(strict=True, min_length=1)
    args: dict[str, Any] = Field(default_factory=dict)
    id: str | None = Field(default=None, min_length=1)

    @field_validator("id", mode="before")
    @classmethod
    def _coerce_id(cls, value: Any) -> Any:
        return _id_to_str(value)


_ASSISTANT_ONLY = "belong to an assistant turn"


class Turn(BaseModel):
    """One message of a conversation.

    ``content`` may be None only on an assistant turn: one that only calls tools, or whose answer
    was not recorded (retrieval-only evaluation, like a `Sample` without ``answer``). The RAG
    fields — ``contexts`` (this turn's retrievals, ranked), ``reference`` (the expected answer),
    ``reference_contexts`` and ``relevance`` (graded labels by context id) — belong to an
    assistant turn; ``tool_calls`` too; ``tool_call_id`` names the call a tool turn answers.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    # ``role`` comes first: the checks of the fields after it read it.
    role: Role
    content: str | None = Field(default=None, strict=True, validate_default=True)
    id: str | None = Field(default=None, min_length=1)
    contexts: list[Context] = Field(default_factory=list)
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = Field(default=None, min_length=1, validate_default=True)
    reference: str | None = None
    reference_contexts: list[str] | None = None
    relevance: dict[str, Grade] | None = None
    reference_tool_calls: list[ToolCall] | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("id", "tool_call_id", mode="before")
    @classmethod
    def _coerce_id(cls, value: Any) -> Any:
        return _id_to_str(value)

    @field_validator("contexts", mode="before")
    @classmethod
    def _bare_strings_are_contexts(cls, value: Any) -> Any:
        return _texts_as_contexts(value)

    @field_validator("content")
    @classmethod
    def _content_unless_assistant(cls, value: str | None, info: ValidationInfo) -> str | None:
        role = info.data.get("role")
        if value is None and role not in (None, "assistant"):
            raise ValueError(f"{_a(role)} turn needs content (a string)")
        return value

    @field_validator("contexts")
    @classmethod
    def _contexts_on_assistant(cls, value: list[Context], info: ValidationInfo) -> list[Context]:
        role = info.data.get("role")
        if value and role not in (None, "assistant", "tool"):
            raise ValueError(
                "contexts belong to the assistant turn that retrieved them (or to the tool turn "
                f"of a retrieval tool that returned them), not to {_a(role)} turn"
            )
        return value

    @field_validator("tool_calls")
    @classmethod
    def _calls_on_assistant(cls, value: list[ToolCall], info: ValidationInfo) -> list[ToolCall]:
        if value and _not_assistant(info):
            raise ValueError(f"tool calls {_ASSISTANT_ONLY}, not to {_a(info.data['role'])} turn")
        return value

    @field_validator("tool_call_id")
    @classmethod
    def _call_id_on_tool(cls, value: str | None, info: ValidationInfo) -> str | None:
        role = info.data.get("role")
        if role == "tool" and value is None:
            raise ValueError("a tool turn needs the id of the tool call it answers")
        if role not in (None, "tool") and value is not None:
            raise ValueError(f"tool_call_id belongs to a tool turn, not to {_a(role)} turn")
        return value

    @field_validator("reference")
    @classmethod
    def _reference_on_assistant(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None and _not_assistant(info):
            raise ValueError(
                "a reference belongs to an assistant turn (the answer expected there), not to "
                f"{_a(info.data['role'])} turn"
            )
        return value

    @field_validator("reference_contexts", "relevance", "reference_tool_calls")
    @classmethod
    def _labels_on_assistant(cls, value: Any, info: ValidationInfo) -> Any:
        if value is not None and _not_assistant(info):
            what, why = {
                "relevance": ("relevance labels", "with the contexts they label"),
                "reference_tool_calls": ("reference tool calls", "the answer they lead to"),
            }.get(info.field_name or "", ("reference contexts", "with the contexts they label"))
            raise ValueError(
                f"{what} {_ASSISTANT_ONLY} ({why}), not to {_a(info.data['role'])} turn"
            )
        return value


def _a(role: str) -> str:
    return f"an {role}" if role == "assistant" else f"a {role}"


def _not_assistant(info: ValidationInfo) -> bool:
    role = info.data.get("role")
    return role is not None and role != "assistant"
