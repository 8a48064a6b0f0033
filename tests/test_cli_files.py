"""Files in and out of the ``ragbridge`` command.

Every input and output path is checked before the first judge call is paid; bad input is one
line naming the file and line; every write is atomic; a reader closing stdout (``| head -1``) is
not an error and costs no file.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ragbridge.adapters.cli import main
from ragbridge.core.results.evaluation import Evaluation
from ragbridge.core.sample import Context, Sample, save_samples

HANDBOOK = Path(__file__).parent.parent / "adapters" / "demo" / "data" / "handbook_questions.jsonl"


def _samples(n: int = 4) -> list[Sample]:
    return [
        Sample(
            id=f"q{i}",
            question=f"What is fact number {i}?",
            answer=f"Fact {i} is that the sky is blue.",
            contexts=[Context(text=f"Fact {i}: the sky is blue.", id=f"d{i}")],
            relevance={f"d{i}": 1},
        )
        for i in range(n)
    ]


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "eval.jsonl"
    save_samples(_samples(), path)
    return path


@pytest.fixture
def no_scoring(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if anything is scored: the checks must come first."""

    def evaluate(*args: Any, **kwargs: Any) -> Evaluation:
        raise AssertionError("scoring started before the inputs and outputs were checked")

    monkeypatch.setattr("ragbridge.core.scoring.runner.evaluate", evaluate)


def one_error_line(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code = main(list(argv))
    _, err = capsys.readouterr()
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("ragbridge: error: ")
    return lines[0].removeprefix("ragbridge: error: ")


# --------------------------------------------------------------------------- outputs, up front


@pytest.mark.usefixtures("no_scoring")
@pytest.mark.parametrize(
    ("flag", "where", "message"),
    [
        ("--out", "missing/results.jsonl", "--out {p}: the folder {parent} does not exist"),
        ("--report", "missing/report.html", "--report {p}: the folder {parent} does not exist"),
        ("--cache", "missing/cache.sqlite", "--cache {p}: the folder {parent} does not exist"),
        ("--out", "folder", "--out {p}: is a folder; name a file in it"),
        ("--report", "folder", "--report {p}: is a folder; name a file in it"),
        ("--cache", "folder", "--cache {p}: is a folder; name a file in it"),
        ("--cache", "not-sqlite.txt", "--cache {p}: is not a ragbridge cache (not an SQLite"),
    ],
)
def test_output_paths_are_checked_before_the_first_call(
    flag: str,
    where: str,
    message: str,
    data: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (tmp_path / "folder").mkdir()
    (tmp_path / "not-sqlite.txt").write_text("hello")
    path = tmp_path / where
    line = one_error_line(
        capsys, "eval", str(data), "--metrics", "faithfulness",
        "--judge", "python:ragbridge.core.testing:CountingJudge", flag, str(path),
    )  # fmt: skip
    assert line.startswith(message.format(p=path, parent=path.parent))


@pytest.mark.usefixtures("no_scoring")
def test_an_unwritable_folder_is_refused(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if os.geteuid() == 0:
        pytest.skip("root writes anywhere")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        line = one_error_line(capsys, "eval", str(data), "--out", str(locked / "r.jsonl"))
    finally:
        locked.chmod(0o700)
    assert line.endswith("is not writable")


@pytest.mark.usefixtures("no_scoring")
@pytest.mark.parametrize("spelling", ["same", "dotted", "symlink"])
def test_out_naming_the_input_file_is_refused_and_the_input_survives(
    spelling: str, data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    before = data.read_bytes()
    monkeypatch.chdir(tmp_path)
    out = {"same": str(data), "dotted": "./sub/../eval.jsonl", "symlink": "link.jsonl"}[spelling]
    (tmp_path / "sub").mkdir()
    (tmp_path / "link.jsonl").symlink_to(data)
    for flag in ("--out", "--report"):
        line = one_error_line(capsys, "eval", str(data), "--metrics", "mrr", flag, out)
        assert line == (
            f"{flag} {out} is the input file: writing it would destroy the input; "
            "choose another file name"
        )
    assert data.read_bytes() == before


@pytest.mark.usefixtures("no_scoring")
def test_two_outputs_naming_one_file_are_refused(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    same = str(tmp_path / "x")
    line = one_error_line(capsys, "eval", str(data), "--out", same, "--report", same)
    assert line == f"--out and --report name the same file {same}; give two files"


@pytest.mark.usefixtures("no_scoring")
def test_save_samples_is_checked_before_the_runs_are_read_or_scored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("langsmith")
    runs = Path(__file__).parent / "data" / "langsmith_runs.jsonl"
    missing = tmp_path / "no" / "samples.jsonl"
    line = one_error_line(capsys, "langsmith", str(runs), "--save-samples", str(missing))
    assert line == f"--save-samples {missing}: the folder {missing.parent} does not exist"
    same = str(tmp_path / "same.jsonl")
    line = one_error_line(capsys, "langsmith", str(runs), "--save-samples", same, "--out", same)
    assert line == f"--out and --save-samples name the same file {same}; give two files"


# --------------------------------------------------------------------------- bad input


@pytest.mark.usefixtures("no_scoring")
@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"id": "a", "question": "q"}\n'.encode("utf-16"), "{p}:1: the file is UTF-16; save it"),
        ('{"id": "a", "question": "q"}\n'.encode("utf-16-le"), "{p}:1: the file is UTF-16; save"),
        (
            b'{"id": "a", "question": "q"}\n{"id": "b", "question": "caf\xe9"}\n',
            "{p}:2: not UTF-8 text (byte 0xe9 at column 29); save the file as UTF-8",
        ),
        (b"", "{p}: the file is empty"),
        (b"\n  \n\n", "{p}: holds no samples (only blank lines)"),
        (
            b'{"id": "a", "question": "q", "relevance": {"d1": 1000000000000000000000000000000}}',
            '{p}:1: relevance["d1"]: grade 100000…(31 digits) is out of range',
        ),
        (b'{"id": "a", "question": "q"}\n{"id": "b"}\n', "{p}:2: question: required field"),
    ],
)
def test_bad_input_is_one_line_naming_file_and_line(
    content: bytes, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "in.jsonl"
    path.write_bytes(content)
    line = one_error_line(
        capsys, "eval", str(path), "--metrics", "faithfulness",
        "--judge", "python:ragbridge.core.testing:CountingJudge",
    )  # fmt: skip
    assert line.startswith(message.format(p=path))


@pytest.mark.usefixtures("no_scoring")
def test_a_bad_line_far_down_the_file_stops_the_run_before_any_call(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "in.jsonl"
    save_samples(_samples(500), path)
    with path.open("a") as fh:
        fh.write('{"id": "late", "question": 7}\n')
    line = one_error_line(
        capsys, "eval", str(path), "--metrics", "faithfulness",
        "--judge", "python:ragbridge.core.testing:CountingJudge",
    )  # fmt: skip
    assert line.startswith(f"{path}:501: question: expected a string")


def test_a_utf8_byte_order_mark_is_accepted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + HANDBOOK.read_bytes())
    code = main(["eval", str(path), "--metrics", "recall@4"])
    out, _ = capsys.readouterr()
    assert code == 0
    assert out.startswith("42 samples, 1 metric")


@pytest.mark.usefixtures("no_scoring")
@pytest.mark.parametrize("command", ["eval", "export", "compare", "run"])
def test_a_folder_instead_of_a_file_is_one_line(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = {
        "eval": ["eval", str(tmp_path)],
        "export": ["export", str(tmp_path), "--to", "ragas", str(tmp_path / "o.jsonl")],
        "compare": ["compare", str(tmp_path)],
        "run": ["run", "nosuchmodule:x", str(tmp_path)],
    }[command]
    assert one_error_line(capsys, *argv) == f"{tmp_path}: is a folder, not a file"


def test_run_checks_its_data_file_before_importing_the_pipeline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "heavy_pipeline.py").write_text(
        "import pathlib\npathlib.Path('imported').touch()\npipeline = None\n"
    )
    monkeypatch.chdir(tmp_path)
    line = one_error_line(capsys, "run", "heavy_pipeline:pipeline", "questions.jsonl")
    assert line == "questions.jsonl: no such file"
    assert not (tmp_path / "imported").exists()
    (tmp_path / "folder").mkdir()
    line = one_error_line(
        capsys, "run", "heavy_pipeline:pipeline", str(HANDBOOK), "--out", "folder"
    )
    assert line == "--out folder: is a folder; name a file in it"
    assert not (tmp_path / "imported").exists()


# --------------------------------------------------------------------------- atomic writes


def test_a_failed_results_write_leaves_the_old_file_and_no_temp_file(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from ragbridge.core.results import cell_json

    out = tmp_path / "results.jsonl"
    out.write_text("previous results\n")
    real = cell_json.cell_json
    calls = {"n": 0}

    def failing_line(*args: Any) -> str:
        calls["n"] += 1
        if calls["n"] == 2:  # one cell written, then the disk "fills up"
            raise OSError(28, "No space left on device")
        return real(*args)

    # every results writer encodes its cell lines through `cell_json`
    monkeypatch.setattr(cell_json, "cell_json", failing_line)
    monkeypatch.setattr("ragbridge.core.results.writer.cell_json", failing_line)
    code = main(["eval", str(data), "--metrics", "mrr", "--out", str(out)])
    _, err = capsys.readouterr()
    assert code == 2
    assert f"ragbridge: error: --out {out}: not written: [Errno 28] No space left" in err
    assert out.read_text() == "previous results\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["eval.jsonl", "results.jsonl"]


@pytest.mark.parametrize("fmt", ["ragas", "deepeval", "langsmith-examples"])
def test_export_leaves_no_temp_file_and_keeps_the_old_file_on_failure(
    fmt: str, data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    pytest.importorskip({"ragas": "ragas", "deepeval": "deepeval"}.get(fmt, "langsmith"))
    monkeypatch.chdir(tmp_path)  # DeepEval may write ./.deepeval
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    target = out_dir / "exported"
    assert main(["export", str(data), "--to", fmt, str(target)]) == 0
    assert [p.name for p in out_dir.iterdir()] == ["exported"]
    good = target.read_bytes()
    assert good

    module, function = {
        "ragas": ("ragbridge.adapters.ragas.rows", "ragas_row"),
        "deepeval": ("ragbridge.adapters.deepeval.test_cases", "to_dataset"),
        "langsmith-examples": ("json", "dumps"),
    }[fmt]
    import importlib

    real = getattr(importlib.import_module(module), function)
    calls = {"n": 0}

    def fails_midway(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] >= 2:
            raise OSError(28, "No space left on device")
        return real(*args, **kwargs)

    if fmt == "langsmith-examples":
        monkeypatch.setattr("ragbridge.adapters.cli.export_command.json.dumps", fails_midway)
    elif fmt == "deepeval":
        calls["n"] = 1  # one call builds the whole dataset: fail it
        monkeypatch.setattr(f"{module}.{function}", fails_midway)
    else:
        monkeypatch.setattr(f"{module}.{function}", fails_midway)
    capsys.readouterr()
    assert main(["export", str(data), "--to", fmt, str(target)]) == 2
    assert "No space left on device" in capsys.readouterr().err
    assert target.read_bytes() == good
    assert [p.name for p in out_dir.iterdir()] == ["exported"]


@pytest.mark.usefixtures("no_scoring")
def test_export_refuses_to_overwrite_its_input(
    data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = data.read_bytes()
    line = one_error_line(capsys, "export", str(data), "--to", "ragas", str(data))
    assert line.startswith(f"OUT {data} is the input file")
    assert data.read_bytes() == before


# --------------------------------------------------------------------------- a closed stdout


def _console_script() -> str:
    exe = shutil.which("ragbridge", path=str(Path(sys.executable).parent))
    assert exe is not None, "the ragbridge console script is not installed"
    return exe


def _eval_argv(tmp_path: Path, data: Path, metrics: str = "recall@5,mrr") -> list[str]:
    return [
        _console_script(), "eval", str(data), "--metrics", metrics,
        "--out", str(tmp_path / "r.jsonl"), "--report", str(tmp_path / "r.html"),
    ]  # fmt: skip


def test_a_reader_that_closes_after_one_line_costs_nothing(data: Path, tmp_path: Path) -> None:
    """``ragbridge eval ... | head -1``: exit code of the run, files written, stderr quiet."""
    proc = subprocess.Popen(
        _eval_argv(tmp_path, data), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None
    first = proc.stdout.readline()
    proc.stdout.close()  # the reader goes away after one line, as `head -1` does
    assert proc.stderr is not None
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0, err
    assert first.decode() == "4 samples, 2 metrics\n"
    assert err == ""
    assert Evaluation.from_jsonl(tmp_path / "r.jsonl").metrics == ["recall@5", "mrr"]
    assert (tmp_path / "r.html").stat().st_size > 0


def test_a_closed_stdout_keeps_the_exit_code_of_the_run(data: Path, tmp_path: Path) -> None:
    """The reader is gone before the first byte: every write to stdout hits a broken pipe."""
    bad = tmp_path / "unlabelled.jsonl"
    save_samples([s.model_copy(update={"relevance": None}) for s in _samples()], bad)
    for source, expected in ((data, 0), (bad, 1)):
        read, write = os.pipe()
        os.close(read)
        try:
            done = subprocess.run(
                _eval_argv(tmp_path, source), stdout=write, stderr=subprocess.PIPE, check=False
            )
        finally:
            os.close(write)
        err = done.stderr.decode()
        assert done.returncode == expected, err
        assert len(err.splitlines()) == 2 * expected  # the two failing metrics, nothing else
        assert "Broken pipe" not in err
        assert "Exception ignored" not in err
        assert (tmp_path / "r.jsonl").exists()
        assert (tmp_path / "r.html").exists()
        (tmp_path / "r.jsonl").unlink()
        (tmp_path / "r.html").unlink()


def test_a_shell_pipe_into_head(data: Path, tmp_path: Path) -> None:
    script = f"set -o pipefail; {shlex.join(_eval_argv(tmp_path, data))} | head -1"
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "4 samples, 2 metrics\n"
    assert done.stderr == ""
    assert (tmp_path / "r.jsonl").exists()


def test_a_full_disk_after_paid_calls_is_exit_1_not_2(
    data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """2 promises "nothing paid": a file that cannot be written after judge calls were sent
    is exit 1, with the line naming it (before: exit 2)."""
    report = tmp_path / "report.html"

    def full_disk(path: object, text: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("ragbridge.core.files.write_text_atomic", full_disk)
    argv = ["eval", str(data), "--metrics", "faithfulness", "--report", str(report)]
    argv += ["--judge", "python:ragbridge.core.testing:CountingJudge", "--embedder", "hash"]
    code = main(argv)
    out, err = capsys.readouterr()
    paid = re.search(r"judge \S+: (\d+) calls?", out)
    assert paid is not None, out
    assert int(paid.group(1)) > 0, out
    assert "No space left on device" in err, err
    assert code == 1, err
