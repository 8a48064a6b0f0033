"""An agent's trajectory: the tool calls it made on the way to an answer, in order.

Retrieval is moving inside agents: an agent decides when to call a retriever tool, with which
query and how often, and answers from everything it gathered. A `Step` is one tool call with its
result — the tool's ``name`` and ``args`` (as RAGAS, LangChain and agentevals hold them), the
``output`` it returned, the ``contexts`` a retrieval step returned (ranked, so the step's own
retrieval can be measured like any other), how long it took and the error it raised, if any.
A sample's ``trajectory`` is its steps in the order they were made; ``reference_tool_calls`` the
calls expected (RAGAS's ``reference_tool_calls``, DeepEval's ``expected_tools``).

In a `Conversation` the same steps are messages — an assistant turn's ``tool_calls`` and the tool
turns that answer them (a tool turn may carry the ``contexts`` a retrieval returned, and
``metadata["latency_s"]`` / ``metadata["error"]``) — because that is the shape every framework's
message list has. `steps_of` reads steps from such turns; `Conversation.turn_sample` uses it, so
an agent's turn is scored as a sample with a trajectory, not by a second code path.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .record_fields import Context, _id_to_str, _texts_as_contexts
from .turn import ToolCall, Turn

__all__ = ["MESSAGE_KEY", "Step", "step_contexts", "steps_of", "tool_calls_of", "turns_of"]

MESSAGE_KEY = "message"
"""Step metadata naming the model reply that asked for the call: steps sharing it were asked for
together, and `turns_of` gives them one assistant turn, as the agent's messages had them."""


class Step(BaseModel):
    """One tool call of a trajectory and what came back.

    ``output`` is None when the call's result was not recorded (or the call failed: then
    ``error`` says how). ``contexts`` are the passages a retrieval step returned, in rank order;
    a step of any other tool has none. ``latency_s`` is the call's wall time in seconds.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    name: str = Field(strict=True, min_length=1)
    args: dict[str, Any] = Field(default_factory=dict)
    id: str | None = Field(default=None, min_length=1)
    output: str | None = None
    contexts: list[Context] = Field(default_factory=list)
    latency_s: float | None = Field(default=None, ge=0)
    error: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("id", mode="before")
    @classmethod
    def _coerce_id(cls, value: Any) -> Any:
        return _id_to_str(value)

    @field_validator("contexts", mode="before")
    @classmethod
    def _bare_strings_are_contexts(cls, value: Any) -> Any:
        return _texts_as_contexts(value)

    def call(self) -> ToolCall:
        """The call alone (name, args, id): what reference calls are compared with."""
        return ToolCall(name=self.name, args=dict(self.args), id=self.id)


def steps_of(turns: Sequence[Turn]) -> list[Step]:
    """The steps the assistant turns of ``turns`` made, in call order, each with the tool turn
    that answered it (matched by ``tool_call_id``; a call without an id takes the next tool
    turn without one). A call nobody answered is a step with no output."""
    answers: dict[str, Turn] = {}
    anonymous: list[Turn] = []
    for turn in turns:
        if turn.role == "tool":
            if turn.tool_call_id is not None:
                answers[turn.tool_call_id] = turn
            else:  # pragma: no cover - a Conversation requires the id; kept for plain lists
                anonymous.append(turn)
    steps: list[Step] = []
    for turn in turns:
        if turn.role != "assistant":
            continue
        for call in turn.tool_calls:
            answer = answers.get(call.id) if call.id is not None else None
            if answer is None and call.id is None and anonymous:
                answer = anonymous.pop(0)
            steps.append(_step(call, answer))
    return steps


def _step(call: ToolCall, answer: Turn | None) -> Step:
    if answer is None:
        return Step(name=call.name, args=dict(call.args), id=call.id)
    meta = dict(answer.metadata)
    latency = meta.pop("latency_s", None)
    error = meta.pop("error", None)
    return Step(
        name=call.name,
        args=dict(call.args),
        id=call.id,
        # A call that failed and returned nothing is an empty tool turn with its error (a tool
        # turn needs content): no output, as in the step the turn was written from.
        output=None if error is not None and answer.content == "" else answer.content,
        contexts=list(answer.contexts),
        latency_s=latency if isinstance(latency, (int, float)) and latency >= 0 else None,
        error=str(error) if error is not None else None,
        metadata=meta,
    )


def tool_calls_of(steps: Iterable[Step]) -> list[ToolCall]:
    """The calls of ``steps``, in order (name, args, id)."""
    return [step.call() for step in steps]


def step_contexts(steps: Iterable[Step]) -> list[tuple[int, Context]]:
    """Every context the steps retrieved, with the index of the step that retrieved it, in step
    order then rank order: the union an agent's answer is checked against, each passage still
    naming its step."""
    return [(index, ctx) for index, step in enumerate(steps) for ctx in step.contexts]


def turns_of(steps: Sequence[Step]) -> list[Turn]:
    """``steps`` as the messages an agent has: one assistant turn per model reply with its tool
    calls (consecutive steps sharing ``metadata["message"]``; any other step alone), each call
    followed by the tool turn answering it — the step's output, its contexts, and ``latency_s``
    and ``error`` in metadata. `steps_of` reads the same steps back; a step without a call id
    gets ``call-<position>`` (a tool turn must name its call), and one that returned nothing has
    an empty tool turn with its error. Every capture writes the conversation form through this,
    so all of them write it alike."""
    named = [
        s if s.id is not None else s.model_copy(update={"id": f"call-{k}"})
        for k, s in enumerate(steps)
    ]
    groups: list[list[Step]] = []
    for step in named:
        group = step.metadata.get(MESSAGE_KEY)
        if groups and group is not None and groups[-1][0].metadata.get(MESSAGE_KEY) == group:
            groups[-1].append(step)
        else:
            groups.append([step])
    turns: list[Turn] = []
    for group_steps in groups:
        turns.append(Turn(role="assistant", tool_calls=[s.call() for s in group_steps]))
        turns.extend(_tool_turn(s) for s in group_steps)
    return turns


def _tool_turn(step: Step) -> Turn:
    metadata = dict(step.metadata)
    if step.latency_s is not None:
        metadata["latency_s"] = step.latency_s
    if step.error is not None:
        metadata["error"] = step.error
    return Turn(
        role="tool",
        content=step.output if step.output is not None else "",
        tool_call_id=step.id,
        contexts=list(step.contexts),
        metadata=metadata,
    )
