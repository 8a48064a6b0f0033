"""What the tool-call measures share: a call's shape, argument equality, the sample's two lists.

A call is anything with a ``name`` and ``args`` — a `Step` of a trajectory or a reference
`ToolCall` — so the functions of `tool_calls` and `trajectory_match` also take an adapter's own
objects once it has read them into that shape.

**Argument equality.** Arguments are JSON values (tools are called with JSON objects), so two
values are equal when they are the same JSON value: objects compare without regard to key
order, arrays in order, numbers by value (``1`` is ``1.0``), and a boolean is not a number
(``true`` is not ``1``). RAGAS compares ``str(value)`` (so ``1`` matches ``"1"`` and two equal
objects written in another key order differ) or Python's ``==`` (so ``True`` matches ``1``), and
agentevals Python's ``==``: those rules are kept behind each measure's ``compat=`` switch.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from typing import Any, ClassVar, Protocol

from ..metrics.base import Metric, MetricContext
from ..results.evaluation import Failure, FailureKind
from ..sample import Sample

__all__ = ["AgentCallMeasure", "CallLike", "canonical", "same_value"]


class CallLike(Protocol):
    """A tool call as the measures read it: the tool's name and its arguments."""

    @property
    def name(self) -> str: ...

    @property
    def args(self) -> Mapping[str, Any]: ...


def canonical(value: Any) -> Hashable:
    """A hashable form of a JSON value in which equal values are equal (see the module).

    Tuples count as arrays and a non-string key as its text, as they would once written as
    JSON; a value JSON has no form for is kept as itself when hashable, else as its ``repr``.
    """
    if isinstance(value, bool) or value is None:
        return ("literal", value)
    if isinstance(value, (int, float)):
        if isinstance(value, float) and math.isnan(value):
            return ("nan", object())  # NaN equals nothing, itself included
        return ("number", value)
    if isinstance(value, str):
        return ("string", value)
    if isinstance(value, Mapping):
        return ("object", frozenset((str(k), canonical(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return ("array", tuple(canonical(v) for v in value))
    if isinstance(value, Hashable):
        return ("other", value)
    return ("other", repr(value))


def same_value(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` are the same JSON value."""
    return canonical(a) == canonical(b)


class AgentCallMeasure(Metric):
    """Base of the measures comparing a sample's ``trajectory`` with its ``reference_tool_calls``.

    Both fields are required to be present, not non-empty: an empty trajectory is an agent that
    called nothing, an empty reference a task that needed no call, and both are scored. Either
    one absent (None) is ``Failure(missing_input)`` naming it.
    """

    requires: ClassVar[tuple[str, ...]] = ("trajectory", "reference_tool_calls")
    reads: ClassVar[tuple[str, ...] | None] = ("trajectory", "reference_tool_calls")
    needs_judge = False
    provider = "offline"

    def missing_input(self, sample: Sample, ctx: MetricContext) -> Failure | None:
        hints = {
            "trajectory": "the tool calls the agent made (Sample.trajectory, a list of Step)",
            "reference_tool_calls": (
                "the tool calls expected (Sample.reference_tool_calls, a list of ToolCall)"
            ),
        }
        for field in self.requires:
            if getattr(sample, field) is None:
                return Failure(
                    kind=FailureKind.MISSING_INPUT,
                    message=(
                        f"{self.name} needs the sample's {field!r}, which is None: "
                        f"give {hints[field]}; an empty list is a valid value"
                    ),
                )
        return None

    @staticmethod
    def calls_of(sample: Sample) -> tuple[Sequence[CallLike], Sequence[CallLike]]:
        """The sample's calls made and calls expected (checked present by `missing_input`)."""
        return sample.trajectory or [], sample.reference_tool_calls or []
