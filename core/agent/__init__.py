"""Measures of an agent's trajectory: the tool calls it made against the calls expected.

A sample of an agent (`ragbridge.core.trajectory`) has ``trajectory`` (the steps it took) and
``reference_tool_calls`` (the calls expected). The deterministic measures compare the two
without a model, each equal to a peer's on the same inputs under its ``compat=`` switch:

* `ToolCallAccuracy`, `ToolCallF1` (`tool_calls`) — RAGAS's ``ToolCallAccuracy`` and
  ``ToolCallF1``;
* `TrajectoryStrictMatch`, `TrajectoryUnorderedMatch`, `TrajectorySubsetMatch`,
  `TrajectorySupersetMatch` (`trajectory_match`) — agentevals' trajectory match modes.

The functions behind them (`tool_call_accuracy`, `tool_call_f1`, `match_trajectory`) take any
calls with a ``name`` and ``args``, for adapters that speak the peers' own types.

Names resolve on first use (`ragbridge.core.exports`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..exports import lazy_exports

if TYPE_CHECKING:
    from .calls import CallLike, canonical, same_value
    from .goal import GoalAccuracy, TaskCompletion
    from .retrieval_steps import (
        RedundantRetrievals,
        StepContextRelevance,
        StepQueryRelevance,
        StepsToRelevant,
    )
    from .steps import RetrievalStep, step_query
    from .string_similarity import similarity
    from .tool_calls import (
        CallAlignment,
        ToolCallAccuracy,
        ToolCallCounts,
        ToolCallF1,
        arg_score,
        tool_call_accuracy,
        tool_call_f1,
    )
    from .trajectory_match import (
        TrajectoryMatch,
        TrajectoryMatchResult,
        TrajectoryStrictMatch,
        TrajectorySubsetMatch,
        TrajectorySupersetMatch,
        TrajectoryUnorderedMatch,
        as_messages,
        match_trajectory,
        match_trajectory_messages,
    )

_EXPORTS: dict[str, str] = {
    "CallLike": "calls",
    "GoalAccuracy": "goal",
    "TaskCompletion": "goal",
    "RedundantRetrievals": "retrieval_steps",
    "StepContextRelevance": "retrieval_steps",
    "StepQueryRelevance": "retrieval_steps",
    "StepsToRelevant": "retrieval_steps",
    "RetrievalStep": "steps",
    "step_query": "steps",
    "canonical": "calls",
    "same_value": "calls",
    "similarity": "string_similarity",
    "CallAlignment": "tool_calls",
    "ToolCallAccuracy": "tool_calls",
    "ToolCallCounts": "tool_calls",
    "ToolCallF1": "tool_calls",
    "arg_score": "tool_calls",
    "tool_call_accuracy": "tool_calls",
    "tool_call_f1": "tool_calls",
    "TrajectoryMatch": "trajectory_match",
    "TrajectoryMatchResult": "trajectory_match",
    "TrajectoryStrictMatch": "trajectory_match",
    "TrajectorySubsetMatch": "trajectory_match",
    "TrajectorySupersetMatch": "trajectory_match",
    "TrajectoryUnorderedMatch": "trajectory_match",
    "as_messages": "trajectory_match",
    "match_trajectory": "trajectory_match",
    "match_trajectory_messages": "trajectory_match",
}

__all__ = [
    "CallAlignment",
    "CallLike",
    "GoalAccuracy",
    "RedundantRetrievals",
    "RetrievalStep",
    "StepContextRelevance",
    "StepQueryRelevance",
    "StepsToRelevant",
    "TaskCompletion",
    "ToolCallAccuracy",
    "ToolCallCounts",
    "ToolCallF1",
    "TrajectoryMatch",
    "TrajectoryMatchResult",
    "TrajectoryStrictMatch",
    "TrajectorySubsetMatch",
    "TrajectorySupersetMatch",
    "TrajectoryUnorderedMatch",
    "arg_score",
    "as_messages",
    "canonical",
    "match_trajectory",
    "match_trajectory_messages",
    "same_value",
    "similarity",
    "step_query",
    "tool_call_accuracy",
    "tool_call_f1",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
