"""The scripted user side: asked in order with the conversation so far, expected values kept."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from ragbridge.core import Context, Conversation, Turn
from ragbridge.core.replay import Reply, areplay, replay, script_steps

SCRIPT = Conversation(
    id="leave",
    turns=[
        Turn(role="system", content="Answer from the handbook."),
        Turn(role="user", content="How many days of leave?"),
        Turn(role="assistant", id="a1", reference="25 days", content="an old answer"),
        Turn(role="user", content="And for part-timers?"),
    ],
    expected_outcome="the user knows both leave rules",
    metadata={"team": "hr"},
)


def _pipeline(seen: list[tuple[int, str]]):  # type: ignore[no-untyped-def]
    def respond(history: Sequence[Turn], question: str) -> Reply:
        seen.append((len(history), question))
        text = f"answer {len(seen)}"
        return Reply(text, [Context(text=f"ctx for {question}", id=f"d{len(seen)}")], (), {"n": 1})

    return respond


def test_each_user_turn_is_asked_with_the_conversation_so_far() -> None:
    seen: list[tuple[int, str]] = []
    conversation = replay(SCRIPT, _pipeline(seen))
    # the system turn is history of the first question; the first exchange of the second
    assert seen == [(1, "How many days of leave?"), (3, "And for part-timers?")]
    assert [t.role for t in conversation.turns] == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    first, second = conversation.turns[2], conversation.turns[4]
    assert (first.content, first.id, first.reference) == ("answer 1", "a1", "25 days")
    assert first.contexts[0].id == "d1"
    assert first.metadata == {"n": 1}
    assert (second.content, second.id, second.reference) == ("answer 2", None, None)
    assert conversation.expected_outcome == SCRIPT.expected_outcome
    assert conversation.metadata == {"team": "hr"}
    assert conversation.turn_sample(4).history == list(conversation.turns[:3])


def test_an_async_pipeline_replays_the_same() -> None:
    sync_seen: list[tuple[int, str]] = []
    async_seen: list[tuple[int, str]] = []
    plain = _pipeline(async_seen)

    async def respond(history: Sequence[Turn], question: str) -> Reply:
        await asyncio.sleep(0)
        return plain(history, question)  # type: ignore[no-any-return]

    assert asyncio.run(areplay(SCRIPT, respond)) == replay(SCRIPT, _pipeline(sync_seen))
    with pytest.raises(TypeError, match="use areplay"):
        replay(SCRIPT, respond)  # type: ignore[arg-type]


def test_a_script_without_user_turns_or_with_tool_turns_is_refused() -> None:
    with pytest.raises(ValueError, match="no user turn"):
        script_steps(Conversation(id="x", turns=[Turn(role="system", content="s")]))
    steps = script_steps(SCRIPT)
    assert [(s.position, s.expected.id if s.expected else None) for s in steps] == [
        (1, "a1"),
        (3, None),
    ]
    with pytest.raises(TypeError, match="must return a ragbridge"):
        replay(SCRIPT, lambda history, question: "text")  # type: ignore[arg-type,return-value]
