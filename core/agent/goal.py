"""Goal accuracy and task completion: did the agent do what it was asked, and how fully?

Both read one judge call per trajectory, ``agent.goal`` (`ragbridge.core.prompts.agent`): the
judge is shown the question (with the conversation before it, `asked`), every tool call the
agent made (tool, arguments, the start of what it returned, the error it raised) and its final
reply, and the reference outcome when the sample has one (``sample.reference``). It states the
task and the outcome, lists what the task asks for with a verdict each, and says whether the
goal was achieved. Scored together the two measures cost that one call (`MetricContext.shared`;
the dry-run plan gives it one share key), where RAGAS's ``AgentGoalAccuracy`` makes two calls per
sample and DeepEval's ``TaskCompletionMetric`` two (``benchmarks/agent_cost.py``).

* ``goal_accuracy`` — 1.0 when the goal was achieved, else 0.0. With a reference outcome, the
  goal is the reference: did the outcome reach it (RAGAS's ``AgentGoalAccuracyWithReference``:
  infer the end state, compare it with the reference)? Without one, the goal is the task the
  judge infers from the request (``AgentGoalAccuracyWithoutReference``).
* ``task_completion`` — the share of the task's requirements the outcome delivers,
  ``met / listed`` in [0, 1] (DeepEval's ``TaskCompletionMetric`` has the judge extract the task
  and outcome and then give a number in [0, 1]; here the number is counted from per-requirement
  verdicts, each with its reason, so a partial completion says what is missing).

Edges: a sample with no question is ``missing_input``; so is one with neither an answer nor a
tool call (nothing the agent did to judge). A sample that is no agent's (``trajectory`` None)
is judged as an agent that made no tool call: its answer is its outcome.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, ClassVar

from ..judging.engine import JudgeCall
from ..metrics._shared import planned, versions
from ..metrics.base import Metric, MetricContext, PlannedCall, declare, usage_of
from ..prompts.agent import AGENT_GOAL, GoalAssessment
from ..prompts.history import asked
from ..results.evaluation import Failure, FailureKind, Score
from ..sample import Sample
from .steps import shown_steps

__all__ = ["GoalAccuracy", "TaskCompletion", "assess_goal", "goal_request"]


def _text(value: str | None) -> str | None:
    return value if value is not None and value.strip() else None


def goal_request(sample: Sample) -> tuple[Hashable, dict[str, Any]]:
    """The ``agent.goal`` request of ``sample`` and its memo (and plan) key: both measures of
    one sample compute the same, so they share the call."""
    values: dict[str, Any] = {
        "question": asked(sample),
        "steps": shown_steps(sample.trajectory or []),
        "answer": _text(sample.answer),
        "reference": _text(sample.reference),
    }
    key = (AGENT_GOAL.id, *(values[k] for k in ("question", "steps", "answer", "reference")))
    return key, values


async def assess_goal(sample: Sample, ctx: MetricContext) -> tuple[JudgeCall[GoalAssessment], bool]:
    """The shared ``agent.goal`` call of ``sample``, and whether this caller owns it."""
    key, values = goal_request(sample)
    return await ctx.shared(key, lambda: ctx.ask(AGENT_GOAL, **values))


class _GoalMeasure(Metric):
    """The checks, plan and call both goal measures share; each reads its part of the reply."""

    requires = ("question",)
    prompt_version = versions(AGENT_GOAL)

    def __init__(self, provider: str = "llm") -> None:
        self._use_provider(provider)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(provider={self.provider!r})"

    def missing_input(self, sample: Sample, ctx: MetricContext) -> Failure | None:
        if _text(sample.answer) is None and not sample.trajectory:
            return Failure(
                kind=FailureKind.MISSING_INPUT,
                message=(
                    f"{self.name} needs something the agent did: the sample's 'answer' is empty "
                    "and its 'trajectory' has no step"
                ),
            )
        return super().missing_input(sample, ctx)

    def _plan(self, sample: Sample, shared_tags: frozenset[str]) -> list[PlannedCall]:
        if not sample.question.strip() or (_text(sample.answer) is None and not sample.trajectory):
            return []
        key, values = goal_request(sample)
        return [planned(AGENT_GOAL, key, **values)]

    async def _score(self, sample: Sample, ctx: MetricContext) -> Score:
        call, owned = await assess_goal(sample, ctx)
        usage = usage_of(call, owned=(owned,))
        if call.value is None:
            assert call.failure is not None
            return Score(failure=call.failure, usage=usage)
        return self._read(sample, call.value).model_copy(update={"usage": usage})

    def _read(self, sample: Sample, reply: GoalAssessment) -> Score:
        raise NotImplementedError


class GoalAccuracy(_GoalMeasure):
    """1.0 when the agent achieved the goal — the reference outcome when the sample has one,
    the task the judge infers otherwise — else 0.0."""

    reads: ClassVar[tuple[str, ...] | None] = ("question", "answer", "reference", "trajectory")

    def _read(self, sample: Sample, reply: GoalAssessment) -> Score:
        reference = _text(sample.reference)
        achieved = reply.goal_achieved
        if reference is not None:
            reason = "reached" if achieved else "did not reach"
            reason = f"the outcome {reason} the reference outcome: {reply.goal_reason}"
        else:
            reason = "achieves" if achieved else "does not achieve"
            reason = f"the outcome {reason} the task ({reply.task}): {reply.goal_reason}"
        return Score(
            value=1.0 if achieved else 0.0,
            reason=reason,
            details={
                "with_reference": reference is not None,
                "goal": reference if reference is not None else reply.task,
                "task": reply.task,
                "outcome": reply.outcome,
                "achieved": achieved,
                "explanation": reply.goal_reason,
            },
        )


class TaskCompletion(_GoalMeasure):
    """Share of the task's requirements (as the judge lists them) that the outcome delivers."""

    reads: ClassVar[tuple[str, ...] | None] = ("question", "answer", "reference", "trajectory")

    def _read(self, sample: Sample, reply: GoalAssessment) -> Score:
        # at least one requirement: the template's reply check asks again for an empty list
        rows = [
            {"requirement": r.requirement, "met": r.met, "reason": r.reason}
            for r in reply.requirements
        ]
        met = sum(1 for r in rows if r["met"])
        reason = f"{met} of {len(rows)} of the task's requirements met ({reply.task})"
        unmet = [r for r in rows if not r["met"]]
        if unmet:
            reason += f"; not met: '{unmet[0]['requirement']}' ({unmet[0]['reason']})"
        return Score(
            value=met / len(rows),
            reason=reason,
            details={
                "task": reply.task,
                "outcome": reply.outcome,
                "requirements": rows,
                "met": met,
                "total": len(rows),
            },
        )


_EDGES = {
    "no answer and no step": "missing_input",
    "no trajectory": "judged as an agent that made no tool call",
}
declare(
    GoalAccuracy,
    meaning="whether the agent achieved the goal: the reference outcome if given, else the "
    "task inferred from the request",
    how="one call per trajectory states the task and outcome and judges the goal (shared with "
    "task_completion)",
    needs=("judge",),
    judge_calls="1 per trajectory, shared",
    edges={**_EDGES, "no reference": "the goal is the task the judge infers"},
    kind="agent",
)
declare(
    TaskCompletion,
    meaning="share of the task's requirements the agent's outcome delivers",
    how="the same call lists what the task asks for and whether the outcome delivers each",
    needs=("judge",),
    judge_calls="1 per trajectory, shared",
    edges=_EDGES,
    kind="agent",
)
