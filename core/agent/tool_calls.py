"""Tool-call accuracy and tool-call F1: the calls an agent made against the calls expected.

Both read a sample's ``trajectory`` (the calls made, in order) and ``reference_tool_calls``
(the calls expected), and compare calls by tool name and arguments (`calls.same_value`, or a
string similarity for `tool_call_accuracy`).

**tool_call_accuracy** (RAGAS's ``ToolCallAccuracy``). The calls made are paired with the
calls expected — in order (``strict_order=True``) or in any order — so as to score the most;
a pair scores the share of its arguments that match (over the arguments either call has), and

    accuracy = sum of the pairs' argument scores / max(calls made, calls expected)

so an extra call and a missing call each cost one call's worth, and a swapped pair under
``strict_order`` costs one of the two. No call made and none expected is 1.0.

**tool_call_f1** (RAGAS's ``ToolCallF1``). A call made is a true positive when an expected
call has the same tool and the same arguments; counts are of calls (a repeated call is counted
each time it is made or expected): ``P = TP / made``, ``R = TP / expected``,
``F1 = 2PR / (P + R)``. No call made and none expected is 1.0.

**compat="ragas"** computes what ragas 0.4.3 computes, to the float (checked on thousands of
random trajectories by ``benchmarks/agent_conformance.py``). Where its definition is odd:

* Accuracy is 0 whenever the two lists of tool names differ as sequences (with
  ``strict_order``) or as multisets (without) — so one extra or one missing call scores 0,
  though RAGAS documents a proportional "coverage penalty" (it is never reached), and one
  swapped pair scores 0 under ``strict_order``.
* Without ``strict_order`` calls are paired after sorting both lists by (name, argument names
  and ``str`` values), not by best match: two calls of one tool can be paired crosswise and
  score less than their best pairing.
* Arguments compare as ``str(value)``: ``1`` matches ``"1"``, and two equal objects whose keys
  are in another order differ. An argument the reference does not have is ignored, unless the
  reference call has no argument at all: then the call scores 0.
* F1 compares sets: a call repeated counts once, made or expected; values compare with
  Python's ``==`` (``True`` matches ``1``); no call made and none expected is 0.0, not 1.0
  as in accuracy; the value is rounded to 4 decimals.

**Arguments by similarity.** ``arg_match`` names one of RAGAS's ``NonLLMStringSimilarity``
distances (``levenshtein``, ``hamming``, ``jaro``, ``jaro_winkler``) to credit an argument with
the string similarity of its value (`similarity`) instead of 0 or 1; ``threshold`` turns that
into 1 when the similarity reaches it and 0 below (``compat="ragas"`` with a threshold is
RAGAS given an argument metric that thresholds ``NonLLMStringSimilarity``). By default only
string values are compared by similarity, other values by equality; with ``compat="ragas"``
every value's ``str`` is.
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, get_args

from ..metrics.base import MetricContext, declare
from ..results.evaluation import Score
from ..sample import Sample
from .calls import AgentCallMeasure, CallLike, canonical, same_value
from .matching import Pair, best_pairs, ordered_pairs
from .string_similarity import DISTANCES, similarity

__all__ = [
    "ArgMatch",
    "CallAlignment",
    "ToolCallAccuracy",
    "ToolCallCounts",
    "ToolCallF1",
    "ToolCallsCompat",
    "arg_score",
    "tool_call_accuracy",
    "tool_call_f1",
]

ToolCallsCompat = Literal["ragbridge", "ragas"]
ArgMatch = Literal["exact", "levenshtein", "hamming", "jaro", "jaro_winkler"]
_COMPATS: tuple[str, ...] = get_args(ToolCallsCompat)
_ARG_MATCHES: tuple[str, ...] = ("exact", *DISTANCES)


def _check(arg_match: str, threshold: float | None, compat: str) -> None:
    if arg_match not in _ARG_MATCHES:
        raise ValueError(f"arg_match must be one of {', '.join(_ARG_MATCHES)}, not {arg_match!r}")
    if threshold is not None and not 0.0 <= threshold <= 1.0:
        raise ValueError(f"threshold must be in [0, 1] or None, not {threshold!r}")
    if compat not in _COMPATS:
        raise ValueError(f"compat must be one of {', '.join(_COMPATS)}, not {compat!r}")


def _value_score(
    made: Any, expected: Any, arg_match: ArgMatch, threshold: float | None, compat: str
) -> float:
    if compat == "ragas":
        made, expected = str(made), str(expected)
    if arg_match == "exact":
        if compat == "ragas":
            return float(expected == made)
        return float(same_value(made, expected))
    if not (isinstance(made, str) and isinstance(expected, str)):
        return float(same_value(made, expected))
    score = similarity(expected, made, arg_match)
    return score if threshold is None else float(score >= threshold)


def arg_score(
    made: Mapping[str, Any],
    expected: Mapping[str, Any],
    *,
    arg_match: ArgMatch = "exact",
    threshold: float | None = None,
    compat: ToolCallsCompat = "ragbridge",
) -> float:
    """The share of the arguments of two calls of one tool that match, in [0, 1].

    By default over every argument either call has (an argument only one call has counts as
    one that does not match); two calls with no argument match fully. With
    ``compat="ragas"``, over the expected call's arguments only (see the module).
    """
    if compat == "ragas":
        if not expected and not made:
            return 1.0
        if not expected:
            return 0.0
        total = 0.0
        for key in expected:
            if key in made:
                total += _value_score(made[key], expected[key], arg_match, threshold, compat)
        return total / len(expected)
    keys = len(expected) + sum(1 for key in made if key not in expected)
    if not keys:
        return 1.0
    total = 0.0
    for key in expected:
        if key in made:
            total += _value_score(made[key], expected[key], arg_match, threshold, compat)
    return total / keys


@dataclass(frozen=True)
class CallAlignment:
    """How the calls made were paired with the calls expected, and the accuracy that gives.

    ``pairs`` are (expected index, made index, argument score) in expected order; ``missing``
    the expected calls left unpaired, ``extra`` the calls made left unpaired (indices into the
    lists as given). ``aligned`` is RAGAS's sequence check (always True by default).
    """

    value: float
    pairs: tuple[Pair, ...]
    missing: tuple[int, ...]
    extra: tuple[int, ...]
    aligned: bool = True


def tool_call_accuracy(
    calls: Sequence[CallLike],
    reference: Sequence[CallLike],
    *,
    strict_order: bool = True,
    arg_match: ArgMatch = "exact",
    threshold: float | None = None,
    compat: ToolCallsCompat = "ragbridge",
) -> CallAlignment:
    """Tool-call accuracy of ``calls`` (made, in order) against ``reference`` (expected).

    See the module for the definition, the arguments, and what ``compat="ragas"`` changes.
    """
    _check(arg_match, threshold, compat)
    n_made, n_expected = len(calls), len(reference)
    if not n_made or not n_expected:
        value = 1.0 if not n_made and not n_expected else 0.0
        return CallAlignment(value, (), tuple(range(n_expected)), tuple(range(n_made)))
    if compat == "ragas":
        return _ragas_accuracy(calls, reference, strict_order, arg_match, threshold)

    def weight(i: int, j: int) -> float | None:
        if reference[i].name != calls[j].name:
            return None
        return arg_score(calls[j].args, reference[i].args, arg_match=arg_match, threshold=threshold)

    if strict_order:
        pairs = ordered_pairs(n_expected, n_made, weight)
    else:
        pairs = best_pairs(
            [c.name for c in reference],
            [c.name for c in calls],
            lambda i, j: weight(i, j) or 0.0,
        )
    total = 0.0
    for _, _, w in pairs:
        total += w
    paired_expected = {i for i, _, _ in pairs}
    paired_made = {j for _, j, _ in pairs}
    return CallAlignment(
        value=total / max(n_made, n_expected),
        pairs=tuple(pairs),
        missing=tuple(i for i in range(n_expected) if i not in paired_expected),
        extra=tuple(j for j in range(n_made) if j not in paired_made),
    )


def _sort_key(call: CallLike) -> tuple[str, ...]:
    # RAGAS's order: the name, then each argument's name and str(value), by argument name
    key = [call.name]
    for name in sorted(call.args):
        key += [name, str(call.args[name])]
    return tuple(key)


def _ragas_accuracy(
    calls: Sequence[CallLike],
    reference: Sequence[CallLike],
    strict_order: bool,
    arg_match: ArgMatch,
    threshold: float | None,
) -> CallAlignment:
    made = list(range(len(calls)))
    expected = list(range(len(reference)))
    if not strict_order:
        made.sort(key=lambda j: _sort_key(calls[j]))
        expected.sort(key=lambda i: _sort_key(reference[i]))
    made_names = [calls[j].name for j in made]
    expected_names = [reference[i].name for i in expected]
    if strict_order:
        aligned = made_names == expected_names
    else:
        aligned = sorted(made_names) == sorted(expected_names)
    pairs: list[Pair] = []
    total = 0.0
    for i, j in zip(expected, made, strict=False):
        if reference[i].name == calls[j].name:
            w = arg_score(
                calls[j].args,
                reference[i].args,
                arg_match=arg_match,
                threshold=threshold,
                compat="ragas",
            )
            total += w
            pairs.append((i, j, w))
    total /= len(reference)
    compared = min(len(calls), len(reference))
    if compared < len(reference):
        total *= compared / len(reference)  # RAGAS's coverage penalty (never reached: see above)
    paired_expected = {i for i, _, _ in pairs}
    paired_made = {j for _, j, _ in pairs}
    return CallAlignment(
        value=total * int(aligned),
        pairs=tuple(sorted(pairs)),
        missing=tuple(i for i in range(len(reference)) if i not in paired_expected),
        extra=tuple(j for j in range(len(calls)) if j not in paired_made),
        aligned=aligned,
    )


@dataclass(frozen=True)
class ToolCallCounts:
    """Tool-call F1 and its counts: calls made that were expected (``true_positives``), made
    but not expected (``false_positives``), expected but not made (``false_negatives``);
    ``extra`` and ``missing`` are indices of those calls (the first of equal ones, in
    compat mode where equal calls count once)."""

    value: float
    precision: float
    recall: float
    true_positives: int
    false_positives: int
    false_negatives: int
    extra: tuple[int, ...] = field(default=())
    missing: tuple[int, ...] = field(default=())


def _ragas_hashable(value: Any) -> Any:
    # RAGAS's make_hashable: equality is then Python's (True == 1, [1] == (1,))
    if isinstance(value, dict):
        return frozenset((k, _ragas_hashable(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return tuple(_ragas_hashable(v) for v in value)
    if isinstance(value, set):
        return frozenset(_ragas_hashable(v) for v in value)
    return value


def _f1(tp: int, fp: int, fn: int) -> tuple[float, float, float]:
    precision = tp / (tp + fp) if tp + fp > 0 else 0.0
    recall = tp / (tp + fn) if tp + fn > 0 else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    return f1, precision, recall


def tool_call_f1(
    calls: Sequence[CallLike],
    reference: Sequence[CallLike],
    *,
    compat: ToolCallsCompat = "ragbridge",
) -> ToolCallCounts:
    """Tool-call F1 of ``calls`` against ``reference`` (see the module; ``compat="ragas"``
    counts distinct calls and rounds to 4 decimals, as RAGAS does)."""
    _check("exact", None, compat)
    if compat == "ragas":
        made_keys = [(c.name, _ragas_hashable(dict(c.args))) for c in calls]
        expected_keys = [(c.name, _ragas_hashable(dict(c.args))) for c in reference]
        made_set, expected_set = set(made_keys), set(expected_keys)
        tp = len(made_set & expected_set)
        fp = len(made_set - expected_set)
        fn = len(expected_set - made_set)
        f1, precision, recall = _f1(tp, fp, fn)
        return ToolCallCounts(
            round(f1, 4),
            precision,
            recall,
            tp,
            fp,
            fn,
            extra=_first_of(made_keys, made_set - expected_set),
            missing=_first_of(expected_keys, expected_set - made_set),
        )
    if not calls and not reference:
        return ToolCallCounts(1.0, 1.0, 1.0, 0, 0, 0)
    made_c = [(c.name, canonical(dict(c.args))) for c in calls]
    expected_c = [(c.name, canonical(dict(c.args))) for c in reference]
    left = Counter(expected_c)
    extra: list[int] = []
    for j, key in enumerate(made_c):
        if left[key] > 0:
            left[key] -= 1
        else:
            extra.append(j)
    unmatched = Counter(made_c)
    missing: list[int] = []
    for i, key in enumerate(expected_c):
        if unmatched[key] > 0:
            unmatched[key] -= 1
        else:
            missing.append(i)
    tp = len(calls) - len(extra)
    f1, precision, recall = _f1(tp, len(extra), len(missing))
    return ToolCallCounts(
        f1, precision, recall, tp, len(extra), len(missing), tuple(extra), tuple(missing)
    )


def _first_of(keys: Sequence[Hashable], wanted: set[Any]) -> tuple[int, ...]:
    seen: set[Any] = set()
    out: list[int] = []
    for index, key in enumerate(keys):
        if key in wanted and key not in seen:
            seen.add(key)
            out.append(index)
    return tuple(out)


def _names(calls: Sequence[CallLike], indices: Sequence[int]) -> list[str]:
    return [calls[i].name for i in indices]


class ToolCallAccuracy(AgentCallMeasure):
    """Tool-call accuracy of the sample's trajectory against its reference tool calls.

    ``strict_order``, ``arg_match``, ``threshold`` and ``compat`` are those of
    `tool_call_accuracy`. ``details``: each pair (``reference``/``call`` indices, ``tool``,
    ``args_score``), the ``missing`` expected calls and the ``extra`` calls made (indices and
    tools), and with ``compat="ragas"`` whether the name sequences ``aligned``.
    """

    reads: ClassVar[tuple[str, ...] | None] = ("trajectory", "reference_tool_calls")

    def __init__(
        self,
        *,
        strict_order: bool = True,
        arg_match: ArgMatch = "exact",
        threshold: float | None = None,
        compat: ToolCallsCompat = "ragbridge",
    ) -> None:
        _check(arg_match, threshold, compat)
        self.strict_order = strict_order
        self.arg_match: ArgMatch = arg_match
        self.threshold = threshold
        self.compat: ToolCallsCompat = compat

    async def _score(self, sample: Sample, ctx: MetricContext) -> Score:
        calls, reference = self.calls_of(sample)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            found = tool_call_accuracy(
                calls,
                reference,
                strict_order=self.strict_order,
                arg_match=self.arg_match,
                threshold=self.threshold,
                compat=self.compat,
            )
        details: dict[str, Any] = {
            "pairs": [
                {"reference": i, "call": j, "tool": reference[i].name, "args_score": w}
                for i, j, w in found.pairs
            ],
            "missing": [{"reference": i, "tool": reference[i].name} for i in found.missing],
            "extra": [{"call": j, "tool": calls[j].name} for j in found.extra],
            "calls": len(calls),
            "expected": len(reference),
        }
        if self.compat != "ragbridge":
            details["aligned"] = found.aligned
            details["compat"] = self.compat
        full = sum(1 for _, _, w in found.pairs if w == 1.0)
        reason = f"{full} of {len(reference)} expected calls made with matching arguments"
        if found.missing:
            reason += f"; missing: {', '.join(_names(reference, found.missing))}"
        if found.extra:
            reason += f"; extra: {', '.join(_names(calls, found.extra))}"
        if not found.aligned:
            reason += "; the tool sequence differs from the reference's, so RAGAS scores 0"
        return Score(value=found.value, reason=reason, details=details)

    def __repr__(self) -> str:
        return (
            f"ToolCallAccuracy(strict_order={self.strict_order}, arg_match={self.arg_match!r}, "
            f"threshold={self.threshold!r}, compat={self.compat!r})"
        )


class ToolCallF1(AgentCallMeasure):
    """Tool-call F1 of the sample's trajectory against its reference tool calls.

    ``details``: ``precision``, ``recall``, the counts, and the ``extra`` and ``missing``
    calls (indices and tools).
    """

    reads: ClassVar[tuple[str, ...] | None] = ("trajectory", "reference_tool_calls")

    def __init__(self, *, compat: ToolCallsCompat = "ragbridge") -> None:
        _check("exact", None, compat)
        self.compat: ToolCallsCompat = compat

    async def _score(self, sample: Sample, ctx: MetricContext) -> Score:
        calls, reference = self.calls_of(sample)
        found = tool_call_f1(calls, reference, compat=self.compat)
        details: dict[str, Any] = {
            "precision": found.precision,
            "recall": found.recall,
            "true_positives": found.true_positives,
            "false_positives": found.false_positives,
            "false_negatives": found.false_negatives,
            "extra": [{"call": j, "tool": calls[j].name} for j in found.extra],
            "missing": [{"reference": i, "tool": reference[i].name} for i in found.missing],
        }
        if self.compat != "ragbridge":
            details["compat"] = self.compat
        reason = (
            f"calls as expected {found.true_positives}, not expected {found.false_positives}, "
            f"expected but not made {found.false_negatives}"
        )
        return Score(value=found.value, reason=reason, details=details)

    def __repr__(self) -> str:
        return f"ToolCallF1(compat={self.compat!r})"


_EDGES = {
    "no trajectory or no reference_tool_calls": "failure missing_input naming the field",
    "no call made and none expected": "1.0 (compat='ragas': accuracy 1.0, F1 0.0)",
    "calls made, none expected": "0.0",
}
declare(
    ToolCallAccuracy,
    meaning=(
        "share of the expected tool calls made with matching arguments, calls paired in order "
        "(or in any order), over the larger of the calls made and expected"
    ),
    how=(
        "pairs calls of the same tool to score the most (in order by dynamic programming, "
        "in any order by assignment); arguments by equality or string similarity; "
        "compat='ragas' reproduces ragas 0.4 ToolCallAccuracy"
    ),
    edges={**_EDGES, "an extra or a missing call": "costs that call (compat='ragas': 0.0)"},
    kind="agent",
)
declare(
    ToolCallF1,
    meaning="F1 of the calls made against the calls expected (a match: same tool, same arguments)",
    how=(
        "counts calls equal in tool and arguments (JSON equality), each as often as it occurs; "
        "compat='ragas' reproduces ragas 0.4 ToolCallF1 (sets, rounded to 4 decimals)"
    ),
    edges={**_EDGES, "a call repeated": "counted each time (compat='ragas': once)"},
    kind="agent",
)
