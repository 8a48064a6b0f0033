"""Tests of the result contract: Score validation, Evaluation storage, summaries and I/O."""

from __future__ import annotations

import csv
import json
import math
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from ragbridge.core.results.cell_json import cell_json
from ragbridge.core.results.evaluation import (
    Evaluation,
    EvaluationRow,
    Failure,
    FailureKind,
    Score,
    Usage,
)

# -- Score ----------------------------------------------------------------------------------------


def test_failure_kinds_are_lowercase_names() -> None:
    required = {
        "judge_error",
        "parse_error",
        "timeout",
        "missing_input",
        "invalid_input",
        "no_claims",
        "rate_limited",
        "cancelled",
    }
    assert required <= {k.value for k in FailureKind}
    for kind in FailureKind:
        assert kind.value == kind.name.lower()
        assert kind == kind.value  # a str enum compares equal to its value


@pytest.mark.parametrize(
    ("bad", "fragment"),
    [
        (float("nan"), "finite"),
        (float("inf"), "finite"),
        (float("-inf"), "finite"),
        (1.5, "within [0, 1]"),
        (-0.1, "within [0, 1]"),
        (2, "within [0, 1]"),
    ],
)
def test_score_value_rejects_nan_inf_and_out_of_range(bad: float, fragment: str) -> None:
    with pytest.raises(ValueError, match=r"Score\.value") as info:
        Score(value=bad)
    assert fragment in str(info.value)


@pytest.mark.parametrize("bad", [True, "0.5", [0.5]])
def test_score_value_rejects_non_numbers(bad: Any) -> None:
    with pytest.raises(ValidationError):
        Score(value=bad)


def test_score_value_coerces_ints_and_keeps_bounds() -> None:
    one, zero = Score(value=1), Score(value=0)
    assert isinstance(one.value, float)
    assert one.value == 1.0
    assert zero.value == 0.0
    assert one.status == "scored"
    assert Score(value=np.float64(0.25)).value == 0.25


def test_value_and_failure_are_exclusive() -> None:
    with pytest.raises(ValueError, match="both a value and a failure"):
        Score(value=0.0, failure=Failure(kind=FailureKind.TIMEOUT, message="slow"))


def test_skipped_score_needs_a_reason() -> None:
    with pytest.raises(ValueError, match="must carry a reason"):
        Score()
    with pytest.raises(ValueError, match="must carry a reason"):
        Score(reason="")
    skipped = Score.skip("no relevant document for this query")
    assert skipped.status == "skipped"
    assert skipped.value is None
    assert skipped.failure is None


def test_fail_constructor_and_status() -> None:
    s = Score.fail("parse_error", "judge reply was not JSON", provider="llm")
    assert s.status == "failed"
    assert s.failure == Failure(kind=FailureKind.PARSE_ERROR, message="judge reply was not JSON")
    assert s.provider == "llm"
    assert s.value is None
    with pytest.raises(ValueError, match="not a valid FailureKind"):
        Score.fail("exploded", "?")


def test_score_is_frozen() -> None:
    s = Score(value=0.5)
    with pytest.raises(ValidationError):
        s.value = 0.7  # type: ignore[misc]


def test_latency_must_be_finite_and_non_negative() -> None:
    assert Score(value=0.1, latency_s=0.0).latency_s == 0.0
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="latency_s"):
            Score(value=0.1, latency_s=bad)


def test_details_must_be_finite_json_data() -> None:
    with pytest.raises(ValueError, match=r"details\[0\]\.score must be finite"):
        Score(value=0.5, details=[{"score": float("nan")}])
    with pytest.raises(ValueError, match="non-string key 3"):
        Score(value=0.5, details={"by_rank": {3: "x"}})
    with pytest.raises(ValueError, match="not JSON data"):
        Score(value=0.5, details={"when": object()})
    normalised = Score(value=0.5, details={"pair": (1, 2), "sim": np.float32(0.5)})
    assert normalised.details == {"pair": [1, 2], "sim": 0.5}
    assert type(normalised.details["sim"]) is float  # type: ignore[index]


def test_details_are_copied_and_subclasses_are_normalised() -> None:
    # Plain details take a fast path; it must copy like the general one, and anything that
    # is not an exact builtin type (a str enum, a bool-like int subclass) still takes the
    # general path and its rules.
    import enum

    class Kind(str, enum.Enum):
        A = "a"

    given = {"claims": [{"verdict": "supported", "n": 1, "w": 0.5, "ok": True, "c": None}]}
    score = Score(value=0.5, details=given)
    given["claims"][0]["verdict"] = "changed"  # type: ignore[index]
    assert score.details == {
        "claims": [{"verdict": "supported", "n": 1, "w": 0.5, "ok": True, "c": None}]
    }
    with pytest.raises(ValueError, match=r"details\.x\[1\] must be finite"):
        Score(value=0.5, details={"x": [1.0, float("inf")]})
    odd = Score(value=0.5, details={"kind": Kind.A, "pair": [(1, 2)]})
    assert odd.details == {"kind": "a", "pair": [[1, 2]]}


def test_usage_adds_up() -> None:
    a = Usage(calls=2, cached_calls=1, prompt_tokens=100, completion_tokens=20)
    b = Usage(calls=1, prompt_tokens=50, completion_tokens=5)
    total = a + b
    assert total == Usage(calls=3, cached_calls=1, prompt_tokens=150, completion_tokens=25)
    assert total.total_tokens == 175
    assert sum([a, b, b], Usage()).calls == 4
    with pytest.raises(ValidationError):
        Usage(calls=-1)


# -- Evaluation: building and reading -------------------------------------------------------------


def _usage(calls: int) -> Usage:
    return Usage(calls=calls, prompt_tokens=10 * calls, completion_tokens=calls)


def _example() -> Evaluation:
    rows = [
        ("q2", "faithfulness", Score(value=0.8, usage=_usage(2), provider="llm")),
        ("q1", "faithfulness", Score(value=0.4, usage=_usage(1), judge_model="m")),
        ("q1", "ndcg@10", Score.skip("no relevant document", provider="trec")),
        ("q3", "faithfulness", Score.fail("timeout", "30 s", usage=_usage(1))),
        ("q4", "faithfulness", Score.fail("timeout", "30 s")),
        ("q5", "faithfulness", Score.fail("no_claims", "answer states nothing")),
        ("q2", "ndcg@10", Score(value=1, details=[{"rank": 1, "rel": 2}])),
    ]
    return Evaluation(rows, metadata={"run": "baseline"})


def test_insertion_order_of_samples_and_metrics() -> None:
    ev = _example()
    assert ev.sample_ids == ["q2", "q1", "q3", "q4", "q5"]
    assert ev.metrics == ["faithfulness", "ndcg@10"]
    assert len(ev) == 7
    first = next(iter(ev))
    assert isinstance(first, EvaluationRow)
    assert first == ("q2", "faithfulness", Score(value=0.8, usage=_usage(2), provider="llm"))
    assert [(r.sample_id, r.metric) for r in ev][-1] == ("q2", "ndcg@10")


def test_add_refuses_to_overwrite_unless_asked() -> None:
    ev = _example()
    with pytest.raises(ValueError, match=r"sample 'q1', metric 'faithfulness'.*replace=True"):
        ev.add("q1", "faithfulness", Score(value=0.9))
    assert ev.get("q1", "faithfulness") == Score(value=0.4, usage=_usage(1), judge_model="m")
    ev.add("q1", "faithfulness", Score(value=0.9), replace=True)
    assert ev.get("q1", "faithfulness") == Score(value=0.9)
    assert len(ev) == 7
    with pytest.raises(ValueError, match="already has a score"):
        Evaluation([("a", "m", Score(value=0.1)), ("a", "m", Score(value=0.1))])


def test_add_checks_its_arguments() -> None:
    ev = Evaluation()
    with pytest.raises(ValueError, match="sample_id must not be empty"):
        ev.add("", "m", Score(value=0.1))
    with pytest.raises(TypeError, match="metric must be a str"):
        ev.add("a", 3, Score(value=0.1))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="score must be a Score"):
        ev.add("a", "m", 0.5)  # type: ignore[arg-type]


def test_get_column_and_values() -> None:
    ev = _example()
    assert ev.get("q9", "faithfulness") is None
    assert ev.get("q3", "ndcg@10") is None
    column = ev.column("ndcg@10")
    assert list(column) == ["q2", "q1"]  # sample order, not insertion order within the column
    ids, vals = ev.values("faithfulness")
    assert ids == ["q2", "q1"]
    assert vals.dtype == np.float64
    assert vals.tolist() == [0.8, 0.4]
    with pytest.raises(KeyError, match="unknown metric 'recall'"):
        ev.column("recall")


def test_usage_total() -> None:
    assert _example().usage() == Usage(calls=4, prompt_tokens=40, completion_tokens=4)


def test_equality_compares_cells_not_order_or_metadata() -> None:
    ev = _example()
    shuffled = Evaluation(reversed(list(ev)), metadata={"other": True})
    assert shuffled == ev
    shuffled.add("q9", "faithfulness", Score(value=0.0))
    assert shuffled != ev
    assert ev != [tuple(r) for r in ev]


# -- summary --------------------------------------------------------------------------------------


def test_summary_counts_and_mean() -> None:
    summary = _example().summary()
    assert list(summary) == ["faithfulness", "ndcg@10"]
    f = summary["faithfulness"]
    assert f.n_scored == 2
    assert f.n_failed == 3
    assert f.n_skipped == 0
    assert f.failures_by_kind == {"timeout": 2, "no_claims": 1}
    assert f.mean == pytest.approx((0.8 + 0.4) / 2)
    assert f.ci_low is not None
    assert f.ci_high is not None
    assert 0.4 <= f.ci_low <= f.mean <= f.ci_high <= 0.8
    assert f.usage == Usage(calls=4, prompt_tokens=40, completion_tokens=4)
    assert f.confidence == 0.95
    n = summary["ndcg@10"]
    assert (n.n_scored, n.n_failed, n.n_skipped) == (1, 0, 1)
    assert n.mean == 1.0
    assert n.ci_low is None  # one value says nothing about spread
    assert n.ci_high is None


def test_summary_without_scores_has_no_mean_and_no_nan() -> None:
    ev = Evaluation([("a", "m", Score.fail("judge_error", "500")), ("b", "m", Score.skip("n/a"))])
    s = ev.summary()["m"]
    assert (s.mean, s.ci_low, s.ci_high) == (None, None, None)
    assert (s.n_scored, s.n_failed, s.n_skipped) == (0, 1, 1)
    assert s.failures_by_kind == {"judge_error": 1}


def test_summary_identical_values_give_a_point_interval() -> None:
    ev = Evaluation((f"s{i}", "m", Score(value=0.1)) for i in range(7))
    s = ev.summary()["m"]
    assert (s.mean, s.ci_low, s.ci_high) == (0.1, 0.1, 0.1)


def test_summary_is_reproducible_and_seeded() -> None:
    rng = np.random.default_rng(5)
    ev = Evaluation((f"s{i}", "m", Score(value=float(v))) for i, v in enumerate(rng.random(40)))
    first, again = ev.summary(seed=3)["m"], ev.summary(seed=3)["m"]
    assert first == again
    other = ev.summary(seed=4)["m"]
    assert (other.ci_low, other.ci_high) != (first.ci_low, first.ci_high)
    assert other.mean == first.mean
    narrow = ev.summary(confidence=0.5)["m"]
    assert narrow.ci_low is not None
    assert narrow.ci_high is not None
    assert first.ci_low is not None
    assert first.ci_high is not None
    assert narrow.ci_high - narrow.ci_low < first.ci_high - first.ci_low


# -- records, CSV, pandas -------------------------------------------------------------------------

RECORD_COLUMNS = [
    "sample_id",
    "metric",
    "value",
    "status",
    "failure_kind",
    "failure_message",
    "reason",
    "provider",
    "judge_model",
    "prompt_version",
    "calls",
    "cached_calls",
    "prompt_tokens",
    "completion_tokens",
    "latency_s",
    "details",
]


def test_to_records_is_flat() -> None:
    records = _example().to_records()
    assert len(records) == 7
    assert all(list(r) == RECORD_COLUMNS for r in records)
    by_cell = {(r["sample_id"], r["metric"]): r for r in records}
    timeout = by_cell["q3", "faithfulness"]
    assert timeout["status"] == "failed"
    assert timeout["value"] is None
    assert (timeout["failure_kind"], timeout["failure_message"]) == ("timeout", "30 s")
    assert (timeout["calls"], timeout["prompt_tokens"], timeout["completion_tokens"]) == (1, 10, 1)
    skipped = by_cell["q1", "ndcg@10"]
    assert (skipped["status"], skipped["reason"], skipped["provider"]) == (
        "skipped",
        "no relevant document",
        "trec",
    )
    assert json.loads(by_cell["q2", "ndcg@10"]["details"]) == [{"rank": 1, "rel": 2}]
    assert by_cell["q2", "faithfulness"]["details"] is None


def test_to_csv_round_trips_through_the_stdlib_reader(tmp_path: Path) -> None:
    path = tmp_path / "res.csv"
    _example().to_csv(path)
    with open(path, encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == RECORD_COLUMNS
    assert len(rows) == 7
    assert rows[0]["value"] == "0.8"
    assert rows[2]["value"] == ""
    assert rows[2]["status"] == "skipped"
    assert json.loads(rows[6]["details"]) == [{"rank": 1, "rel": 2}]


def test_to_pandas_long_and_wide() -> None:
    pd = pytest.importorskip("pandas")
    ev = _example()
    long = ev.to_pandas()
    assert list(long.columns) == RECORD_COLUMNS
    assert len(long) == 7
    assert str(long["value"].dtype) == "Float64"
    assert long["value"].isna().sum() == 4
    wide = ev.to_pandas(wide=True)
    assert list(wide.index) == ev.sample_ids
    assert list(wide.columns) == ev.metrics
    assert wide.loc["q2", "faithfulness"] == 0.8
    assert wide.loc["q2", "ndcg@10"] == 1.0
    assert wide.loc["q3", "faithfulness"] is pd.NA  # failed: missing, not NaN
    assert wide.loc["q5", "ndcg@10"] is pd.NA  # never computed
    assert not np.isnan(wide.to_numpy(dtype=float, na_value=-1.0)).any()


def test_to_pandas_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match="pip install pandas"):
        _example().to_pandas()


# -- JSONL ----------------------------------------------------------------------------------------


def _rich() -> Evaluation:
    ev = _example()
    ev.add(
        "q6",
        "faithfulness",
        Score(
            value=0.1 + 0.2,  # not a short decimal: must survive exactly
            reason="2 of 3 claims supported",
            details=[
                {"claim": "Paris is in France", "verdict": True, "why": None},
                {"claim": "it has 9 M people", "verdict": False, "score": 1e-300},
            ],
            provider="llm",
            judge_model="judge-1",
            prompt_version="faith-v3",
            usage=Usage(calls=1, cached_calls=1, prompt_tokens=900, completion_tokens=70),
            latency_s=1.25,
        ),
    )
    ev.add("q7", "ndcg@10", Score.skip("unlabelled", details={"qrels": {}}))
    ev.metadata.update({"judge": {"model": "judge-1", "temperature": 0}, "note": "ünïcode"})
    return ev


def test_jsonl_round_trip_is_lossless(tmp_path: Path) -> None:
    ev = _rich()
    path = tmp_path / "res.jsonl"
    ev.to_jsonl(path)
    back = Evaluation.from_jsonl(path)
    assert back == ev
    assert back.metadata == ev.metadata
    assert list(back) == list(ev)  # order too
    assert back.sample_ids == ev.sample_ids
    assert back.metrics == ev.metrics
    lines = path.read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[0]) == {"ragbridge_evaluation": 1, "metadata": ev.metadata}
    assert len(lines) == len(ev) + 1


def test_jsonl_header_is_optional_and_blank_lines_are_ignored(tmp_path: Path) -> None:
    path = tmp_path / "plain.jsonl"
    line = {"sample_id": "a", "metric": "m", "score": {"value": 1}}
    path.write_text("\n" + json.dumps(line) + "\n\n", encoding="utf-8")
    back = Evaluation.from_jsonl(path)
    assert back == Evaluation([("a", "m", Score(value=1.0))])
    assert back.metadata == {}


def _write_lines(path: Path, *objs: Any) -> None:
    path.write_text(
        "\n".join(o if isinstance(o, str) else json.dumps(o) for o in objs) + "\n",
        encoding="utf-8",
    )


GOOD = {"sample_id": "a", "metric": "m", "score": {"value": 0.5}}


@pytest.mark.parametrize(
    ("bad_line", "expected"),
    [
        (
            {"sample_id": "c", "metric": "m", "score": {"value": 1.5}},
            r"res\.jsonl:4: score\.value: Score\.value must lie within \[0, 1\], got 1\.5",
        ),
        ('{"sample_id": "c", "metric": "m", "score": {"value": NaN}}', r"res\.jsonl:4: .*NaN"),
        ('{"sample_id": "c", "metric": ', r"res\.jsonl:4: invalid JSON"),
        ([1, 2], r"res\.jsonl:4: expected a JSON object"),
        ({"metric": "m", "score": {"value": 0.5}}, r"res\.jsonl:4: sample_id: Field required"),
        ({"sample_id": "c", "metric": "m", "score": {}}, r"res\.jsonl:4: score: .*reason"),
        (
            {"sample_id": "c", "metric": "m", "score": {"failure": {"kind": "oops"}}},
            r"res\.jsonl:4: score\.failure\.kind: ",
        ),
        ({"sample_id": "c", "metric": "m", "score": {"value": 0.5}, "x": 1}, r":4: x: Extra"),
        (GOOD, r"res\.jsonl:4: duplicate cell \(sample 'a', metric 'm'\)"),
        ({"ragbridge_evaluation": 1, "metadata": {}}, r"res\.jsonl:4: header line allowed only"),
    ],
)
def test_bad_jsonl_line_names_file_line_and_field(
    tmp_path: Path, bad_line: Any, expected: str
) -> None:
    path = tmp_path / "res.jsonl"
    header = {"ragbridge_evaluation": 1, "metadata": {}}
    second = {"sample_id": "b", "metric": "m", "score": {"value": 0.5}}
    _write_lines(path, header, GOOD, second, bad_line)
    with pytest.raises(ValueError, match=expected) as info:
        Evaluation.from_jsonl(path)
    assert not isinstance(info.value, ValidationError)  # our message, not a pydantic trace
    assert str(info.value).startswith(f"{path}:4: ")


def test_unknown_header_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "future.jsonl"
    _write_lines(path, {"ragbridge_evaluation": 2, "metadata": {}})
    with pytest.raises(ValueError, match=r"future\.jsonl:1: ragbridge_evaluation: "):
        Evaluation.from_jsonl(path)


def test_unwritable_metadata_is_reported(tmp_path: Path) -> None:
    ev = Evaluation([("a", "m", Score(value=0.5))], metadata={"bad": float("nan")})
    with pytest.raises(ValueError, match="metadata cannot be written as JSON"):
        ev.to_jsonl(tmp_path / "x.jsonl")


_json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.text(max_size=5),
    st.floats(allow_nan=False, allow_infinity=False),
)
_json = st.recursive(
    _json_leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=8,
)
_scores = st.one_of(
    st.builds(
        Score,
        value=st.floats(0.0, 1.0),
        details=st.none() | st.dictionaries(st.text(max_size=4), _json, max_size=3),
        latency_s=st.none() | st.floats(0.0, 1e6),
    ),
    st.builds(Score.fail, st.sampled_from(list(FailureKind)), st.text()),
    st.builds(Score.skip, st.text(min_size=1)),
)


@settings(max_examples=60, deadline=None)
@given(cells=st.dictionaries(st.tuples(st.sampled_from("abc"), st.sampled_from("xy")), _scores))
def test_jsonl_round_trip_property(cells: dict[tuple[str, str], Score]) -> None:
    ev = Evaluation((sid, metric, score) for (sid, metric), score in cells.items())
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ev.jsonl"
        ev.to_jsonl(path)
        assert Evaluation.from_jsonl(path) == ev


# -- merge ----------------------------------------------------------------------------------------


def test_merge_unions_cells_and_metadata() -> None:
    a = Evaluation(
        [("q1", "m", Score(value=0.2)), ("q2", "m", Score(value=0.4))],
        metadata={"run": "r1", "shard": 0},
    )
    b = Evaluation(
        [("q2", "m", Score(value=0.4)), ("q3", "m", Score.fail("timeout", "t"))],
        metadata={"shard": 1, "host": "h"},
    )
    merged = Evaluation.merge(a, b)
    assert len(merged) == 3
    assert merged.sample_ids == ["q1", "q2", "q3"]
    assert merged.get("q3", "m") == Score.fail("timeout", "t")
    assert merged.metadata == {"run": "r1", "shard": 1, "host": "h"}
    assert Evaluation.merge() == Evaluation()


def test_merge_conflict_names_the_cell() -> None:
    a = Evaluation([("q1", "m", Score(value=0.2))])
    b = Evaluation([("q1", "m", Score(value=0.3))])
    c = Evaluation([("q1", "m", Score.fail("timeout", "t"))])
    with pytest.raises(ValueError, match=r"merge conflict at \(sample 'q1', metric 'm'\)"):
        Evaluation.merge(a, b)
    with pytest.raises(ValueError, match=r"scored 0\.2 vs failed None"):
        Evaluation.merge(a, c)


def test_merge_of_jsonl_shards_equals_the_whole(tmp_path: Path) -> None:
    whole = _rich()
    rows = list(whole)
    shards = [Evaluation(rows[i::3]) for i in range(3)]
    for i, shard in enumerate(shards):
        shard.to_jsonl(tmp_path / f"shard{i}.jsonl")
    merged = Evaluation.merge(
        *(Evaluation.from_jsonl(tmp_path / f"shard{i}.jsonl") for i in range(3))
    )
    assert merged == whole
    s_whole, s_merged = whole.summary()["faithfulness"], merged.summary()["faithfulness"]
    assert s_merged.mean == s_whole.mean
    assert s_merged.mean is not None
    _, vals = whole.values("faithfulness")
    assert math.isclose(s_merged.mean, statistics.fmean(vals.tolist()))


# -- atomic writes --------------------------------------------------------------------------------


def test_to_jsonl_that_fails_midway_leaves_the_old_file_and_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "results.jsonl"
    _example().to_jsonl(path)
    before = path.read_bytes()
    bigger = Evaluation((f"s{i}", "m", Score(value=0.5)) for i in range(50))
    real = cell_json
    calls = {"n": 0}

    def line(sample_id: str, metric: str, score: Score) -> str:
        calls["n"] += 1
        if calls["n"] == 19:  # the header and 18 cells are written: then the disk is full
            raise OSError(28, "No space left on device")
        return real(sample_id, metric, score)

    monkeypatch.setattr("ragbridge.core.results.evaluation.cell_json", line)
    with pytest.raises(OSError, match="No space left"):
        bigger.to_jsonl(path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["results.jsonl"]


def test_to_jsonl_with_bad_metadata_leaves_no_file(tmp_path: Path) -> None:
    ev = Evaluation(metadata={"when": object()})
    with pytest.raises(ValueError, match="metadata cannot be written as JSON"):
        ev.to_jsonl(tmp_path / "x.jsonl")
    assert list(tmp_path.iterdir()) == []


def test_to_csv_is_atomic_and_keeps_ordinary_permissions(tmp_path: Path) -> None:
    path = tmp_path / "results.csv"
    _example().to_csv(path)
    reference = tmp_path / "plain.txt"
    reference.write_text("x")
    assert path.stat().st_mode & 0o777 == reference.stat().st_mode & 0o777
    path.chmod(0o640)
    _example().to_csv(path)  # an existing file keeps its permissions
    assert path.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plain.txt", "results.csv"]
