"""The judge engine: concurrency cap, retries, timeouts, structured output, cache, cost."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from pydantic import BaseModel

from ragbridge.core.cache import Cache
from ragbridge.core.engine import JudgeEngine, Price, cost_of, extract_json
from ragbridge.core.judge import (
    JudgeReply,
    PermanentJudgeError,
    RateLimited,
    ServerError,
)
from ragbridge.core.prompts import PromptTemplate
from ragbridge.core.results import FailureKind, Usage
from ragbridge.core.testing import CountingJudge, ScriptedJudge


class Verdict(BaseModel):
    ok: bool
    why: str


TEMPLATE = PromptTemplate(
    id="test.verdict", version="1", system="You judge.", user="Is $question true?", schema=Verdict
)
GOOD = {"ok": True, "why": "because"}


class Sleeps:
    """Records backoff sleeps instead of sleeping."""

    def __init__(self) -> None:
        self.durations: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.durations.append(seconds)


def _ask(engine: JudgeEngine, question: str = "water wet", version: str = "1"):  # type: ignore[no-untyped-def]
    return engine.ask(
        TEMPLATE.render(question=question),
        Verdict,
        template_id=TEMPLATE.id,
        template_version=version,
    )


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


def test_in_flight_calls_never_exceed_the_cap_and_reach_it() -> None:
    judge = ScriptedJudge({"*": GOOD}, delay=0.005)
    engine = JudgeEngine(judge, max_concurrency=4)

    async def many() -> None:
        results = await asyncio.gather(*(_ask(engine, f"q{i}") for i in range(40)))
        assert all(r.ok for r in results)

    run(many())
    assert judge.max_in_flight == 4
    assert engine.stats.max_in_flight == 4
    assert len(judge.calls) == 40


def test_cap_counts_calls_not_jobs_across_retries() -> None:
    # Every job fails once then succeeds: 20 jobs make 40 calls, still at most 3 in flight.
    judge = ScriptedJudge({"*": [ServerError("503"), GOOD]}, delay=0.002)

    def fresh() -> ScriptedJudge:
        return ScriptedJudge({"*": [ServerError("503"), GOOD]}, delay=0.002)

    judges = [fresh() for _ in range(20)]

    class Fanout:
        model = "fanout"

        async def generate(self, messages, *, schema=None):  # type: ignore[no-untyped-def]
            index = int(messages[1]["content"].split("q")[1].split("\n")[0])
            judge.in_flight += 1
            judge.max_in_flight = max(judge.max_in_flight, judge.in_flight)
            try:
                return await judges[index].generate(messages, schema=schema)
            finally:
                judge.in_flight -= 1

    engine = JudgeEngine(Fanout(), max_concurrency=3, sleep=Sleeps())

    async def many() -> None:
        results = await asyncio.gather(*(_ask(engine, f"q{i}") for i in range(20)))
        assert all(r.ok for r in results)

    run(many())
    assert engine.stats.calls == 40
    assert judge.max_in_flight <= 3


def test_transient_errors_are_retried_with_backoff_then_succeed() -> None:
    sleeps = Sleeps()
    judge = ScriptedJudge({"*": [ServerError("502"), RateLimited(retry_after=7.0), GOOD]})
    engine = JudgeEngine(judge, sleep=sleeps, seed=3, backoff_base=1.0, backoff_max=10.0)
    result = run(_ask(engine))
    assert result.value == Verdict(**GOOD)
    assert result.usage.calls == 3
    assert engine.stats.retries == 2
    assert 0.0 <= sleeps.durations[0] <= 1.0  # full jitter under base * 2^0
    assert sleeps.durations[1] == 7.0  # the provider's retry_after wins


def test_exhausted_retry_budget_is_a_typed_failure_not_an_exception() -> None:
    judge = ScriptedJudge({"*": RateLimited()})
    engine = JudgeEngine(judge, max_retries=2, sleep=Sleeps())
    result = run(_ask(engine))
    assert result.value is None
    assert result.failure is not None
    assert result.failure.kind is FailureKind.RATE_LIMITED
    assert "gave up after 3 attempts" in result.failure.message
    assert len(judge.calls) == 3
    assert result.usage.calls == 3


def test_backoff_grows_exponentially_up_to_the_maximum() -> None:
    sleeps = Sleeps()
    engine = JudgeEngine(
        ScriptedJudge({"*": ServerError("x")}),
        max_retries=8,
        backoff_base=1.0,
        backoff_max=5.0,
        sleep=sleeps,
        seed=0,
    )
    run(_ask(engine))
    ceilings = [min(5.0, 2.0**i) for i in range(8)]
    assert len(sleeps.durations) == 8
    assert all(0 <= d <= c for d, c in zip(sleeps.durations, ceilings, strict=True))
    assert max(sleeps.durations[3:]) > 2.0  # later waits really are longer


def test_permanent_and_unexpected_errors_are_not_retried() -> None:
    for error in (PermanentJudgeError("401 unauthorized"), KeyError("adapter bug")):
        judge = ScriptedJudge({"*": error})
        result = run(_ask(JudgeEngine(judge, sleep=Sleeps())))
        assert result.failure is not None
        assert result.failure.kind is FailureKind.JUDGE_ERROR
        assert len(judge.calls) == 1
    assert "KeyError" in (result.failure.message if result.failure else "")


def test_timeout_per_attempt() -> None:
    judge = ScriptedJudge({"*": GOOD}, delay=5.0)
    engine = JudgeEngine(judge, timeout=0.01, max_retries=1, sleep=Sleeps())
    result = run(_ask(engine))
    assert result.failure is not None
    assert result.failure.kind is FailureKind.TIMEOUT
    assert len(judge.calls) == 2


@pytest.mark.parametrize(
    "text",
    [
        '{"ok": true, "why": "because"}',
        'Sure!\n```json\n{"ok": true, "why": "because"}\n```\nHope that helps.',
        'My verdict: {"ok": true, "why": "because"} — final.',
        '```\n{"ok": true, "why": "because"}\n```',
    ],
)
def test_fenced_json_and_prose_around_the_object_are_tolerated(text: str) -> None:
    judge = ScriptedJudge({"*": text})
    result = run(_ask(JudgeEngine(judge)))
    assert result.value == Verdict(**GOOD)
    assert len(judge.calls) == 1


def test_invalid_reply_gets_one_repair_that_quotes_the_error() -> None:
    judge = ScriptedJudge({"*": ['{"ok": "maybe"}', GOOD]})
    result = run(_ask(JudgeEngine(judge)))
    assert result.value == Verdict(**GOOD)
    repair = judge.calls[1].messages
    assert repair[-2] == {"role": "assistant", "content": '{"ok": "maybe"}'}
    assert "could not be used" in repair[-1]["content"]
    assert "why" in repair[-1]["content"]  # the missing field is named
    assert result.usage.calls == 2


def test_still_invalid_after_repair_is_a_parse_error_with_the_reply() -> None:
    judge = ScriptedJudge({"*": "I refuse to answer in JSON."})
    engine = JudgeEngine(judge, max_retries=0)
    result = run(_ask(engine))
    assert result.failure is not None
    assert result.failure.kind is FailureKind.PARSE_ERROR
    assert "no JSON object" in result.failure.message
    assert "I refuse" in result.failure.message
    assert len(judge.calls) == 2  # the attempt and its one repair
    assert engine.stats.failures == 1
    no_repair = ScriptedJudge({"*": "nope"})
    assert run(_ask(JudgeEngine(no_repair, repair=False, max_retries=0))).failure is not None
    assert len(no_repair.calls) == 1


def test_unusable_replies_draw_on_the_retry_budget_after_the_repair() -> None:
    # attempt, repair, then each retry is a fresh attempt plus its own repair
    judge = ScriptedJudge({"*": "still not JSON"})
    result = run(_ask(JudgeEngine(judge, max_retries=2, sleep=Sleeps())))
    assert result.failure is not None
    assert len(judge.calls) == 6
    assert sum(1 for c in judge.calls if len(c.messages) == 2) == 3  # fresh attempts
    # a truncated reply, then a broken repair, then a good fresh attempt: scored
    judge = ScriptedJudge({"*": ['{"ok": tr', "still bad", GOOD]})
    result = run(_ask(JudgeEngine(judge, max_retries=1, sleep=Sleeps())))
    assert result.value == Verdict(**GOOD)
    assert result.usage.calls == 3


def test_failures_are_counted_once_each_whatever_their_kind() -> None:
    script = [RateLimited(), "bad", "bad", PermanentJudgeError("x"), ServerError()]
    engine = JudgeEngine(ScriptedJudge({"*": script}), max_retries=0, sleep=Sleeps())

    async def four() -> list[str]:
        results = [await _ask(engine, f"q{i}") for i in range(4)]
        return [r.failure.kind.value for r in results if r.failure is not None]

    assert run(four()) == ["rate_limited", "parse_error", "judge_error", "judge_error"]
    assert engine.stats.failures == 4


def test_natively_parsed_replies_are_used_and_none_counts_as_unparsed() -> None:
    class Native:
        model = "native"

        async def generate(self, messages, *, schema=None):  # type: ignore[no-untyped-def]
            return JudgeReply(text="", parsed=Verdict(**GOOD), usage=Usage(prompt_tokens=9))

    result = run(_ask(JudgeEngine(Native())))
    assert result.value == Verdict(**GOOD)
    assert result.usage.prompt_tokens == 9


def test_cache_makes_the_second_run_free_and_versions_invalidate(tmp_path: Path) -> None:
    cache = Cache(tmp_path / "c.sqlite")
    judge = ScriptedJudge({"*": GOOD})
    first = run(_ask(JudgeEngine(judge, cache=cache)))
    second = run(_ask(JudgeEngine(judge, cache=Cache(tmp_path / "c.sqlite"))))
    assert len(judge.calls) == 1
    assert second.value == first.value
    assert second.usage == Usage(cached_calls=1)
    run(_ask(JudgeEngine(judge, cache=cache), version="2"))
    assert len(judge.calls) == 2


def test_failures_are_not_cached(tmp_path: Path) -> None:
    cache = Cache(tmp_path / "c.sqlite")
    judge = ScriptedJudge({"*": [PermanentJudgeError("boom"), GOOD]})
    assert run(_ask(JudgeEngine(judge, cache=cache))).failure is not None
    assert run(_ask(JudgeEngine(judge, cache=cache))).ok
    assert len(judge.calls) == 2


def test_counting_judge_answers_any_schema() -> None:
    judge = CountingJudge()
    result = run(_ask(JudgeEngine(judge)))
    assert result.ok
    assert judge.calls == 1
    assert judge.prompt_tokens > 0


def test_cost_of_usage() -> None:
    usage = Usage(prompt_tokens=2_000_000, completion_tokens=500_000)
    assert cost_of(usage, Price(prompt_per_million=0.5, completion_per_million=2.0)) == 2.0
    assert cost_of(usage, None) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('x {"a": "}{", "b": {"c": 1}} y', '{"a": "}{", "b": {"c": 1}}'),
        ('{"a": "say \\"hi\\" {"} tail', '{"a": "say \\"hi\\" {"}'),
        ("no object here", None),
        ("{ unbalanced", None),
    ],
)
def test_extract_json(text: str, expected: str | None) -> None:
    assert extract_json(text) == expected


def test_one_engine_serves_many_event_loops() -> None:
    # evaluate() runs each call on a fresh loop; the engine's semaphore must follow the loop.
    judge = ScriptedJudge({"*": GOOD})
    engine = JudgeEngine(judge, max_concurrency=2)
    for i in range(30):
        assert run(_ask(engine, f"q{i}")).ok
    assert len(judge.calls) == 30


def test_classify_error_maps_provider_exceptions_by_duck_typing() -> None:
    from ragbridge.core.judge import JudgeTimeout, classify_error

    class Response:
        def __init__(self, status: int, headers: dict[str, str] | None = None) -> None:
            self.status_code = status
            self.headers = headers or {}

    class APIStatusError(Exception):
        def __init__(self, status: int, headers: dict[str, str] | None = None) -> None:
            super().__init__(f"HTTP {status}")
            self.response = Response(status, headers)

    class APITimeoutError(Exception):
        pass

    class APIConnectionError(Exception):
        pass

    limited = classify_error(APIStatusError(429, {"retry-after": "3"}))
    assert isinstance(limited, RateLimited)
    assert limited.retry_after == 3.0
    assert isinstance(classify_error(APIStatusError(503)), ServerError)
    assert isinstance(classify_error(APIStatusError(401)), PermanentJudgeError)
    assert isinstance(classify_error(APITimeoutError("slow")), JudgeTimeout)
    assert isinstance(classify_error(TimeoutError()), JudgeTimeout)
    assert isinstance(classify_error(APIConnectionError("reset")), ServerError)
    assert isinstance(classify_error(ValueError("Rate limit reached, slow down")), RateLimited)
    assert classify_error(ValueError("a bug")) is None


def test_free_text_requests_get_retries_and_the_cache(tmp_path: Path) -> None:
    """`complete` serves other frameworks' prompts: no schema, same retries and cache."""
    cache = Cache(tmp_path / "c.sqlite")
    judge = ScriptedJudge({"*": [ServerError("502"), "", "the answer"]})
    messages = [{"role": "user", "content": "Say something."}]

    def complete(engine: JudgeEngine, version: str = "4.3"):  # type: ignore[no-untyped-def]
        return engine.complete(messages, template_id="deepeval", template_version=version)

    first = run(complete(JudgeEngine(judge, cache=cache, sleep=Sleeps())))
    assert first.value == "the answer"
    assert first.usage.calls == 3  # the error, the empty reply (unusable, retried), the answer
    again = run(complete(JudgeEngine(judge, cache=cache)))
    assert again.value == "the answer"
    assert again.usage == Usage(cached_calls=1)
    assert len(judge.calls) == 3
    gave_up = run(complete(JudgeEngine(ScriptedJudge({"*": ""}), max_retries=1)))
    assert gave_up.value is None
    assert gave_up.failure is not None
    assert gave_up.failure.kind is FailureKind.PARSE_ERROR
    assert "non-empty text" in gave_up.failure.message
