"""The core of human annotation: task selection, label merging and inter-annotator agreement."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from ragbridge.core.labels.annotation import (
    AnnotationError,
    AnnotationTask,
    TaskContext,
    annotator_agreement,
    default_stratify_metric,
    form_id,
    krippendorff_alpha,
    labels_with_lines,
    load_tasks,
    merge_labels,
    save_tasks,
    select_tasks,
)
from ragbridge.core.labels.human import HumanLabel, LabelFileError, save_labels
from ragbridge.core.results.evaluation import Evaluation, Score
from ragbridge.core.sample import Context, Sample

# -- Krippendorff's alpha: worked values from the literature and by hand ----------------------

_: None = None
# Krippendorff, K. (2011). "Computing Krippendorff's Alpha-Reliability", Annenberg School for
# Communication, University of Pennsylvania (repository.upenn.edu/asc_papers/43), section C:
# four observers, twelve units, values 1-5, missing values. The paper gives
# alpha nominal = 0.743, ordinal = 0.815, interval = 0.849, ratio = 0.797.
KRIPPENDORFF_2011_C = {
    "A": [1, 2, 3, 3, 2, 1, 4, 1, 2, _, _, _],
    "B": [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, _, 3],
    "C": [_, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, _],
    "D": [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, _],
}


def _units(by_observer: dict[str, list[int | None]]) -> list[list[int | None]]:
    return [list(unit) for unit in zip(*by_observer.values(), strict=True)]


@pytest.mark.parametrize(
    ("level", "expected"),
    [("nominal", 0.743), ("ordinal", 0.815), ("interval", 0.849), ("ratio", 0.797)],
)
def test_alpha_reproduces_krippendorff_2011_example_c(level: str, expected: float) -> None:
    alpha = krippendorff_alpha(_units(KRIPPENDORFF_2011_C), level=level)  # type: ignore[arg-type]
    assert round(alpha, 3) == expected


def test_alpha_reproduces_krippendorff_2011_example_a_binary() -> None:
    # Same paper, section A: two observers, ten units, binary data; alpha = 0.095.
    a = [0, 1, 0, 0, 0, 0, 0, 0, 1, 0]
    b = [1, 1, 1, 0, 0, 1, 0, 0, 0, 0]
    assert round(krippendorff_alpha(list(zip(a, b, strict=True))), 3) == 0.095


def test_alpha_ordinal_by_hand_with_a_named_scale() -> None:
    # Units (no < partly < yes): [yes, yes], [yes, partly], [no, no], [no, partly].
    # Coincidences: o(yes,yes)=2, o(yes,partly)=o(partly,yes)=1, o(no,no)=2,
    # o(no,partly)=o(partly,no)=1; n_no=3, n_partly=2, n_yes=3, n=8.
    # Ordinal d2: no-partly = (3+2 - 5/2)^2 = 6.25, partly-yes = (2+3 - 5/2)^2 = 6.25,
    # no-yes = (3+2+3 - 3)^2 = 25. Observed sum o*d2 = 2*6.25 + 2*6.25 = 25.
    # Expected sum n_c*n_k*d2 = 2*(3*2*6.25 + 2*3*6.25 + 3*3*25) = 600.
    # alpha = 1 - (8-1) * 25 / 600 = 17/24.
    units = [["yes", "yes"], ["yes", "partly"], ["no", "no"], ["no", "partly"]]
    alpha = krippendorff_alpha(units, level="ordinal", values=["no", "partly", "yes"])
    assert math.isclose(alpha, 17 / 24)
    # An unused category on the scale changes nothing (its n_g is 0).
    wider = krippendorff_alpha(units, level="ordinal", values=["no", "partly", "maybe", "yes"])
    assert math.isclose(wider, 17 / 24)


def test_alpha_perfect_agreement_missing_values_and_undefined_cases() -> None:
    assert krippendorff_alpha([[1, 1, None], [2, 2, 2], [3, None, 3]], level="ordinal") == 1.0
    # a unit with one value carries no pair and changes nothing
    base = krippendorff_alpha([[1, 2], [2, 2], [3, 3]])
    assert krippendorff_alpha([[1, 2], [2, 2], [3, 3], [5]]) == base
    with pytest.raises(ValueError, match="at least one unit with two"):
        krippendorff_alpha([[1], [2, None]])
    with pytest.raises(ValueError, match="every label is the same"):
        krippendorff_alpha([[4, 4], [4, 4, 4]])
    with pytest.raises(ValueError, match="not on the scale"):
        krippendorff_alpha([["a", "b"]], values=["a"])
    with pytest.raises(ValueError, match="numeric"):
        krippendorff_alpha([["a", "b"]], level="interval")
    with pytest.raises(ValueError, match="level must be"):
        krippendorff_alpha([[1, 2]], level="cardinal")  # type: ignore[arg-type]


def test_alpha_systematic_disagreement_is_negative() -> None:
    assert krippendorff_alpha([[1, 5], [5, 1], [1, 5], [5, 1]], level="interval") < 0


# -- agreement per question -------------------------------------------------------------------


def _label(sample: str, who: str, **answers: object) -> HumanLabel:
    return HumanLabel(sample_id=sample, annotator=who, **answers)  # type: ignore[arg-type]


def test_agreement_per_question_alpha_kappa_and_raw_agreement_by_hand() -> None:
    grounded_a = ["yes", "yes", "no", "no"]
    grounded_b = ["yes", "partly", "no", "partly"]
    labels = [_label(f"s{i}", "ann", grounded=a, relevance=5) for i, a in enumerate(grounded_a)] + [
        _label(f"s{i}", "bob", grounded=b) for i, b in enumerate(grounded_b)
    ]
    labels.append(_label("s9", "cyd", grounded="yes", helpfulness=2))
    stats = annotator_agreement(labels)
    assert list(stats) == ["relevance", "accuracy", "grounded", "helpfulness"]
    grounded = stats["grounded"]
    assert (grounded.labels, grounded.items, grounded.items_multi, grounded.annotators) == (
        9,
        5,
        4,
        3,
    )
    assert grounded.alpha is not None
    assert math.isclose(grounded.alpha, 17 / 24)
    # Quadratic-weighted kappa of ranks A=[2,2,0,0], B=[2,1,0,1] (no=0, partly=1, yes=2):
    # observed weighted disagreement (1 + 1)/4 = 0.5; chance: marginals A (0: .5, 2: .5),
    # B (0: .25, 1: .5, 2: .25) give .5*.5*1 + .5*.25*4 + .5*.25*4 + .5*.5*1 = 1.5;
    # kappa = 1 - 0.5/1.5 = 2/3. Pairs with cyd share no sample: one pair counts.
    assert grounded.kappa is not None
    assert math.isclose(grounded.kappa, 2 / 3)
    assert grounded.kappa_pairs == 1
    assert grounded.percent_agreement == 0.5
    assert grounded.note is None
    # relevance: one annotator only — nothing to compute, and the note says why
    relevance = stats["relevance"]
    assert (relevance.labels, relevance.items_multi) == (4, 0)
    assert relevance.alpha is None
    assert relevance.kappa is None
    assert relevance.percent_agreement is None
    assert relevance.note == "no sample has two labels"
    assert stats["accuracy"].labels == 0
    assert stats["accuracy"].note == "nobody answered this question"


def test_agreement_when_everyone_gives_the_same_answer() -> None:
    labels = [_label(f"s{i}", who, accuracy=5) for i in range(3) for who in ("a", "b")]
    accuracy = annotator_agreement(labels)["accuracy"]
    assert accuracy.percent_agreement == 1.0
    assert accuracy.alpha is None
    assert accuracy.kappa is None
    assert accuracy.note is not None
    assert "every label is the same" in accuracy.note


def test_agreement_three_annotators_matches_alpha_of_the_units() -> None:
    rows: dict[str, list[int | None]] = {
        "a": [1, 2, 3, 4, 5],
        "b": [1, 2, 3, 5, 4],
        "c": [2, 2, 3, 4, None],
    }
    labels = [
        _label(f"s{i}", who, helpfulness=value)
        for who, values in rows.items()
        for i, value in enumerate(values)
        if value is not None
    ]
    stats = annotator_agreement(labels)["helpfulness"]
    units = [[str(v) for v in unit if v is not None] for unit in zip(*rows.values(), strict=True)]
    expected = krippendorff_alpha(units, level="ordinal", values=["1", "2", "3", "4", "5"])
    assert stats.alpha is not None
    assert math.isclose(stats.alpha, expected)
    assert stats.kappa_pairs == 3
    assert stats.items_multi == 5
    # pairs: s0 1 of 3 identical, s1-s2 3 of 3, s3 1 of 3, s4 0 of 1 -> 8 / 13
    assert stats.percent_agreement is not None
    assert math.isclose(stats.percent_agreement, 8 / 13)


# -- selection --------------------------------------------------------------------------------


def _samples(n: int, *, answer: bool = True) -> list[Sample]:
    return [
        Sample(
            id=f"q{i:02d}",
            question=f"Question {i}?",
            answer=f"Answer {i}." if answer else None,
            contexts=[Context(text=f"Passage {i}.", id=f"d{i}"), Context(text="Other.")],
            reference=f"Reference {i}." if i % 2 else None,
        )
        for i in range(n)
    ]


def test_selection_is_deterministic_and_independent_of_file_order() -> None:
    samples = _samples(40)
    first = select_tasks(samples, 10, seed=7)
    again = select_tasks(list(reversed(samples)), 10, seed=7)
    assert first.tasks == again.tasks
    assert [t.task_id for t in first.tasks] == [f"t{i:02d}" for i in range(1, 11)]
    other = select_tasks(samples, 10, seed=8)
    assert {t.sample_id for t in other.tasks} != {t.sample_id for t in first.tasks}
    # adding samples to the file keeps the draw of the ones already there
    grown = select_tasks(samples + _samples(60)[40:], 40, seed=7)
    ranked = [t.sample_id for t in grown.tasks]
    assert {t.sample_id for t in first.tasks} <= set(ranked)
    assert first.stratify_by is None
    assert first.available == {"all": 40}


def test_task_holds_what_the_annotator_sees() -> None:
    task = select_tasks(_samples(3), 3).tasks[0]
    sample = next(s for s in _samples(3) if s.id == task.sample_id)
    assert task.question == sample.question
    assert task.answer == sample.answer
    assert task.reference == sample.reference
    assert task.contexts == [TaskContext(text=c.text, id=c.id) for c in sample.contexts]
    assert task.scores == {}
    assert task.stratum is None


def test_samples_without_an_answer_are_left_out_and_n_larger_than_the_set() -> None:
    samples = [
        *_samples(5),
        Sample(id="blank", question="?", answer="   "),
        Sample(id="none", question="?"),
    ]
    selection = select_tasks(samples, 50)
    assert len(selection.tasks) == 5
    assert selection.without_answer == ["blank", "none"]


def _evaluation(values: dict[str, float | None]) -> Evaluation:
    ev = Evaluation()
    for sample_id, value in values.items():
        if value is None:
            ev.add(sample_id, "faithfulness", Score.fail("judge_error", "boom"))
        else:
            ev.add(sample_id, "faithfulness", Score(value=value))
        ev.add(sample_id, "recall@5", Score(value=1.0))
    return ev


def test_stratified_selection_gives_low_mid_and_high_equal_shares() -> None:
    samples = _samples(40)
    # 2 low, 5 mid, 30 high, 3 unscored (judge failures)
    values: dict[str, float | None] = {}
    for i, sample in enumerate(samples):
        if i < 2:
            values[sample.id] = 0.1
        elif i < 7:
            values[sample.id] = 0.5
        elif i < 37:
            values[sample.id] = 0.9
        else:
            values[sample.id] = None
    ev = _evaluation(values)
    selection = select_tasks(samples, 9, seed=3, evaluation=ev, stratify_by="faithfulness")
    # rounds of low, mid, high: 3, 6, then (low is empty) mid, high, mid
    assert selection.chosen == {"low": 2, "mid": 4, "high": 3}
    assert selection.available == {"low": 2, "mid": 5, "high": 30, "unscored": 3}
    # round robin: low runs out after two rounds, mid after five
    bigger = select_tasks(samples, 12, seed=3, evaluation=ev, stratify_by="faithfulness")
    assert bigger.chosen == {"low": 2, "mid": 5, "high": 5}
    for task in bigger.tasks:
        value = values[task.sample_id]
        assert task.stratum == {0.1: "low", 0.5: "mid", 0.9: "high"}[value]  # type: ignore[index]
        assert task.scores == {"faithfulness": value, "recall@5": 1.0}
    # the unscored only fill what the bins cannot
    everything = select_tasks(samples, 40, seed=3, evaluation=ev, stratify_by="faithfulness")
    assert everything.chosen == {"low": 2, "mid": 5, "high": 30, "unscored": 3}
    failed = next(t for t in everything.tasks if t.stratum == "unscored")
    assert failed.scores == {"recall@5": 1.0}  # a failed cell is no score


def test_stratified_order_does_not_group_the_bins() -> None:
    samples = _samples(30)
    ev = _evaluation({s.id: (0.1, 0.5, 0.9)[i % 3] for i, s in enumerate(samples)})
    tasks = select_tasks(samples, 30, evaluation=ev, stratify_by="faithfulness").tasks
    strata = [t.stratum for t in tasks]
    assert strata != sorted(strata)
    assert strata[:3] != ["low", "mid", "high"] or strata[3:6] != ["low", "mid", "high"]


def test_default_stratify_metric_prefers_a_measure_people_are_asked_about() -> None:
    ev = Evaluation()
    ev.add("a", "recall@5", Score(value=1.0))
    ev.add("a", "faithfulness", Score(value=0.5))
    assert default_stratify_metric(ev) == "faithfulness"
    only = Evaluation()
    only.add("a", "recall@5", Score(value=1.0))
    assert default_stratify_metric(only) == "recall@5"
    assert default_stratify_metric(Evaluation()) is None


def test_selection_refuses_bad_arguments() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        select_tasks(_samples(3), 0)
    with pytest.raises(ValueError, match="needs an evaluation"):
        select_tasks(_samples(3), 2, stratify_by="faithfulness")
    with pytest.raises(ValueError, match=r"no metric 'nope'.*faithfulness"):
        select_tasks(_samples(3), 2, evaluation=_evaluation({"q00": 0.5}), stratify_by="nope")


# -- tasks file -------------------------------------------------------------------------------


def test_tasks_round_trip_and_form_id(tmp_path: Path) -> None:
    tasks = select_tasks(_samples(6), 4).tasks
    path = tmp_path / "tasks.jsonl"
    assert save_tasks(tasks, path) == 4
    assert load_tasks(path) == tasks
    assert form_id(tasks) == form_id(load_tasks(path))
    assert form_id(tasks) != form_id(tasks[:3])
    assert len(form_id(tasks)) == 16


def test_load_tasks_names_the_line_and_field(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    good = AnnotationTask(task_id="t1", sample_id="a", question="?", answer="!")
    path.write_text(good.model_dump_json() + "\n\n" + '{"task_id": "t2", "sample_id": "b"}\n')
    with pytest.raises(AnnotationError, match=r"tasks\.jsonl:3: question: Field required"):
        load_tasks(path)
    path.write_text(good.model_dump_json() + "\n" + good.model_dump_json() + "\n")
    with pytest.raises(AnnotationError, match=r":2: task_id: duplicate task id 't1'.*line 1"):
        load_tasks(path)
    path.write_text("\n")
    with pytest.raises(AnnotationError, match="holds no tasks"):
        load_tasks(path)


# -- merging labels ---------------------------------------------------------------------------

TASKS = [
    AnnotationTask(task_id="t1", sample_id="a", question="?", answer="!"),
    AnnotationTask(task_id="t2", sample_id="b", question="?", answer="!"),
    AnnotationTask(task_id="t3", sample_id="c", question="?", answer="!"),
]


def test_labels_with_lines_counts_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "ann.jsonl"
    save_labels([_label("a", "x", relevance=3), _label("b", "x", relevance=4)], path)
    text = path.read_text().splitlines()
    path.write_text("\n" + text[0] + "\n\n\n" + text[1] + "\n")
    located = list(labels_with_lines(path))
    assert [where for where, _ in located] == [f"{path}:2", f"{path}:5"]
    assert [label.relevance for _, label in located] == [3, 4]


def test_merge_orders_by_task_then_annotator_and_fills_task_ids() -> None:
    labelled = [
        ("x.jsonl:1", _label("c", "zed", relevance=2)),
        ("x.jsonl:2", _label("a", "zed", relevance=3, task_id="t1")),
        ("y.jsonl:1", _label("a", "amy", relevance=4)),
    ]
    merged = merge_labels(labelled, TASKS)
    assert [(m.sample_id, m.annotator, m.task_id) for m in merged] == [
        ("a", "amy", "t1"),
        ("a", "zed", "t1"),
        ("c", "zed", "t3"),
    ]


def test_merge_refuses_labels_that_do_not_fit_the_tasks() -> None:
    with pytest.raises(AnnotationError, match=r"^y\.jsonl:4: sample_id: 'zz' is not one of"):
        merge_labels([("y.jsonl:4", _label("zz", "amy", relevance=1))], TASKS)
    with pytest.raises(AnnotationError, match=r"^y\.jsonl:1: task_id: 't9' is not one of"):
        merge_labels([("y.jsonl:1", _label("a", "amy", task_id="t9"))], TASKS)
    with pytest.raises(AnnotationError, match=r"task_id: task 't2' shows sample 'b', not 'a'"):
        merge_labels([("y.jsonl:1", _label("a", "amy", task_id="t2"))], TASKS)


def test_merge_refuses_one_annotator_labelling_a_sample_twice_across_files() -> None:
    labelled = [
        ("first.jsonl:3", _label("b", "amy", relevance=1)),
        ("second.jsonl:1", _label("b", "amy", relevance=2)),
    ]
    with pytest.raises(
        AnnotationError,
        match=r"^second\.jsonl:1: annotator: 'amy' labelled sample 'b' twice "
        r"\(also at first\.jsonl:3\)",
    ):
        merge_labels(labelled, TASKS)


def test_a_bad_label_line_is_refused_by_the_label_contract(tmp_path: Path) -> None:
    path = tmp_path / "ann.jsonl"
    path.write_text(
        '{"sample_id": "a", "annotator": "amy", "relevance": 3}\n'
        '{"sample_id": "b", "annotator": "amy", "grounded": "maybe"}\n'
    )
    with pytest.raises(LabelFileError, match=r"ann\.jsonl:2: grounded: "):
        list(labels_with_lines(path))
