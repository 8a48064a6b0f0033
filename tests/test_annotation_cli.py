"""``ragbridge annotate export`` and ``ragbridge annotate import`` end to end."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragbridge.adapters.cli import main
from ragbridge.core.labels.annotation import load_tasks
from ragbridge.core.labels.human import HumanLabel, load_labels, save_labels
from ragbridge.core.results.evaluation import Evaluation, Score
from ragbridge.core.sample import Context, Sample, save_samples


def _samples() -> list[Sample]:
    samples = [
        Sample(
            id=f"s{i:02d}",
            question=f"How many days of leave in policy {i}?",
            answer=f"{10 + i} days.",
            contexts=[Context(text=f"Policy {i}: {10 + i} days.", id=f"p{i}")],
            reference=f"{10 + i} days.",
        )
        for i in range(30)
    ]
    samples.append(Sample(id="unanswered", question="Is there a gym?"))
    return samples


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "eval.jsonl"
    save_samples(_samples(), path)
    return path


@pytest.fixture
def results(tmp_path: Path) -> Path:
    ev = Evaluation(metadata={"judge_model": "scripted"})
    for i in range(30):
        ev.add(f"s{i:02d}", "recall@5", Score(value=1.0))
        ev.add(f"s{i:02d}", "faithfulness", Score(value=0.1 if i < 4 else 0.95))
    path = tmp_path / "results.jsonl"
    ev.to_jsonl(path)
    return path


def test_export_writes_tasks_and_form(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks, form = tmp_path / "tasks.jsonl", tmp_path / "form.html"
    argv = ["annotate", "export", str(data), "--n", "8", "--seed", "3"]
    assert main([*argv, "--out", str(tasks), "--html", str(form)]) == 0
    captured = capsys.readouterr()
    assert f"wrote 8 tasks to {tasks} (seed 3)" in captured.out
    assert "judge scores hidden" in captured.out
    assert "left out 1 sample without an answer" in captured.err
    first = load_tasks(tasks)
    assert len(first) == 8
    assert all(t.stratum is None for t in first)
    assert "How many days of leave" in form.read_text(encoding="utf-8")
    # the same command gives the same tasks
    again = tmp_path / "again.jsonl"
    assert main([*argv, "--out", str(again)]) == 0
    assert again.read_bytes() == tasks.read_bytes()


def test_export_stratified_by_the_results(
    data: Path, results: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = tmp_path / "tasks.jsonl"
    argv = ["annotate", "export", str(data), "--results", str(results), "--n", "6"]
    assert main([*argv, "--out", str(tasks), "--html", str(tmp_path / "f.html")]) == 0
    out = capsys.readouterr().out
    assert "stratified by faithfulness: low 3/4, high 3/26 (chosen/available)" in out
    loaded = load_tasks(tasks)
    assert sorted(t.stratum or "" for t in loaded) == ["high"] * 3 + ["low"] * 3
    assert all(set(t.scores) == {"faithfulness", "recall@5"} for t in loaded)
    assert "0.950" not in (tmp_path / "f.html").read_text(encoding="utf-8")
    assert main([*argv, "--out", str(tasks), "--stratify-by", "none"]) == 0
    assert "stratified by" not in capsys.readouterr().out
    assert all(t.stratum is None for t in load_tasks(tasks))


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--n", "0"], "--n must be at least 1"),
        (["--stratify-by", "faithfulness"], "--stratify-by needs --results"),
        (["--html", "{out}"], "--out and --html name the same file"),
        (["--html", "{missing}/form.html"], "does not exist"),
    ],
)
def test_export_usage_errors(
    data: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    extra: list[str],
    message: str,
) -> None:
    out = tmp_path / "tasks.jsonl"
    extra = [e.format(out=out, missing=tmp_path / "nope") for e in extra]
    assert main(["annotate", "export", str(data), "--out", str(out), *extra]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_export_refuses_results_of_another_set_and_an_unknown_metric(
    data: Path, results: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "other.jsonl"
    ev = Evaluation()
    ev.add("zz", "faithfulness", Score(value=0.5))
    ev.to_jsonl(other)
    out = str(tmp_path / "t.jsonl")
    assert main(["annotate", "export", str(data), "--results", str(other), "--out", out]) == 2
    assert "none of its sample ids is in" in capsys.readouterr().err
    argv = ["annotate", "export", str(data), "--results", str(results), "--out", out]
    assert main([*argv, "--stratify-by", "nope"]) == 2
    err = capsys.readouterr().err
    assert f"--stratify-by nope: no such metric in {results} (has: recall@5, faithfulness)" in err
    assert "warning" not in err  # the unanswered sample has no row, and needs none


# -- import -----------------------------------------------------------------------------------


@pytest.fixture
def tasks(data: Path, tmp_path: Path) -> Path:
    path = tmp_path / "tasks.jsonl"
    assert main(["annotate", "export", str(data), "--n", "4", "--out", str(path)]) == 0
    return path


def _ids(tasks: Path) -> list[str]:
    return [t.sample_id for t in load_tasks(tasks)]


def test_import_merges_annotators_and_prints_agreement(
    tasks: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = _ids(tasks)
    amy = [
        HumanLabel(sample_id=s, annotator="amy", relevance=r, grounded=g, comment="ok")
        for s, r, g in zip(ids, [5, 4, 2, 1], ["yes", "yes", "no", "partly"], strict=True)
    ]
    bob = [
        HumanLabel(sample_id=s, annotator="bob", relevance=r, grounded=g)
        for s, r, g in zip(ids[:3], [5, 3, 1], ["yes", "partly", "no"], strict=True)
    ]
    files = [tmp_path / "labels-amy.jsonl", tmp_path / "labels-bob.jsonl"]
    save_labels(amy, files[0])
    save_labels(bob, files[1])
    out = tmp_path / "labels.jsonl"
    capsys.readouterr()
    argv = ["annotate", "import", *map(str, files), "--tasks", str(tasks), "--out", str(out)]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert f"merged 7 labels from 2 files into {out}" in captured.out
    assert "annotators: amy (4), bob (3)" in captured.out
    rows = {line.split()[0]: line.split() for line in captured.out.splitlines() if line}
    assert rows["relevance"][:4] == ["relevance", "7", "4", "3"]
    assert rows["accuracy"][1:5] == ["0", "0", "0", "—"]
    assert "accuracy: nobody answered this question" in captured.out
    assert "grounded: " not in captured.out  # every statistic of grounded is defined
    merged = list(load_labels(out))
    assert len(merged) == 7
    assert [lab.sample_id for lab in merged][:2] == [ids[0], ids[0]]
    assert all(lab.task_id is not None for lab in merged)
    assert captured.err == ""


def test_import_warns_about_one_annotator_and_unlabelled_tasks(
    tasks: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "a.jsonl"
    save_labels([HumanLabel(sample_id=_ids(tasks)[0], annotator="amy", relevance=3)], path)
    out = tmp_path / "labels.jsonl"
    assert main(["annotate", "import", str(path), "--tasks", str(tasks), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "3 of 4 tasks have no label" in err
    assert "one annotator only" in err


def _import_error(
    tasks: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], *contents: str
) -> str:
    files = []
    for i, text in enumerate(contents):
        path = tmp_path / f"ann{i + 1}.jsonl"
        path.write_text(text, encoding="utf-8")
        files.append(str(path))
    out = tmp_path / "labels.jsonl"
    capsys.readouterr()
    assert main(["annotate", "import", *files, "--tasks", str(tasks), "--out", str(out)]) == 2
    assert not out.exists()
    return capsys.readouterr().err


def test_import_names_file_line_and_field(
    tasks: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = _ids(tasks)[:2]
    good = f'{{"sample_id": "{a}", "annotator": "amy", "relevance": 3}}\n'
    err = _import_error(
        tasks,
        tmp_path,
        capsys,
        good + f'\n{{"sample_id": "{b}", "annotator": "amy", "relevance": 7}}\n',
    )
    assert f"{tmp_path / 'ann1.jsonl'}:3: relevance: Input should be less than or equal to 5" in err
    err = _import_error(tasks, tmp_path, capsys, '{"sample_id": "gym", "annotator": "amy"}\n')
    assert f"{tmp_path / 'ann1.jsonl'}:1: sample_id: 'gym' is not one of {tasks}" in err
    err = _import_error(
        tasks, tmp_path, capsys, f'{{"sample_id": "{a}", "annotator": "amy", "task_id": "t9"}}\n'
    )
    assert ":1: task_id: 't9' is not one of" in err
    err = _import_error(tasks, tmp_path, capsys, good, good)
    assert (
        f"{tmp_path / 'ann2.jsonl'}:1: annotator: 'amy' labelled sample '{a}' twice "
        f"(also at {tmp_path / 'ann1.jsonl'}:1)"
    ) in err
    err = _import_error(tasks, tmp_path, capsys, good + good)
    assert ":2: annotator 'amy' labelled sample" in err  # within a file: load_labels says so
    err = _import_error(tasks, tmp_path, capsys, f'{{"sample_id": "{a}", "who": "amy"}}\n')
    assert ":1: annotator: Field required" in err


def test_import_refuses_the_same_file_twice_and_output_over_an_input(
    tasks: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "a.jsonl"
    save_labels([HumanLabel(sample_id=_ids(tasks)[0], annotator="amy", relevance=3)], path)
    argv = ["annotate", "import", str(path), str(path), "--tasks", str(tasks)]
    assert main([*argv, "--out", str(tmp_path / "x.jsonl")]) == 2
    assert "is given twice" in capsys.readouterr().err
    assert main(["annotate", "import", str(path), "--tasks", str(tasks), "--out", str(path)]) == 2
    assert "is the input file" in capsys.readouterr().err
