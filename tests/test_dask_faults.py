"""What an operator sees when a cluster run (``ragbridge eval --dask``) meets a fault.

Ctrl-C, a worker killed mid-run and a rerun at another endpoint, each through the command line
against `FakeOpenAI` on 127.0.0.1, on a local cluster of 2 worker processes: the lines on stderr
must be few, ours, and true (checked against the part files on disk and the calls the server
answered). Slow (each run starts a cluster): run this file alone. The pieces the lines are made
of (reasons, redaction, the call ledger) are checked without a cluster first.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("distributed", reason='needs the dask extra: pip install ".[dask]"')

from fake_openai import FakeOpenAI

from ragbridge.adapters.dask.join import Joiner
from ragbridge.adapters.dask.ledger import CallLedger
from ragbridge.adapters.dask.run import ClusterInterrupted, _Driver
from ragbridge.adapters.dask.worker import describe_source
from ragbridge.core.results.evaluation import Evaluation, Failure, FailureKind, Score
from ragbridge.core.scoring.partitions import PartStore, not_reused_reason, readable_url

JUDGE = "openai:gpt-fake"
LEASES = {  # a killed worker's leases come back in 2 s, not 30
    "DASK_DISTRIBUTED__SCHEDULER__LOCKS__LEASE_TIMEOUT": "2s",
    "DASK_DISTRIBUTED__SCHEDULER__LOCKS__LEASE_VALIDATION_INTERVAL": "0.2s",
}


def _data(path: Path, n: int) -> Path:
    rows = [
        {
            "id": f"s{i:03d}",
            "question": f"What does clause {i} say?",
            "answer": f"Clause {i} grants {i % 7 + 1} days of leave.",
            "contexts": [{"id": f"d{i}", "text": f"Clause {i}: {i % 7 + 1} days of leave."}],
            "relevance": {f"d{i}": 1},
        }
        for i in range(n)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _argv(data: Path, server: FakeOpenAI, *more: str) -> list[str]:
    return [
        "eval", str(data), "--metrics", "faithfulness,mrr", "--judge", JUDGE,
        "--base-url", server.base_url, "--dask", "--concurrency", "4", *more,
    ]  # fmt: skip


def _console_script() -> str:
    exe = shutil.which("ragbridge", path=str(Path(sys.executable).parent))
    assert exe is not None, "the ragbridge console script is not installed"
    return exe


def _wait_for(condition: Any, proc: subprocess.Popen[str], what: str) -> None:
    deadline = time.monotonic() + 120
    while not condition():
        assert proc.poll() is None, (what, proc.communicate())
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


# -- the pieces, without a cluster ---------------------------------------------------------------


def test_the_reason_a_kept_partition_is_not_reused_names_what_changed() -> None:
    now = {"metrics": [["faithfulness", "Faithfulness", "llm"]], "base_url": "http://b/v1"}
    kept = {"config": {**now, "base_url": "http://a/v1"}}
    assert not_reused_reason(kept, now) == "base_url changed (http://a/v1 -> http://b/v1)"
    more = {**now, "metrics": [*now["metrics"], ["mrr", "MRR", None]]}
    assert not_reused_reason({"config": now}, more) == "metrics changed (+mrr/MRR)"
    assert not_reused_reason({"config": now}, now).startswith("their samples changed")
    assert "stopped early" in not_reused_reason({"config": now, "aborted": True}, now)
    assert "older ragbridge" in not_reused_reason({"fingerprint": "x"}, now)


def test_readable_urls_and_source_descriptions_hold_no_secret() -> None:
    url = "https://user:hunter2@host/v1?api-version=2024-06-01&api-key=sk-1&token=t0"
    shown = readable_url(url)
    assert shown == "https://user:***@host/v1?api-version=2024-06-01&api-key=***&token=***"
    factory = functools.partial(dict, "sk-secret-key")
    described = describe_source(factory)
    assert described is not None
    assert "sk-secret" not in described
    assert described != describe_source(functools.partial(dict, "sk-other-key"))


def test_the_ledger_counts_the_attempts_that_never_returned() -> None:
    ledger = CallLedger("run1")
    for message in (
        ["run1", 0, "a", 0, 0],
        ["run1", 0, "a", 7, 1],  # partition 0's first attempt: its worker died after 7 calls
        ["run1", 0, "b", 9, 1],  # its second attempt returned
        ["run1", 1, "c", 3, 0],
        ["other", 1, "d", 50, 0],  # another run's
    ):
        ledger.on_event((0.0, message))
    ledger.returned("b")
    ledger.returned("c")
    lost = ledger.lost()
    assert lost is not None
    assert (lost.attempts, lost.judge_calls, lost.embedding_calls) == (1, 7, 1)
    ledger.returned("a")
    assert ledger.lost() is None


def test_a_partition_that_stopped_early_is_scored_again(tmp_path: Path) -> None:
    store = PartStore(tmp_path)
    stopped = Evaluation()
    refused = Failure(kind=FailureKind.CANCELLED, message="not sent: judge: 401")
    stopped.add("s1", "faithfulness", Score(value=None, failure=refused))
    stopped.metadata["aborted"] = "judge: 401 on 5/5 calls"
    config = {"judge": JUDGE}
    store.write(0, "f0", 1, stopped, config=config)
    joiner = Joiner(store, on_result=None, keep=True)
    driver = _Driver(None, None, store, "", None, config, CallLedger("r"), None, joiner)  # type: ignore[arg-type]
    assert not driver._kept(0, "f0", 1)  # same fingerprint, but its cells are refusals
    assert list(driver.not_reused) == ["stopped early (the judge or the embedder was unusable)"]


def test_the_interrupt_line_says_so_when_nothing_is_kept() -> None:
    from ragbridge.adapters.cli.cluster_command import interrupted_line

    assert interrupted_line(ClusterInterrupted(2, 5, 80, 160, None)) == (
        "interrupted: 2 of 5 partitions finished (80 samples, 160 results), not kept: give "
        "--out or --parts DIR to keep finished partitions for a rerun"
    )
    assert interrupted_line(ClusterInterrupted(0, 0, 0, 0, "parts")) == (
        "interrupted before any partition was scored"
    )


# -- the command line, on a local cluster --------------------------------------------------------


def test_ctrl_c_says_in_one_line_what_is_kept_and_where(tmp_path: Path) -> None:
    data = _data(tmp_path / "data.jsonl", 120)
    out = tmp_path / "out.jsonl"
    parts = Path(f"{out}.parts")
    with FakeOpenAI(delay=0.1) as server:
        proc = subprocess.Popen(
            [_console_script(), *_argv(data, server, "--partition-size", "20", "--out", str(out))],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its own process group, as a shell gives a command
        )
        _wait_for(lambda: len(list(parts.glob("part-*.jsonl"))) >= 2, proc, "2 partitions")
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C reaches every process of the group
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    lines = err.splitlines()
    assert len(lines) <= 3, err
    assert all(line.startswith("ragbridge: ") for line in lines), err
    said = re.search(
        r"interrupted: (\d+) of 6 partitions finished \((\d+) samples, (\d+) results\), "
        r"kept in (.+); run the same command again",
        err,
    )
    assert said is not None, err
    kept = [Evaluation.from_jsonl(p) for p in sorted(parts.glob("part-*.jsonl"))]
    assert int(said[1]) == len(kept) >= 2
    assert int(said[2]) == sum(e.metadata["partition"]["samples"] for e in kept)
    assert int(said[3]) == sum(len(e) for e in kept)
    assert said[4] == str(parts)


def _workers_of(pid: int) -> list[int]:
    """The Dask worker processes a local cluster spawned from ``pid`` (Linux /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid and b"spawn_main" in cmdline:
            found.append(int(entry.name))
    return found


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="finds workers through /proc")
def test_a_killed_workers_calls_are_counted_and_dask_says_nothing(tmp_path: Path) -> None:
    data = _data(tmp_path / "data.jsonl", 120)
    with FakeOpenAI(delay=0.05) as server:
        proc = subprocess.Popen(
            [_console_script(), *_argv(data, server, "--partition-size", "20")],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
            env={**os.environ, **LEASES},
        )
        _wait_for(lambda: server.count("chat") >= 60, proc, "60 judge calls")
        os.kill(min(_workers_of(proc.pid)), signal.SIGKILL)  # mid-partition, on both workers
        out, err = proc.communicate(timeout=180)
        served = server.count("chat")
    assert proc.returncode == 0, err
    assert all(line.startswith("ragbridge: ") for line in err.splitlines()), err
    # one partition attempt per thread of the killed worker (`run.WORKER_THREADS`: 1 or 2)
    assert re.search(r"ragbridge: \d+ partition attempts? did not return", err), err
    counted = re.search(r"judge gpt-fake: at least (\d+) calls", out)
    assert counted is not None, out
    # Uncounted: at most the calls on the wire (the cap, 4) and those whose report was on its
    # way when the worker died. Before the ledger, a lost partition's ~30 calls were missing.
    assert served - 8 <= int(counted[1]) <= served


def test_a_rerun_at_another_endpoint_says_why_it_pays_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ragbridge.adapters.cli import main

    data = _data(tmp_path / "data.jsonl", 24)
    parts = tmp_path / "parts"
    more = ("--partition-size", "8", "--parts", str(parts))
    with FakeOpenAI() as first, FakeOpenAI() as second:
        assert main(_argv(data, first, *more)) == 0
        capsys.readouterr()
        with_password = second.base_url.replace("http://", "http://user:hunter2@")
        argv = _argv(data, second, *more)
        argv[argv.index(second.base_url)] = with_password
        assert main(argv) == 0
        err = capsys.readouterr().err
        assert second.count("chat") == first.count("chat")  # every partition paid again ...
        assert (  # ... and said, once, before it was paid
            f"ragbridge: 3 kept partitions not reused: base_url changed ({first.base_url} -> "
            f"{with_password.replace('hunter2', '***')}); scored again\n"
        ) in err
        argv[argv.index(with_password)] = with_password.replace("hunter2", "rotated")
        assert main(argv) == 0  # a new password is the same endpoint: nothing paid again
        err = capsys.readouterr().err
        assert second.count("chat") == first.count("chat")
        assert "3 of 3 partitions were finished by an earlier run" in err
        assert "not reused" not in err
    kept = "".join(p.read_text() for p in parts.glob("part-*.jsonl"))
    assert "hunter2" not in kept
    assert "rotated" not in kept
