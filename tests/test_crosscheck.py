"""Cross-framework comparison statistics, from per-framework Evaluations."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ragbridge.core.results import stats
from ragbridge.core.results.crosscheck import CrossComparison, Skipped, compare_frameworks
from ragbridge.core.results.evaluation import Evaluation, Score, Usage


def _evaluation(values: dict[str, float | Score], measure: str = "faithfulness") -> Evaluation:
    ev = Evaluation()
    for sid, v in values.items():
        ev.add(sid, measure, v if isinstance(v, Score) else Score(value=v, reason=f"because {v}"))
    return ev


NO_CLAIMS = Score.fail("no_claims", "RAGAS returned NaN: the answer has no claims")

RAGBRIDGE = {"s1": 1.0, "s2": 0.5, "s3": 0.0, "s4": 0.75, "s5": 0.2}
RAGAS = {"s1": 0.9, "s2": 0.6, "s3": 0.1, "s4": 0.25, "s5": NO_CLAIMS}
DEEPEVAL = {"s1": 1.0, "s2": 1.0, "s3": 0.0, "s4": 0.5, "s5": 1.0}


def _comparison() -> CrossComparison:
    return compare_frameworks(
        {
            "ragbridge": _evaluation(RAGBRIDGE),
            "ragas": _evaluation(RAGAS),
            "deepeval": _evaluation(DEEPEVAL),
        },
        skipped=[Skipped(framework="ragas", measure="answer_relevance", reason="needs a judge")],
        top=2,
    )


def test_framework_columns_have_the_mean_ci_and_failure_counts() -> None:
    m = _comparison().measure("faithfulness")
    cols = {f.framework: f for f in m.frameworks}
    assert cols["ragbridge"].mean == pytest.approx(np.mean(list(RAGBRIDGE.values())))
    expected = stats.mean_ci(list(RAGBRIDGE.values()), seed=0)
    assert (cols["ragbridge"].ci_low, cols["ragbridge"].ci_high) == (expected.low, expected.high)
    assert cols["ragas"].n_scored == 4
    assert cols["ragas"].failures_by_kind == {"no_claims": 1}
    assert cols["ragas"].mean == pytest.approx((0.9 + 0.6 + 0.1 + 0.25) / 4)


def test_pairs_correlate_only_the_samples_both_scored() -> None:
    m = _comparison().measure("faithfulness")
    pair = next(p for p in m.pairs if (p.a, p.b) == ("ragbridge", "ragas"))
    xs, ys = [1.0, 0.5, 0.0, 0.75], [0.9, 0.6, 0.1, 0.25]
    assert pair.n == 4
    assert pair.spearman == pytest.approx(stats.spearman(xs, ys))
    assert pair.pearson == pytest.approx(stats.pearson(xs, ys))
    assert pair.mean_abs_diff == pytest.approx(np.mean(np.abs(np.subtract(xs, ys))))
    assert [(p.a, p.b) for p in m.pairs] == [
        ("ragbridge", "ragas"),
        ("ragbridge", "deepeval"),
        ("ragas", "deepeval"),
    ]


def test_disagreements_are_the_widest_spreads_with_every_reason() -> None:
    m = _comparison().measure("faithfulness")
    # spreads: s5 0.8; s2 and s4 0.5 each, the tie broken by sample id
    assert [d.sample_id for d in m.disagreements] == ["s5", "s2"]
    s5 = m.disagreements[0]
    assert s5.spread == pytest.approx(0.8)
    assert s5.values == {"ragbridge": 0.2, "ragas": None, "deepeval": 1.0}
    assert s5.reasons["ragas"] == "failed (no_claims): RAGAS returned NaN: the answer has no claims"
    assert s5.reasons["ragbridge"] == "because 0.2"


def test_no_claims_policy_differences_are_named_as_edge_cases() -> None:
    comparison = _comparison()
    (edge,) = comparison.measure("faithfulness").edge_cases
    assert edge.sample_id == "s5"
    assert edge.kind == "no_claims"
    assert "policy difference" in edge.description
    assert "deepeval 1.00" in edge.description
    text = comparison.table()
    assert "edge case s5: no claims to check" in text
    assert "skipped ragas / answer_relevance: needs a judge" in text


def test_undefined_correlations_say_why_and_json_round_trips(tmp_path: Path) -> None:
    comparison = compare_frameworks(
        {
            "a": _evaluation({"s1": 1.0, "s2": 1.0, "s3": 1.0}),
            "b": _evaluation({"s1": 0.2, "s2": 0.9, "s3": 0.4}),
            "c": _evaluation({"s9": 0.5}),
        }
    )
    m = comparison.measure("faithfulness")
    ab = m.pairs[0]
    assert ab.spearman is None
    assert ab.note == "correlation undefined: a constant over these samples"
    ac = m.pairs[1]
    assert ac.n == 0
    assert ac.note == "no sample was scored by both"
    assert comparison.n_samples == 4
    comparison.to_json(tmp_path / "c.json")
    assert CrossComparison.from_json(tmp_path / "c.json") == comparison


def test_usage_is_summed_per_framework_and_errors_name_the_problem() -> None:
    costly = Evaluation()
    costly.add("s1", "faithfulness", Score(value=0.5, usage=Usage(calls=3, prompt_tokens=900)))
    costly.add("s2", "faithfulness", Score(value=0.7, usage=Usage(calls=2, prompt_tokens=600)))
    m = compare_frameworks({"x": costly}).measure("faithfulness")
    assert m.frameworks[0].usage == Usage(calls=5, prompt_tokens=1500)
    with pytest.raises(ValueError, match="no framework results"):
        compare_frameworks({})
    with pytest.raises(KeyError, match="no framework scored measure 'recall'"):
        compare_frameworks({"x": costly}, measures=["recall"])
    with pytest.raises(KeyError, match="compared: faithfulness"):
        compare_frameworks({"x": costly}).measure("nope")
