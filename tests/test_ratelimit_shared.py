"""Rate budgets shared by machines: the pluggable ledger (`ragbridge.core.judging.rate_ledger`),
the Redis ledger (`ragbridge.adapters.redis_ratelimit`) and the Dask one
(`ragbridge.adapters.dask.rate_ledger`).

"Machines" are processes that share no temporary directory (each its own ``TMPDIR``), so the
file ledger of one machine cannot join them: only a ledger on a server can. They send to
`FakeOpenAI` enforcing requests per (short) window with OpenAI's headers; the server counts.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI

from ragbridge.core.judging.judge import RateLimited
from ragbridge.core.judging.rate_ledger import ledger_name, open_ledger
from ragbridge.core.judging.ratelimit import RateLimiter, RateLimits
from ragbridge.core.results.evaluation import Usage
from ragbridge.core.settings import Settings

pytest_plugins = ["redis_server"]
pytest.importorskip("redis")
pytest.importorskip("httpx")

MESSAGE = [{"role": "user", "content": "x" * 300}]

# One machine's run: once imported, say "ready" and read the start (wall clock) from stdin; send
# distinct requests for ``seconds`` with the limiter the mode asks for; print what it did as JSON.
CHILD = r"""
import asyncio, json, sys, time
from ragbridge.adapters.openai import OpenAIJudge
from ragbridge.core.judging.ratelimit import RateLimits
from ragbridge.core.scoring.runner import judge_engine
from ragbridge.core.settings import Settings

base_url, mode, ledger, tag, seconds, window = sys.argv[1:7]
seconds, window = float(seconds), float(window)
print("ready", flush=True)
start = float(sys.stdin.readline())  # when every machine is ready
limits = RateLimits(window=window, slack=0.3, shared=ledger if mode == "url" else True)
settings = Settings(rate_limits=limits, cache=ledger if mode == "cache" else None)

async def main():
    judge = OpenAIJudge("m", base_url=base_url, api_key="one-key", structured="none")
    engine = judge_engine(settings, judge, None)  # the cache itself is not opened: no reuse
    ok = failed = 0
    counter = iter(range(10**9))

    async def worker():
        nonlocal ok, failed
        while time.time() < start + seconds:
            text = f"{tag} call {next(counter)} " + "w" * 200
            call = await engine.complete(
                [{"role": "user", "content": text}], template_id="t", template_version="1"
            )
            ok, failed = (ok + 1, failed) if call.ok else (ok, failed + 1)

    await asyncio.sleep(max(0.0, start - time.time()))
    tasks = [asyncio.ensure_future(worker()) for _ in range(6)]
    await asyncio.wait(tasks, timeout=max(0.0, start + seconds - time.time()))
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await judge.aclose()
    ledger_type = type(engine.limiter._ledger).__name__
    print(json.dumps({"ok": ok, "failed": failed, "ledger": ledger_type}))

asyncio.run(main())
"""


def _machines(
    server: FakeOpenAI, mode: str, ledger: str, tmp_path: Path, seconds: float, window: float
) -> list[dict[str, Any]]:
    """Two runs as two machines (own TMPDIR each), started together; their JSON reports."""
    children = []
    for tag in ("alpha", "beta"):
        tmp = tmp_path / f"{mode}-{tag}"
        tmp.mkdir()
        env = {**os.environ, "TMPDIR": str(tmp)}
        args = [server.base_url, mode, ledger, tag, str(seconds), str(window)]
        children.append(
            subprocess.Popen(
                [sys.executable, "-c", CHILD, *args],
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
        )
    for child in children:  # both have imported ragbridge (seconds on a loaded machine)
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
    start = repr(time.time() + 0.2)
    for child in children:
        assert child.stdin is not None
        child.stdin.write(start + "\n")
        child.stdin.flush()
    outputs = [child.communicate(timeout=seconds + 60)[0] for child in children]
    assert [child.returncode for child in children] == [0, 0]
    return [json.loads(out.strip().splitlines()[-1]) for out in outputs]


def _over_after_first_window(server: FakeOpenAI, window: float) -> list[float]:
    """429s for going over the limit later than one window after the first request or 429."""
    first = min([t for t, _, _ in server.admitted] + server.limited_at)
    return [t for t in server.limited_at if t > first + window]


def _by_machine(server: FakeOpenAI, since: float) -> dict[str, int]:
    """Requests answered ``ok`` per machine (by the tag in the prompt) arriving after ``since``."""
    counts = {"alpha": 0, "beta": 0}
    for request in server.requests:
        if request.mode == "ok" and request.at >= since:
            text = str(request.body["messages"][-1]["content"])
            counts[text.split(" ", 1)[0]] += 1
    return counts


# --------------------------------------------------------------------------- choosing


def test_the_ledger_follows_the_limits_and_a_cache_url(redis_url: str) -> None:
    assert type(open_ledger("k", RateLimits(shared=False))).__name__ == "MemoryLedger"
    by_cache = Settings(cache=redis_url, rate_limits=RateLimits(window=5)).rate_limits
    assert by_cache is not None
    assert by_cache.shared == redis_url
    kept = Settings(cache="x.db", rate_limits=RateLimits()).rate_limits
    assert kept is not None
    assert kept.shared is True
    alone = Settings(cache=redis_url, rate_limits=RateLimits(shared=False)).rate_limits
    assert alone is not None
    assert alone.shared is False
    assert Settings(cache=redis_url).rate_limits is None  # no limiter unless asked
    # dataclasses.replace (as a cluster run does with cache=None) keeps the shared ledger
    assert Settings(cache=redis_url, rate_limits=RateLimits()).replace(
        cache=None
    ).rate_limits == RateLimits(shared=redis_url)


def test_a_ledger_url_shows_no_password_and_a_bad_one_is_refused() -> None:
    limits = RateLimits(shared="redis://user:hunter2@127.0.0.1:1/0")
    assert "hunter2" not in repr(limits)
    assert "***" in repr(limits)
    with pytest.raises(ValueError, match="ledger URL"):
        RateLimits(shared="127.0.0.1:6379")
    with pytest.raises(ValueError, match="no ledger for nosuch://"):
        open_ledger("k", RateLimits(shared="nosuch://host"))


def test_the_command_line_takes_a_ledger_url(redis_url: str) -> None:
    import argparse

    from ragbridge.adapters.cli.options import add_model_options, settings_from

    parser = argparse.ArgumentParser()
    add_model_options(parser)
    limits = settings_from(parser.parse_args(["--rpm", "600", "--rate-ledger", redis_url]))[
        "rate_limits"
    ]
    assert limits is not None
    assert limits.shared == redis_url
    learned = settings_from(parser.parse_args(["--rate-ledger", redis_url]))["rate_limits"]
    assert learned is not None
    assert (learned.rpm, learned.shared) == (None, redis_url)


# --------------------------------------------------------------------------- Redis, unit


class FakeTime:
    """Wall-clock seconds that only move when a limiter sleeps (shared by both limiters)."""

    def __init__(self) -> None:
        self.now = time.time()

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds


def _machine(redis_url: str, clock: FakeTime, **limits: Any) -> RateLimiter:
    """A limiter with its own connection to the ledger, as another machine would have."""
    config = RateLimits(slack=0.0, burst=1.0, shared=redis_url, **limits)
    return RateLimiter(
        config, ledger=open_ledger("openai:key", config), clock=clock.clock, sleep=clock.sleep
    )


def test_two_machines_on_one_redis_ledger_share_the_budget(redis_url: str) -> None:
    import redis

    clock = FakeTime()
    start = clock.now
    first, second = _machine(redis_url, clock, rpm=4), _machine(redis_url, clock, rpm=4)
    for limiter in (first, second, first, second):
        asyncio.run(limiter.acquire(MESSAGE, 50)).replied(Usage(prompt_tokens=10))
    assert clock.now == start  # four calls fit the window
    asyncio.run(second.acquire(MESSAGE, 50))  # the fifth waits for the first to leave it
    assert clock.now == pytest.approx(start + 60.0, abs=0.05)
    client = redis.Redis.from_url(redis_url)
    keys = [k.decode() for k in client.keys("*")]
    assert keys == [f"ragbridge:1:ratelimit:{ledger_name('openai:key')}"]  # a hash, no key
    assert 0 < client.pttl(keys[0]) <= (2 * 60 + 60) * 1000 + 1000  # it expires


def test_a_retry_after_on_one_machine_pauses_the_other(redis_url: str) -> None:
    clock = FakeTime()
    start = clock.now
    first, second = _machine(redis_url, clock, rpm=100), _machine(redis_url, clock, rpm=100)
    permit = asyncio.run(first.acquire(MESSAGE, 50))
    permit.failed(RateLimited(retry_after=7.0))
    asyncio.run(second.acquire(MESSAGE, 50))
    assert clock.now >= start + 7.0  # the other machine waited out the Retry-After


# --------------------------------------------------------------------------- Redis, two machines


def test_two_machines_through_redis_stay_within_the_limit_and_split_it(
    redis_url: str, tmp_path: Path
) -> None:
    """Through the run's ``redis://`` cache, the two machines stay within the server's limit
    once the first window is over and share it; each with its own machine's ledger (today's
    behaviour) they go over it again and again."""
    window, seconds = 2.0, 8.0
    with FakeOpenAI(rpm=20, tpm=1_000_000, window=window, rate_headers=True, delay=0.03) as server:
        runs = _machines(server, "cache", redis_url, tmp_path, seconds, window)
    assert [r["ledger"] for r in runs] == ["RedisLedger", "RedisLedger"]
    assert _over_after_first_window(server, window) == []
    first = min([t for t, _, _ in server.admitted] + server.limited_at)
    split = _by_machine(server, first + window)
    total = sum(split.values())
    assert total >= 0.5 * 20 * (seconds - window - 1.0) / window  # the limit is used
    assert min(split.values()) >= 0.3 * total, split  # and split between the machines

    with FakeOpenAI(rpm=20, tpm=1_000_000, window=window, rate_headers=True, delay=0.03) as apart:
        alone = _machines(apart, "machine", redis_url, tmp_path, seconds, window)
    assert [r["ledger"] for r in alone] == ["FileLedger", "FileLedger"]
    assert len(_over_after_first_window(apart, window)) > 0


def test_a_retry_after_pauses_both_machines(redis_url: str, tmp_path: Path) -> None:
    """The server answers one request 429 with ``Retry-After: 2``: neither machine sends
    anything until it has passed (but calls already on the wire), then both go on."""
    window, seconds = 2.0, 7.0
    with FakeOpenAI(
        rpm=30, tpm=1_000_000, window=window, rate_headers=True, delay=0.03, retry_after=2.0
    ) as server:
        server.script("chat", *(["ok"] * 25), "429", "ok")
        _machines(server, "url", redis_url, tmp_path, seconds, window)
    refused = [r.at for r in server.requests if r.mode == "429"]
    assert len(refused) == 1
    paused_from, paused_to = refused[0] + 0.3, refused[0] + 2.0 - 0.05
    during = [r for r in server.requests if paused_from < r.at < paused_to]
    assert during == []
    assert _by_machine(server, refused[0])["alpha"] > 0
    assert _by_machine(server, refused[0])["beta"] > 0
    assert min(_by_machine(server, 0.0).values()) > 0


# --------------------------------------------------------------------------- Dask, 2 workers


def test_settle_splits_the_key_and_releases_only_what_is_no_longer_used() -> None:
    """The board's rule without a cluster: quotas never claim more than the whole key."""
    from ragbridge.adapters.dask.rate_ledger import settle

    board: dict[str, Any] = {}

    def report(applied: float, used: float | None, active: bool = True) -> dict[str, Any]:
        return {"applied": applied, "used": used, "active": active, "until": 0.0}

    def claimed() -> float:
        holders = board["holders"].values()
        return sum(r["claim"] for r in holders) + sum(c[1] for c in board["cooling"])

    assert settle(board, "a", report(0.0, 0.0), 100.0, 2.0)["quota"] == 1.0  # alone: all
    assert settle(board, "b", report(0.0, 0.0), 100.1, 2.0)["quota"] == 0.0  # none is free
    assert settle(board, "a", report(1.0, 0.8), 100.2, 2.0)["quota"] == 0.5  # told to lower
    assert claimed() == pytest.approx(1.0)  # but a still claims 1 until it runs with 0.5
    assert settle(board, "b", report(0.0, 0.0), 100.3, 2.0)["quota"] == 0.0
    settle(board, "a", report(0.5, 0.8), 100.4, 2.0)  # runs with 0.5; 0.8 is in its log
    assert settle(board, "b", report(0.0, 0.0), 100.5, 2.0)["quota"] == pytest.approx(0.2)
    assert claimed() == pytest.approx(1.0)
    # one window (and slack) later, what a's log held has left it: b gets its half
    assert settle(board, "b", report(0.2, 0.1), 102.5, 2.0)["quota"] == pytest.approx(0.5)
    assert claimed() <= 1.0 + 1e-9
    # a worker silent for EXPIRY_S is dropped; its claim cools for a window before reuse
    assert settle(board, "b", report(0.5, 0.5), 108.0, 2.0)["quota"] == pytest.approx(0.5)
    assert settle(board, "b", report(0.5, 0.5), 110.1, 2.0)["quota"] == pytest.approx(1.0)


@pytest.fixture(scope="module")
def cluster() -> Any:
    pytest.importorskip("distributed")
    from distributed import LocalCluster

    with LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        dashboard_address="127.0.0.1:0",
        host="127.0.0.1",
    ) as local:
        yield local


def _spend(cluster: Any, limits: RateLimits, key: str, seconds: float) -> list[dict[str, Any]]:
    """On each of the two workers at once, admit calls for ``seconds`` under ``limits`` (each
    worker a "machine": its own ledger directory); the admission times and the ledger used."""
    from distributed import Client

    from ragbridge.adapters.dask.rate_ledger import cluster_limits

    async def spend(limits: RateLimits, key: str, start: float, seconds: float) -> dict[str, Any]:
        import dataclasses
        import os
        import tempfile

        from ragbridge.core.judging.ratelimit import rate_limiter
        from ragbridge.core.results.evaluation import Usage

        own = tempfile.mkdtemp(prefix=f"machine-{os.getpid()}-")
        limiter = rate_limiter(key, cluster_limits(dataclasses.replace(limits, directory=own)))
        times: list[float] = []
        await asyncio.sleep(max(0.0, start - time.time()))
        while time.time() < start + seconds:
            permit = await limiter.acquire([{"role": "user", "content": "x" * 30}], 5)
            times.append(time.time())
            permit.replied(Usage(prompt_tokens=10, completion_tokens=5))
        ledger = limiter._ledger
        return {
            "times": times,
            "ledger": type(ledger).__name__,
            "error": getattr(ledger, "error", None),
            "exchanges": getattr(ledger, "exchanges", None),
        }

    def warm() -> None:  # imports take seconds on a loaded machine: not in the measured time
        import ragbridge.adapters.dask.rate_ledger
        import ragbridge.core.judging.ratelimit  # noqa: F401

    with Client(cluster) as client:
        client.run(warm)
        workers = sorted(client.scheduler_info()["workers"])
        start = time.time() + 1.0
        futures = [
            client.submit(spend, limits, key, start, seconds, workers=[w], pure=False)
            for w in workers
        ]
        return [f.result(timeout=seconds + 60) for f in futures]


def _most_in_a_window(times: list[float], window: float) -> int:
    ordered = sorted(times)
    return max(
        (sum(1 for u in ordered[i:] if u < t + window) for i, t in enumerate(ordered)), default=0
    )


def test_two_dask_workers_split_one_budget_through_the_scheduler(cluster: Any) -> None:
    """Two worker processes, each its own "machine" (no shared ledger file): through the
    scheduler no 2 s window holds more than the key's 20 requests and both get their part;
    each on its own machine's ledger (today) they send twice the limit."""
    window, seconds = 2.0, 6.0
    limits = RateLimits(rpm=20, window=window, slack=0.1, burst=1.0)
    runs = _spend(cluster, limits, f"dask-key-{time.time()}", seconds)
    assert [r["ledger"] for r in runs] == ["DaskLedger", "DaskLedger"], runs
    everything = runs[0]["times"] + runs[1]["times"]
    assert _most_in_a_window(everything, window) <= 20
    assert len(everything) >= 0.6 * 20 * seconds / window, runs  # the limit is used
    assert min(len(r["times"]) for r in runs) >= 0.2 * len(everything)  # by both

    apart = RateLimits(rpm=20, window=window, slack=0.1, burst=1.0, shared=False)
    alone = _spend(cluster, apart, f"dask-key-alone-{time.time()}", 3.0)
    assert _most_in_a_window(alone[0]["times"] + alone[1]["times"], window) > 20


def test_a_cluster_run_shares_the_key_through_the_scheduler(cluster: Any, tmp_path: Path) -> None:
    """``evaluate`` on the cluster with ``rate_limits``: the workers' judge calls stay within
    the server's limit once the first window is over, every sample scored."""
    from distributed import Client

    from ragbridge.adapters.dask import evaluate

    rows = [
        {
            "id": f"s{i:03d}",
            "question": f"What does clause {i} say?",
            "answer": f"Clause {i} grants {i % 7 + 1} days of leave.",
            "contexts": [{"id": f"d{i}", "text": f"Clause {i}: {i % 7 + 1} days of leave."}],
        }
        for i in range(60)
    ]
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    window = 2.0
    with (
        Client(cluster) as client,
        FakeOpenAI(rpm=20, tpm=1_000_000, window=window, rate_headers=True, delay=0.02) as server,
    ):
        result = evaluate(
            str(data),
            ["context_precision"],
            judge="openai:gpt-fake",
            base_url=server.base_url,
            client=client,
            partition_size=10,
            max_concurrency=8,
            rate_limits=RateLimits(window=window, slack=0.3),
        )
    assert len(list(result)) == 60
    assert all(cell.failure is None for _, _, cell in result)
    assert _over_after_first_window(server, window) == []
    # the workers settled through the scheduler (the LocalCluster's runs in this process)
    from ragbridge.adapters.dask.rate_ledger import _BOARDS

    assert any(len(board.get("holders", {})) >= 1 for board in _BOARDS.values())
