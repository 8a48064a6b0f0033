"""``ragbridge agreement`` end to end with a scripted judge, its input mistakes (exit 2, said by
file, line and field, or by naming ids from each side), and the report's agreement section."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ragbridge.adapters.cli.main import main
from ragbridge.adapters.report import render_report
from ragbridge.core.labels.agreement import judge_agreement
from ragbridge.core.labels.human import HumanLabel, save_labels
from ragbridge.core.results.evaluation import Evaluation, Score
from ragbridge.core.sample import Context, Sample, save_samples

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"

# A judge that calls an answer grounded unless it holds the word "invented".
JUDGE_MODULE = """
from ragbridge.core.testing import ScriptedJudge


def _verdict(messages):
    text = messages[-1]["content"]
    return {"explanation": "looked for invented facts", "verdict": "invented" not in text}


def make():
    return ScriptedJudge({"grader.groundedness": _verdict, "grader.correctness": _verdict})
"""

# (worst human label, summary): the judge and people agree on four of six.
FAITHBENCH_ROWS = [
    ("Consistent", "The council approved the budget."),  # yes / yes
    ("Benign", "The city council approved its budget."),  # yes / yes
    ("Unwanted", "The council invented a new tax."),  # no / no
    ("Questionable", "The mayor invented the plan."),  # no / partly (binary no)
    ("Unwanted", "The council rejected the budget."),  # yes / no: a false positive
    ("Consistent", "The invented budget passed."),  # no / yes: a false negative
]


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def judge(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> str:
    """A ``python:MODULE:make`` judge spec; the module name is unique per test."""
    name = "agree_judge_" + "".join(c for c in request.node.name if c.isalnum())
    (tmp_path / f"{name}.py").write_text(JUDGE_MODULE, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return f"python:{name}:make"


def _faithbench(tmp_path: Path) -> Path:
    rows = []
    for i, (worst, summary) in enumerate(FAITHBENCH_ROWS):
        rows.append(
            {
                "id": f"b1-s{i}",
                "source": "The city council met on Monday and approved the yearly budget.",
                "summary": summary,
                "worst_label": worst,
                "hallucinated_worst_QU": int(worst in ("Questionable", "Unwanted")),
            }
        )
    path = tmp_path / "faithbench.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _samples(tmp_path: Path) -> Path:
    samples = [
        Sample(
            id=f"q{i}",
            question="What did the council do?",
            answer=summary,
            contexts=[Context(text="The council approved the yearly budget on Monday.")],
        )
        for i, (_, summary) in enumerate(FAITHBENCH_ROWS)
    ]
    path = tmp_path / "samples.jsonl"
    save_samples(samples, path)
    return path


def _labels(tmp_path: Path) -> Path:
    """Two annotators per sample; they split on q5 (a tie), agree elsewhere."""
    said = ["yes", "yes", "no", "no", "no", "yes"]
    labels = []
    for i, grounded in enumerate(said):
        labels.append(HumanLabel(sample_id=f"q{i}", annotator="ann-a", grounded=grounded))  # type: ignore[arg-type]
        other = "no" if i == 5 else grounded
        labels.append(HumanLabel(sample_id=f"q{i}", annotator="ann-b", grounded=other))  # type: ignore[arg-type]
    path = tmp_path / "labels.jsonl"
    save_labels(labels, path)
    return path


def test_dataset_mode_scores_with_the_scripted_judge_and_prints_the_table(
    tmp_path: Path, judge: str, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _faithbench(tmp_path)
    code, out, err = run_cli(
        capsys, "agreement", "--dataset", "faithbench", str(data),
        "--metrics", "groundedness,faithfulness:offline", "--judge", judge, "--embedder", "hash",
        "--json", "agreement.json", "--report", "agreement.html", "--out", "scores.jsonl",
    )  # fmt: skip
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "6 labelled samples, 6 labels, 1 annotator"
    assert lines[1].split() == [
        "metric", "n", "kappa@0.5", "kappa@best", "(t)", "spearman", "AUROC", "[95%", "CI]",
        "TP/FP/FN/TN@0.5", "positive",
    ]  # fmt: skip
    grounded = next(line for line in lines if line.startswith("groundedness:llm"))
    assert grounded.split()[:4] == ["groundedness:llm", "6", "0.33", "0.33"]
    assert "2/1/1/2" in grounded
    table = json.loads((tmp_path / "agreement.json").read_text(encoding="utf-8"))
    row = next(r for r in table["rows"] if r["label"] == "groundedness:llm")
    assert row["default"]["kappa"]["value"] == pytest.approx(1 / 3)
    # people graded 1, 1, 0, 0.5, 0, 1; the judge 1, 1, 0, 0, 1, 0
    assert row["auroc"]["value"] == pytest.approx(6 / 9)
    assert {r["label"] for r in table["rows"]} == {"groundedness:llm", "faithfulness:offline"}
    html = (tmp_path / "agreement.html").read_text(encoding="utf-8")
    assert 'id="agreement"' in html
    assert '<a href="#agreement">' in html
    scores = Evaluation.from_jsonl(tmp_path / "scores.jsonl")
    assert set(scores.metrics) == {"groundedness:llm", "faithfulness:offline"}
    assert "faithbench: 6 samples" in err


def test_providers_of_one_measure_are_scored_side_by_side(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _faithbench(tmp_path)
    code, _out, err = run_cli(
        capsys, "agreement", "--dataset", "faithbench", str(data),
        "--metrics", "faithfulness:offline,faithfulness:llm,hallucination:offline",
        "--judge", "python:ragbridge.core.testing:CountingJudge", "--embedder", "hash",
        "--json", str(tmp_path / "a.json"),
    )  # fmt: skip
    assert code in (0, 1), err
    table = json.loads((tmp_path / "a.json").read_text(encoding="utf-8"))
    assert [r["label"] for r in table["rows"]] == [
        "faithfulness:offline",
        "hallucination:offline",
        "faithfulness:llm",
    ]
    assert [r["inverted"] for r in table["rows"]] == [False, True, False]


def test_results_mode_compares_a_run_with_several_annotators_and_reports_the_tie(
    tmp_path: Path, judge: str, capsys: pytest.CaptureFixture[str]
) -> None:
    samples, labels = _samples(tmp_path), _labels(tmp_path)
    code, _, err = run_cli(
        capsys, "eval", str(samples), "--metrics", "groundedness", "--judge", judge,
        "--out", "results.jsonl",
    )  # fmt: skip
    assert code == 0, err
    code, out, err = run_cli(
        capsys, "agreement", "results.jsonl", "--labels", str(labels), "--json", "a.json",
        "--report", "a.html",
    )  # fmt: skip
    assert code == 0, err
    assert out.splitlines()[0] == "6 labelled samples, 12 labels, 2 annotators"
    assert "1 sample(s) with tied annotators" in out
    assert "between people (grounded, 6 samples, 2 annotators): Krippendorff's alpha" in out
    row = json.loads((tmp_path / "a.json").read_text(encoding="utf-8"))["rows"][0]
    assert (row["n"], row["n_binary"], row["n_ties"], row["n_labels"]) == (6, 5, 1, 12)
    # without q5: judge yes on q0, q1, q4; people yes on q0, q1 -> TP 2, FP 1, FN 0, TN 2
    assert row["default"]["confusion"] == {
        "positive": "grounded = yes",
        "tp": 2,
        "fp": 1,
        "fn": 0,
        "tn": 2,
    }
    assert 'id="agreement"' in (tmp_path / "a.html").read_text(encoding="utf-8")


def test_results_mode_accepts_provider_qualified_metric_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "results.jsonl"
    Evaluation(
        [
            (f"q{i}", "faithfulness", Score(value=v, provider="offline"))
            for i, v in enumerate((0.9, 0.1))
        ]
    ).to_jsonl(results)
    labels = tmp_path / "labels.jsonl"
    save_labels(
        [
            HumanLabel(sample_id="q0", annotator="a", grounded="yes"),
            HumanLabel(sample_id="q1", annotator="a", grounded="no"),
        ],
        labels,
    )
    code, out, _ = run_cli(
        capsys, "agreement", str(results), "--labels", str(labels), "--metrics",
        "faithfulness:offline",
    )  # fmt: skip
    assert code == 0
    assert "faithfulness:offline  2" in out
    code, _, err = run_cli(
        capsys, "agreement", str(results), "--labels", str(labels), "--metrics", "faithfulness:llm"
    )
    assert code == 2
    assert "came from offline" in err


def test_a_bad_results_line_is_exit_2_naming_file_line_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "results.jsonl"
    good = {"sample_id": "q0", "metric": "faithfulness", "score": {"value": 0.5}}
    bad = {"sample_id": "q1", "metric": "faithfulness", "score": {"value": 1.5}}
    results.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n", encoding="utf-8")
    code, _, err = run_cli(capsys, "agreement", str(results), "--labels", str(_labels(tmp_path)))
    assert code == 2
    assert f"{results}:2: score.value" in err


def test_a_bad_labels_line_is_exit_2_naming_file_line_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "results.jsonl"
    Evaluation([("q0", "faithfulness", Score(value=0.5))]).to_jsonl(results)
    labels = tmp_path / "labels.jsonl"
    labels.write_text(
        '{"sample_id": "q0", "annotator": "a", "grounded": "yes"}\n'
        '{"sample_id": "q1", "annotator": "a", "grounded": "maybe"}\n',
        encoding="utf-8",
    )
    code, _, err = run_cli(capsys, "agreement", str(results), "--labels", str(labels))
    assert code == 2
    assert f"{labels}:2: grounded" in err


def test_ids_that_never_match_are_exit_2_naming_ids_from_each_side(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "results.jsonl"
    Evaluation([(f"row-{i}", "faithfulness", Score(value=0.5)) for i in range(4)]).to_jsonl(results)
    code, _, err = run_cli(capsys, "agreement", str(results), "--labels", str(_labels(tmp_path)))
    assert code == 2
    assert "never match" in err
    assert "'q0', 'q1', 'q2'" in err
    assert "'row-0', 'row-1', 'row-2'" in err


def test_no_labelled_sample_with_a_score_is_exit_1_saying_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "results.jsonl"
    Evaluation(
        [(f"q{i}", "faithfulness", Score.fail("timeout", "no answer")) for i in range(6)]
    ).to_jsonl(results)
    code, out, err = run_cli(capsys, "agreement", str(results), "--labels", str(_labels(tmp_path)))
    assert code == 1
    assert "no metric could be compared" in err
    assert "6 failed (timeout 6)" in err
    assert out.splitlines()[0].startswith("6 labelled samples")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ([], "give RESULTS.jsonl --labels LABELS.jsonl, or --dataset NAME PATH"),
        (["r.jsonl", "--labels", "l.jsonl", "--judge", "openai:x"], "--judge only apply"),
        (["--dataset", "halueval", "."], "unknown set; use faithbench or short-answer"),
        (["--dataset", "faithbench", "nowhere"], "no such file or folder"),
        (["r.jsonl", "--labels", "l.jsonl", "--dataset", "faithbench", "."], "drop --dataset"),
    ],
)
def test_usage_mistakes_are_exit_2_with_one_line(
    capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    code, _, err = run_cli(capsys, "agreement", *extra)
    assert code == 2
    assert message in err
    assert len(err.strip().splitlines()) == 1


def test_a_metric_the_set_does_not_label_is_refused_before_scoring(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _faithbench(tmp_path)
    code, _, err = run_cli(
        capsys, "agreement", "--dataset", "faithbench", str(data),
        "--metrics", "faithfulness,answer_relevance,mrr", "--embedder", "hash",
    )  # fmt: skip
    assert code == 2
    assert "answer_relevance (checked by 'relevance', not labelled here)" in err
    assert "mrr (no label question checks it)" in err


# --------------------------------------------------------------------------- the report

HOSTILE = '<img src=x onerror=alert(1)>"'


def _hostile_table() -> tuple[Evaluation, Any]:
    metric = f"faithfulness:{HOSTILE}"
    ev = Evaluation()
    labels = []
    for i, (value, said) in enumerate([(0.9, "yes"), (0.2, "no"), (0.7, "no")]):
        ev.add(f"s{i}", metric, Score(value=value))
        labels.append(HumanLabel(sample_id=f"s{i}", annotator=HOSTILE, grounded=said))  # type: ignore[arg-type]
    ev.add("s0", "<script>alert(2)</script>", Score(value=0.5))
    table = judge_agreement(ev, labels, n_resamples=100, source={"labels": HOSTILE})
    return ev, table


def test_the_report_has_an_agreement_section_only_when_given_and_escapes_it() -> None:
    ev, table = _hostile_table()
    plain = render_report(ev)
    assert 'id="agreement"' not in plain
    assert "#agreement" not in plain
    page = render_report(ev, agreement=table)
    assert 'id="agreement"' in page
    assert '<a href="#agreement">Agreement</a>' in page
    assert "<img src=x" not in page
    assert "<script>alert" not in page
    assert page.count("<script>") == 1  # the report's own
    assert "&lt;img src=x onerror=alert(1)&gt;&quot;" in page
    section = page[page.index('<section id="agreement"') :]
    section = section[: section.index("</section>")]
    assert "Not compared" in section  # the hostile metric no question checks
    assert 'class="num kappa-default"' in section


def test_the_report_refuses_an_agreement_of_the_wrong_type() -> None:
    ev, _ = _hostile_table()
    with pytest.raises(TypeError, match="agreement must be an AgreementTable"):
        render_report(ev, agreement={"rows": []})  # type: ignore[arg-type]


# --------------------------------------------------------------------------- the public sets


@pytest.mark.parametrize(
    ("name", "folder", "rows"),
    [("faithbench", "faithbench_dev", 100), ("short-answer", "short_answer_dev", 200)],
)
def test_the_public_sets_run_end_to_end_offline(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str, folder: str, rows: int
) -> None:
    path = SHARED_DATA / folder
    if not path.exists():
        pytest.skip(f"public dev data not found at {path} (it is not shipped with ragbridge)")
    code, out, err = run_cli(
        capsys, "agreement", "--dataset", name, str(path), "--metrics",
        "faithfulness:offline,hallucination:offline", "--embedder", "hash",
        "--json", str(tmp_path / "a.json"), "--resamples", "200",
    )  # fmt: skip
    assert code == 0, err
    table = json.loads((tmp_path / "a.json").read_text(encoding="utf-8"))
    assert table["labelled_samples"] == rows
    found = table["rows"]
    assert [r["label"] for r in found] == ["faithfulness:offline", "hallucination:offline"]
    # hash embeddings: the figures are not the real ones; every labelled sample is accounted for
    for row in found:
        assert row["n"] + row["n_failed"] + row["n_skipped"] + row["n_missing"] == rows
    assert found[0]["auroc"]["value"] == pytest.approx(found[1]["auroc"]["value"])
    assert out.startswith(f"{rows} labelled samples")
