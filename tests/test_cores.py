"""A run of model-free measures split over local processes equals the one-process run.

`ragbridge.core.scoring.cores` cuts the file into ranges of lines; this process scores the
first, forked children the others, and the caller joins their cells, tallies and id checks. The
reference everywhere is the same file scored in one process: the same cells in the same order
(save ``latency_s``, a clock reading), the same summary, the same id warning counted over the
whole file. A child that dies or raises has its range scored again in the parent.
"""

from __future__ import annotations

import itertools
import json
import os
import pickle
import random
import re
from pathlib import Path
from typing import Any

import pytest

import ragbridge.core.scoring.cores as cores
from ragbridge.adapters.cli.main import main
from ragbridge.core.metrics.faithfulness import Faithfulness
from ragbridge.core.results.evaluation import Score
from ragbridge.core.results.id_check import IdCheck
from ragbridge.core.results.tally import Tally
from ragbridge.core.results.writer import ResultWriter
from ragbridge.core.sample import SampleValidationError, load_samples
from ragbridge.core.scoring.runner import evaluate, resolve_metrics

pytestmark = pytest.mark.skipif(
    "fork" not in __import__("multiprocessing").get_all_start_methods(),
    reason="runs are split over processes only where fork exists",
)

METRICS = ["recall@4", "mrr", "ndcg@4", "token_f1", "exact_match", "context_usage"]


def _write(path: Path, n: int, *, seed: int = 5, blank_every: int = 0) -> None:
    """``n`` samples with the edges a split must carry: no answer (failed cells), no labels
    (skipped ranking cells), ids that match no label (the id warning), blank lines."""
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            docs = [rng.randrange(30) for _ in range(5)]
            row: dict[str, Any] = {
                "id": f"s{i}",
                "question": f"How many days does rule {i} give?",
                "contexts": [
                    {"id": f"d{d}", "text": f"Rule {d} gives {d + 20} days."} for d in docs
                ],
            }
            if rng.random() < 0.9:
                row["answer"] = f"Rule {i} gives {rng.randrange(20, 50)} days."
                row["reference"] = rng.choice([row["answer"], "It gives 25 days."])
            if rng.random() < 0.8:
                label = rng.choice(docs) if rng.random() < 0.7 else 99
                row["relevance"] = {f"d{label}": 1}
            fh.write(json.dumps(row) + "\n")
            if blank_every and i % blank_every == 0:
                fh.write("\n")


def _cells(path: Path) -> tuple[dict[str, Any], list[str]]:
    """A results file's header and its cells without their latency."""
    with path.open(encoding="utf-8") as fh:
        header = json.loads(fh.readline())
        return header, [re.sub(r'"latency_s":[^,}]*,?', "", line) for line in fh]


# --------------------------------------------------------------------------- cutting the file


@pytest.mark.parametrize("parts", [1, 2, 3, 7])
@pytest.mark.parametrize("trailing_newline", [True, False])
def test_ranges_cover_every_line_once_with_its_number(
    tmp_path: Path, parts: int, trailing_newline: bool
) -> None:
    lines = [f'{{"n": {i}, "pad": "{"x" * (i % 13)}"}}' for i in range(50)]
    lines[10] = ""  # a blank line keeps its number
    path = tmp_path / "f.jsonl"
    path.write_text("\n".join(lines) + ("\n" if trailing_newline else ""), encoding="utf-8")
    ranges = cores.cut_lines(path, parts)
    assert 1 <= len(ranges) <= parts
    seen = [(number, raw) for r in ranges for number, raw in r.lines(path)]
    assert [number for number, _ in seen] == list(range(1, 51))
    assert [raw.decode().rstrip("\n") for _, raw in seen] == lines
    assert ranges[0].start == 0
    assert ranges[-1].end == path.stat().st_size
    assert all(a.end == b.start for a, b in itertools.pairwise(ranges))


def test_a_file_of_fewer_lines_than_parts_gives_fewer_ranges(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    path.write_text('{"a": 1}\n{"a": 2}\n', encoding="utf-8")
    ranges = cores.cut_lines(path, 8)
    assert [r.first_line for r in ranges] == [1, 2]


# --------------------------------------------------------------------------- what is merged


def test_tallies_merged_in_order_equal_one_tally(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    _write(path, 300)
    cells = list(evaluate(list(load_samples(path)), METRICS))
    whole = Tally.of(cells)
    first, second = Tally.of(cells[:700]), Tally.of(cells[700:])
    first.merge(pickle.loads(pickle.dumps(second)))
    assert first.summary() == whole.summary()
    assert [list(c.values) for c in first.columns.values()] == [
        list(c.values) for c in whole.columns.values()
    ]


def test_id_checks_merged_in_order_say_the_one_check_line(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    _write(path, 300)
    evaluation = evaluate(list(load_samples(path)), ["recall@4", "mrr"])
    by_sample: dict[str, list[Score]] = {}
    for sample_id, _, score in evaluation:
        by_sample.setdefault(sample_id, []).append(score)
    whole, first, second = IdCheck(), IdCheck(), IdCheck()
    for k, (sample_id, scores) in enumerate(by_sample.items()):
        whole.add_sample(sample_id, scores)
        (first if k < 120 else second).add_sample(sample_id, scores)
    first.merge(pickle.loads(pickle.dumps(second)))  # a child sends its check pickled
    assert whole.lines()
    assert first.lines() == whole.lines()
    assert first.labelled == whole.labelled
    assert first.mismatched == whole.mismatched


def test_a_writer_copies_appended_parts_after_its_own_cells_and_removes_them(
    tmp_path: Path,
) -> None:
    part = tmp_path / "part.cells"
    part.write_text('{"c": 2}\n{"c": 3}\n', encoding="utf-8")
    out = tmp_path / "r.jsonl"
    writer = ResultWriter(out)
    writer.add("a", "m", Score(value=0.5))
    writer.append_cells(part, 2)
    writer.close({"x": 1})
    lines = out.read_text(encoding="utf-8").splitlines()
    assert lines[2:] == ['{"c": 2}', '{"c": 3}']
    assert '"sample_id":"a"' in lines[1].replace(" ", "")
    assert writer.cells == 3
    assert not part.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_a_discarded_writer_removes_appended_parts(tmp_path: Path) -> None:
    part = tmp_path / "part.cells"
    part.write_text('{"c": 2}\n', encoding="utf-8")
    writer = ResultWriter(tmp_path / "r.jsonl")
    writer.append_cells(part, 1)
    writer.discard()
    assert not part.exists()
    assert not (tmp_path / "r.jsonl").exists()


# --------------------------------------------------------------------------- the split run


def _split(path: Path, processes: int, spool_dir: Path) -> tuple[list[str], Tally, Any]:
    """Cells (as the CLI writes them, without latency), tally and run of a split run."""
    out = spool_dir / "split.jsonl"
    tally = Tally()
    writer = ResultWriter(out)

    def keep(sample_id: str, metric: str, score: Score) -> None:
        tally.add(sample_id, metric, score)
        writer.add(sample_id, metric, score)

    run = cores.evaluate_on_cores(
        path, resolve_metrics(METRICS), processes, on_result=keep, spool_dir=spool_dir
    )
    for share in run.shares:
        tally.merge(share.tally)
        writer.append_cells(share.spool, share.cells)
    writer.close(run.evaluation.metadata)
    return _cells(out)[1], tally, run


def _one(path: Path, folder: Path) -> tuple[list[str], Tally, Any]:
    out = folder / "one.jsonl"
    with ResultWriter(out) as writer:
        tally = Tally()

        def keep(sample_id: str, metric: str, score: Score) -> None:
            tally.add(sample_id, metric, score)
            writer.add(sample_id, metric, score)

        evaluation = evaluate(load_samples(path), METRICS, on_result=keep, keep=False)
        writer.close(evaluation.metadata)
    return _cells(out)[1], tally, evaluation


def test_a_split_run_equals_the_one_process_run(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    _write(path, 900, blank_every=97)
    cells, tally, run = _split(path, 3, tmp_path)
    ref_cells, ref_tally, ref = _one(path, tmp_path)
    assert len(cells) == 900 * len(METRICS)
    assert cells == ref_cells
    assert tally.summary() == ref_tally.summary()
    warnings = run.evaluation.metadata["warnings"]
    assert warnings == ref.metadata["warnings"]
    assert len(warnings) == 1  # one, for the whole file
    assert run.evaluation.metadata["processes"] == 3
    assert not run.rescored
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".cells")]


def _dies(first_line: int) -> None:
    if first_line > 1:
        os._exit(7)  # as a killed process would: no reply, no cleanup


def _raises(first_line: int) -> None:
    raise RuntimeError(f"boom in the child scoring lines from {first_line}")


@pytest.mark.parametrize(
    ("fault", "said"),
    [(_dies, "its process ended with exit code 7"), (_raises, "RuntimeError: boom in the child")],
)
def test_a_child_that_fails_has_its_range_scored_again_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fault: Any, said: str
) -> None:
    path = tmp_path / "d.jsonl"
    _write(path, 600)
    parent = os.getpid()
    real = cores._score_range

    def failing(*args: Any, **kwargs: Any) -> Any:
        if os.getpid() != parent:  # in a child only: the parent's second try succeeds
            fault(args[1].first_line)
        return real(*args, **kwargs)

    monkeypatch.setattr(cores, "_score_range", failing)
    cells, _, run = _split(path, 3, tmp_path)
    assert cells == _one(path, tmp_path)[0]
    starts = [f"lines from {r.first_line}" for r in cores.cut_lines(path, 3)[1:]]
    assert [line.split(": ", 1)[0] for line in run.rescored] == starts
    assert all(said in line for line in run.rescored)
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".cells")]


def test_a_bad_line_in_a_later_range_is_raised_with_its_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    _write(path, 400)
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[350] = '{"id": "s350", "question": 3}'  # changed after the validating pass
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(SampleValidationError, match=r"d\.jsonl:351: question"):
        cores.evaluate_on_cores(
            path, resolve_metrics(METRICS), 2, on_result=lambda *a: None, spool_dir=tmp_path
        )
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".cells")]


def test_only_model_free_runs_of_enough_samples_are_split() -> None:
    cheap = resolve_metrics(METRICS)
    assert cores.processes_for(cheap, 100) == 1  # too few samples for a second process
    assert cores.processes_for(cheap, 100, asked=3) == 3
    assert cores.processes_for(cheap, 2, asked=3) == 2
    big = cores.MIN_SAMPLES_PER_PROCESS * 64
    assert cores.processes_for(cheap, big) == cores.usable_cores()
    assert cores.processes_for([*cheap, Faithfulness()], big, asked=4) == 1


# --------------------------------------------------------------------------- the CLI


def _eval(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["eval", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_eval_on_processes_writes_the_one_process_file_and_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "d.jsonl"
    _write(path, 700)
    metrics = ",".join(METRICS)
    split, one = tmp_path / "split.jsonl", tmp_path / "one.jsonl"
    run = ["--metrics", metrics, "--out"]
    code, out, err = _eval(capsys, str(path), *run, str(split), "--processes", "2")
    assert code == 1  # 10% of the answers are missing: failed cells, over the default bar
    assert "scoring on 2 processes" in err
    code1, out1, err1 = _eval(capsys, str(path), *run, str(one), "--processes", "1")
    assert code1 == 1
    assert "scoring on" not in err1
    assert out.replace("split.jsonl", "one.jsonl") == out1
    header, cells = _cells(split)
    header1, cells1 = _cells(one)
    assert cells == cells1
    assert header["metadata"]["processes"] == 2
    assert "processes" not in header1["metadata"]
    assert [line for line in err.splitlines() if "scoring on" not in line] == [
        line for line in err1.splitlines()
    ]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    # without --out: the children write no cells, only their tallies; the same summary
    code3, out3, _ = _eval(capsys, str(path), "--metrics", metrics, "--processes", "3")
    assert code3 == 1
    assert out3 == out1.replace(f"wrote {one}\n", "")
    assert "token_f1" in out3


def test_the_progress_bar_counts_the_samples_of_every_process(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAGBRIDGE_PROGRESS", "1")
    path = tmp_path / "d.jsonl"
    _write(path, 700)
    _, _, err = _eval(capsys, str(path), "--metrics", "recall@4,token_f1", "--processes", "3")
    assert "scoring on 3 processes" in err
    assert "700/700" in err


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (
            [
                "--metrics",
                "recall@4,faithfulness",
                "--judge",
                "python:ragbridge.core.testing:CountingJudge",
            ],
            "need one: faithfulness",
        ),
        (["--metrics", "recall@4", "--history", "h.sqlite"], "--history"),
        (["--metrics", "recall@4", "--report", "r.html"], "--report"),
    ],
)
def test_eval_refuses_processes_it_cannot_use(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    extra: list[str],
    said: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "d.jsonl"
    _write(path, 50)
    code, _, err = _eval(capsys, str(path), *extra, "--processes", "2")
    assert code == 2
    assert "--processes" in err
    assert said in err
    assert err.count("\n") <= 2
