"""The limiter that follows the provider (`ragbridge.core.judging.ratelimit`).

Unit tests drive a `RateLimiter` on a fake clock (its ``sleep`` advances the clock), so windows
of a minute take no time; the end-to-end tests run engines with `OpenAIJudge` against
`FakeOpenAI` enforcing requests and tokens per (short) window and sending OpenAI's headers.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from fake_openai import FakeOpenAI

from ragbridge.core.judging.engine import JudgeEngine
from ragbridge.core.judging.judge import JudgeReply, RateLimited
from ragbridge.core.judging.ratelimit import (
    Permit,
    RateLimiter,
    RateLimits,
    parse_duration,
    rate_limiter,
    read_headers,
)
from ragbridge.core.results.evaluation import Usage
from ragbridge.core.settings import Settings

pytest.importorskip("httpx")
from ragbridge.adapters.openai import OpenAIJudge


class FakeTime:
    """Wall-clock seconds that only move when a limiter sleeps."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def _limiter(time: FakeTime, path: Path | None = None, **limits: float) -> RateLimiter:
    config = RateLimits(slack=0.0, **{"burst": 1.0, **limits})  # type: ignore[arg-type]
    return RateLimiter(config, ledger_path=path, clock=time.clock, sleep=time.sleep)


MESSAGE = [{"role": "user", "content": "x" * 300}]  # 100 tokens at 3 characters a token


def _take(limiter: RateLimiter, budget: int | None = 50) -> Permit:
    return asyncio.run(limiter.acquire(MESSAGE, budget))


# --------------------------------------------------------------------------- headers


def test_reset_durations_are_read_in_every_form_openai_sends() -> None:
    assert parse_duration("1s") == 1.0
    assert parse_duration("6m0s") == 360.0
    assert parse_duration("20ms") == pytest.approx(0.02)
    assert parse_duration("1h2m3.5s") == pytest.approx(3723.5)
    assert parse_duration("0.25") == 0.25
    assert parse_duration("soon") is None


def test_headers_are_read_into_limits() -> None:
    seen = read_headers(
        {
            "x-ratelimit-limit-requests": "600",
            "x-ratelimit-remaining-requests": "599",
            "x-ratelimit-reset-requests": "100ms",
            "x-ratelimit-limit-tokens": "200000",
            "x-ratelimit-remaining-tokens": "oops",
        }
    )
    assert (seen.limit_requests, seen.remaining_requests) == (600, 599)
    assert seen.reset_requests == pytest.approx(0.1)
    assert seen.limit_tokens == 200000
    assert seen.remaining_tokens is None
    assert read_headers(None).empty


# --------------------------------------------------------------------------- budgets


def test_requests_beyond_the_rpm_wait_for_the_oldest_to_leave_the_window() -> None:
    time = FakeTime()
    limiter = _limiter(time, rpm=3, window=60)
    for _ in range(3):
        _take(limiter).replied(Usage(prompt_tokens=10, completion_tokens=5))
    assert time.now == 1000.0  # three fit at once
    _take(limiter)
    assert time.now == pytest.approx(1060.0, abs=0.01)  # the fourth waited a whole window


def test_tokens_are_estimated_before_and_corrected_after_the_call() -> None:
    time = FakeTime()
    limiter = _limiter(time, tpm=400, window=60)
    first = _take(limiter)
    assert first.tokens >= 150  # 100 prompt + 50 completion budget, on the high side
    first.replied(Usage(prompt_tokens=40, completion_tokens=10))  # the reply cost 50
    # Without the correction the ledger would hold ~160 tokens and only one more call would
    # fit; with it the second and third estimates follow the replies (~50 each) and fit now.
    _take(limiter).replied(Usage(prompt_tokens=40, completion_tokens=10))
    _take(limiter).replied(Usage(prompt_tokens=40, completion_tokens=10))
    assert time.now == 1000.0
    assert limiter.estimate(MESSAGE) < 80


def test_budgets_are_learned_from_the_headers() -> None:
    time = FakeTime()
    limiter = _limiter(time, window=60)  # nothing configured
    _take(limiter).replied(
        Usage(prompt_tokens=10, completion_tokens=5),
        {"x-ratelimit-limit-requests": "2", "x-ratelimit-remaining-requests": "1"},
    )
    _take(limiter).replied(Usage(prompt_tokens=10, completion_tokens=5))
    assert time.now == 1000.0
    _take(limiter)
    assert time.now == pytest.approx(1060.0, abs=0.01)


def test_a_header_saying_nothing_remains_pauses_until_its_reset() -> None:
    time = FakeTime()
    limiter = _limiter(time, window=60)
    _take(limiter).replied(
        Usage(prompt_tokens=10, completion_tokens=5),
        {"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "7s"},
    )
    _take(limiter)
    assert time.now == pytest.approx(1007.0, abs=0.01)


def test_without_budgets_the_cap_starts_slow_and_grows_by_one_a_reply() -> None:
    time = FakeTime()
    limiter = _limiter(time, window=60)
    assert limiter.cap == 2.0
    permits = [_take(limiter) for _ in range(2)]
    for permit in permits:
        permit.replied(Usage(prompt_tokens=10, completion_tokens=5))
    assert limiter.cap == 4.0  # doubled in one round trip
    assert time.now == 1000.0


def test_a_429_honours_retry_after_for_every_call_and_halves_the_cap_without_budgets() -> None:
    time = FakeTime()
    limiter = _limiter(time, window=60, start=4)
    permits = [_take(limiter) for _ in range(4)]
    permits[0].failed(RateLimited(retry_after=5.0))
    assert limiter.cap == pytest.approx(2.0)  # 4 in flight when refused: halved
    permits[1].failed(RateLimited(retry_after=5.0))
    assert limiter.cap == pytest.approx(2.0)  # one cut per pause, not one per 429
    for permit in permits[2:]:
        permit.replied(Usage(prompt_tokens=10, completion_tokens=5))
    assert 2.0 < limiter.cap < 3.0  # additive increase on replies: +1/cap each
    _take(limiter)
    assert time.now == pytest.approx(1005.0, abs=0.01)
    assert limiter.rate_limited == 2


def test_a_429_within_known_budgets_halves_the_share_which_grows_back() -> None:
    time = FakeTime()
    path = None
    limiter = _limiter(time, path, rpm=100, window=60)
    _take(limiter).failed(RateLimited(retry_after=1.0))  # someone else spends the key
    assert limiter._ledger.update(lambda state: state["share"]) == 0.5
    for _ in range(20):
        _take(limiter).replied(Usage(prompt_tokens=10, completion_tokens=5))
    assert 0.5 < limiter._ledger.update(lambda state: state["share"]) <= 1.0


def test_a_call_never_sent_gives_its_room_back() -> None:
    from ragbridge.core.judging.attempts import NotSent

    time = FakeTime()
    limiter = _limiter(time, rpm=1, window=60)
    _take(limiter).failed(NotSent())
    _take(limiter)
    assert time.now == 1000.0


def test_two_limiters_on_one_ledger_file_share_the_budget(tmp_path: Path) -> None:
    """Two runs (two limiters, as two processes would have) on one key: one budget."""
    time = FakeTime()
    path = tmp_path / "ledger.json"
    first, second = _limiter(time, path, rpm=4, window=60), _limiter(time, path, rpm=4, window=60)
    for limiter in (first, second, first, second):
        _take(limiter).replied(Usage(prompt_tokens=10, completion_tokens=5))
    assert time.now == 1000.0
    _take(second)
    assert time.now == pytest.approx(1060.0, abs=0.01)


def test_one_limiter_per_key_in_a_process_and_the_ledger_name_hides_the_key(
    tmp_path: Path,
) -> None:
    limits = RateLimits(rpm=10, directory=str(tmp_path))
    assert rate_limiter("openai:abc", limits) is rate_limiter("openai:abc", limits)
    assert rate_limiter("openai:abc", limits) is not rate_limiter("openai:other", limits)
    judge = OpenAIJudge("m", base_url="http://127.0.0.1:9/v1", api_key="sk-secret-key")
    assert "secret" not in judge.rate_key
    other = OpenAIJudge("m", base_url="http://127.0.0.1:9/v1", api_key="sk-other")
    assert judge.rate_key != other.rate_key


# --------------------------------------------------------------------------- the server


def test_the_fake_server_enforces_nothing_and_sends_no_headers_by_default() -> None:
    async def main(server: FakeOpenAI) -> list[JudgeReply]:
        judge = OpenAIJudge("m", base_url=server.base_url, api_key="k", structured="none")
        return [await judge.generate([{"role": "user", "content": "hi"}]) for _ in range(5)]

    with FakeOpenAI() as server:
        replies = asyncio.run(main(server))
    assert all(reply.headers == {} for reply in replies)
    assert server.limited_at == []
    assert server.count(mode="ok") == 5


def test_the_adapter_passes_the_headers_of_replies_and_429s() -> None:
    async def main(server: FakeOpenAI) -> tuple[JudgeReply, RateLimited]:
        judge = OpenAIJudge("m", base_url=server.base_url, api_key="k", structured="none")
        reply = await judge.generate([{"role": "user", "content": "hi"}])
        try:
            await judge.generate([{"role": "user", "content": "hi"}])
        except RateLimited as exc:
            return reply, exc
        raise AssertionError("the second request should be over the limit")

    with FakeOpenAI(rpm=1, window=30, rate_headers=True) as server:
        reply, refused = asyncio.run(main(server))
    assert reply.headers["x-ratelimit-limit-requests"] == "1"
    assert reply.headers["x-ratelimit-remaining-requests"] == "0"
    assert refused.headers["x-ratelimit-remaining-requests"] == "0"
    assert refused.retry_after is not None
    assert 25 < refused.retry_after <= 30
    assert len(server.limited_at) == 1


def test_settings_rate_limits_reach_the_engine(tmp_path: Path) -> None:
    from ragbridge.core.scoring.runner import judge_engine

    judge = OpenAIJudge("m", base_url="http://127.0.0.1:9/v1", api_key="k")
    limits = RateLimits(rpm=60, directory=str(tmp_path))
    engine = judge_engine(Settings(rate_limits=limits), judge, None)
    assert engine.limiter is rate_limiter(judge.rate_key, limits)
    assert judge_engine(Settings(), judge, None).limiter is None


def _runs(
    server: FakeOpenAI, calls: int, limits: RateLimits | None, concurrency: int = 6
) -> list[int]:
    """Three runs (engines with their own limiter, sharing the ledger as processes would) of
    ``calls`` distinct requests each, at once; the number that succeeded per run."""

    async def run(index: int) -> int:
        judge = OpenAIJudge("m", base_url=server.base_url, api_key="k", structured="none")
        limiter = None
        if limits is not None:
            path = Path(str(limits.directory)) / "ledger.json"
            limiter = RateLimiter(limits, ledger_path=path)
        engine = JudgeEngine(
            judge, max_concurrency=concurrency, max_retries=8, timeout=10, limiter=limiter
        )
        prompts = [f"run {index} call {i} " + "w" * 200 for i in range(calls)]
        done = await asyncio.gather(
            *(
                engine.complete(
                    [{"role": "user", "content": p}], template_id="t", template_version="1"
                )
                for p in prompts
            )
        )
        await judge.aclose()
        return sum(1 for call in done if call.ok)

    async def main() -> list[int]:
        return list(await asyncio.gather(*(run(i) for i in range(3))))

    return asyncio.run(main())


def _after_first_window(server: FakeOpenAI, window: float) -> list[float]:
    """429s that came later than one window after the first request (or the first 429)."""
    first = min(t for t, _, _ in server.admitted)
    if server.limited_at:
        first = min(first, *server.limited_at)
    return [t for t in server.limited_at if t > first + window]


def test_three_runs_on_one_key_stay_within_the_limit_after_the_first_window(
    tmp_path: Path,
) -> None:
    """With headers and a shared ledger: nothing over the limit once the budgets are known;
    without the limiter (the fixed cap of today) the same runs are refused many times."""
    window = 2.0
    limits = RateLimits(window=window, slack=0.3, directory=str(tmp_path))
    with FakeOpenAI(rpm=24, tpm=100_000, window=window, rate_headers=True, delay=0.02) as server:
        ok = _runs(server, 16, limits)
    assert ok == [16, 16, 16]
    assert _after_first_window(server, window) == []

    with FakeOpenAI(rpm=24, tpm=100_000, window=window, rate_headers=True, delay=0.02) as control:
        _runs(control, 16, None)
    assert len(control.limited_at) > max(5, 2 * len(server.limited_at))


def test_the_token_budget_binds_when_calls_are_large(tmp_path: Path) -> None:
    """~60-token calls against 800 tokens a 2 s window: the limiter keeps to the tokens."""
    window = 2.0
    limits = RateLimits(window=window, slack=0.3, directory=str(tmp_path))
    with FakeOpenAI(rpm=1000, tpm=800, window=window, rate_headers=True, delay=0.02) as server:
        ok = _runs(server, 5, limits)
    assert ok == [5, 5, 5]
    assert _after_first_window(server, window) == []


def test_the_command_line_flags_build_the_limits_every_command_passes_on() -> None:
    import argparse

    from ragbridge.adapters.cli.options import add_model_options, settings_from

    parser = argparse.ArgumentParser()
    add_model_options(parser)
    assert settings_from(parser.parse_args([]))["rate_limits"] is None  # off unless asked
    limits = settings_from(parser.parse_args(["--rpm", "600", "--tpm", "200000"]))["rate_limits"]
    assert limits is not None
    assert (limits.rpm, limits.tpm, limits.shared) == (600.0, 200000.0, True)
    learned = settings_from(parser.parse_args(["--follow-limits"]))["rate_limits"]
    assert learned is not None
    assert (learned.rpm, learned.tpm) == (None, None)  # learned from the headers
    with pytest.raises(SystemExit):
        parser.parse_args(["--rpm", "0"])
