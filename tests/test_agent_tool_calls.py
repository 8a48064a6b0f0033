"""Tool-call accuracy and tool-call F1 (`ragbridge.core.agent.tool_calls`).

Hand-checked cases first, each one step wrong (an argument, the order, a call extra or
missing), by default and with ``compat="ragas"``; then the pairing algorithms against brute
force, the string similarities against rapidfuzz, the registered measures on samples, and the
conformance with ragas 0.4's own metrics on random trajectories
(``benchmarks/agent_conformance.py``).
"""

from __future__ import annotations

import asyncio
import importlib.util
import itertools
import random
import sys
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from ragbridge.core.agent import (
    ToolCallAccuracy,
    ToolCallF1,
    arg_score,
    similarity,
    tool_call_accuracy,
    tool_call_f1,
)
from ragbridge.core.agent.matching import best_pairs, ordered_pairs
from ragbridge.core.metrics import resolve
from ragbridge.core.metrics.base import MetricContext
from ragbridge.core.registry import REGISTRY
from ragbridge.core.results.evaluation import FailureKind, Score
from ragbridge.core.sample import Sample
from ragbridge.core.trajectory import Step
from ragbridge.core.turn import ToolCall

ROOT = Path(__file__).resolve().parents[1]


def call(name: str, **args: Any) -> ToolCall:
    return ToolCall(name=name, args=args)


PARIS = call("search", query="Paris", k=3)
LONDON = call("search", query="London", k=3)
LOOKUP = call("lookup", id="A1")
WEATHER = call("weather", city="Paris")


def accuracy(made: list[ToolCall], expected: list[ToolCall], **kw: Any) -> float:
    return tool_call_accuracy(made, expected, **kw).value


# --------------------------------------------------------------------------- 1. accuracy by hand


@pytest.mark.parametrize("compat", ["ragbridge", "ragas"])
def test_the_expected_calls_made_as_expected_score_one(compat: str) -> None:
    assert accuracy([PARIS, LOOKUP], [PARIS, LOOKUP], compat=compat) == 1.0


@pytest.mark.parametrize("compat", ["ragbridge", "ragas"])
def test_one_wrong_argument_costs_that_argument_of_that_call(compat: str) -> None:
    wrong = call("search", query="Paris", k=4)
    # (1/2 for the search, 1 for the lookup) over two calls
    assert accuracy([wrong, LOOKUP], [PARIS, LOOKUP], compat=compat) == 0.75
    found = tool_call_accuracy([wrong, LOOKUP], [PARIS, LOOKUP], compat=compat)
    assert found.pairs == ((0, 0, 0.5), (1, 1, 1.0))


def test_a_swap_costs_one_call_in_order_and_nothing_in_any_order() -> None:
    made, expected = [LOOKUP, PARIS], [PARIS, LOOKUP]
    assert accuracy(made, expected) == 0.5
    assert accuracy(made, expected, strict_order=False) == 1.0
    found = tool_call_accuracy(made, expected)
    assert found.missing == (0,) or found.missing == (1,)
    # RAGAS: the name sequences differ, so the order-sensitive score is 0
    assert accuracy(made, expected, compat="ragas") == 0.0
    assert accuracy(made, expected, strict_order=False, compat="ragas") == 1.0


def test_an_extra_or_a_missing_call_costs_one_call_by_default_and_everything_in_ragas() -> None:
    expected = [PARIS, LOOKUP]
    extra = [PARIS, WEATHER, LOOKUP]
    assert accuracy(extra, expected) == pytest.approx(2 / 3)
    assert tool_call_accuracy(extra, expected).extra == (1,)
    assert accuracy([PARIS], expected) == 0.5
    assert tool_call_accuracy([PARIS], expected).missing == (1,)
    for strict in (True, False):
        assert accuracy(extra, expected, strict_order=strict, compat="ragas") == 0.0
        assert accuracy([PARIS], expected, strict_order=strict, compat="ragas") == 0.0


def test_arguments_compare_as_json_values_and_ragas_compares_their_text() -> None:
    # 1 is not "1" (ragas: str(1) == "1")
    assert accuracy([call("search", k="1")], [call("search", k=1)]) == 0.0
    assert accuracy([call("search", k="1")], [call("search", k=1)], compat="ragas") == 1.0
    # the same object with its keys in another order (ragas: the two texts differ)
    made, expected = call("search", f={"b": 2, "a": 1}), call("search", f={"a": 1, "b": 2})
    assert accuracy([made], [expected]) == 1.0
    assert accuracy([made], [expected], compat="ragas") == 0.0
    # a boolean is not a number; 1 is 1.0
    assert arg_score({"k": True}, {"k": 1}) == 0.0
    assert arg_score({"k": 1.0}, {"k": 1}) == 1.0


def test_an_argument_the_reference_lacks_counts_by_default_and_only_sometimes_in_ragas() -> None:
    expected = call("search", query="x")
    made = call("search", query="x", k=5)
    assert accuracy([made], [expected]) == 0.5  # one of the two arguments either call has
    assert accuracy([made], [expected], compat="ragas") == 1.0  # ignored...
    assert accuracy([made], [call("search")], compat="ragas") == 0.0  # ...unless it has none
    assert accuracy([call("search")], [call("search")], compat="ragas") == 1.0


def test_in_any_order_calls_pair_by_best_match_and_ragas_pairs_them_by_sorting() -> None:
    expected = [call("f", a=1, b=2), call("f", a=2, b=1)]
    made = [call("f", b=2), call("f", a=2, b=1)]
    # best: f(b=2) with f(a=1, b=2) scores 1/2, the other pair 1
    assert accuracy(made, expected, strict_order=False) == 0.75
    # ragas sorts both lists by (name, argument, str(value)) and pairs them crosswise
    assert accuracy(made, expected, strict_order=False, compat="ragas") == 0.0


@pytest.mark.parametrize("compat", ["ragbridge", "ragas"])
def test_the_empty_cases(compat: str) -> None:
    assert accuracy([], [], compat=compat) == 1.0
    assert accuracy([PARIS], [], compat=compat) == 0.0
    assert accuracy([], [PARIS], compat=compat) == 0.0


def test_a_call_to_another_tool_never_pairs() -> None:
    assert accuracy([call("lookup", query="Paris", k=3)], [PARIS]) == 0.0
    assert accuracy([call("lookup", query="Paris", k=3)], [PARIS], compat="ragas") == 0.0


# --------------------------------------------------------------------------- 2. similarity


def test_arguments_by_string_similarity_with_and_without_a_threshold() -> None:
    expected, made = [call("search", query="Paris")], [call("search", query="Pariss")]
    assert accuracy(made, expected) == 0.0
    assert accuracy(made, expected, arg_match="levenshtein") == pytest.approx(5 / 6)
    assert accuracy(made, expected, arg_match="levenshtein", threshold=0.8) == 1.0
    assert accuracy(made, expected, arg_match="levenshtein", threshold=0.9) == 0.0
    # numbers are compared by value by default, as text by ragas
    assert accuracy([call("f", k=100)], [call("f", k=10)], arg_match="levenshtein") == 0.0
    ragas = accuracy([call("f", k=100)], [call("f", k=10)], arg_match="levenshtein", compat="ragas")
    assert ragas == pytest.approx(2 / 3)


def test_the_similarities_on_textbook_pairs() -> None:
    # Jaro 1989 / Winkler 1990: MARTHA-MARHTA and DIXON-DICKSONX
    assert similarity("MARTHA", "MARHTA", "jaro") == pytest.approx(17 / 18)
    assert similarity("MARTHA", "MARHTA", "jaro_winkler") == pytest.approx(0.9611, abs=1e-4)
    assert similarity("DIXON", "DICKSONX", "jaro") == pytest.approx(0.7667, abs=1e-4)
    assert similarity("DIXON", "DICKSONX", "jaro_winkler") == pytest.approx(0.8133, abs=1e-4)
    assert similarity("kitten", "sitting", "levenshtein") == pytest.approx(1 - 3 / 7)
    assert similarity("karolin", "kathrin", "hamming") == pytest.approx(1 - 3 / 7)
    assert similarity("abc", "abcde", "hamming") == pytest.approx(1 - 2 / 5)  # padded
    for distance in ("levenshtein", "hamming", "jaro", "jaro_winkler"):
        assert similarity("", "", distance) == 1.0  # type: ignore[arg-type]
        assert similarity("", "a", distance) == 0.0  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown distance"):
        similarity("a", "b", "cosine")  # type: ignore[arg-type]


def test_the_similarities_are_rapidfuzzs_to_the_float() -> None:
    distance = pytest.importorskip(
        "rapidfuzz.distance", reason="rapidfuzz comes with the ragas extra"
    )
    peers = {
        "levenshtein": distance.Levenshtein,
        "hamming": distance.Hamming,
        "jaro": distance.Jaro,
        "jaro_winkler": distance.JaroWinkler,
    }
    rng = random.Random(5)
    alphabet = "abcé P"
    for _ in range(1500):
        a = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        b = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        if rng.random() < 0.5:
            b = a[: rng.randint(0, len(a))] + b[: rng.randint(0, 2)]
        for name, peer in peers.items():
            assert similarity(a, b, name) == 1 - peer.normalized_distance(a, b), (name, a, b)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- 3. F1 by hand


def test_f1_counts_each_call_and_ragas_counts_distinct_ones() -> None:
    made, expected = [PARIS, PARIS, WEATHER], [PARIS, LOOKUP]
    found = tool_call_f1(made, expected)
    # TP 1 (one search), FP 2 (the repeat, the weather), FN 1 (the lookup)
    assert (found.true_positives, found.false_positives, found.false_negatives) == (1, 2, 1)
    assert found.value == pytest.approx(2 * (1 / 3) * (1 / 2) / (1 / 3 + 1 / 2))
    assert found.extra == (1, 2)
    assert found.missing == (1,)
    ragas = tool_call_f1(
        made, expected, compat="ragas"
    )  # sets: {search, weather} vs {search, lookup}
    assert (ragas.true_positives, ragas.false_positives, ragas.false_negatives) == (1, 1, 1)
    assert ragas.value == 0.5


def test_f1_one_wrong_argument_is_one_false_positive_and_one_false_negative() -> None:
    wrong = call("search", query="Paris", k=4)
    found = tool_call_f1([wrong, LOOKUP], [PARIS, LOOKUP])
    assert (found.true_positives, found.false_positives, found.false_negatives) == (1, 1, 1)
    assert found.value == 0.5


def test_f1_edges_and_ragas_rounding_and_equality() -> None:
    assert tool_call_f1([], []).value == 1.0
    assert tool_call_f1([], [], compat="ragas").value == 0.0
    assert tool_call_f1([PARIS], []).value == 0.0
    # ragas rounds to 4 decimals
    assert tool_call_f1([PARIS], [PARIS, LOOKUP]).value == 2 / 3
    assert tool_call_f1([PARIS], [PARIS, LOOKUP], compat="ragas").value == 0.6667
    # ragas compares with Python's ==: True is 1
    assert tool_call_f1([call("f", k=True)], [call("f", k=1)]).value == 0.0
    assert tool_call_f1([call("f", k=True)], [call("f", k=1)], compat="ragas").value == 1.0


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="arg_match"):
        ToolCallAccuracy(arg_match="cosine")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="threshold"):
        ToolCallAccuracy(threshold=1.5)
    with pytest.raises(ValueError, match="compat"):
        ToolCallF1(compat="deepeval")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- 4. the pairings


def test_ordered_pairs_is_the_best_order_preserving_pairing() -> None:
    rng = random.Random(11)
    for _ in range(300):
        n, m = rng.randint(0, 5), rng.randint(0, 5)
        table = [[rng.choice((None, 0.0, 0.5, 1.0, 1 / 3)) for _ in range(m)] for _ in range(n)]
        pairs = ordered_pairs(n, m, lambda i, j, t=table: t[i][j])  # type: ignore[misc]
        assert all(a[0] < b[0] and a[1] < b[1] for a, b in itertools.pairwise(pairs))
        best = 0.0
        for k in range(min(n, m) + 1):
            for rows in itertools.combinations(range(n), k):
                for cols in itertools.combinations(range(m), k):
                    weights = [table[i][j] for i, j in zip(rows, cols, strict=True)]
                    if all(w is not None for w in weights):
                        best = max(best, sum(w for w in weights if w is not None))
        assert sum(w for _, _, w in pairs) == pytest.approx(best)


def test_best_pairs_is_the_best_assignment_per_tool() -> None:
    rng = random.Random(12)
    for _ in range(300):
        expected = [rng.choice("ab") for _ in range(rng.randint(0, 5))]
        made = [rng.choice("ab") for _ in range(rng.randint(0, 5))]
        table = [[rng.choice((0.0, 0.25, 0.5, 1.0)) for _ in made] for _ in expected]
        pairs = best_pairs(expected, made, lambda i, j, t=table: t[i][j])  # type: ignore[misc]
        assert all(expected[i] == made[j] for i, j, _ in pairs)
        assert len({i for i, _, _ in pairs}) == len({j for _, j, _ in pairs}) == len(pairs)

        assert sum(w for _, _, w in pairs) == pytest.approx(_brute(expected, made, table))
        for name in "ab":  # every call of the scarcer side of a tool is paired
            paired = sum(1 for i, _, _ in pairs if expected[i] == name)
            assert paired == min(expected.count(name), made.count(name))


def _brute(expected: list[str], made: list[str], table: list[list[float]]) -> float:
    """The best total weight of any pairing of same-name calls, by trying them all."""

    def best(i: int, used: frozenset[int]) -> float:
        if i == len(expected):
            return 0.0
        found = best(i + 1, used)
        for j, name in enumerate(made):
            if j not in used and name == expected[i]:
                found = max(found, table[i][j] + best(i + 1, used | {j}))
        return found

    return best(0, frozenset())


# --------------------------------------------------------------------------- 5. the measures


def sample(made: list[ToolCall] | None, expected: list[ToolCall] | None) -> Sample:
    steps = None if made is None else [Step(name=c.name, args=c.args) for c in made]
    return Sample(id="s", question="q", trajectory=steps, reference_tool_calls=expected)


def score(metric: Any, s: Sample) -> Score:
    result = asyncio.run(metric.score(s, MetricContext()))
    assert isinstance(result, Score)
    return result


def test_the_measures_are_registered_and_need_no_model() -> None:
    for name in ("tool_call_accuracy", "tool_call_f1"):
        spec = REGISTRY.measure(name)
        assert spec.kind == "agent"
        assert spec.requires == ("trajectory", "reference_tool_calls")
        provider = REGISTRY.provider(name)
        assert provider.name == "offline"
        assert provider.needs == frozenset()
        metric = resolve(name)
        assert metric.name == name
        assert not metric.needs_judge
        assert not metric.needs_embedder
        assert not metric.needs_nli


def test_the_measures_score_a_samples_trajectory() -> None:
    s = sample([call("search", query="Paris", k=4), LOOKUP, WEATHER], [PARIS, LOOKUP])
    found = score(resolve("tool_call_accuracy"), s)
    assert found.value == pytest.approx(1.5 / 3)
    assert found.details is not None
    assert found.details["pairs"][0] == {
        "reference": 0,
        "call": 0,
        "tool": "search",
        "args_score": 0.5,
    }
    assert found.details["extra"] == [{"call": 2, "tool": "weather"}]
    assert "extra: weather" in (found.reason or "")
    ragas = score(ToolCallAccuracy(compat="ragas"), s)
    assert ragas.value == 0.0
    assert ragas.details is not None
    assert ragas.details["aligned"] is False
    f1 = score(resolve("tool_call_f1"), s)
    assert f1.value == pytest.approx(0.4)  # TP 1, FP 2, FN 1


@pytest.mark.parametrize("metric", [ToolCallAccuracy(), ToolCallF1()])
def test_an_absent_field_is_a_missing_input_naming_it(metric: Any) -> None:
    for s, field in (
        (sample(None, [PARIS]), "trajectory"),
        (sample([PARIS], None), "reference_tool_calls"),
    ):
        found = score(metric, s)
        assert found.failure is not None
        assert found.failure.kind == FailureKind.MISSING_INPUT
        assert f"'{field}'" in found.failure.message
    assert score(metric, sample([], [])).value == 1.0  # empty lists are values


# --------------------------------------------------------------------------- 6. against ragas


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """``benchmarks/agent_conformance.py``, in ``sys.modules`` while the test runs: its
    dataclasses (one is made inside a function) look their module up."""
    path = ROOT / "benchmarks" / "agent_conformance.py"
    spec = importlib.util.spec_from_file_location("agent_conformance", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return module


def test_compat_ragas_equals_ragas_on_random_trajectories(bench: ModuleType) -> None:
    pytest.importorskip("ragas")
    cases = bench.make_cases(250, seed=41)
    assert sum(1 for c in cases if not c.reference) > 10  # the edges are drawn too
    wanted = {
        ("tool_call_accuracy [strict_order, args exact]", "ragas ToolCallAccuracy"),
        ("tool_call_accuracy [any order, args exact]", "ragas ToolCallAccuracy"),
        ("tool_call_accuracy [strict_order, args jaro_winkler]", "ragas ToolCallAccuracy"),
        ("tool_call_accuracy [any order, args levenshtein>=0.8]", "ragas ToolCallAccuracy"),
        ("tool_call_accuracy [any order, args exact]", "ragas collections ToolCallAccuracy"),
        ("tool_call_f1", "ragas ToolCallF1"),
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        variants = [v for v in bench.ragas_variants() if (v.measure, v.peer) in wanted]
        assert len(variants) == len(wanted)
        rows = [bench.compare(v, cases) for v in variants]
    for row in rows:
        assert row.max_diff == 0, (row.measure, row.peer, row.first_difference)
        assert row.exact == len(cases)
        assert 0.1 < row.peer_mean < 0.9  # neither side is trivially constant
        assert row.default_agrees < len(cases)  # the default differs where ragas is odd
