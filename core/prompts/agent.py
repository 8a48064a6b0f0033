"""Templates of the agent measures: one call per trajectory for each job.

An agent's trajectory is shown as numbered, delimited STEP blocks (``<<<BEGIN STEP 2>>>``,
1-based), one per tool call, each a few lines the measure renders (the tool, its query or
arguments, the start of what it returned), so a reply aligned with the steps can be checked
for its length like a verdict list aligned with contexts.

* ``agent.step_queries`` — is each retrieval step's query relevant to the question? The judge
  sees every retrieval step of the trajectory at once, with the start of what each returned, so
  a follow-up search on something an earlier step found (the director a first search named)
  can be judged relevant; one verdict per step.
* ``agent.goal`` — what the user asked the agent to do (the task), what the agent's steps and
  final reply achieved (the outcome), the things the task asks for and whether the outcome
  delivers each, and whether the goal was achieved: against the REFERENCE outcome when one is
  given, against the task the judge stated otherwise. ``goal_accuracy`` and
  ``task_completion`` both read this one reply.

A step's context relevance needs no template of its own: it asks context relevance's
``context_relevance.judge`` over every step's contexts (`ragbridge.core.agent.retrieval_steps`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field

from ..judging.judge import Message
from . import register
from .base import Facts, PromptTemplate, Reply, _as_text, neutralise
from .budget import VERDICT, flat, per_item, restating, summed

__all__ = [
    "AGENT_GOAL",
    "AGENT_STEP_QUERIES",
    "GoalAssessment",
    "Requirement",
    "StepQueryVerdict",
    "StepQueryVerdicts",
    "StepsTemplate",
    "format_steps",
]

NO_STEPS = "(the agent made no tool calls)"
NO_ANSWER = "(the agent gave no final reply)"
NO_REFERENCE = "(no reference outcome was given: judge goal_achieved against the task you stated)"


class StepQueryVerdict(Reply):
    """One retrieval step's verdict: the reason (one sentence), then whether its query is
    relevant to the question."""

    reason: str
    relevant: bool


class StepQueryVerdicts(Reply):
    """Reply of ``agent.step_queries``: one verdict per STEP block, in order."""

    verdicts: list[StepQueryVerdict] = Field(json_schema_extra={"aligned_with": "STEP"})


class Requirement(Reply):
    """One thing the task asks for, and whether the outcome delivers it."""

    requirement: str
    reason: str
    met: bool


class GoalAssessment(Reply):
    """Reply of ``agent.goal``: the task and the outcome as the judge reads them, the task's
    requirements with a verdict each, and whether the goal was achieved."""

    task: str
    outcome: str
    requirements: list[Requirement]
    goal_reason: str
    goal_achieved: bool


def format_steps(steps: Sequence[str]) -> str:
    """The steps as numbered, delimited STEP blocks (1-based)."""
    if not steps:
        return NO_STEPS
    return "\n".join(
        f"<<<BEGIN STEP {i}>>>\n{neutralise(text)}\n<<<END STEP {i}>>>"
        for i, text in enumerate(steps, start=1)
    )


@dataclass(frozen=True)
class StepsTemplate(PromptTemplate):
    """A template whose ``steps`` value is a list of rendered steps (shown as STEP blocks) and
    whose ``answer`` and ``reference`` may be None (said so in their place)."""

    def render(self, **values: Any) -> list[Message]:
        fields: dict[str, str] = {}
        for name, value in values.items():
            if name == "steps":
                fields[name] = format_steps(list(value))
            elif value is None and name == "answer":
                fields[name] = NO_ANSWER
            elif value is None and name == "reference":
                fields[name] = NO_REFERENCE
            else:
                fields[name] = _as_text(name, value)
        return self.messages(fields)

    def facts(self, **values: Any) -> dict[str, int]:
        return {"STEP": len(list(values.get("steps") or ()))}


def _at_least_one_requirement(reply: BaseModel, facts: Facts) -> str | None:
    if isinstance(reply, GoalAssessment) and not reply.requirements:
        return 'list at least one requirement of the task in "requirements"'
    return None


_STEPS_SHOWN = (
    "Each STEP block is one tool call the agent made, in order: the tool, what it was asked, "
    "and the start of what it returned."
)

AGENT_STEP_QUERIES = register(
    StepsTemplate(
        id="agent.step_queries",
        version="1",
        description="Relevance of each retrieval step's query to the question.",
        system=(
            "You judge the searches an agent ran while answering a question: whether each one "
            "looked for something the question needs."
        ),
        user=f"""\
$question

$steps

{_STEPS_SHOWN} Is each step's query relevant to the question? Relevant: it looks for \
information the question needs, directly or through what an earlier step found (a follow-up \
on a name or a fact an earlier search turned up counts). Not relevant: it looks for something \
the question does not need, or is too vague to find what it needs.
For each step, in order: "reason" (one sentence) first, then "relevant". One verdict per \
step.""",
        schema=StepQueryVerdicts,
        budget=per_item("steps"),
    )
)


def _goal_budget(values: Mapping[str, Any]) -> int:
    """Three free sentences (task, outcome, goal reason) and a reason and a verdict for each
    requirement, about one per sentence of the request."""
    return summed(flat(3), restating("question", per_fact=VERDICT))(values)


AGENT_GOAL = register(
    StepsTemplate(
        id="agent.goal",
        version="1",
        description=(
            "The task given to an agent, the outcome it reached, the task's requirements met or "
            "not, and whether the goal was achieved (against a reference outcome if given)."
        ),
        system=(
            "You review what an agent did for a user: the task it was given, the tool calls it "
            "made, and the outcome it reached."
        ),
        user=f"""\
$question

$steps

$answer

$reference

The QUESTION block is the user's request (after the conversation before it, if any). \
{_STEPS_SHOWN} The ANSWER block is the agent's final reply. Reply with:
- "task": what the user asked the agent to do, in one sentence, as the request states it.
- "outcome": what the agent's tool calls and final reply actually achieved, in one sentence.
- "requirements": each thing the task asks for (a fact to find, an action to take, a \
constraint to respect), as a short sentence; then "reason" (one sentence) and "met": true if \
the outcome delivers it in full. At least one.
- "goal_reason" (one sentence), then "goal_achieved": if a REFERENCE block is given, true when \
the outcome reaches the outcome it describes (the same result; details it leaves open may \
differ); otherwise true when the outcome achieves the task you stated.""",
        schema=GoalAssessment,
        extra_check=_at_least_one_requirement,
        budget=_goal_budget,
    )
)
