"""A team's own criterion checked against people: labels that answer criteria by name, agreement
per criterion, annotation tasks and the form that ask the criterion itself."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest

from ragbridge.adapters.annotation_form import render_form
from ragbridge.adapters.cli.main import main
from ragbridge.core.labels.agreement import AgreementError, judge_agreement
from ragbridge.core.labels.annotation import (
    AnnotationError,
    AskedCriterion,
    annotator_agreement,
    asked_criterion,
    form_id,
    load_tasks,
    merge_labels,
    save_tasks,
    select_tasks,
    tasks_criteria,
)
from ragbridge.core.labels.human import (
    HumanLabel,
    LabelFileError,
    criterion_question,
    load_labels,
    save_labels,
)
from ragbridge.core.labels.per_group import per_group_spearman
from ragbridge.core.results.evaluation import Evaluation, Score
from ragbridge.core.sample import Context, Sample

HOSTILE = "<script>document.body.setAttribute('data-pwned','1')</script>"


# --------------------------------------------------------------------------- labels


def test_label_files_written_before_criteria_still_load_and_save_the_same(tmp_path: Path) -> None:
    old = (
        '{"sample_id": "q1", "annotator": "ann", "relevance": 4, "grounded": "partly", '
        '"comment": "", "task_id": "t1"}\n'
    )
    path = tmp_path / "old.jsonl"
    path.write_text(old, encoding="utf-8")
    (label,) = load_labels(path)
    assert (label.relevance, label.grounded, label.criteria) == (4, "partly", None)
    save_labels([label], tmp_path / "again.jsonl")
    assert json.loads((tmp_path / "again.jsonl").read_text(encoding="utf-8")) == json.loads(old)


def test_criteria_answers_load_by_name_and_bad_ones_name_line_and_field(tmp_path: Path) -> None:
    path = tmp_path / "labels.jsonl"
    path.write_text(
        '{"sample_id": "q1", "annotator": "a", "criteria": {"tone": 4, "cites": true, "m": 3.5}}\n'
        '{"sample_id": "q2", "annotator": "a", "criteria": {"tone": "4"}}\n',
        encoding="utf-8",
    )
    with pytest.raises(LabelFileError, match=r"labels\.jsonl:2: criteria: .*tone: '4' is neither"):
        list(load_labels(path))
    first = HumanLabel.model_validate_json(path.read_text(encoding="utf-8").splitlines()[0])
    assert first.criteria == {"tone": 4, "cites": True, "m": 3.5}
    assert isinstance(first.criteria["cites"], bool)
    with pytest.raises(ValueError, match="not a criterion name"):
        HumanLabel(sample_id="q", annotator="a", criteria={"2nd": 1})
    with pytest.raises(ValueError, match="not a finite number"):
        HumanLabel(sample_id="q", annotator="a", criteria={"tone": float("inf")})


def test_a_criterion_question_reads_its_scale_and_cuts_at_its_middle() -> None:
    tone = criterion_question("tone", (1, 5))
    assert tone.scale == ("1", "2", "3", "4", "5")
    assert [tone.positive(v) for v in (3, 3.34, 4)] == [False, True, True]
    assert tone.graded(2) == pytest.approx(0.25)
    ten = criterion_question("detail", (0, 10))
    assert [ten.positive(v) for v in (5, 6)] == [False, True]
    cites = criterion_question("cites", None)
    assert cites.binary
    assert (cites.graded(True), cites.positive(False)) == (1.0, False)
    label = HumanLabel(sample_id="q", annotator="a", relevance=2, criteria={"tone": 5})
    assert tone.answer(label) == 5
    assert criterion_question("relevance", (1, 5)).answer(label) is None


# --------------------------------------------------------------------------- agreement


def _criterion_cells(name: str, values: list[float], **details: Any) -> Evaluation:
    ev = Evaluation()
    for i, value in enumerate(values):
        ev.add(f"s{i}", name, Score(value=value, provider="llm", details=details or None))
    return ev


def test_agreement_reports_a_scored_criterion_against_the_same_named_answers() -> None:
    # people (two each) and the judge's normalised score on a 1-5 criterion
    people = [(5, 5), (4, 5), (2, 2), (1, 2), (3, 4)]
    judge = [1.0, 0.75, 0.25, 0.0, 0.5]
    ev = _criterion_cells("tone", judge, kind="criterion", scale=[1, 5])
    labels = [
        HumanLabel(sample_id=f"s{i}", annotator=who, criteria={"tone": said})
        for i, pair in enumerate(people)
        for who, said in zip(("a", "b"), pair, strict=True)
    ]
    table = judge_agreement(ev, labels, n_resamples=100)
    (row,) = table.rows
    assert (row.metric, row.question, row.positive) == ("tone", "tone", "tone > 3")
    assert row.spearman.value == pytest.approx(1.0)
    # s4's two people split (3 is not above the middle, 4 is): a tie, out of the binary view
    assert (row.n, row.n_binary, row.n_ties) == (5, 4, 1)
    assert row.default is not None
    assert row.default.confusion.text() == "2/0/0/2"
    assert table.notes == []
    assert [p.question for p in table.people] == ["tone"]


def test_a_yes_no_aspect_reads_the_true_false_answers() -> None:
    ev = _criterion_cells("cites_policy", [1.0, 0.0, 1.0, 0.0], kind="aspect")
    said = [True, False, False, False]
    labels = [
        HumanLabel(sample_id=f"s{i}", annotator="a", criteria={"cites_policy": v})
        for i, v in enumerate(said)
    ]
    (row,) = judge_agreement(ev, labels, n_resamples=100).rows
    assert row.positive == "cites_policy = yes"
    assert row.default is not None
    assert row.default.confusion.text() == "1/1/0/2"


def test_a_scale_nobody_states_is_read_from_the_labels_and_said() -> None:
    ev = _criterion_cells("tone", [0.9, 0.1, 0.6])
    labels = [
        HumanLabel(sample_id=f"s{i}", annotator="a", criteria={"tone": v})
        for i, v in enumerate((4, 2, 3))
    ]
    table = judge_agreement(ev, labels, n_resamples=100)
    assert table.notes[0].startswith("tone: scale 2-4 inferred from the labels")
    assert table.rows[0].positive == "tone > 3"
    given = judge_agreement(ev, labels, criteria={"tone": criterion_question("tone", (1, 5))})
    assert given.notes == []


def test_an_answer_off_the_criterion_scale_is_refused_naming_who_gave_it() -> None:
    ev = _criterion_cells("tone", [0.9, 0.1], kind="criterion", scale=[1, 5])
    labels = [
        HumanLabel(sample_id="s0", annotator="a", criteria={"tone": 4}),
        HumanLabel(sample_id="s1", annotator="bo", criteria={"tone": 7}),
    ]
    with pytest.raises(AgreementError, match=r"criteria\.tone: 7 \(sample 's1', annotator 'bo'\)"):
        judge_agreement(ev, labels)


def test_a_criterion_named_like_a_form_question_keeps_its_own_answers() -> None:
    ev = Evaluation()
    for i, (relevance, criterion) in enumerate([(0.9, 0.2), (0.1, 0.8), (0.8, 0.1)]):
        ev.add(f"s{i}", "answer_relevance", Score(value=relevance))
        ev.add(f"s{i}", "relevance", Score(value=criterion, details={"scale": [1, 5]}))
    labels = [
        HumanLabel(sample_id=f"s{i}", annotator="a", relevance=form, criteria={"relevance": own})
        for i, (form, own) in enumerate([(5, 2), (1, 5), (4, 1)])
    ]
    rows = {r.metric: r for r in judge_agreement(ev, labels, n_resamples=100).rows}
    assert rows["answer_relevance"].spearman.value == pytest.approx(1.0)
    assert rows["relevance"].spearman.value == pytest.approx(1.0)
    assert rows["relevance"].positive == "relevance > 3"
    assert rows["answer_relevance"].positive == "relevance >= 4"


def test_per_group_spearman_is_the_mean_over_groups_that_vary() -> None:
    ids = ["a1", "a2", "a3", "b1", "b2", "c1", "c2"]
    people = [1.0, 2.0, 3.0, 1.0, 2.0, 4.0, 4.0]
    judge = [0.1, 0.2, 0.3, 0.9, 0.1, 0.2, 0.5]
    groups = {i: i[0] for i in ids}
    found = per_group_spearman(ids, people, judge, groups)
    assert found.value == pytest.approx((1.0 + -1.0) / 2)
    assert (found.groups, found.left_out) == (2, 1)
    none = per_group_spearman(ids[5:], people[5:], judge[5:], groups)
    assert none.value is None
    assert none.reason == "in all 1 groups people or the judge gave one score to every sample"


# --------------------------------------------------------------------------- annotation


CRITERIA = [
    AskedCriterion(name="tone", text=f"Polite and calm. {HOSTILE}", scale=(1, 5)),
    AskedCriterion(name="cites_policy", text="Names the policy number."),
    AskedCriterion(
        name="depth", text="How complete.", scale=(0, 2), levels={0: "none", 1: "some", 2: "all"}
    ),
]


def _samples() -> list[Sample]:
    return [
        Sample(
            id=f"q{i}",
            question=f"Question {i}?",
            answer=f"Answer {i}.",
            contexts=[Context(text="Policy 7 says so.")],
        )
        for i in range(3)
    ]


def test_criteria_specs_become_what_people_are_asked() -> None:
    from ragbridge.core.criteria import Aspect, Criterion, Rubric

    asked = [
        asked_criterion(Criterion(name="tone", criteria="Polite and calm.", scale=(1, 4))),
        asked_criterion(Aspect(name="cites", definition="Names the policy number.")),
        asked_criterion(Rubric(name="depth", rubrics={1: "none", 2: "some", 3: "all"})),
    ]
    assert [(a.name, a.text, a.scale) for a in asked[:2]] == [
        ("tone", "Polite and calm.", (1, 4)),
        ("cites", "Names the policy number.", None),
    ]
    assert (asked[2].scale, asked[2].levels) == ((1, 3), {1: "none", 2: "some", 3: "all"})
    with pytest.raises(ValueError, match="not a criterion spec"):
        asked_criterion("tone")


def test_tasks_carry_the_criteria_and_old_tasks_keep_their_bytes_and_form_id(
    tmp_path: Path,
) -> None:
    plain = select_tasks(_samples(), 2, seed=3).tasks
    old_way = hashlib.sha256()
    for task in plain:
        dumped = task.model_dump(mode="json", exclude={"criteria"})
        old_way.update(json.dumps(dumped, sort_keys=True).encode() + b"\n")
    assert form_id(plain) == old_way.hexdigest()[:16]
    save_tasks(plain, tmp_path / "plain.jsonl")
    assert '"criteria"' not in (tmp_path / "plain.jsonl").read_text(encoding="utf-8")

    asked = select_tasks(_samples(), 2, seed=3, criteria=CRITERIA).tasks
    assert all(task.criteria == CRITERIA for task in asked)
    assert form_id(asked) != form_id(plain)
    save_tasks(asked, tmp_path / "asked.jsonl")
    assert load_tasks(tmp_path / "asked.jsonl") == asked
    assert set(tasks_criteria(asked)) == {"tone", "cites_policy", "depth"}
    with pytest.raises(ValueError, match="a name is given twice"):
        select_tasks(_samples(), 2, criteria=[CRITERIA[0], CRITERIA[0]])


def test_merged_labels_answer_only_the_asked_criteria_on_their_scales() -> None:
    tasks = select_tasks(_samples(), 3, seed=3, criteria=CRITERIA).tasks
    sample = tasks[0].sample_id
    good = HumanLabel(
        sample_id=sample, annotator="a", criteria={"tone": 4, "cites_policy": True, "depth": 0}
    )
    assert merge_labels([("f:1", good)], tasks)[0].criteria == good.criteria
    for criteria, problem in [
        ({"warmth": 3}, r"f:2: criteria\.warmth: not a criterion the task asked"),
        ({"tone": 6}, r"f:2: criteria\.tone: 6 is off its scale 1-5"),
        ({"cites_policy": 1}, r"f:2: criteria\.cites_policy: 1 is off its scale true or false"),
        ({"depth": 1.5}, None),
    ]:
        label = HumanLabel(sample_id=sample, annotator="b", criteria=criteria)
        if problem is None:
            merge_labels([("f:2", label)], tasks)
        else:
            with pytest.raises(AnnotationError, match=problem):
                merge_labels([("f:2", label)], tasks)


def test_annotator_agreement_covers_every_criterion_on_its_scale() -> None:
    labels = [
        HumanLabel(sample_id=f"s{i}", annotator=who, criteria={"tone": v, "relevance": 3})
        for i, pair in enumerate([(5, 5), (1, 2), (3, 3)])
        for who, v in zip(("a", "b"), pair, strict=True)
    ]
    found = annotator_agreement(labels, criteria={"tone": criterion_question("tone", (1, 5))})
    assert list(found)[:4] == ["relevance", "accuracy", "grounded", "helpfulness"]
    assert found["relevance"].labels == 0  # the form question nobody answered
    assert found["criteria.relevance"].labels == 6
    tone = found["tone"]
    assert (tone.labels, tone.items_multi, tone.annotators) == (6, 3, 2)
    assert tone.alpha is not None
    assert tone.alpha > 0.8


# --------------------------------------------------------------------------- the form


def _form(criteria: list[AskedCriterion] = CRITERIA) -> tuple[str, dict[str, Any]]:
    tasks = select_tasks(_samples(), 2, seed=3, criteria=criteria).tasks
    page = render_form(tasks)
    data_text = re.search(r'<script type="application/json" id="form-data">(.*?)</script>', page)
    assert data_text is not None
    return page, json.loads(data_text.group(1))


def test_the_form_shows_each_criterion_escaped_with_its_scale() -> None:
    page, data = _form()
    assert HOSTILE not in page
    assert "Polite and calm. &lt;script&gt;document.body.setAttribute(" in page
    assert page.count("<script") == 2  # the data block and our code, nothing from a criterion
    assert '<fieldset class="q criterion"><legend>tone</legend>' in page
    assert '<p class="text criterion-text">Names the policy number.</p>' in page
    assert "Relevance: does the answer address the question?" not in page
    radios = re.findall(r'<input type="radio" name="(t\d+-[a-z0-9]+)" value="([^"]+)">', page)
    assert {name for name, _ in radios} == {f"t{i}-c{k}" for i in (0, 1) for k in (0, 1, 2)}
    assert [v for n, v in radios if n == "t0-c1"] == ["yes", "no"]
    assert [v for n, v in radios if n == "t0-c2"] == ["0", "1", "2"]
    assert 'value="2"> 2 <span class="hint">all</span>' in page
    assert 'value="5"> 5 <span class="hint">fully</span>' in page
    assert data["questions"] == {
        "c0": ["1", "2", "3", "4", "5"],
        "c1": ["yes", "no"],
        "c2": ["0", "1", "2"],
    }
    assert data["criteria"] == {"c0": "tone", "c1": "cites_policy", "c2": "depth"}
    assert (data["integer_questions"], data["binary_questions"]) == (["c0", "c2"], ["c1"])
    assert "answer each criterion on its scale" in page


def test_a_form_asks_one_set_of_criteria() -> None:
    tasks = select_tasks(_samples(), 2, seed=3, criteria=CRITERIA).tasks
    mixed = [tasks[0], tasks[1].model_copy(update={"criteria": CRITERIA[:1]})]
    with pytest.raises(ValueError, match="must ask the same criteria"):
        render_form(mixed)


# --------------------------------------------------------------------------- the CLI


def test_agreement_cli_pairs_a_criterion_column_with_the_answers_of_its_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "results.jsonl"
    _criterion_cells("tone", [1.0, 0.75, 0.0, 0.25], kind="criterion", scale=[1, 5]).to_jsonl(
        results
    )
    labels = tmp_path / "labels.jsonl"
    save_labels(
        [
            HumanLabel(sample_id=f"s{i}", annotator="a", criteria={"tone": v})
            for i, v in enumerate((5, 4, 2, 1))
        ],
        labels,
    )
    code = main(["agreement", str(results), "--labels", str(labels), "--resamples", "100"])
    out, err = capsys.readouterr()
    assert code == 0, err
    row = next(line for line in out.splitlines() if line.startswith("tone:llm"))
    assert row.split()[:3] == ["tone:llm", "4", "1.00"]
    assert row.split()[-3:] == ["tone", ">", "3"]


CRITERIA_YAML = f"""\
criteria:
  - name: tone
    criteria: "Polite and calm. {HOSTILE}"
    scale: [1, 4]
  - name: cites_policy
    definition: The answer names the policy number.
"""


def test_annotate_asks_the_criteria_of_a_file_and_import_checks_and_reports_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from ragbridge.core.sample import save_samples

    monkeypatch.chdir(tmp_path)
    save_samples(_samples(), "data.jsonl")
    Path("criteria.yaml").write_text(CRITERIA_YAML, encoding="utf-8")
    code = main(
        ["annotate", "export", "data.jsonl", "--criteria", "criteria.yaml", "--n", "3",
         "--out", "tasks.jsonl", "--html", "form.html"]
    )  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "asking the criteria tone, cites_policy" in out
    tasks = load_tasks("tasks.jsonl")
    assert [(c.name, c.scale) for c in tasks[0].criteria] == [
        ("tone", (1, 4)),
        ("cites_policy", None),
    ]
    page = Path("form.html").read_text(encoding="utf-8")
    assert "<legend>tone</legend>" in page
    assert HOSTILE not in page
    ids = [t.sample_id for t in tasks]
    for who, tone in (("ana", (4, 1, 3)), ("bo", (4, 2, 3))):
        save_labels(
            [
                HumanLabel(
                    sample_id=sid, annotator=who, criteria={"tone": t, "cites_policy": t > 2}
                )
                for sid, t in zip(ids, tone, strict=True)
            ],
            f"labels-{who}.jsonl",
        )
    code = main(
        ["annotate", "import", "labels-ana.jsonl", "labels-bo.jsonl", "--tasks", "tasks.jsonl",
         "--out", "labels.jsonl"]
    )  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    table = {line.split()[0]: line.split() for line in out.splitlines() if line[:1].isalpha()}
    assert table["tone"][1:4] == ["6", "3", "3"]
    assert table["cites_policy"][1:4] == ["6", "3", "3"]
    assert "relevance" not in table  # the default questions were not asked
    save_labels([HumanLabel(sample_id=ids[0], annotator="cy", criteria={"tone": 5})], "bad.jsonl")
    code = main(["annotate", "import", "bad.jsonl", "--tasks", "tasks.jsonl", "--out", "x.jsonl"])
    _, err = capsys.readouterr()
    assert code == 2
    assert "bad.jsonl:1: criteria.tone: 5 is off its scale 1-4" in err


def test_agreement_takes_the_scales_from_a_criteria_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "results.jsonl"
    _criterion_cells("tone", [1.0, 0.66, 0.0]).to_jsonl(results)  # cells that state no scale
    labels = tmp_path / "labels.jsonl"
    save_labels(
        [
            HumanLabel(sample_id=f"s{i}", annotator="a", criteria={"tone": v})
            for i, v in enumerate((4, 3, 2))
        ],
        labels,
    )
    (tmp_path / "criteria.yaml").write_text(CRITERIA_YAML, encoding="utf-8")
    argv = ["agreement", str(results), "--labels", str(labels), "--resamples", "50"]
    assert main(argv) == 0
    guessed = capsys.readouterr().out
    assert "tone: scale 2-4 inferred from the labels" in guessed
    assert main([*argv, "--criteria", str(tmp_path / "criteria.yaml")]) == 0
    given = capsys.readouterr().out
    assert "inferred" not in given
    assert "tone > 2.5" in given
