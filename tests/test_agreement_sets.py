"""The public labelled sets as samples and labels (`ragbridge.core.labels.labelled_sets`).

The real files are development data kept beside the repository (``../shared/data``), never in
it: the tests that read them skip, saying where they looked, when they are absent. The parsing
rules are checked on small files written here.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from ragbridge.core.labels.labelled_sets import (
    SUMMARIZE,
    LabelledSetError,
    load_faithbench,
    load_labelled_set,
    load_short_answer,
)

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
FAITHBENCH = SHARED_DATA / "faithbench_dev" / "faithbench.jsonl"
SHORT_ANSWER = SHARED_DATA / "short_answer_dev" / "qa_pairs.jsonl"


def _need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"public dev data not found at {path} (it is not shipped with ragbridge)")
    return path


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _fb(i: int, worst: str, **extra: Any) -> dict[str, Any]:
    row = {
        "id": f"b1-s{i}",
        "source": f"Source text {i}.",
        "summary": f"Summary {i}.",
        "worst_label": worst,
        "hallucinated_worst_QU": int(worst in ("Questionable", "Unwanted")),
    }
    row.update(extra)
    return row


def test_faithbench_rows_become_summaries_of_their_source_with_the_worst_label(
    tmp_path: Path,
) -> None:
    path = _write(
        tmp_path / "faithbench.jsonl",
        [_fb(0, "Consistent"), _fb(1, "Benign"), _fb(2, "Questionable"), _fb(3, "Unwanted")],
    )
    labelled = load_faithbench(tmp_path)  # the folder finds faithbench.jsonl
    assert labelled.path == path
    sample = labelled.samples[0]
    assert (sample.id, sample.question, sample.answer) == ("b1-s0", SUMMARIZE, "Summary 0.")
    assert [c.text for c in sample.contexts] == ["Source text 0."]
    assert [label.grounded for label in labelled.labels] == ["yes", "yes", "partly", "no"]
    assert {label.annotator for label in labelled.labels} == {"faithbench:worst"}


@pytest.mark.parametrize(
    ("row", "problem"),
    [
        (_fb(5, "Fine"), "faithbench.jsonl:2: worst_label: expected one of"),
        (_fb(5, "Unwanted", hallucinated_worst_QU=0), "2: hallucinated_worst_QU: 0 disagrees"),
        ({**_fb(5, "Benign"), "summary": ""}, "faithbench.jsonl:2: summary: missing"),
        (_fb(1, "Benign", id="b1-s0"), "2: id: 'b1-s0' already on line 1"),
    ],
)
def test_a_bad_faithbench_line_is_refused_by_line_and_field(
    tmp_path: Path, row: dict[str, Any], problem: str
) -> None:
    path = _write(tmp_path / "faithbench.jsonl", [_fb(0, "Benign"), row])
    with pytest.raises(LabelledSetError, match=problem):
        load_faithbench(path)


def test_short_answer_rows_give_a_right_and_a_fabricated_sample(tmp_path: Path) -> None:
    row = {
        "seed_index": 7,
        "knowledge": "Ada was born in London.",
        "question": " Where was Ada born?",
        "right_answer": "London",
        "hallucinated_answer_one_turn": "Paris",
        "hallucinated_answer_multi_turn": "Ada was born in Paris.",
    }
    _write(tmp_path / "qa_pairs.jsonl", [row])
    labelled = load_short_answer(tmp_path)
    assert [s.id for s in labelled.samples] == ["7:right", "7:one_turn"]
    right, fake = labelled.samples
    assert right.question == "Where was Ada born?"
    assert (right.answer, fake.answer) == ("London", "Paris")
    assert right.reference == fake.reference == "London"
    assert [c.text for c in fake.contexts] == ["Ada was born in London."]
    assert [(x.grounded, x.accuracy) for x in labelled.labels] == [("yes", 5), ("no", 1)]
    both = load_labelled_set("short-answer", tmp_path, fabricated="both")
    assert [s.id for s in both.samples] == ["7:right", "7:one_turn", "7:multi_turn"]
    multi = load_short_answer(tmp_path, fabricated="multi_turn")
    assert multi.samples[1].answer == "Ada was born in Paris."


def test_missing_files_and_names_are_said(tmp_path: Path) -> None:
    with pytest.raises(LabelledSetError, match=r"looked for .*qa_pairs\.jsonl"):
        load_short_answer(tmp_path)
    with pytest.raises(ValueError, match="unknown labelled set 'halueval'"):
        load_labelled_set("halueval", tmp_path)
    (tmp_path / "qa_pairs.jsonl").write_text('{"seed_index": 1}\n', encoding="utf-8")
    with pytest.raises(LabelledSetError, match=r"qa_pairs.jsonl:1: question: missing"):
        load_short_answer(tmp_path)


def test_the_real_faithbench_dev_sample_loads_with_the_published_label_mix() -> None:
    path = _need(FAITHBENCH)
    labelled = load_faithbench(path)
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    assert len(labelled.samples) == len(labelled.labels) == 100
    assert Counter(label.grounded for label in labelled.labels) == {
        "no": 57,
        "partly": 24,
        "yes": 19,
    }
    # the binary view is exactly "not hallucinated_worst_QU"
    for row, label in zip(rows, labelled.labels, strict=True):
        assert (label.grounded == "yes") == (row["hallucinated_worst_QU"] == 0)
    assert len({s.id for s in labelled.samples}) == 100


def test_the_real_short_answer_dev_sample_loads_two_or_three_samples_per_row() -> None:
    path = _need(SHORT_ANSWER)
    assert len(load_short_answer(path).samples) == 200
    both = load_short_answer(path.parent, fabricated="both")
    assert len(both.samples) == 300
    assert Counter(label.grounded for label in both.labels) == {"yes": 100, "no": 200}
    assert all(s.reference for s in both.samples)
