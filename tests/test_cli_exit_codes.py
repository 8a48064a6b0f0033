"""Exit codes of the scoring commands: a run that failed must not look like one that passed.

0 passed, 1 a metric failed its bar, 2 usage/input error, 3 stopped early, 130 interrupted —
checked through `main(argv)` and, for signals, through the console script in a subprocess.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from ragbridge.adapters.cli import main
from ragbridge.core.results.evaluation import Evaluation, Failure, FailureKind, Score
from ragbridge.core.sample import Context, Sample, save_samples


def _samples(n: int = 6, *, unlabelled: int = 0, no_answer: int = 0) -> list[Sample]:
    """``n`` samples ranking their relevant document first; the first ``unlabelled`` have no
    labels (a ``missing_input`` failure), the next ``no_answer`` no relevant document (a skip)."""
    out = []
    for i in range(n):
        relevance: dict[str, int] | None = {f"d{i}": 1}
        if i < unlabelled:
            relevance = None
        elif i < unlabelled + no_answer:
            relevance = {}
        out.append(
            Sample(
                id=f"q{i}",
                question=f"What is fact number {i}?",
                answer=f"Fact {i} is that the sky is blue.",
                contexts=[Context(text=f"Fact {i}: the sky is blue.", id=f"d{i}")],
                reference=f"Fact {i} is that the sky is blue.",
                relevance=relevance,
            )
        )
    return out


def _write(tmp_path: Path, samples: list[Sample], name: str = "eval.jsonl") -> Path:
    path = tmp_path / name
    save_samples(samples, path)
    return path


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_passing_run_exits_0_with_nothing_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _write(tmp_path, _samples(6, no_answer=2))
    code, out, err = run_cli(capsys, "eval", str(data), "--metrics", "recall@5,mrr")
    assert code == 0, err
    assert err == ""
    assert "recall@5  1.000" in out  # the two no-answer questions are skipped, not failed


def test_every_cell_failing_exits_1_naming_metric_kind_message_and_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _write(tmp_path, _samples(4, unlabelled=4))
    out_path, report = tmp_path / "results.jsonl", tmp_path / "report.html"
    code, out, err = run_cli(
        capsys, "eval", str(data), "--metrics", "recall@5,mrr",
        "--out", str(out_path), "--report", str(report),
    )  # fmt: skip
    assert code == 1
    lines = err.strip().splitlines()
    assert len(lines) == 2  # one line per failing metric
    assert lines[0].startswith(
        "ragbridge: error: recall@5: 4 of 4 cells failed — missing_input ×4:"
    )
    assert "'relevance'" in lines[0]
    assert lines[0].endswith(
        "fix: add 'relevance' to the samples in the input file, or drop recall@5 from --metrics"
    )
    assert lines[1].startswith("ragbridge: error: mrr: 4 of 4 cells failed")
    # The summary says the same by kind, and the files are written anyway.
    assert "missing_input 4" in out
    assert Evaluation.from_jsonl(out_path).get("q0", "mrr") is not None
    assert report.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_a_partial_failure_above_the_share_exits_1_and_below_it_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _write(tmp_path, _samples(6, unlabelled=1))  # 1 of 6 = 17% failed
    code, _, err = run_cli(capsys, "eval", str(data), "--metrics", "mrr")
    assert code == 1
    assert "mrr: 1 of 6 cells failed (17%, more than --max-failed-share 0.05)" in err
    code, _, err = run_cli(
        capsys, "eval", str(data), "--metrics", "mrr", "--max-failed-share", "0.2"
    )
    assert (code, err) == (0, "")
    many = _write(tmp_path, _samples(30, unlabelled=1), "many.jsonl")  # 1 of 30 = 3% < 5%
    code, out, err = run_cli(capsys, "eval", str(many), "--metrics", "mrr")
    assert (code, err) == (0, "")
    assert "missing_input 1" in out  # still counted by kind in the summary


def test_skipped_cells_are_not_failures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = _write(tmp_path, _samples(3, no_answer=3))  # every question has no relevant document
    code, out, err = run_cli(capsys, "eval", str(data), "--metrics", "recall@5")
    assert (code, err) == (0, "")
    assert out.splitlines()[2].split()[-3:] == ["0", "0", "3"]  # scored, failed, skipped


def _fake_evaluate(result: Evaluation, seen: dict[str, Any]) -> Any:
    def evaluate(samples: Any, metrics: Any, **kwargs: Any) -> Evaluation:
        seen.update(kwargs, samples=samples, metrics=metrics)
        for _ in samples:  # consume the stream like the real one
            pass
        return result

    return evaluate


def test_a_run_stopped_early_exits_3_with_one_line_and_writes_the_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    cancelled = Score(failure=Failure(kind=FailureKind.CANCELLED, message="not sent: stopped"))
    result = Evaluation(
        [("q0", "mrr", Score(value=1.0)), ("q1", "mrr", cancelled)],
        metadata={"aborted": "judge: 401 Unauthorized on 5/5 calls — check OPENAI_API_KEY"},
    )
    monkeypatch.setattr("ragbridge.core.scoring.runner.evaluate", _fake_evaluate(result, {}))
    data = _write(tmp_path, _samples(4))
    out_path, report = tmp_path / "r.jsonl", tmp_path / "r.html"
    code, out, err = run_cli(
        capsys, "eval", str(data), "--metrics", "mrr", "--out", str(out_path),
        "--report", str(report),
    )  # fmt: skip
    assert code == 3
    assert err.splitlines() == [
        "ragbridge: error: judge: 401 Unauthorized on 5/5 calls — check OPENAI_API_KEY"
    ]
    assert Evaluation.from_jsonl(out_path).metadata["aborted"].startswith("judge: 401")
    assert report.exists()
    assert f"wrote {out_path}" in out


def test_a_judge_that_is_always_refused_stops_the_run_with_exit_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "refused_judge.py").write_text(
        textwrap.dedent(
            """
            from ragbridge.core.judging.judge import ProviderUnusable

            class Refused:
                model = "refused-model"
                calls = 0

                async def generate(self, messages, *, schema=None):
                    Refused.calls += 1
                    raise ProviderUnusable("401 Unauthorized: invalid API key")
            """
        )
    )
    monkeypatch.chdir(tmp_path)
    data = _write(tmp_path, _samples(40))
    code, _, err = run_cli(
        capsys, "eval", str(data), "--metrics", "correctness", "--judge",
        "python:refused_judge:Refused", "--out", str(tmp_path / "r.jsonl"),
    )  # fmt: skip
    assert code == 3, err
    lines = err.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("ragbridge: error: ")
    assert "401" in lines[0]
    import refused_judge  # type: ignore[import-not-found]

    assert refused_judge.Refused.calls < 40  # stopped early, not one call per sample
    assert (tmp_path / "r.jsonl").exists()


def test_run_warnings_are_printed_on_stderr_one_line_each(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    result = Evaluation(
        [("q0", "mrr", Score(value=0.0))],
        metadata={"warnings": ["context ids never match the labels", "second thing"]},
    )
    monkeypatch.setattr("ragbridge.core.scoring.runner.evaluate", _fake_evaluate(result, {}))
    data = _write(tmp_path, _samples(1))
    code, _, err = run_cli(capsys, "eval", str(data), "--metrics", "mrr")
    assert code == 0
    assert err.splitlines() == [
        "ragbridge: warning: context ids never match the labels",
        "ragbridge: warning: second thing",
    ]


def test_timeout_and_retries_reach_evaluate_and_the_input_is_streamed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, Any] = {}
    fake = _fake_evaluate(Evaluation(), seen)
    monkeypatch.setattr("ragbridge.core.scoring.runner.evaluate", fake)
    data = _write(tmp_path, _samples(3))
    code, _, _ = run_cli(
        capsys, "eval", str(data), "--metrics", "mrr", "--timeout", "2.5", "--max-retries", "0",
        "--concurrency", "3",
    )  # fmt: skip
    assert code == 0
    assert (seen["timeout"], seen["max_retries"], seen["max_concurrency"]) == (2.5, 0, 3)
    assert not isinstance(seen["samples"], list)  # a stream, not the file in a list


@pytest.mark.parametrize(
    "argv",
    [
        ["--timeout", "0"],
        ["--timeout", "nan"],
        ["--timeout", "inf"],
        ["--max-retries", "-1"],
        ["--max-failed-share", "1.5"],
        ["--max-failed-share", "nan"],
    ],
)
def test_bad_limits_are_usage_errors(tmp_path: Path, argv: list[str]) -> None:
    data = _write(tmp_path, _samples(1))
    with pytest.raises(SystemExit) as exc:
        main(["eval", str(data), "--metrics", "mrr", *argv])
    assert exc.value.code == 2


def test_keyboard_interrupt_exits_130_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(*args: Any, **kwargs: Any) -> Evaluation:
        raise KeyboardInterrupt

    monkeypatch.setattr("ragbridge.core.scoring.runner.evaluate", interrupted)
    data = _write(tmp_path, _samples(2))
    code, _, err = run_cli(capsys, "eval", str(data), "--metrics", "mrr")
    assert code == 130
    assert err == "ragbridge: interrupted\n"


def _console_script() -> str:
    exe = shutil.which("ragbridge", path=str(Path(sys.executable).parent))
    assert exe is not None, "the ragbridge console script is not installed"
    return exe


def test_ctrl_c_on_the_console_script_exits_130_without_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "slow_judge.py").write_text(
        textwrap.dedent(
            """
            import asyncio, pathlib

            class Slow:
                model = "slow"

                async def generate(self, messages, *, schema=None):
                    pathlib.Path("started").touch()
                    await asyncio.sleep(60)
            """
        )
    )
    data = _write(tmp_path, _samples(3))
    proc = subprocess.Popen(
        [_console_script(), "eval", str(data), "--metrics", "correctness",
         "--judge", "python:slow_judge:Slow"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not (tmp_path / "started").exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the judge was never called"
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert err == "ragbridge: interrupted\n"
    assert "Traceback" not in err


def test_exit_codes_through_the_console_script(tmp_path: Path) -> None:
    ok = _write(tmp_path, _samples(3), "ok.jsonl")
    bad = _write(tmp_path, _samples(3, unlabelled=3), "bad.jsonl")
    exe = _console_script()
    env = {**os.environ, "RAGBRIDGE_PROGRESS": "0"}

    def code(*argv: str) -> int:
        done = subprocess.run([exe, *argv], capture_output=True, text=True, env=env, check=False)
        return done.returncode

    assert code("eval", str(ok), "--metrics", "mrr") == 0
    assert code("eval", str(bad), "--metrics", "mrr") == 1
    assert code("eval", str(tmp_path / "missing.jsonl")) == 2
