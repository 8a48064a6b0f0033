"""goal_accuracy and task_completion (issue 32): one judge call per trajectory for both.

The scripted judge reads what the ``agent.goal`` prompt shows (the REFERENCE block or its
absence, the STEP blocks) and answers from it, so a test fails when the reference is not shown,
a step is left out, or the two measures ask two calls.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from ragbridge.core import Sample, estimate, evaluate
from ragbridge.core.agent import GoalAccuracy, TaskCompletion
from ragbridge.core.conversation import Conversation
from ragbridge.core.judging.judge import Message
from ragbridge.core.prompts.agent import AGENT_GOAL, NO_REFERENCE, GoalAssessment
from ragbridge.core.results.evaluation import FailureKind
from ragbridge.core.testing import CountingJudge, ScriptedJudge
from ragbridge.core.trajectory import Step
from ragbridge.core.turn import ToolCall, Turn

QUESTION = "Book a table for two at an Italian restaurant tonight at 8pm and tell me the address."
STEPS = [
    Step(
        name="restaurant_search",
        args={"cuisine": "Italian", "party": 2},
        output="Trattoria Roma, 12 Via Verdi; Luigi's, 4 Oak Street",
    ),
    Step(
        name="book_table",
        args={"name": "Trattoria Roma", "time": "20:00", "party": 2},
        output="Booked: Trattoria Roma, 20:00, 2 people",
    ),
    Step(name="maps", args={"place": "Trattoria Roma"}, error="service unavailable"),
]
ANSWER = "Your table for two at Trattoria Roma is booked for 8pm tonight."
REFERENCE = "A table for two is booked at an Italian restaurant for 8pm."


def sample(**update: Any) -> Sample:
    values: dict[str, Any] = {
        "id": "booking",
        "question": QUESTION,
        "answer": ANSWER,
        "trajectory": STEPS,
    }
    values.update(update)
    return Sample(**values)


def _user(messages: list[Message]) -> str:
    return next(m["content"] for m in messages if m["role"] == "user")


def assess(messages: list[Message]) -> dict[str, Any]:
    """agent.goal: the booking was made, the address was not given (the maps call failed). The
    goal is achieved when the judge was shown a REFERENCE block (the reference asks only for
    the booking), not when it judges against its own task (which asks for the address too)."""
    user = _user(messages)
    with_reference = "<<<BEGIN REFERENCE>>>" in user
    steps = re.findall(r"<<<BEGIN STEP \d+>>>\ntool: (\w+)", user)
    assert steps == ["restaurant_search", "book_table", "maps"], steps
    return GoalAssessment(
        task="Book an Italian table for two at 8pm and give the address.",
        outcome="A table is booked at Trattoria Roma for 8pm; no address was given.",
        requirements=[
            {"requirement": "Book a table for two", "reason": "booked", "met": True},
            {"requirement": "Italian, tonight at 8pm", "reason": "20:00 Roma", "met": True},
            {"requirement": "Give the address", "reason": "maps failed", "met": False},
        ],
        goal_reason="the reference asks for the booking" if with_reference else "no address",
        goal_achieved=with_reference,
    ).model_dump()


def judge() -> ScriptedJudge:
    return ScriptedJudge({"agent.goal": assess})


def test_goal_and_task_come_from_one_call_per_trajectory() -> None:
    j = judge()
    samples = [sample(reference=REFERENCE), sample(id="no-reference")]
    evaluation = evaluate(samples, [GoalAccuracy(), TaskCompletion()], judge=j)
    assert j.tasks() == ["agent.goal", "agent.goal"]  # one per trajectory, not per measure
    assert estimate(samples, ["goal_accuracy", "task_completion"]).calls == 2
    assert estimate(samples, ["goal_accuracy"]).calls == 2
    usage = [
        evaluation.get(s.id, m).usage.calls
        for s in samples
        for m in ("goal_accuracy", "task_completion")
    ]
    assert sorted(usage) == [0, 0, 1, 1]  # the first to ask records the call

    with_reference = evaluation.get("booking", "goal_accuracy")
    assert with_reference.value == 1.0
    assert with_reference.details["with_reference"] is True
    assert with_reference.details["goal"] == REFERENCE
    inferred = evaluation.get("no-reference", "goal_accuracy")
    assert inferred.value == 0.0
    assert inferred.details["with_reference"] is False
    assert inferred.details["goal"].startswith("Book an Italian table")

    task = evaluation.get("booking", "task_completion")
    assert task.value == pytest.approx(2 / 3)
    assert [r["met"] for r in task.details["requirements"]] == [True, True, False]
    assert "Give the address" in (task.reason or "")


def test_the_prompt_shows_the_reference_only_when_there_is_one() -> None:
    j = CountingJudge()
    evaluate([sample(reference=REFERENCE), sample(id="b")], ["goal_accuracy"], judge=j)
    rendered = [
        _user(AGENT_GOAL.render(question=QUESTION, steps=[], answer=ANSWER, reference=r))
        for r in (REFERENCE, None)
    ]
    assert f"<<<BEGIN REFERENCE>>>\n{REFERENCE}\n<<<END REFERENCE>>>" in rendered[0]
    assert NO_REFERENCE in rendered[1]
    assert "<<<BEGIN REFERENCE>>>" not in rendered[1]
    assert j.calls == 2


def test_a_failed_step_is_shown_with_its_error() -> None:
    j = judge()
    evaluate([sample()], ["task_completion"], judge=j)
    user = _user(j.calls[0].messages)
    assert 'tool: maps\narguments: {"place": "Trattoria Roma"}\nfailed: service unavailable' in user
    assert "returned: Booked: Trattoria Roma, 20:00, 2 people" in user


def test_a_reply_without_requirements_is_asked_again() -> None:
    empty = GoalAssessment(
        task="t", outcome="o", requirements=[], goal_reason="r", goal_achieved=True
    )
    assert AGENT_GOAL.check(empty, {"STEP": 3}) is not None
    good = assess(
        [
            {
                "role": "user",
                "content": "".join(
                    f"<<<BEGIN STEP {i}>>>\ntool: {s.name}\n" for i, s in enumerate(STEPS, 1)
                ),
            }
        ]
    )
    j = ScriptedJudge({"agent.goal": [empty.model_dump(), good]})
    score = evaluate([sample()], ["task_completion"], judge=j).get("booking", "task_completion")
    assert score.value == pytest.approx(2 / 3)
    assert len(j.calls) == 2


def test_nothing_the_agent_did_is_missing_input() -> None:
    j = CountingJudge()
    bare = sample(answer=None, trajectory=[])
    for name in ("goal_accuracy", "task_completion"):
        score = evaluate([bare], [name], judge=j).get("booking", name)
        assert score.failure is not None
        assert score.failure.kind == FailureKind.MISSING_INPUT
    assert j.calls == 0
    assert estimate([bare], ["goal_accuracy", "task_completion"]).calls == 0


def test_a_conversation_turn_with_tool_calls_is_judged_with_its_steps() -> None:
    conversation = Conversation(
        id="c",
        turns=[
            Turn(role="user", content=QUESTION),
            Turn(
                role="assistant",
                tool_calls=[
                    ToolCall(name=s.name, args=s.args, id=f"call-{i}") for i, s in enumerate(STEPS)
                ],
            ),
            *(
                Turn(
                    role="tool",
                    tool_call_id=f"call-{i}",
                    content=s.output or "",
                    metadata={"error": s.error} if s.error else {},
                )
                for i, s in enumerate(STEPS)
            ),
            Turn(role="assistant", content=ANSWER),
        ],
    )
    turn = conversation.turn_sample(len(conversation.turns) - 1)
    j = judge()
    evaluation = evaluate([turn], ["goal_accuracy", "task_completion"], judge=j)
    assert j.tasks() == ["agent.goal"]
    assert evaluation.get(turn.id, "task_completion").value == pytest.approx(2 / 3)
