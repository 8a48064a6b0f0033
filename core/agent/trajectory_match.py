"""Trajectory match: whether an agent's tool calls match a reference trajectory's, agentevals' way.

agentevals (LangChain's ``create_trajectory_match_evaluator``) compares an agent's messages with
a reference trajectory's in one of four modes, each a yes/no (1.0/0.0 here):

* ``strict`` — the same calls in the same order (message by message: the same roles, and each
  assistant message's calls the same, in any order within that message);
* ``unordered`` — the same calls in any order (each call made pairs with one expected call);
* ``subset`` — every call made is an expected call (calls may be missing, none may be extra);
* ``superset`` — every expected call was made (calls may be extra, none may be missing).

Two calls pair when they call the same tool and their arguments match by
``tool_args_match_mode``: ``exact`` (equal arguments), ``ignore`` (any arguments), ``subset``
(the call made's arguments are among the expected call's) or ``superset`` (the call made has
at least the expected call's arguments). ``tool_args_match_overrides`` sets another rule per
tool: a mode, a list of argument names (dotted paths into nested objects) that must be equal, or
a function ``(made_args, expected_args) -> bool``.

**The sample's trajectory as agentevals' messages.** A `Sample` holds a flat list of calls and
of expected calls, so each call is read as its own assistant message (answered by a tool
message), on both sides: ``strict`` then asks for the same calls in the same order.
`match_trajectory_messages` takes calls grouped by message, for callers that keep the grouping
(an assistant message with several parallel calls).

**compat="agentevals"** computes what agentevals 0.0.9 computes (checked on thousands of random
trajectories by ``benchmarks/agent_conformance.py``). Where its definition is odd, the default
differs:

* Calls are paired greedily (each expected call takes the first call made that matches it), so
  with ``subset``/``superset`` argument modes or overrides a trajectory can fail although a
  pairing exists; ragbridge finds a pairing whenever one exists (maximum bipartite matching,
  Kuhn 1955).
* In ``subset`` mode agentevals swaps the two sides before comparing arguments, so the
  ``subset`` argument mode asks the *expected* call's arguments to be among the call made's
  (and an override function receives its arguments the other way round); ``unordered`` checks
  the two directions separately, each with its own pairing. ragbridge always compares the call
  made with the expected call, and ``unordered`` asks for one pairing of all calls.
* Values compare with Python's ``==`` after a JSON round trip, so ``true`` matches ``1``;
  ragbridge compares JSON values (`calls.same_value`: a boolean is not a number).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, get_args

from ..metrics.base import MetricContext, declare
from ..results.evaluation import Score
from ..sample import Sample
from .calls import AgentCallMeasure, CallLike, canonical

__all__ = [
    "ArgsMatcher",
    "ToolArgsMatchMode",
    "ToolArgsMatchOverrides",
    "TrajectoryCompat",
    "TrajectoryMatch",
    "TrajectoryMatchMode",
    "TrajectoryMatchResult",
    "TrajectoryMessage",
    "TrajectoryStrictMatch",
    "TrajectorySubsetMatch",
    "TrajectorySupersetMatch",
    "TrajectoryUnorderedMatch",
    "as_messages",
    "match_trajectory",
    "match_trajectory_messages",
]

TrajectoryMatchMode = Literal["strict", "unordered", "subset", "superset"]
ToolArgsMatchMode = Literal["exact", "ignore", "subset", "superset"]
TrajectoryCompat = Literal["ragbridge", "agentevals"]
ArgsMatcher = Callable[[dict[str, Any], dict[str, Any]], bool]
"""``(made_args, expected_args) -> bool``: agentevals' custom argument matcher."""
ToolArgsMatchOverrides = Mapping[str, "ToolArgsMatchMode | Sequence[str] | ArgsMatcher"]
TrajectoryMessage = tuple[str, "Sequence[CallLike] | None"]
"""One message of a trajectory: its role and its tool calls (None: a message without)."""

_MODES: tuple[str, ...] = get_args(TrajectoryMatchMode)
_ARG_MODES: tuple[str, ...] = get_args(ToolArgsMatchMode)
_COMPATS: tuple[str, ...] = get_args(TrajectoryCompat)

Equal = Callable[[Any, Any], bool]


def _python_equal(a: Any, b: Any) -> bool:
    return bool(a == b)


def _json_equal(a: Any, b: Any) -> bool:
    return canonical(a) == canonical(b)


def _by_mode(mode: str, equal: Equal) -> ArgsMatcher:
    if mode == "exact":
        return lambda made, expected: equal(made, expected)
    if mode == "subset":
        return lambda made, expected: all(
            key in expected and equal(expected[key], value) for key, value in made.items()
        )
    if mode == "superset":
        return lambda made, expected: all(
            key in made and equal(made[key], value) for key, value in expected.items()
        )
    return lambda made, expected: True


def _nested(args: dict[str, Any], path: str) -> Any:
    current: Any = args
    for part in path.split("."):
        if not isinstance(current, dict):
            return None
        current = current.get(part)
        if current is None:
            return None
    return current


def _on_keys(keys: Sequence[str], equal: Equal) -> ArgsMatcher:
    return lambda made, expected: all(
        equal(_nested(made, key), _nested(expected, key)) for key in keys
    )


def _matcher(
    tool: str,
    mode: ToolArgsMatchMode,
    overrides: ToolArgsMatchOverrides | None,
    equal: Equal,
) -> ArgsMatcher:
    override = overrides.get(tool) if overrides is not None else None
    if not override:  # agentevals skips a falsy override (an empty list of keys)
        return _by_mode(mode, equal)
    if isinstance(override, str):
        if override not in _ARG_MODES:
            raise ValueError(f"override for {tool!r}: {override!r} is not one of {_ARG_MODES}")
        return _by_mode(override, equal)
    if callable(override):
        return override
    if isinstance(override, Sequence):
        return _on_keys(list(override), equal)
    raise ValueError(f"invalid tool args match override for {tool!r}: {override!r}")


def _args(call: CallLike, compat: str) -> dict[str, Any]:
    args = dict(call.args)
    if compat != "agentevals":
        return args
    try:  # agentevals reads arguments from OpenAI's JSON text: tuples become lists
        loaded = json.loads(json.dumps(args, ensure_ascii=False))
    except (TypeError, ValueError):
        return args
    return loaded if isinstance(loaded, dict) else args


@dataclass(frozen=True)
class TrajectoryMatchResult:
    """Whether the trajectories match, and where they do not.

    ``unmatched_calls`` / ``unmatched_reference``: calls made / expected (flat indices) left
    without a partner by the pairing the mode uses (empty when the mode allows them: extra calls
    under ``superset``); ``message``: under ``strict``, the first message that differs.
    """

    matched: bool
    unmatched_calls: tuple[int, ...] = ()
    unmatched_reference: tuple[int, ...] = ()
    message: int | None = None

    @property
    def value(self) -> float:
        return 1.0 if self.matched else 0.0


class _Side:
    """One side's calls, flat, with their names and (compat-normalised) arguments."""

    def __init__(self, calls: Sequence[CallLike], compat: str) -> None:
        self.names = [c.name for c in calls]
        self.args = [_args(c, compat) for c in calls]


def _pairing(
    made: _Side,
    expected: _Side,
    fits: Callable[[int, int], bool],
    greedy: bool,
) -> dict[int, int]:
    """Expected index -> made index: greedy (agentevals' first fit) or a maximum matching."""
    owner: dict[int, int] = {}  # made -> expected
    pairs: dict[int, int] = {}

    def edges(i: int) -> list[int]:
        return [j for j in range(len(made.names)) if fits(i, j)]

    if greedy:
        for i in range(len(expected.names)):
            for j in edges(i):
                if j not in owner:
                    owner[j], pairs[i] = i, j
                    break
        return pairs
    options = {i: edges(i) for i in range(len(expected.names))}

    def augment(i: int, seen: set[int]) -> bool:
        for j in options[i]:
            if j in seen:
                continue
            seen.add(j)
            if j not in owner or augment(owner[j], seen):
                owner[j] = i
                return True
        return False

    for i in options:
        augment(i, set())
    return {i: j for j, i in owner.items()}


def _covering(
    made: _Side,
    expected: _Side,
    matcher_of: Callable[[str], ArgsMatcher],
    greedy: bool,
    swap_args: bool = False,
) -> tuple[bool, tuple[int, ...], tuple[int, ...]]:
    """Whether every expected call pairs with a distinct call made; and the calls left over
    on each side."""

    def fits(i: int, j: int) -> bool:
        if expected.names[i] != made.names[j]:
            return False
        matcher = matcher_of(expected.names[i])
        if swap_args:
            return bool(matcher(expected.args[i], made.args[j]))
        return bool(matcher(made.args[j], expected.args[i]))

    pairs = _pairing(made, expected, fits, greedy)
    used = set(pairs.values())
    missing = tuple(i for i in range(len(expected.names)) if i not in pairs)
    extra = tuple(j for j in range(len(made.names)) if j not in used)
    return not missing, extra, missing


def _check(mode: str, args_mode: str, compat: str) -> None:
    if mode not in _MODES:
        raise ValueError(f"trajectory_match_mode must be one of {', '.join(_MODES)}, not {mode!r}")
    if args_mode not in _ARG_MODES:
        raise ValueError(
            f"tool_args_match_mode must be one of {', '.join(_ARG_MODES)}, not {args_mode!r}"
        )
    if compat not in _COMPATS:
        raise ValueError(f"compat must be one of {', '.join(_COMPATS)}, not {compat!r}")


def match_trajectory_messages(
    messages: Sequence[TrajectoryMessage],
    reference_messages: Sequence[TrajectoryMessage],
    *,
    mode: TrajectoryMatchMode = "strict",
    tool_args_match_mode: ToolArgsMatchMode = "exact",
    tool_args_match_overrides: ToolArgsMatchOverrides | None = None,
    compat: TrajectoryCompat = "ragbridge",
) -> TrajectoryMatchResult:
    """Trajectory match of ``messages`` against ``reference_messages``, each a list of
    ``(role, calls or None)`` in order (see the module)."""
    _check(mode, tool_args_match_mode, compat)
    agentevals = compat == "agentevals"
    equal = _python_equal if agentevals else _json_equal

    def matcher_of(tool: str) -> ArgsMatcher:
        return _matcher(tool, tool_args_match_mode, tool_args_match_overrides, equal)

    if mode == "strict":
        return _strict(messages, reference_messages, matcher_of, compat)
    made = _Side([c for _, calls in messages for c in calls or ()], compat)
    expected = _Side([c for _, calls in reference_messages for c in calls or ()], compat)
    if not agentevals:
        if mode == "subset":  # every call made pairs with a distinct expected call
            ok, _, unpaired = _covering(expected, made, matcher_of, False, swap_args=True)
            return TrajectoryMatchResult(ok, unmatched_calls=unpaired)
        ok, extra, missing = _covering(made, expected, matcher_of, False)
        if mode == "unordered":
            ok = ok and not extra
            return TrajectoryMatchResult(ok, extra, missing)
        return TrajectoryMatchResult(ok, (), missing)
    # agentevals: "is A a superset of B" pairs each call of B with the first free call of A,
    # comparing matcher(A's args, B's args) whichever side A is.
    if mode == "superset":
        ok, _, missing = _covering(made, expected, matcher_of, True)
        return TrajectoryMatchResult(ok, (), missing)
    if mode == "subset":
        ok, _, extra = _covering(expected, made, matcher_of, True)
        return TrajectoryMatchResult(ok, extra, ())
    ok_sup, _, missing = _covering(made, expected, matcher_of, True)
    ok_sub, _, extra = _covering(expected, made, matcher_of, True)
    return TrajectoryMatchResult(ok_sup and ok_sub, extra, missing)


def _strict(
    messages: Sequence[TrajectoryMessage],
    reference_messages: Sequence[TrajectoryMessage],
    matcher_of: Callable[[str], ArgsMatcher],
    compat: str,
) -> TrajectoryMatchResult:
    flat_made = flat_expected = 0
    if len(messages) != len(reference_messages):
        return TrajectoryMatchResult(False, message=min(len(messages), len(reference_messages)))
    for position, ((role, calls), (ref_role, ref_calls)) in enumerate(
        zip(messages, reference_messages, strict=True)
    ):
        if role != ref_role or (calls is None) != (ref_calls is None):
            return TrajectoryMatchResult(False, message=position)
        if calls is None or ref_calls is None:
            continue
        if len(calls) != len(ref_calls):
            return TrajectoryMatchResult(False, message=position)
        made = _Side(calls, compat)
        expected = _Side(ref_calls, compat)
        # agentevals: each call made takes the first free expected call it matches
        ok, extra, missing = _covering(
            expected, made, matcher_of, compat == "agentevals", swap_args=True
        )
        if not ok:
            return TrajectoryMatchResult(
                False,
                unmatched_calls=tuple(flat_made + j for j in missing),
                unmatched_reference=tuple(flat_expected + i for i in extra),
                message=position,
            )
        flat_made += len(calls)
        flat_expected += len(ref_calls)
    return TrajectoryMatchResult(True)


def as_messages(calls: Sequence[CallLike]) -> list[TrajectoryMessage]:
    """A flat list of calls as agentevals' messages: each call its own assistant message,
    answered by a tool message."""
    out: list[TrajectoryMessage] = []
    for call in calls:
        out += [("assistant", [call]), ("tool", None)]
    return out


def match_trajectory(
    calls: Sequence[CallLike],
    reference: Sequence[CallLike],
    *,
    mode: TrajectoryMatchMode = "strict",
    tool_args_match_mode: ToolArgsMatchMode = "exact",
    tool_args_match_overrides: ToolArgsMatchOverrides | None = None,
    compat: TrajectoryCompat = "ragbridge",
) -> TrajectoryMatchResult:
    """Trajectory match of ``calls`` (made, in order) against ``reference`` (expected), each
    call read as its own message (see the module)."""
    return match_trajectory_messages(
        as_messages(calls),
        as_messages(reference),
        mode=mode,
        tool_args_match_mode=tool_args_match_mode,
        tool_args_match_overrides=tool_args_match_overrides,
        compat=compat,
    )


class TrajectoryMatch(AgentCallMeasure):
    """Trajectory match of the sample's trajectory against its reference tool calls: 1.0 when
    they match in ``mode``, else 0.0 (see the module; arguments as `match_trajectory`'s).

    Named ``trajectory_<mode>_match``, agentevals' feedback key. ``details``: the modes, and
    the calls made and expected left unpaired (``unmatched_calls``, ``unmatched_reference``:
    step indices and tools); under ``strict``, the first ``step`` that differs.
    """

    reads: ClassVar[tuple[str, ...] | None] = ("trajectory", "reference_tool_calls")

    def __init__(
        self,
        mode: TrajectoryMatchMode = "strict",
        *,
        tool_args_match_mode: ToolArgsMatchMode = "exact",
        tool_args_match_overrides: ToolArgsMatchOverrides | None = None,
        compat: TrajectoryCompat = "ragbridge",
    ) -> None:
        _check(mode, tool_args_match_mode, compat)
        self.mode: TrajectoryMatchMode = mode
        self.name = f"trajectory_{mode}_match"
        self.tool_args_match_mode: ToolArgsMatchMode = tool_args_match_mode
        self.tool_args_match_overrides = (
            None if tool_args_match_overrides is None else dict(tool_args_match_overrides)
        )
        self.compat: TrajectoryCompat = compat

    async def _score(self, sample: Sample, ctx: MetricContext) -> Score:
        calls, reference = self.calls_of(sample)
        found = match_trajectory(
            calls,
            reference,
            mode=self.mode,
            tool_args_match_mode=self.tool_args_match_mode,
            tool_args_match_overrides=self.tool_args_match_overrides,
            compat=self.compat,
        )
        details: dict[str, Any] = {
            "mode": self.mode,
            "tool_args_match_mode": self.tool_args_match_mode,
            "unmatched_calls": [{"call": j, "tool": calls[j].name} for j in found.unmatched_calls],
            "unmatched_reference": [
                {"reference": i, "tool": reference[i].name} for i in found.unmatched_reference
            ],
            "calls": len(calls),
            "expected": len(reference),
        }
        if self.compat != "ragbridge":
            details["compat"] = self.compat
        if found.message is not None:
            details["step"] = found.message // 2  # each call is an assistant and a tool message
        return Score(
            value=found.value, reason=self._reason(found, calls, reference), details=details
        )

    def _reason(
        self, found: TrajectoryMatchResult, calls: Sequence[CallLike], reference: Sequence[CallLike]
    ) -> str:
        sizes = f"calls made {len(calls)}, expected {len(reference)}"
        if found.matched:
            return f"the trajectory matches the reference ({self.mode}; {sizes})"
        if self.mode == "strict":
            step = (found.message or 0) // 2
            if len(calls) != len(reference):
                return f"strict: {sizes}"
            return (
                f"strict: call {step} ({calls[step].name}) does not match the reference's "
                f"call {step} ({reference[step].name})"
            )
        parts = [f"{self.mode}: {sizes}"]
        if found.unmatched_calls:
            names = ", ".join(calls[j].name for j in found.unmatched_calls)
            parts.append(f"not in the reference: {names}")
        if found.unmatched_reference:
            names = ", ".join(reference[i].name for i in found.unmatched_reference)
            parts.append(f"not made: {names}")
        return "; ".join(parts)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(mode={self.mode!r}, "
            f"tool_args_match_mode={self.tool_args_match_mode!r}, compat={self.compat!r})"
        )


class _OneMode(TrajectoryMatch):
    """`TrajectoryMatch` with its mode fixed by the class (``fixed_mode``): one registered
    measure per agentevals mode, each named for it."""

    fixed_mode: ClassVar[TrajectoryMatchMode] = "strict"

    def __init__(
        self,
        *,
        tool_args_match_mode: ToolArgsMatchMode = "exact",
        tool_args_match_overrides: ToolArgsMatchOverrides | None = None,
        compat: TrajectoryCompat = "ragbridge",
    ) -> None:
        super().__init__(
            self.fixed_mode,
            tool_args_match_mode=tool_args_match_mode,
            tool_args_match_overrides=tool_args_match_overrides,
            compat=compat,
        )


class TrajectoryStrictMatch(_OneMode):
    """`TrajectoryMatch` in ``strict`` mode: the same calls in the same order."""

    reads: ClassVar[tuple[str, ...] | None] = ("trajectory", "reference_tool_calls")
    fixed_mode: ClassVar[TrajectoryMatchMode] = "strict"


class TrajectoryUnorderedMatch(_OneMode):
    """`TrajectoryMatch` in ``unordered`` mode: the same calls in any order."""

    reads: ClassVar[tuple[str, ...] | None] = ("trajectory", "reference_tool_calls")
    fixed_mode: ClassVar[TrajectoryMatchMode] = "unordered"


class TrajectorySubsetMatch(_OneMode):
    """`TrajectoryMatch` in ``subset`` mode: no call beyond the expected ones."""

    reads: ClassVar[tuple[str, ...] | None] = ("trajectory", "reference_tool_calls")
    fixed_mode: ClassVar[TrajectoryMatchMode] = "subset"


class TrajectorySupersetMatch(_OneMode):
    """`TrajectoryMatch` in ``superset`` mode: every expected call made, extra calls allowed."""

    reads: ClassVar[tuple[str, ...] | None] = ("trajectory", "reference_tool_calls")
    fixed_mode: ClassVar[TrajectoryMatchMode] = "superset"


_EDGES = {
    "no trajectory or no reference_tool_calls": "failure missing_input naming the field",
    "no call made and none expected": "1.0",
}
_HOW = (
    "each call and each expected call an agentevals message; pairs calls of one tool whose "
    "arguments match (exact, ignore, subset, superset, per-tool overrides) by maximum matching; "
    "compat='agentevals' reproduces agentevals 0.0.9"
)
_MEANINGS = {
    TrajectoryStrictMatch: "1 when the agent made the expected tool calls in the expected order",
    TrajectoryUnorderedMatch: "1 when the agent made the expected tool calls, in any order",
    TrajectorySubsetMatch: "1 when every tool call the agent made is an expected one",
    TrajectorySupersetMatch: "1 when the agent made every expected tool call (extra calls allowed)",
}
for _cls, _meaning in _MEANINGS.items():
    declare(_cls, meaning=_meaning, how=_HOW, edges=dict(_EDGES), kind="agent")
