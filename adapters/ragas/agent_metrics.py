"""RAGAS's tool-call metrics on ragbridge's measures: change the import, keep the code.

``from ragas.metrics import ToolCallAccuracy, ToolCallF1`` becomes ``from
ragbridge.adapters.ragas import ToolCallAccuracy, ToolCallF1``; the constructors (RAGAS's
fields: ``name``, ``strict_order``, ``arg_comparison_metric``; ``batch_size``,
``is_multi_turn``), ``multi_turn_ascore(sample)`` / ``multi_turn_score(sample)`` and the
metric's place in ``ragas.evaluate(dataset, metrics=[...])`` on an ``EvaluationDataset`` of
``MultiTurnSample``s stay as they were. The number is ragbridge's core ``tool_call_accuracy``
/ ``tool_call_f1`` (`ragbridge.core.agent.tool_calls`) on the sample the RAGAS sample is read
into (`agent_sample`: every AI message's tool calls, in order, are the trajectory, and
``reference_tool_calls`` the calls expected, as RAGAS reads them).

``compat="ragas"`` (the default here, so the values are RAGAS 0.4's to the float) keeps
RAGAS's odd corners — an extra or missing call scores 0, arguments compare as ``str``, F1
counts distinct calls and rounds to 4 decimals — and ``compat="ragbridge"`` gives ragbridge's
definition (`ragbridge.core.agent.tool_calls` says where they differ). ``arg_comparison_metric``
may be RAGAS's ``ExactMatch`` (the default) or ``NonLLMStringSimilarity`` with any of its
distances; ``threshold=`` (ragbridge's) turns that similarity into 1 at or above it, 0 below.

A failure (no ``reference_tool_calls``) raises `RagbridgeScoreError`: RAGAS logs it and
writes NaN, and `ragbridge.adapters.ragas.evaluate` keeps the reason.
"""

from __future__ import annotations

import typing as t
from dataclasses import dataclass, field

from . import _framework  # noqa: F401  (first: RAGAS through the one guard)

# isort: split
from pydantic import ValidationError
from ragas.dataset_schema import MultiTurnSample
from ragas.messages import AIMessage, HumanMessage
from ragas.metrics._string import ExactMatch, NonLLMStringSimilarity
from ragas.metrics.base import MetricType, MultiTurnMetric, SingleTurnMetric
from ragas.run_config import RunConfig

from ragbridge.core.agent.tool_calls import ArgMatch, ToolCallsCompat
from ragbridge.core.agent.tool_calls import ToolCallAccuracy as CoreAccuracy
from ragbridge.core.agent.tool_calls import ToolCallF1 as CoreF1
from ragbridge.core.metrics.base import Metric, MetricContext
from ragbridge.core.sample import Sample, validation_problems
from ragbridge.core.trajectory import Step
from ragbridge.core.turn import ToolCall

from .callbacks import recorder_in
from .metrics import RagbridgeScoreError, RagbridgeSkipped

__all__ = ["ToolCallAccuracy", "ToolCallF1", "agent_sample"]

_ROW_ID = "ragas-row"


def _required() -> dict[MetricType, set[str]]:
    return {MetricType.MULTI_TURN: {"user_input", "reference_tool_calls"}}


def agent_sample(sample: MultiTurnSample, *, id: str = _ROW_ID) -> Sample:
    """A RAGAS ``MultiTurnSample`` as the sample the tool-call measures read: the tool calls of
    its AI messages, in order, as the ``trajectory`` (RAGAS's ``ToolCall`` holds a name and
    arguments), its ``reference_tool_calls`` as the calls expected (None when it has none),
    its first human message as the question."""
    if not isinstance(sample, MultiTurnSample):
        raise TypeError(f"expected a RAGAS MultiTurnSample, got {type(sample).__name__}")
    question = next((m.content for m in sample.user_input if isinstance(m, HumanMessage)), "")
    steps = [
        {"name": call.name, "args": dict(call.args)}
        for message in sample.user_input
        if isinstance(message, AIMessage)
        for call in message.tool_calls or []
    ]
    expected = sample.reference_tool_calls
    try:
        return Sample(
            id=id,
            question=question,
            trajectory=[Step.model_validate(s) for s in steps],
            reference_tool_calls=(
                None
                if expected is None
                else [ToolCall(name=c.name, args=dict(c.args)) for c in expected]
            ),
        )
    except ValidationError as exc:
        raise ValueError(
            f"RAGAS sample: {validation_problems(exc)[0]} (a tool call needs a name)"
        ) from None


async def _scored(metric: Metric, label: str, sample: MultiTurnSample, callbacks: t.Any) -> float:
    """``metric``'s value on the RAGAS sample; a failure or skip raises (RAGAS writes NaN)."""
    score = await metric.score(agent_sample(sample), MetricContext())
    recorder = recorder_in(callbacks)
    if recorder is not None:
        recorder.scored(getattr(callbacks, "parent_run_id", None), score)
    if score.value is not None:
        return score.value
    if score.failure is not None:
        raise RagbridgeScoreError(label, score)
    raise RagbridgeSkipped(label, score)


def _arg_match(metric: SingleTurnMetric) -> ArgMatch:
    """What RAGAS's ``arg_comparison_metric`` means as ragbridge's ``arg_match``."""
    if type(metric) is ExactMatch:
        return "exact"
    if type(metric) is NonLLMStringSimilarity:
        distance = str(metric.distance_measure.value)
        if distance in ("levenshtein", "hamming", "jaro", "jaro_winkler"):
            return t.cast(ArgMatch, distance)
    raise ValueError(
        f"arg_comparison_metric={type(metric).__name__}(...): ragbridge compares arguments "
        "exactly (ExactMatch) or by string similarity (NonLLMStringSimilarity, any distance; "
        "threshold= makes it pass/fail); other RAGAS metrics are not reproduced"
    )


@dataclass
class ToolCallAccuracy(MultiTurnMetric):
    """RAGAS's ``ToolCallAccuracy`` on ragbridge's ``tool_call_accuracy``: the tool calls of
    the sample's AI messages against its ``reference_tool_calls``, in order
    (``strict_order=True``) or in any order, arguments compared by ``arg_comparison_metric``.
    The same value as RAGAS's with ``compat="ragas"`` (the default); see the module."""

    _required_columns: dict[MetricType, set[str]] = field(default_factory=_required)
    name: str = "tool_call_accuracy"
    strict_order: bool = True
    arg_comparison_metric: SingleTurnMetric = field(default_factory=ExactMatch)
    threshold: float | None = None
    compat: ToolCallsCompat = "ragas"

    def __post_init__(self) -> None:
        super().__post_init__()
        self.ragbridge_measure()  # refuse a bad argument now, not on the first row

    def ragbridge_measure(self) -> CoreAccuracy:
        """The ragbridge measure these arguments mean."""
        return CoreAccuracy(
            strict_order=self.strict_order,
            arg_match=_arg_match(self.arg_comparison_metric),
            threshold=self.threshold,
            compat=self.compat,
        )

    def init(self, run_config: RunConfig) -> None:
        """Nothing to set up: no model."""

    async def _multi_turn_ascore(self, sample: MultiTurnSample, callbacks: t.Any) -> float:
        return await _scored(self.ragbridge_measure(), self.name, sample, callbacks)

    async def _ascore(self, row: dict[str, t.Any], callbacks: t.Any) -> float:
        return await self._multi_turn_ascore(MultiTurnSample(**row), callbacks)


@dataclass
class ToolCallF1(MultiTurnMetric):
    """RAGAS's ``ToolCallF1`` on ragbridge's ``tool_call_f1``: F1 of the sample's tool calls
    against its ``reference_tool_calls``, a call matching on name and arguments. The same value
    as RAGAS's with ``compat="ragas"`` (the default); ``compat="ragbridge"`` counts a repeated
    call each time and scores no call made and none expected as 1.0."""

    _required_columns: dict[MetricType, set[str]] = field(default_factory=_required)
    name: str = "tool_call_f1"
    batch_size: int = 1
    is_multi_turn: bool = True
    compat: ToolCallsCompat = "ragas"

    def __post_init__(self) -> None:
        super().__post_init__()
        self.ragbridge_measure()

    def ragbridge_measure(self) -> CoreF1:
        """The ragbridge measure these arguments mean."""
        return CoreF1(compat=self.compat)

    def init(self, run_config: RunConfig) -> None:
        """Nothing to set up: no model."""

    async def _multi_turn_ascore(self, sample: MultiTurnSample, callbacks: t.Any) -> float:
        return await _scored(self.ragbridge_measure(), self.name, sample, callbacks)

    async def _ascore(self, row: dict[str, t.Any], callbacks: t.Any) -> float:
        return await self._multi_turn_ascore(MultiTurnSample(**row), callbacks)
