"""A run that failed must not look like one that passed: the CLI against a real (fake) server.

Every test runs ``ragbridge eval`` on twelve samples against `tests/fake_openai.py` on
127.0.0.1, scripted to fail the way real endpoints do, and checks the exit code, the one line
that names the cause and the fix, and how many requests the server saw (the run stops early;
it does not pay for every sample).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("httpx")

from fake_openai import FakeOpenAI, free_port

from ragbridge.adapters.cli.main import main

DATA = Path(__file__).parent / "data" / "twelve_samples.jsonl"
METRICS = "faithfulness,answer_relevance"


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(hang_seconds=60) as server:
        yield server


@pytest.fixture(autouse=True)
def dummy_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-dummy")


def argv(base_url: str, *extra: str, data: Path = DATA) -> list[str]:
    return [
        "eval",
        str(data),
        "--judge",
        "openai:gpt-fake",
        "--embedder",
        "openai:embed-fake",
        "--base-url",
        base_url,
        "--metrics",
        METRICS,
        *extra,
    ]


def errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("ragbridge: error:")]


def results(path: Path) -> tuple[dict, list[dict]]:  # type: ignore[type-arg]
    """The header (run metadata) and the cell rows of a results JSONL file."""
    header, *rows = (json.loads(line) for line in path.read_text().splitlines())
    return header, rows


def two_samples(tmp_path: Path) -> Path:
    path = tmp_path / "two.jsonl"
    path.write_text("".join(DATA.read_text(encoding="utf-8").splitlines(keepends=True)[:2]))
    return path


def test_a_wrong_key_stops_the_run_with_exit_3_and_one_line(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """Before: 12 calls, exit 0, no error line. After: 5 calls (stop_after), exit 3."""
    fake_openai.script("chat", "401")
    out = tmp_path / "results.jsonl"
    env = {**os.environ, "OPENAI_API_KEY": "sk-dummy", "PYTHONUNBUFFERED": "1"}
    started = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ragbridge.adapters.cli",
            *argv(fake_openai.base_url),
            "--out",
            f"{out}",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 3, done.stderr
    (line,) = errors(done.stderr)
    assert line == (
        "ragbridge: error: judge: 401 Unauthorized on 5/5 calls — "
        "check OPENAI_API_KEY (or RAGBRIDGE_API_KEY)"
    )
    assert fake_openai.count("chat") == 5  # stop_after, not one per sample
    assert fake_openai.count("embeddings") == 0
    assert "sk-dummy" not in done.stderr + done.stdout
    assert out.exists()  # what was scored is written even when the run stopped
    header, rows = results(out)
    assert header["metadata"]["aborted"] == line.removeprefix("ragbridge: error: ")
    assert {row["score"]["failure"]["kind"] for row in rows} == {"judge_error", "cancelled"}
    assert time.monotonic() - started < 60


def test_a_hung_server_costs_the_timeout_not_minutes(
    fake_openai: FakeOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: 305 s for 2 samples (5 attempts x 60 s). After: --timeout bounds each attempt."""
    fake_openai.script("chat", "hang")
    started = time.monotonic()
    code = main(
        argv(
            fake_openai.base_url, "--timeout", "1", "--max-retries", "1", data=two_samples(tmp_path)
        )
    )
    elapsed = time.monotonic() - started
    assert code in (1, 3)
    assert elapsed < 15
    assert fake_openai.count("chat") == 4  # 2 samples x (1 attempt + 1 retry)
    assert errors(capsys.readouterr().err)


def test_a_base_url_without_scheme_is_an_error_before_any_call(
    fake_openai: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    started = time.monotonic()
    code = main(argv(f"127.0.0.1:{fake_openai.port}/v1"))
    assert code in (2, 3)
    (line,) = errors(capsys.readouterr().err)
    assert "--base-url must start with http:// or https://" in line
    assert fake_openai.count() == 0
    assert time.monotonic() - started < 10


def test_nothing_listening_stops_the_run_with_exit_3(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    code = main(argv(url))
    assert code == 3
    (line,) = errors(capsys.readouterr().err)
    assert line == (
        f"ragbridge: error: judge: connection refused at {url} on 5/5 calls — "
        f"is the server at {url} running?"
    )


def test_an_unknown_model_names_the_fix(
    fake_openai: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_openai.script("chat", "404")
    assert main(argv(fake_openai.base_url)) == 3
    (line,) = errors(capsys.readouterr().err)
    assert "404 unknown model 'gpt-fake'" in line
    assert line.endswith("unknown model: check the model name")


def test_a_wrong_key_for_the_embedder_names_the_embedder(
    fake_openai: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_openai.script("embeddings", "401")
    code = main(argv(fake_openai.base_url, "--metrics", "answer_relevance"))
    assert code in (1, 3)  # batches of several samples: fewer than stop_after calls may fail
    err = capsys.readouterr().err
    assert "check OPENAI_API_KEY" in err
    assert fake_openai.count("embeddings") <= 5


def test_a_wrong_but_valid_reply_is_repaired_and_the_rerun_is_free(
    fake_openai: FakeOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: the wrong reply was cached and every rerun repeated the parse_error."""
    fake_openai.script("chat", "ok", "wrong", "ok")  # the first verify reply has 1 verdict too many
    cache = tmp_path / "cache.sqlite"
    out = tmp_path / "first.jsonl"
    data = two_samples(tmp_path)
    code = main(argv(fake_openai.base_url, "--cache", str(cache), "--out", str(out), data=data))
    assert code == 0
    _, first = results(out)
    assert all(row["score"]["failure"] is None for row in first)
    assert fake_openai.count("chat", "wrong") == 1
    sent = fake_openai.count("chat")
    again = tmp_path / "again.jsonl"
    code = main(argv(fake_openai.base_url, "--cache", str(cache), "--out", str(again), data=data))
    assert code == 0
    assert fake_openai.count("chat") == sent  # all from the cache: nothing wrong was stored
    _, second = results(again)
    assert [r["score"]["value"] for r in second] == [r["score"]["value"] for r in first]
    capsys.readouterr()
