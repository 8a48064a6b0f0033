"""SummEval as a labelled set: its loader, its four criteria and ``ragbridge agreement --dataset
summeval`` end to end with a judge scripted to agree or to disagree with the experts.

The parsing rules and the end-to-end figures are checked on small files in SummEval's own
formats written here (our text, so nothing of the CNN/DailyMail articles is in the repository).
The real dev slice (10 articles x 12 systems of SummEval's paired file) is development data:
the tests that read it look in ``tests/data/summeval_dev`` and then ``../shared/data`` and skip,
saying where they looked, when it is in neither.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from ragbridge.adapters.cli.main import main
from ragbridge.core.labels.labelled_sets import (
    DATASETS,
    SUMMARIZE,
    SUMMEVAL_CRITERIA,
    LabelledSetError,
    load_labelled_set,
    load_summeval,
)
from ragbridge.core.labels.summeval_criteria import SUMMEVAL_TEXTS, summeval_criteria

ROOT = Path(__file__).resolve().parents[1]
DEV_SLICES = (
    ROOT / "tests" / "data" / "summeval_dev",
    ROOT.parent / "shared" / "data" / "summeval_dev",
)

# (article, [(system, summary, {criterion: rating of each of the three experts})])
ARTICLES = {
    "doc-a": "The city council met on Monday and approved the yearly budget of 4 million.",
    "doc-b": "A storm closed the harbour on Friday; ferries will sail again on Sunday.",
}
SYSTEMS = ("M1", "M2", "M3", "M4")
# one rating per (article, system, criterion), the same from all three experts, so the expert
# mean is a whole point a judge can return exactly; every article has varied ratings.
RATINGS = {
    ("doc-a", "M1"): (5, 4, 5, 4),
    ("doc-a", "M2"): (4, 2, 3, 5),
    ("doc-a", "M3"): (2, 5, 4, 2),
    ("doc-a", "M4"): (1, 1, 2, 3),
    ("doc-b", "M1"): (3, 5, 1, 1),
    ("doc-b", "M2"): (5, 3, 5, 4),
    ("doc-b", "M3"): (1, 2, 3, 5),
    ("doc-b", "M4"): (2, 4, 4, 2),
}


def _summary(doc: str, system: str) -> str:
    return f"Summary of {doc} by {system}: the news in short."


def _paired_row(doc: str, system: str, **change: Any) -> dict[str, Any]:
    rating = dict(zip(SUMMEVAL_CRITERIA, RATINGS[(doc, system)], strict=True))
    row = {
        "id": doc,
        "model_id": system,
        "decoded": _summary(doc, system),
        "text": ARTICLES[doc],
        "references": [f"Reference of {doc}.", "Another reference."],
        "expert_annotations": [dict(rating) for _ in range(3)],
        "turker_annotations": [{name: 5 for name in SUMMEVAL_CRITERIA}],
        "filepath": f"cnndm/stories/{doc}.story",
    }
    row.update(change)
    return row


def _write_paired(folder: Path, rows: list[dict[str, Any]] | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    if rows is None:
        rows = [_paired_row(d, s) for d in ARTICLES for s in SYSTEMS]
    path = folder / "model_annotations.aligned.paired.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _dev_slice() -> Path:
    for folder in DEV_SLICES:
        if (folder / "model_annotations.aligned.paired.jsonl").exists():
            return folder
    pytest.skip(
        "SummEval dev slice not found in "
        + " or ".join(str(f) for f in DEV_SLICES)
        + " (development data, not shipped with ragbridge)"
    )


# --------------------------------------------------------------------------- the loader


def test_paired_rows_become_summaries_of_their_article_with_one_label_per_expert(
    tmp_path: Path,
) -> None:
    path = _write_paired(tmp_path / "summeval")
    labelled = load_labelled_set("summeval", tmp_path / "summeval")  # the folder finds the file
    assert "summeval" in DATASETS
    assert labelled.path == path
    assert len(labelled.samples) == 8
    sample = labelled.samples[0]
    assert (sample.id, sample.question, sample.answer) == (
        "doc-a:M1",
        SUMMARIZE,
        _summary("doc-a", "M1"),
    )
    assert [c.text for c in sample.contexts] == [ARTICLES["doc-a"]]
    assert sample.reference == "Reference of doc-a."
    assert sample.metadata == {"dataset": "summeval", "doc_id": "doc-a", "system": "M1"}
    mine = [label for label in labelled.labels if label.sample_id == "doc-a:M2"]
    assert [label.annotator for label in mine] == [f"summeval:expert{k}" for k in (1, 2, 3)]
    assert mine[0].criteria == {"coherence": 4, "consistency": 2, "fluency": 3, "relevance": 5}
    assert all(label.grounded is None and label.relevance is None for label in mine)
    assert set(labelled.criteria) == set(SUMMEVAL_CRITERIA)
    assert labelled.criteria["fluency"].scale == ("1", "2", "3", "4", "5")
    assert labelled.groups is not None
    assert labelled.groups["doc-b:M3"] == "doc-b"


def test_geval_json_gives_the_expert_means(tmp_path: Path) -> None:
    rows = [
        {
            "doc_id": "doc-a",
            "system_id": "M1",
            "source": ARTICLES["doc-a"],
            "reference": "Reference.",
            "system_output": "A summary.",
            "scores": {"coherence": 1.6667, "consistency": 5.0, "fluency": 3, "relevance": 2.3333},
        }
    ]
    (tmp_path / "summeval.json").write_text(json.dumps(rows), encoding="utf-8")
    labelled = load_summeval(tmp_path)
    (label,) = labelled.labels
    assert label.annotator == "summeval:expert-mean"
    assert label.criteria == {
        "coherence": 1.6667,
        "consistency": 5.0,
        "fluency": 3.0,
        "relevance": 2.3333,
    }
    assert labelled.samples[0].reference == "Reference."


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"decoded": ""}, r"\.jsonl:2: decoded: missing"),
        ({"expert_annotations": []}, r":2: expert_annotations: missing or not a non-empty list"),
        (
            {"expert_annotations": [{"coherence": 6, "consistency": 1, "fluency": 1}]},
            r":2: expert_annotations\[0\]\.coherence: expected an integer from 1 to 5, got 6",
        ),
        (
            {"expert_annotations": [{"coherence": 2, "consistency": 1, "fluency": 1}]},
            r":2: expert_annotations\[0\]\.relevance: expected an integer from 1 to 5, got None",
        ),
        ({"model_id": "M1"}, r":2: 'doc-a:M1': the same article and system again \(first at "),
    ],
)
def test_a_bad_paired_line_is_refused_by_line_and_field(
    tmp_path: Path, change: dict[str, Any], problem: str
) -> None:
    rows = [_paired_row("doc-a", "M1"), _paired_row("doc-a", "M2", **change)]
    path = _write_paired(tmp_path, rows)
    with pytest.raises(LabelledSetError, match=problem):
        load_summeval(path)


def test_an_unpaired_row_says_how_to_pair_it(tmp_path: Path) -> None:
    row = _paired_row("doc-a", "M1")
    del row["text"]
    path = _write_paired(tmp_path, [row])
    with pytest.raises(LabelledSetError, match=r":1: text: missing: .*pair_data\.py"):
        load_summeval(path)


def test_a_folder_without_either_file_names_both(tmp_path: Path) -> None:
    with pytest.raises(LabelledSetError, match=r"paired\.jsonl or .*summeval\.json"):
        load_summeval(tmp_path)


# --------------------------------------------------------------------------- the criteria


def test_the_four_criteria_are_ours_on_the_experts_scale() -> None:
    specs = summeval_criteria()
    assert [s.name for s in specs] == list(SUMMEVAL_CRITERIA)
    assert all(s.scale == (1, 5) and s.evaluation_steps for s in specs)
    reads = {s.name: s.reads for s in specs}
    assert reads["fluency"] == ("answer",)
    assert set(reads["consistency"]) == {"answer", "contexts"}
    for name, (text, _, _) in SUMMEVAL_TEXTS.items():
        assert text.lower().startswith(name)


# --------------------------------------------------------------------------- end to end

JUDGE_MODULE = """
import json
import re

from ragbridge.core.labels.summeval_criteria import SUMMEVAL_TEXTS
from ragbridge.core.testing import ScriptedJudge

TABLE = json.loads({table!r})
FLIP = {flip!r}


def _answer(text):
    return re.search(r"<<<BEGIN ANSWER>>>\\n(.*?)\\n<<<END ANSWER>>>", text, re.S).group(1)


def _score(messages):
    text = messages[-1]["content"]
    name = next(n for n, (words, _, _) in SUMMEVAL_TEXTS.items() if words in text)
    value = TABLE[name][_answer(text)]
    return {{"reason": "scripted", "score": 6 - value if FLIP else value}}


def make():
    return ScriptedJudge({{"criteria.score": _score}})
"""


def _scripted_judge(
    folder: Path, monkeypatch: pytest.MonkeyPatch, name: str, table: dict[str, Any], flip: bool
) -> str:
    """A ``python:MODULE:make`` judge that scores each summary as ``table`` says (``flip``: the
    scale turned upside down, a judge that disagrees with the experts)."""
    (folder / f"{name}.py").write_text(
        JUDGE_MODULE.format(table=json.dumps(table), flip=flip), encoding="utf-8"
    )
    monkeypatch.chdir(folder)
    monkeypatch.syspath_prepend(str(folder))
    return f"python:{name}:make"


def _experts_table(path: Path) -> dict[str, dict[str, int]]:
    """criterion -> summary -> the experts' mean, rounded (exact on the files written here)."""
    labelled = load_summeval(path)
    answers = {s.id: s.answer for s in labelled.samples}
    ratings: dict[str, list[dict[str, Any]]] = {}
    for label in labelled.labels:
        ratings.setdefault(label.sample_id, []).append(label.criteria or {})
    return {
        name: {
            answers[sid]: round(sum(r[name] for r in given) / len(given))
            for sid, given in ratings.items()
        }
        for name in SUMMEVAL_CRITERIA
    }


def _agreement(
    capsys: pytest.CaptureFixture[str], data: Path, judge: str, *extra: str
) -> tuple[int, str, str, dict[str, Any]]:
    code = main(
        ["agreement", "--dataset", "summeval", str(data), "--judge", judge, "--resamples", "200",
         "--json", "agreement.json", *extra]
    )  # fmt: skip
    out, err = capsys.readouterr()
    table = json.loads(Path("agreement.json").read_text(encoding="utf-8")) if code == 0 else {}
    return code, out, err, table


@pytest.mark.parametrize(("flip", "sign"), [(False, 1.0), (True, -1.0)])
def test_agreement_on_summeval_reports_every_criterion_for_an_agreeing_and_a_contrary_judge(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    flip: bool,
    sign: float,
) -> None:
    data = _write_paired(tmp_path / "summeval")
    judge = _scripted_judge(
        tmp_path, monkeypatch, f"summeval_judge_{int(flip)}", _experts_table(data), flip
    )
    code, out, err, table = _agreement(capsys, data, judge)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "8 labelled samples, 24 labels, 3 annotators"
    rows = {row["metric"]: row for row in table["rows"]}
    assert set(rows) == {f"{name}:llm" for name in SUMMEVAL_CRITERIA}
    for name in SUMMEVAL_CRITERIA:
        row = rows[f"{name}:llm"]
        assert (row["n"], row["n_labels"], row["question"]) == (8, 24, name)
        assert row["positive"] == f"{name} > 3"
        assert row["spearman"]["value"] == pytest.approx(sign)
        assert row["spearman_per_group"]["value"] == pytest.approx(sign)
        assert row["groups"] == 2
        assert row["auroc"]["value"] == pytest.approx(1.0 if sign > 0 else 0.0)
        line = next(x for x in lines if x.startswith(f"{name}:llm "))
        assert f"{sign:.2f}" in line.split()  # the Spearman column
        assert f"{name}:llm: per-document Spearman {sign:.3f}: mean over 2 documents" in out
    # every expert gave the same rating, so the people agree perfectly among themselves
    assert "between people (coherence, 8 samples, 3 annotators): Krippendorff's alpha 1.00" in out
    assert "summeval: 8 samples" in err


def test_metrics_narrow_the_criteria_and_an_unknown_one_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _write_paired(tmp_path / "summeval")
    judge = _scripted_judge(tmp_path, monkeypatch, "summeval_judge_n", _experts_table(data), False)
    code, _, err, table = _agreement(capsys, data, judge, "--metrics", "fluency,coherence:llm")
    assert code == 0, err
    assert [row["metric"] for row in table["rows"]] == ["coherence:llm", "fluency:llm"]
    code, _, err, _ = _agreement(capsys, data, judge, "--metrics", "faithfulness")
    assert code == 2
    assert "--metrics faithfulness: not a criterion judged here" in err


def test_summeval_needs_a_judge(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = _write_paired(tmp_path / "summeval")
    code = main(["agreement", "--dataset", "summeval", str(data)])
    _, err = capsys.readouterr()
    assert code == 2
    assert "criteria are judged by an LLM: give --judge" in err


# --------------------------------------------------------------------------- the real slice


def test_the_dev_slice_loads_with_its_ten_articles_and_three_experts() -> None:
    labelled = load_summeval(_dev_slice())
    assert len(labelled.samples) == 120
    assert labelled.groups is not None
    assert len(set(labelled.groups.values())) == 10
    systems = {s.metadata["system"] for s in labelled.samples}
    assert systems == {f"M{k}" for k in (8, 9, 10, 11, 12, 13, 14, 15, 17, 20, 22, 23)}
    assert len(labelled.labels) == 360
    assert {label.annotator for label in labelled.labels} == {
        f"summeval:expert{k}" for k in (1, 2, 3)
    }
    assert all(s.contexts and s.reference for s in labelled.samples)


def test_agreement_on_the_dev_slice_end_to_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A judge that answers each summary with the experts' rounded mean: every criterion gets
    its row, close to +1 but not exactly (rounding ties summaries the experts told apart)."""
    data = _dev_slice()
    table = _experts_table(data)
    judge = _scripted_judge(tmp_path, monkeypatch, "summeval_dev_judge", table, False)
    code, out, err, result = _agreement(capsys, data, judge)
    assert code == 0, err
    assert out.splitlines()[0] == "120 labelled samples, 360 labels, 3 annotators"
    for row in result["rows"]:
        assert row["n"] == 120
        assert 0.8 < row["spearman"]["value"] < 1.0
        assert 0.8 < row["spearman_per_group"]["value"] <= 1.0
    assert re.search(r"between people \(relevance, 120 samples, 3 annotators\)", out)
