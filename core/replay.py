"""Replaying a scripted user side through a chat pipeline, turn by turn.

A chat assistant cannot be evaluated from a list of questions: its second answer depends on its
first. So a *script* is a conversations file in which the user side is fixed — the user turns,
in order, and optionally an assistant turn after each holding only what is expected there (a
``reference``, ``reference_contexts``, ``relevance``, an ``id``) — and the pipeline supplies
every assistant turn. `replay` asks the pipeline each user turn in order, with the conversation
so far, and records what it answered and retrieved on that turn. The adapters (LangChain and
LangGraph, LlamaIndex chat engines, ``ragbridge run``) only say how to ask their framework; the
walk through the script, where the expected values go, and the checks live here, once.

What a script's assistant turns already say (a recorded answer, contexts, tool calls) is
replaced, not kept: the replay is a new run of the pipeline, and mixing an old answer into it
would score a conversation nobody had.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .conversation import Conversation
from .record_fields import Context
from .turn import ToolCall, Turn

__all__ = ["Reply", "Respond", "ScriptStep", "areplay", "replay", "script_steps"]


@dataclass(frozen=True)
class Reply:
    """What a pipeline answered to one user turn: the answer text (None when it only called
    tools), the contexts it retrieved for this turn (ranked), the tool calls it made, and
    anything worth keeping (latency, run ids) as metadata."""

    content: str | None
    contexts: Sequence[Context] = ()
    tool_calls: Sequence[ToolCall] = ()
    metadata: dict[str, Any] = field(default_factory=dict)


Respond = Callable[[Sequence[Turn], str], "Reply | Awaitable[Reply]"]
"""``respond(history, question)``: ask the pipeline ``question`` after the turns ``history``
(everything before the question, as replayed so far) and return its `Reply`."""


@dataclass(frozen=True)
class ScriptStep:
    """One user turn of a script (``user``, at ``position`` in the script) and the assistant turn
    scripted after it, if any (``expected``: the turn whose labels the answer inherits)."""

    position: int
    user: Turn
    expected: Turn | None


def script_steps(script: Conversation) -> list[ScriptStep]:
    """The user turns of ``script`` in order, each with the assistant turn scripted after it.

    Raises ValueError when the script has no user turn, or holds a tool turn (a tool's output
    is the pipeline's to produce, not the script's).
    """
    steps: list[ScriptStep] = []
    for index, turn in enumerate(script.turns):
        if turn.role == "tool":
            raise ValueError(
                f"script {script.id!r}: turns[{index}] is a tool turn; a script holds the user "
                "side only (tool results come from the pipeline when it is replayed)"
            )
        if turn.role == "user":
            steps.append(ScriptStep(index, turn, None))
        elif turn.role == "assistant" and steps and steps[-1].expected is None:
            last = steps[-1]
            if last.position == index - 1 or all(
                t.role == "system" for t in script.turns[last.position + 1 : index]
            ):
                steps[-1] = ScriptStep(last.position, last.user, turn)
    if not steps:
        raise ValueError(f"script {script.id!r} has no user turn to replay")
    return steps


def _answer(step: ScriptStep, reply: Reply) -> Turn:
    expected = step.expected
    return Turn(
        role="assistant",
        content=reply.content,
        id=expected.id if expected is not None else None,
        contexts=list(reply.contexts),
        tool_calls=list(reply.tool_calls),
        reference=expected.reference if expected is not None else None,
        reference_contexts=expected.reference_contexts if expected is not None else None,
        relevance=expected.relevance if expected is not None else None,
        metadata={**(expected.metadata if expected is not None else {}), **reply.metadata},
    )


def _replayed(script: Conversation, turns: list[Turn]) -> Conversation:
    return Conversation(
        id=script.id,
        turns=turns,
        expected_outcome=script.expected_outcome,
        metadata=dict(script.metadata),
    )


def _leading(script: Conversation, steps: Sequence[ScriptStep]) -> list[Turn]:
    """System turns before the first user turn: they configure the assistant, so they stay."""
    return [t for t in script.turns[: steps[0].position] if t.role == "system"]


def replay(script: Conversation, respond: Callable[[Sequence[Turn], str], Reply]) -> Conversation:
    """The conversation ``respond`` has when asked ``script``'s user turns in order.

    Each assistant turn is the pipeline's reply, with the scripted expected values (reference,
    reference contexts, relevance, id) of the assistant turn that followed that user turn in
    the script. The conversation keeps the script's id, expected outcome and metadata.
    """
    steps = script_steps(script)
    turns = _leading(script, steps)
    for step in steps:
        reply = respond(tuple(turns), _content(step))
        if inspect.isawaitable(reply):
            if inspect.iscoroutine(reply):
                reply.close()  # never to be awaited: say so without a "never awaited" warning
            raise TypeError("respond returned an awaitable; use areplay for an async pipeline")
        turns += [step.user, _answer(step, _checked(reply, script, step))]
    return _replayed(script, turns)


async def areplay(script: Conversation, respond: Respond) -> Conversation:
    """`replay` for a pipeline whose ``respond`` may be a coroutine function."""
    steps = script_steps(script)
    turns = _leading(script, steps)
    for step in steps:
        reply = respond(tuple(turns), _content(step))
        if inspect.isawaitable(reply):
            reply = await reply
        turns += [step.user, _answer(step, _checked(reply, script, step))]
    return _replayed(script, turns)


def _content(step: ScriptStep) -> str:
    assert step.user.content is not None  # a user turn always has content
    return step.user.content


def _checked(reply: object, script: Conversation, step: ScriptStep) -> Reply:
    if not isinstance(reply, Reply):
        raise TypeError(
            f"script {script.id!r}, turns[{step.position}]: respond must return a "
            f"ragbridge.core.replay.Reply, got {type(reply).__name__}"
        )
    return reply
