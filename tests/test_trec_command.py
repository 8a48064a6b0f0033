"""`ragbridge trec`: file errors name file and line; bad arguments exit 2 with one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ragbridge.adapters.cli import main
from ragbridge.core.retrieval import read_qrels, read_run


@pytest.mark.parametrize(
    ("kind", "content", "message"),
    [
        ("qrels", "q1 0 d1 1\nq1 0 d2\n", "qrels.txt:2: expected 4 fields"),
        ("qrels", "q1 0 d1 high\n", "qrels.txt:1: grade 'high' is not an integer"),
        ("qrels", "q1 0 d1 1\n# note\nq1 0 d1 0\n", "qrels.txt:3: document 'd1' judged twice"),
        ("run", "q1 Q0 d1 1 0.5\n", "run.txt:1: expected 6 fields"),
        ("run", "q1 Q0 d1 1 high tag\n", "run.txt:1: score 'high' is not a number"),
        ("run", "q1 Q0 d1 1 nan tag\n", "run.txt:1: score is NaN"),
        ("run", "q1 Q0 d1 1 1 t\n\nq1 Q0 d1 2 1 t\n", "run.txt:3: document 'd1' retrieved twice"),
    ],
)
def test_malformed_lines_name_file_and_line(
    tmp_path: Path, kind: str, content: str, message: str
) -> None:
    path = tmp_path / f"{kind}.txt"
    path.write_text(content)
    reader = read_qrels if kind == "qrels" else read_run
    with pytest.raises(ValueError, match=message.replace("(", r"\(")) as info:
        reader(path)
    assert str(info.value).startswith(str(path))


def test_comments_blank_lines_and_extra_run_fields_are_accepted(tmp_path: Path) -> None:
    run = tmp_path / "run.txt"
    run.write_text("# header\n\nq1 Q0 d1 9 0.5 tagA extra\nq1 Q0 d2 1 0.7 tagB\n")
    ranking = read_run(run)
    assert list(ranking["q1"]) == ["d2", "d1"]
    assert ranking.run_id == "tagB"  # the last line's tag, as trec_eval keeps it


def test_user_errors_exit_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    qrels = tmp_path / "q.txt"
    qrels.write_text("q1 0 d1 1\n")
    run = tmp_path / "r.txt"
    run.write_text("q1 Q0 d1 1 1.0 t\n")
    assert main(["trec", str(qrels), str(run), "-m", "bpref"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith("ragbridge: error: unknown or unsupported")
    assert main(["trec", str(qrels), str(tmp_path / "missing.txt")]) == 2
    assert "missing.txt" in capsys.readouterr().err
    assert main(["trec", str(qrels), str(run), "-m", "map", "-m", "runid"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == ["runid                 \tall\tt", "map                   \tall\t1.0000"]


def test_console_script_runs_as_a_module(tmp_path: Path) -> None:
    qrels = tmp_path / "q.txt"
    qrels.write_text("q1 0 d1 1\nq2 0 d3 2\n")
    run = tmp_path / "r.txt"
    run.write_text("q1 Q0 d2 1 2.0 t\nq1 Q0 d1 2 1.0 t\nq2 Q0 d3 1 1.0 t\n")
    done = subprocess.run(
        [sys.executable, "-m", "ragbridge.adapters.cli", "trec", str(qrels), str(run),
         "-m", "recip_rank", "-q"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert done.stdout.splitlines() == [
        "recip_rank            \tq1\t0.5000",
        "recip_rank            \tq2\t1.0000",
        "recip_rank            \tall\t0.7500",
    ]
