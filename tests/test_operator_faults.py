"""Faults an operator meets mid-run, and what the run does about them (issue 28).

* The cache's store is lost (a Redis server killed, the SQLite file's folder deleted, a full
  disk): the run goes on uncached after one warning, writes what it scored, and its exit code
  is its own — never 2, which means "nothing paid".
* A metric whose cells failed for several reasons: its line names the commonest causes with a
  count each, and an exception without a message is named by its class and what it interrupted.
* A judge that refuses every connection: exit 3 whether the run had 2 samples or 10.

Real servers where it matters: Debian's ``redis-server`` (killed with SIGKILL), a fake
OpenAI-compatible server on 127.0.0.1 (`fake_openai`), a closed port.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from pydantic import BaseModel

from ragbridge.adapters.cli import main
from ragbridge.core import Settings, evaluate
from ragbridge.core.cache.backend import CacheBackend
from ragbridge.core.cache.disk import Cache
from ragbridge.core.cache.guard import CacheGuard
from ragbridge.core.cache.stored import CachedReply, CacheStats
from ragbridge.core.judging.error_text import describe_error
from ragbridge.core.judging.judge import JudgeReply, Message, ProviderUnusable
from ragbridge.core.judging.limits import Breaker, Outcome
from ragbridge.core.sample import Context, Sample, save_samples
from ragbridge.core.testing import CountingJudge, minimal_reply

pytest_plugins = ["redis_server"]

METRICS = "faithfulness,answer_correctness"


def _samples(n: int) -> list[Sample]:
    return [
        Sample(
            id=f"q{i}",
            question=f"What is fact number {i}?",
            answer=f"Fact {i} is that the sky is blue.",
            contexts=[Context(text=f"Fact {i}: the sky is blue.", id=f"d{i}")],
            reference=f"Fact {i} is that the sky is blue.",
        )
        for i in range(n)
    ]


def _data(tmp_path: Path, n: int) -> Path:
    path = tmp_path / f"data_{n}.jsonl"
    save_samples(_samples(n), path)
    return path


def _cells(path: Path) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return [row for row in rows if "sample_id" in row]


# --------------------------------------------------------------------------------------------
# 1. The cache's store lost mid-run
# --------------------------------------------------------------------------------------------


def test_redis_killed_mid_run_the_run_goes_on_uncached_and_writes_everything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """SIGKILL to redis-server after the 20th judge call; before: exit 2 and no file at all."""
    redis = pytest.importorskip("redis")
    from fake_openai import FakeOpenAI
    from redis_server import redis_server

    n = 12
    data = _data(tmp_path, n)
    out, report, history = tmp_path / "out.jsonl", tmp_path / "r.html", tmp_path / "h.sqlite"
    with redis_server() as url:
        client = redis.Redis.from_url(url)
        pid = int(client.info("server")["process_id"])
        client.close()
        lock = threading.Lock()
        seen = {"calls": 0, "after": 0}

        def answer(messages: list[Message]) -> str:
            with lock:
                seen["calls"] += 1
                if seen["calls"] == 20:
                    os.kill(pid, signal.SIGKILL)  # the server this test started
                elif seen["calls"] > 20:
                    seen["after"] += 1
            return minimal_reply(messages)

        with FakeOpenAI(answer=answer) as server:
            code = main(
                ["eval", str(data), "--metrics", METRICS, "--judge", "openai:gpt-fake",
                 "--base-url", server.base_url, "--cache", url, "--concurrency", "2",
                 "--out", str(out), "--report", str(report), "--history", str(history)]
            )  # fmt: skip
            requests = server.count("chat")
    _, err = capsys.readouterr()
    assert code == 0, err
    assert seen["after"] > 0  # calls were paid after the server died ...
    cells = _cells(out)
    assert len(cells) == 2 * n  # ... and every cell they paid for is written, scored
    assert all(c["score"]["failure"] is None for c in cells), cells
    assert report.exists()
    assert history.exists()
    lines = err.strip().splitlines()
    lost = [line for line in lines if "cache redis://" in line]
    assert len(lost) == 1, err  # one warning, not one per call
    assert lost[0].startswith(f"ragbridge: warning: cache {url}: ")
    assert "went on without the cache" in lost[0]
    assert f"{seen['after'] + 1} judge replies" in lost[0]  # the 20th's put failed too
    assert requests == seen["calls"]


class _Deleting(CountingJudge):
    """Deletes ``folder`` (the cache file's) when its ``at``-th call is made."""

    def __init__(self, folder: Path, at: int) -> None:
        super().__init__()
        self.folder, self.at = folder, at

    async def generate(
        self, messages: Sequence[Message], *, schema: type[BaseModel] | None = None
    ) -> JudgeReply:
        if self.calls + 1 == self.at:
            shutil.rmtree(self.folder)
        return await super().generate(messages, schema=schema)


def test_sqlite_folder_deleted_mid_run_is_said_once_and_the_run_goes_on(tmp_path: Path) -> None:
    """SQLite writes on into a deleted file without a word; before: no warning, every reply
    paid after the deletion silently lost."""
    folder = tmp_path / "cache"
    judge = _Deleting(folder, at=5)
    run = evaluate(
        _samples(6),
        METRICS.split(","),
        judge=judge,
        cache=str(folder / "c.sqlite"),
        max_concurrency=1,
    )
    assert all(score.failure is None for _, _, score in run)
    warnings = run.metadata.get("warnings") or []
    assert len(warnings) == 1, warnings
    line = warnings[0]
    assert line.startswith(f"cache {folder / 'c.sqlite'}: the file was deleted or replaced")
    assert f"{judge.calls - 4} judge replies" in line  # the 5th and every later reply


def folder_deleting_judge() -> CountingJudge:
    """``--judge python:test_operator_faults:folder_deleting_judge``: deletes the folder
    ``$RAGBRIDGE_TEST_DOOMED`` at its 3rd call."""
    return _Deleting(Path(os.environ["RAGBRIDGE_TEST_DOOMED"]), at=3)


def test_a_cli_run_whose_cache_folder_vanishes_exits_0_with_its_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "cache"
    folder.mkdir()
    monkeypatch.setenv("RAGBRIDGE_TEST_DOOMED", str(folder))
    out = tmp_path / "out.jsonl"
    code = main(
        ["eval", str(_data(tmp_path, 4)), "--metrics", METRICS,
         "--judge", "python:test_operator_faults:folder_deleting_judge",
         "--cache", str(folder / "c.sqlite"), "--concurrency", "1", "--out", str(out)]
    )  # fmt: skip
    err = capsys.readouterr().err
    assert code == 0, err
    assert len(_cells(out)) == 8
    assert err.count("ragbridge: warning: cache ") == 1, err


class _Failing:
    """A backend whose store fails from the ``after``-th operation of kind ``op`` on."""

    def __init__(self, inner: Cache, op: str, after: int, error: Exception) -> None:
        self.inner, self.op, self.after, self.error = inner, op, after, error
        self.seen: dict[str, int] = {}
        self.calls_after_failure = 0
        self.failed = False

    @property
    def location(self) -> str:
        return self.inner.location

    def _maybe_fail(self, op: str) -> None:
        if self.failed:
            self.calls_after_failure += 1
        self.seen[op] = self.seen.get(op, 0) + 1
        if op == self.op and self.seen[op] >= self.after:
            self.failed = True
            raise self.error

    def get_reply(self, key: str) -> CachedReply | None:
        self._maybe_fail("get_reply")
        return self.inner.get_reply(key)

    def put_reply(self, key: str, reply: CachedReply, **meta: Any) -> None:
        self._maybe_fail("put_reply")
        self.inner.put_reply(key, reply, **meta)

    def get_embeddings(self, model: str, texts: Sequence[str]) -> list[list[float] | None]:
        self._maybe_fail("get_embeddings")
        return self.inner.get_embeddings(model, texts)

    def put_embeddings(
        self,
        model: str,
        texts: Sequence[str],
        vectors: Sequence[Sequence[float]] | npt.NDArray[np.floating[Any]],
    ) -> None:
        self._maybe_fail("put_embeddings")
        self.inner.put_embeddings(model, texts, vectors)

    def get_results(self, keys: Sequence[str]) -> dict[str, str]:
        self._maybe_fail("get_results")
        return self.inner.get_results(keys)

    def put_results(self, rows: Sequence[tuple[str, str, str, str]]) -> None:
        self._maybe_fail("put_results")
        self.inner.put_results(rows)

    def stats(self) -> CacheStats:
        return self.inner.stats()

    def close(self) -> None:
        self.inner.close()


@pytest.mark.parametrize(
    ("op", "after", "error"),
    [
        ("put_reply", 3, sqlite3.OperationalError("database or disk is full")),
        ("get_reply", 3, sqlite3.OperationalError("disk I/O error")),
        ("get_results", 3, sqlite3.OperationalError("disk I/O error")),
        ("put_results", 1, OSError(28, "No space left on device")),  # one batch, at the end
    ],
)
def test_a_backend_that_starts_raising_is_turned_off_after_one_warning(
    tmp_path: Path, op: str, after: int, error: Exception
) -> None:
    backend = _Failing(Cache(tmp_path / "c.sqlite"), op, after=after, error=error)
    judge = CountingJudge()
    run = evaluate(_samples(5), METRICS.split(","), judge=judge, cache=backend, max_concurrency=1)
    assert backend.failed
    assert backend.calls_after_failure == 0  # turned off: never asked again in this run
    assert all(score.failure is None for _, _, score in run)
    (line,) = run.metadata["warnings"]
    assert line.startswith(f"cache {backend.location}: {op} failed ({type(error).__name__}: ")
    assert str(error.args[-1]) in line
    assert "went on without the cache" in line
    backend.close()


def test_the_guard_lets_the_callers_own_errors_through(tmp_path: Path) -> None:
    """A NaN vector or a closed cache is a bug to see, not a store to switch off."""
    inner = Cache(tmp_path / "c.sqlite")
    guard = CacheGuard(inner)
    with pytest.raises(ValueError, match="non-finite"):
        guard.put_embeddings("m", ["a"], [[float("nan")]])
    inner.close()
    with pytest.raises(ValueError, match="closed"):
        guard.get_reply("k")
    assert not guard.lost
    assert guard.warning() is None


def test_a_backend_of_the_protocol_stays_a_backend_inside_the_guard(tmp_path: Path) -> None:
    with Cache(tmp_path / "c.sqlite") as inner:
        guard: CacheBackend = CacheGuard(inner)
        assert isinstance(guard, CacheBackend)
        guard.put_reply("k", CachedReply("x", 1, 2), model="m", template_id="t")
        assert guard.get_reply("k") == CachedReply("x", 1, 2)
        assert guard.stats().replies == 1


# --------------------------------------------------------------------------------------------
# 2. The failure line names the commonest causes, each with its count
# --------------------------------------------------------------------------------------------


def test_the_failure_line_counts_each_cause_and_names_an_empty_exception(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: ``judge_error ×27: … HTTP 200 reply is not a JSON object`` (16 of the 27 were)."""
    from fake_openai import FakeOpenAI

    data = _data(tmp_path, 27)
    with FakeOpenAI() as server:
        server.script("chat", *(["garbage"] * 16 + ["reset"] * 5 + ["500"] * 6))
        code = main(
            ["eval", str(data), "--metrics", "faithfulness", "--judge", "openai:gpt-fake",
             "--base-url", server.base_url, "--max-retries", "0", "--concurrency", "1"]
        )  # fmt: skip
    err = capsys.readouterr().err
    assert code == 1, err
    (line,) = [x for x in err.splitlines() if x.startswith("ragbridge: error: faithfulness")]
    assert "27 of 27 cells failed — judge_error ×16: gpt-fake: HTTP 200 reply is not a JSON" in line
    assert "; judge_error ×6: gpt-fake: HTTP 500: The server had an error" in line
    reset = f"; judge_error ×5: gpt-fake: ReadError while reading the reply from {server.base_url}"
    assert reset in line
    assert "Connection reset by peer" in line
    assert "ReadError: " not in line


def test_a_single_cause_keeps_the_short_form(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _data(tmp_path, 2)
    code = main(["eval", str(data), "--metrics", "recall@5", "--max-failed-share", "0"])
    err = capsys.readouterr().err
    assert code == 1
    assert "2 of 2 cells failed — missing_input ×2: " in err
    assert ";" not in err.split("missing_input ×2: ")[1].split("; fix:")[0]


def test_an_empty_exception_is_named_by_class_doing_and_the_reason_below_it() -> None:
    try:
        try:
            raise ConnectionResetError(104, "Connection reset by peer")
        except ConnectionResetError as inner:
            raise RuntimeError() from inner
    except RuntimeError as exc:
        text = describe_error(exc, "reading the reply from http://h/v1")
    assert text == (
        "RuntimeError while reading the reply from http://h/v1: "
        "ConnectionResetError: [Errno 104] Connection reset by peer"
    )
    assert (
        describe_error(ValueError(), "asking the judge m") == "ValueError while asking the judge m"
    )
    assert describe_error(ValueError("bad"), "anything") == "ValueError: bad"


# --------------------------------------------------------------------------------------------
# 3. The same cause, the same exit code, however many samples
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [2, 10])
def test_a_closed_port_exits_3_with_2_samples_as_with_10(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], n: int
) -> None:
    """Before: exit 1 with 2 samples (too few calls to trip the breaker), exit 3 with 10."""
    from fake_openai import free_port

    base = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    out = tmp_path / "out.jsonl"
    code = main(
        ["eval", str(_data(tmp_path, n)), "--metrics", METRICS, "--judge", "openai:gpt-fake",
         "--base-url", base, "--out", str(out)]
    )  # fmt: skip
    err = capsys.readouterr().err
    assert code == 3, err
    assert f"ragbridge: error: judge: connection refused at {base} on " in err
    assert len(_cells(out)) == 2 * n  # written with whatever was scored, as on any exit 3


def _settled(*outcomes: Outcome, cause: str = "connection refused") -> Breaker:
    breaker = Breaker("judge", stop_after=5)
    for outcome in outcomes:
        breaker.settle(outcome, cause, "is it running?")
    return breaker


@pytest.mark.parametrize(
    ("outcomes", "unusable"),
    [
        ((Outcome.UNUSABLE, Outcome.UNUSABLE), True),
        ((Outcome.UNUSABLE,), True),
        ((Outcome.REPLIED, Outcome.UNUSABLE), False),  # it worked once: not the provider
        ((Outcome.NEUTRAL, Outcome.UNUSABLE), False),  # a 400 is the request's fault
        ((Outcome.NOT_SENT,), False),
        ((), False),
    ],
)
def test_the_verdict_of_a_run_too_small_to_trip_the_breaker(
    outcomes: tuple[Outcome, ...], unusable: bool
) -> None:
    breaker = _settled(*outcomes)
    assert not breaker.tripped
    verdict = breaker.verdict
    if unusable:
        assert verdict == (
            f"judge: connection refused on {len(outcomes)}/{len(outcomes)} calls — is it running?"
        )
    else:
        assert verdict is None


def test_two_causes_are_not_one_unusable_provider() -> None:
    breaker = Breaker("judge", stop_after=5)
    breaker.settle(Outcome.UNUSABLE, "401 Unauthorized", "check the key")
    breaker.settle(Outcome.UNUSABLE, "connection refused", "is it running?")
    assert breaker.verdict is None


def test_a_python_run_with_an_unusable_judge_is_aborted_whatever_its_size() -> None:
    class Unauthorized(CountingJudge):
        async def generate(
            self, messages: Sequence[Message], *, schema: type[BaseModel] | None = None
        ) -> JudgeReply:
            self.calls += 1
            raise ProviderUnusable("HTTP 401", cause="401 Unauthorized", hint="check the key")

    judge = Unauthorized()
    run = evaluate(_samples(1), ["faithfulness"], settings=Settings(judge=judge))
    assert judge.calls == 1
    assert run.metadata.get("aborted") == "judge: 401 Unauthorized on 1/1 calls — check the key"
