"""DeepEval's tool correctness as a ragbridge measure: the calls an agent made against the calls
expected, with no judge.

Why it is here: DeepEval's ``ToolCorrectnessMetric`` is deterministic, and a user moving from it
must get the same number (`ragbridge.adapters.deepeval.agent_metrics.ToolCorrectnessMetric`).
`ToolCorrectness` reads a `Sample` — its ``trajectory`` and ``reference_tool_calls``, with the
DeepEval fields `ragbridge.adapters.deepeval.tool_calls` keeps for them (a call's ``type``, a
non-string output, ``input_parameters={}``) — and scores it as DeepEval 4.3 does:

* **unordered** (the default): each expected tool, in order, takes the best-scoring call not
  taken yet (same name and type; times the share of matching arguments when
  ``"input_parameters"`` is compared; 0 when ``"output"`` is compared and differs); the score
  is the sum over the expected tools divided by their number;
* **``should_consider_ordering``**: the weight of the longest common subsequence of expected and
  called tools (each pair weighted as above), divided by the number of expected tools;
* **``should_exact_match``**: 1 when the calls are the expected ones, one for one in order
  (name, type, and the compared fields equal), else 0;
* no expected tools: 1 when nothing was called either, else 0; ``strict_mode``: below 1 is 0.

Where DeepEval's own definition is odd, the default (``compat=True``) keeps it and
``compat=False`` does what its description says:

* *Repeated calls.* DeepEval marks a call "taken" by value, so once one of two identical calls
  matches an expected tool, the other can match nothing: an agent that was expected to search
  twice and did so scores 0.5. ``compat=False`` takes calls by position (1.0 there).

Where DeepEval raises instead of scoring (``input_parameters`` None on one side only, with
arguments compared partially), the missing arguments are read as none: ``None`` against ``{}``
is 1, against ``{"q": ...}`` 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Literal

from ragbridge.core.agent.calls import AgentCallMeasure
from ragbridge.core.metrics.base import MetricContext
from ragbridge.core.results.evaluation import Score
from ragbridge.core.sample import Sample

from .tool_calls import CallView, called_views, expected_views

__all__ = ["TOOL_CALL_PARAMS", "ToolCallParam", "ToolCorrectness", "tool_correctness"]

ToolCallParam = Literal["input_parameters", "output"]
"""What is compared besides the tool's name and type (DeepEval's ``ToolCallParams`` values)."""

TOOL_CALL_PARAMS: tuple[ToolCallParam, ...] = ("input_parameters", "output")


def _param_names(params: Sequence[Any]) -> tuple[ToolCallParam, ...]:
    """DeepEval's ``ToolCallParams`` members or their values, as values (checked)."""
    names: list[ToolCallParam] = []
    for param in params:
        value = getattr(param, "value", param)
        if value not in TOOL_CALL_PARAMS:
            raise ValueError(
                f"evaluation_params: {param!r} is not one of {', '.join(TOOL_CALL_PARAMS)} "
                "(DeepEval's ToolCallParams)"
            )
        names.append(value)
    return tuple(names)


def _compare_dicts(first: Any, second: Any) -> float:
    """The share of argument keys (over both calls' keys) whose values agree, nested objects
    compared the same way, as DeepEval computes it (its summation order kept, so the float is
    the same). None is read as no arguments (DeepEval raises there)."""
    if first == second:
        return 1.0
    one = first if first is not None else {}
    two = second if second is not None else {}
    if one == two:
        return 1.0
    score = 0.0
    shared = set(one.keys()).intersection(set(two.keys()))
    total = set(one.keys()).union(set(two.keys()))
    for key in shared:
        if one[key] == two[key]:
            score += 1 / len(total)
        elif isinstance(one[key], dict) and isinstance(two[key], dict):
            score += _compare_dicts(one[key], two[key]) / len(total)
    return score


def _pair(expected: CallView, called: CallView, params: tuple[ToolCallParam, ...]) -> float:
    """One expected tool against one call: 0 unless name and type agree."""
    if expected.name != called.name or expected.type != called.type:
        return 0.0
    value = 1.0
    if "input_parameters" in params:
        value *= _compare_dicts(expected.input_parameters, called.input_parameters)
    if "output" in params and expected.output != called.output:
        value = 0.0
    return value


def _key(view: CallView) -> tuple[Any, ...]:
    """What DeepEval's ``ToolCall.__eq__`` compares."""
    return (view.name, view.input_parameters, view.output)


def _unordered(
    expected: Sequence[CallView],
    called: Sequence[CallView],
    params: tuple[ToolCallParam, ...],
    compat: bool,
) -> tuple[float, list[dict[str, Any]]]:
    total = 0.0
    taken: list[int] = []
    details: list[dict[str, Any]] = []
    for index, want in enumerate(expected):
        best, best_at = 0.0, None
        for at, call in enumerate(called):
            if at in taken or (compat and any(_key(call) == _key(called[t]) for t in taken)):
                continue
            value = _pair(want, call, params)
            if value > best:
                best, best_at = value, at
        if best > 0:
            total += best
            assert best_at is not None
            taken.append(best_at)
        details.append({"expected": index, "tool": want.name, "called": best_at, "score": best})
    if not expected:
        return (1.0 if not called else 0.0), details
    return total / len(expected), details


def _ordered(
    expected: Sequence[CallView], called: Sequence[CallView], params: tuple[ToolCallParam, ...]
) -> tuple[float, list[dict[str, Any]]]:
    """DeepEval's weighted longest common subsequence, with its traceback (same floats)."""
    rows, cols = len(expected), len(called)
    table = [[0.0] * (cols + 1) for _ in range(rows + 1)]
    for i in range(1, rows + 1):
        for j in range(1, cols + 1):
            want, call = expected[i - 1], called[j - 1]
            if want.name != call.name or want.type != call.type:
                table[i][j] = max(table[i - 1][j], table[i][j - 1])
                continue
            value = _pair(want, call, params)
            table[i][j] = max(
                table[i - 1][j],
                table[i][j - 1],
                table[i - 1][j - 1] + value if value > 0 else 0,
            )
    i, j, weight = rows, cols, 0.0
    details: list[dict[str, Any]] = []
    while i > 0 and j > 0:
        if table[i][j] == table[i - 1][j]:
            i -= 1
        elif table[i][j] == table[i][j - 1]:
            j -= 1
        else:
            value = table[i][j] - table[i - 1][j - 1]
            weight += value
            details.append(
                {"expected": i - 1, "tool": expected[i - 1].name, "called": j - 1, "score": value}
            )
            i, j = i - 1, j - 1
    details.reverse()
    if not expected:
        return (1.0 if not called else 0.0), details
    return weight / len(expected), details


def _exact(
    expected: Sequence[CallView], called: Sequence[CallView], params: tuple[ToolCallParam, ...]
) -> tuple[float, list[dict[str, Any]]]:
    if len(called) != len(expected):
        return 0.0, [{"mismatch": f"{len(called)} calls for {len(expected)} expected"}]
    for k, (want, call) in enumerate(zip(expected, called, strict=True)):
        differs = [
            name
            for name, same in (
                ("name", want.name == call.name),
                ("type", want.type == call.type),
                (
                    "input_parameters",
                    "input_parameters" not in params
                    or want.input_parameters == call.input_parameters,
                ),
                ("output", "output" not in params or want.output == call.output),
            )
            if not same
        ]
        if differs:
            return 0.0, [{"mismatch": f"call {k}: {', '.join(differs)} differ"}]
    return 1.0, []


def tool_correctness(
    expected: Sequence[CallView],
    called: Sequence[CallView],
    *,
    evaluation_params: Sequence[Any] = (),
    should_exact_match: bool = False,
    should_consider_ordering: bool = False,
    compat: bool = True,
) -> tuple[float, list[dict[str, Any]]]:
    """DeepEval's tool-calling score of ``called`` against ``expected`` (see the module), and
    per expected tool the call it was matched with."""
    params = _param_names(evaluation_params)
    if should_exact_match:
        return _exact(expected, called, params)
    if should_consider_ordering:
        return _ordered(expected, called, params)
    return _unordered(expected, called, params, compat)


class ToolCorrectness(AgentCallMeasure):
    """DeepEval's tool correctness of a sample's trajectory against its reference calls (see
    the module); no judge. ``strict_mode`` scores below 1 as 0, as DeepEval's does. Either
    field None is ``Failure(missing_input)`` naming it (an empty list is scored)."""

    name = "tool_correctness"
    reads: ClassVar[tuple[str, ...] | None] = (
        "trajectory",
        "reference_tool_calls",
        "metadata.deepeval",
    )

    def __init__(
        self,
        *,
        evaluation_params: Sequence[Any] = (),
        should_exact_match: bool = False,
        should_consider_ordering: bool = False,
        strict_mode: bool = False,
        compat: bool = True,
    ) -> None:
        self.evaluation_params = _param_names(evaluation_params)
        self.should_exact_match = should_exact_match
        self.should_consider_ordering = should_consider_ordering
        self.strict_mode = strict_mode
        self.compat = compat

    def __repr__(self) -> str:
        return (
            f"ToolCorrectness(evaluation_params={list(self.evaluation_params)}, "
            f"should_exact_match={self.should_exact_match}, "
            f"should_consider_ordering={self.should_consider_ordering}, "
            f"strict_mode={self.strict_mode}, compat={self.compat})"
        )

    async def _score(self, sample: Sample, ctx: MetricContext) -> Score:
        assert sample.trajectory is not None
        expected = expected_views(sample)
        called = called_views(sample.trajectory)
        value, details = tool_correctness(
            expected,
            called,
            evaluation_params=self.evaluation_params,
            should_exact_match=self.should_exact_match,
            should_consider_ordering=self.should_consider_ordering,
            compat=self.compat,
        )
        if self.strict_mode and value < 1:
            value = 0.0
        return Score(value=value, reason=self._reason(expected, called, value), details=details)

    def _reason(
        self, expected: Sequence[CallView], called: Sequence[CallView], value: float
    ) -> str:
        mode = (
            "exact match"
            if self.should_exact_match
            else "in order"
            if self.should_consider_ordering
            else "any order"
        )
        compared = ", ".join(("name", "type", *self.evaluation_params))
        want = [c.name for c in expected]
        got = [c.name for c in called]
        missing = sorted(set(want) - set(got))
        head = f"{value:.2f}: expected {want}, called {got} ({mode}; compared: {compared})"
        return head + (f"; never called: {missing}" if missing else "")
