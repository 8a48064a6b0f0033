"""Trajectory match in agentevals' four modes (`ragbridge.core.agent.trajectory_match`).

Hand-checked cases that each differ by one step (a swapped pair, an extra call, a missing call,
one wrong argument) in every mode and argument mode; where agentevals' definition is odd, the
default and ``compat="agentevals"`` side by side, checked against agentevals itself; the
registered measures on samples; and the conformance with agentevals on random trajectories
(``benchmarks/agent_conformance.py``).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from ragbridge.core.agent import (
    TrajectoryMatch,
    TrajectoryStrictMatch,
    TrajectorySubsetMatch,
    TrajectorySupersetMatch,
    TrajectoryUnorderedMatch,
    match_trajectory,
    match_trajectory_messages,
)
from ragbridge.core.metrics import resolve
from ragbridge.core.metrics.base import MetricContext
from ragbridge.core.registry import REGISTRY
from ragbridge.core.results.evaluation import FailureKind, Score
from ragbridge.core.sample import Sample
from ragbridge.core.trajectory import Step
from ragbridge.core.turn import ToolCall

ROOT = Path(__file__).resolve().parents[1]
MODES = ("strict", "unordered", "subset", "superset")


def call(name: str, **args: Any) -> ToolCall:
    return ToolCall(name=name, args=args)


SEARCH = call("search", query="Paris")
LOOKUP = call("lookup", id=1)
WEATHER = call("weather", city="Paris")


def matches(made: list[ToolCall], expected: list[ToolCall], **kw: Any) -> dict[str, float]:
    return {mode: match_trajectory(made, expected, mode=mode, **kw).value for mode in MODES}  # type: ignore[arg-type]


def agentevals_score(
    made: Sequence[ToolCall], expected: Sequence[ToolCall], mode: str, **kw: Any
) -> float:
    """agentevals' own value, each call its own assistant message answered by a tool message."""
    match = pytest.importorskip("agentevals.trajectory.match")

    def messages(calls: Sequence[ToolCall]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = [{"role": "user", "content": "Where?"}]
        for n, c in enumerate(calls):
            function = {"name": c.name, "arguments": json.dumps(c.args)}
            tool_call = {"id": f"c{n}", "type": "function", "function": function}
            out.append({"role": "assistant", "content": "", "tool_calls": [tool_call]})
            out.append({"role": "tool", "content": "ok", "tool_call_id": f"c{n}"})
        return out

    evaluator = match.create_trajectory_match_evaluator(trajectory_match_mode=mode, **kw)
    result = evaluator(outputs=messages(made), reference_outputs=messages(expected))
    return float(result["score"])


# --------------------------------------------------------------------------- 1. one step off


@pytest.mark.parametrize("compat", ["ragbridge", "agentevals"])
def test_the_same_calls_match_in_every_mode(compat: str) -> None:
    assert set(matches([SEARCH, LOOKUP], [SEARCH, LOOKUP], compat=compat).values()) == {1.0}
    assert set(matches([], [], compat=compat).values()) == {1.0}


@pytest.mark.parametrize("compat", ["ragbridge", "agentevals"])
def test_a_swapped_pair_fails_strict_only(compat: str) -> None:
    found = matches([LOOKUP, SEARCH], [SEARCH, LOOKUP], compat=compat)
    assert found == {"strict": 0.0, "unordered": 1.0, "subset": 1.0, "superset": 1.0}


@pytest.mark.parametrize("compat", ["ragbridge", "agentevals"])
def test_an_extra_call_passes_superset_only_and_a_missing_one_subset_only(compat: str) -> None:
    extra = matches([SEARCH, WEATHER, LOOKUP], [SEARCH, LOOKUP], compat=compat)
    assert extra == {"strict": 0.0, "unordered": 0.0, "subset": 0.0, "superset": 1.0}
    missing = matches([SEARCH], [SEARCH, LOOKUP], compat=compat)
    assert missing == {"strict": 0.0, "unordered": 0.0, "subset": 1.0, "superset": 0.0}


@pytest.mark.parametrize("compat", ["ragbridge", "agentevals"])
def test_one_wrong_argument_fails_every_mode_unless_arguments_are_ignored(compat: str) -> None:
    made, expected = [call("search", query="London"), LOOKUP], [SEARCH, LOOKUP]
    assert set(matches(made, expected, compat=compat).values()) == {0.0}
    ignored = matches(made, expected, tool_args_match_mode="ignore", compat=compat)
    assert set(ignored.values()) == {1.0}
    renamed = [call("find", query="Paris"), LOOKUP]  # the tool's name always counts
    assert set(matches(renamed, expected, tool_args_match_mode="ignore").values()) == {0.0}


def test_argument_modes() -> None:
    expected = [call("search", query="Paris", k=3)]
    more = [call("search", query="Paris", k=3, lang="fr")]
    fewer = [call("search", query="Paris")]
    for mode in ("strict", "unordered", "superset"):
        kw: dict[str, Any] = {"mode": mode}
        assert match_trajectory(more, expected, tool_args_match_mode="superset", **kw).matched
        assert not match_trajectory(more, expected, tool_args_match_mode="subset", **kw).matched
        assert match_trajectory(fewer, expected, tool_args_match_mode="subset", **kw).matched
        assert not match_trajectory(fewer, expected, tool_args_match_mode="superset", **kw).matched
        assert not match_trajectory(more, expected, tool_args_match_mode="exact", **kw).matched


def test_overrides_by_mode_keys_and_function() -> None:
    expected = [call("search", query="Paris", opts={"lang": "fr", "k": 3}), LOOKUP]
    made = [call("search", query="Paris", opts={"lang": "fr", "k": 5}), call("lookup", id=2)]
    assert not match_trajectory(made, expected).matched
    overrides: dict[str, Any] = {"search": ["query", "opts.lang"], "lookup": "ignore"}
    assert match_trajectory(made, expected, tool_args_match_overrides=overrides).matched
    overrides["search"] = ["query", "opts.k"]
    assert not match_trajectory(made, expected, tool_args_match_overrides=overrides).matched
    seen: list[tuple[dict[str, Any], dict[str, Any]]] = []

    def same_query(made_args: dict[str, Any], expected_args: dict[str, Any]) -> bool:
        seen.append((made_args, expected_args))
        return bool(made_args["query"] == expected_args["query"])

    overrides["search"] = same_query
    assert match_trajectory(made, expected, tool_args_match_overrides=overrides).matched
    assert seen[0][0]["opts"]["k"] == 5  # the call made first, then the expected call


def test_parallel_calls_of_one_message_may_come_in_any_order_under_strict() -> None:
    both = [("user", None), ("assistant", [SEARCH, LOOKUP]), ("tool", None), ("tool", None)]
    swapped = [("user", None), ("assistant", [LOOKUP, SEARCH]), ("tool", None), ("tool", None)]
    assert match_trajectory_messages(swapped, both, mode="strict").matched
    # the same calls made one message at a time are a different trajectory
    apart = [("user", None), ("assistant", [LOOKUP]), ("tool", None)]
    apart += [("assistant", [SEARCH]), ("tool", None)]
    assert not match_trajectory_messages(apart, both, mode="strict").matched
    assert match_trajectory_messages(apart, both, mode="unordered").matched


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="trajectory_match_mode"):
        match_trajectory([], [], mode="loose")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="tool_args_match_mode"):
        TrajectoryStrictMatch(tool_args_match_mode="fuzzy")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="compat"):
        TrajectoryMatch("subset", compat="ragas")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- 2. agentevals is odd


def test_agentevals_pairs_greedily_and_ragbridge_finds_a_pairing_when_one_exists() -> None:
    # the first expected call takes the first call made that has its arguments; the second
    # expected call then has none left, though the crosswise pairing fits both
    expected = [call("search", q="a"), call("search", q="a", k=1)]
    made = [call("search", q="a", k=1), call("search", q="a", k=2)]
    kw: dict[str, Any] = {"mode": "superset", "tool_args_match_mode": "superset"}
    assert match_trajectory(made, expected, **kw).matched
    assert not match_trajectory(made, expected, compat="agentevals", **kw).matched
    assert agentevals_score(made, expected, "superset", tool_args_match_mode="superset") == 0.0


def test_in_subset_mode_agentevals_compares_arguments_the_other_way_round() -> None:
    # "subset" arguments: the call made has no argument beyond the expected call's
    made, expected = [call("search", q="a")], [call("search", q="a", k=1)]
    kw: dict[str, Any] = {"mode": "subset", "tool_args_match_mode": "subset"}
    assert match_trajectory(made, expected, **kw).matched
    assert not match_trajectory(made, expected, compat="agentevals", **kw).matched
    assert agentevals_score(made, expected, "subset", tool_args_match_mode="subset") == 0.0
    # and the other way round passes there
    backwards: dict[str, Any] = {"mode": "subset", "tool_args_match_mode": "superset"}
    assert match_trajectory(made, expected, compat="agentevals", **backwards).matched
    assert agentevals_score(made, expected, "subset", tool_args_match_mode="superset") == 1.0


def test_agentevals_takes_true_for_one_and_ragbridge_does_not() -> None:
    made, expected = [call("search", k=True)], [call("search", k=1)]
    assert not match_trajectory(made, expected).matched
    assert match_trajectory(made, expected, compat="agentevals").matched
    assert agentevals_score(made, expected, "strict") == 1.0


# --------------------------------------------------------------------------- 3. the measures


def sample(made: list[ToolCall] | None, expected: list[ToolCall] | None) -> Sample:
    steps = None if made is None else [Step(name=c.name, args=c.args) for c in made]
    return Sample(id="s", question="q", trajectory=steps, reference_tool_calls=expected)


def score(metric: Any, s: Sample) -> Score:
    result = asyncio.run(metric.score(s, MetricContext()))
    assert isinstance(result, Score)
    return result


@pytest.mark.parametrize(
    ("cls", "mode"),
    [
        (TrajectoryStrictMatch, "strict"),
        (TrajectoryUnorderedMatch, "unordered"),
        (TrajectorySubsetMatch, "subset"),
        (TrajectorySupersetMatch, "superset"),
    ],
)
def test_each_mode_is_a_registered_measure_named_as_agentevals_keys_it(
    cls: type[TrajectoryMatch], mode: str
) -> None:
    name = f"trajectory_{mode}_match"
    metric = resolve(name)
    assert type(metric) is cls
    assert metric.name == name
    assert TrajectoryMatch(mode).name == name  # type: ignore[arg-type]
    assert REGISTRY.measure(name).requires == ("trajectory", "reference_tool_calls")
    assert REGISTRY.provider(name).needs == frozenset()
    assert not metric.needs_judge


def test_the_measures_score_a_samples_trajectory_with_details() -> None:
    s = sample([SEARCH, call("lookup", id=2)], [SEARCH, LOOKUP])
    strict = score(resolve("trajectory_strict_match"), s)
    assert strict.value == 0.0
    assert strict.details is not None
    assert strict.details["step"] == 1
    assert "call 1 (lookup)" in (strict.reason or "")
    superset = score(TrajectorySupersetMatch(tool_args_match_mode="ignore"), s)
    assert superset.value == 1.0
    s = sample([SEARCH, LOOKUP, WEATHER], [SEARCH, LOOKUP])
    unordered = score(TrajectoryUnorderedMatch(), s)
    assert unordered.value == 0.0
    assert unordered.details is not None
    assert unordered.details["unmatched_calls"] == [{"call": 2, "tool": "weather"}]
    assert "not in the reference: weather" in (unordered.reason or "")


@pytest.mark.parametrize("mode", MODES)
def test_an_absent_field_is_a_missing_input_naming_it(mode: str) -> None:
    metric = TrajectoryMatch(mode)  # type: ignore[arg-type]
    for s, field in (
        (sample(None, [SEARCH]), "trajectory"),
        (sample([SEARCH], None), "reference_tool_calls"),
    ):
        found = score(metric, s)
        assert found.failure is not None
        assert found.failure.kind == FailureKind.MISSING_INPUT
        assert f"'{field}'" in found.failure.message
    assert score(metric, sample([], [])).value == 1.0


# --------------------------------------------------------------------------- 4. against agentevals


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """``benchmarks/agent_conformance.py``, in ``sys.modules`` while the test runs."""
    path = ROOT / "benchmarks" / "agent_conformance.py"
    spec = importlib.util.spec_from_file_location("agent_conformance", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return module


def test_compat_agentevals_equals_agentevals_on_random_trajectories(bench: ModuleType) -> None:
    pytest.importorskip("agentevals")
    cases = bench.make_cases(200, seed=43)
    wanted = {
        "trajectory_strict_match [args exact]",
        "trajectory_unordered_match [args subset]",
        "trajectory_subset_match [args superset]",
        "trajectory_superset_match [args subset]",
        "trajectory_subset_match [args exact, overrides]",
        "trajectory_strict_match [args exact, parallel calls grouped]",
    }
    variants = [v for v in bench.agentevals_variants() if v.measure in wanted]
    assert len(variants) == len(wanted)
    disagreements = 0
    for variant in variants:
        row = bench.compare(variant, cases)
        assert row.max_diff == 0, (row.measure, row.first_difference)
        assert row.exact == len(cases)
        assert 0.1 < row.peer_mean < 0.9, row.measure  # both outcomes are drawn
        disagreements += len(cases) - row.default_agrees
    assert disagreements > 0  # the default differs where agentevals is odd
