"""The judge engine: concurrency cap, retries, timeouts, structured output, cache, cost."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from ragbridge.core.cache.disk import Cache
from ragbridge.core.judging.attempts import next_step
from ragbridge.core.judging.engine import JudgeEngine, Price, cost_of
from ragbridge.core.judging.judge import (
    ConnectionRefused,
    JudgeError,
    JudgeReply,
    JudgeTimeout,
    PermanentJudgeError,
    ProviderUnusable,
    RateLimited,
    ServerError,
)
from ragbridge.core.judging.reply_parse import (
    extract_json,
    parse_reply,
    schema_instruction,
    schema_key_json,
)
from ragbridge.core.prompts import PromptTemplate
from ragbridge.core.results.evaluation import FailureKind, Usage
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


def test_identical_requests_in_flight_at_once_cost_one_call(tmp_path: Path) -> None:
    judge = ScriptedJudge({"*": GOOD}, delay=0.05)
    engine = JudgeEngine(judge, cache=Cache(tmp_path / "c.sqlite"), max_concurrency=4)

    async def three() -> list[Any]:
        return list(await asyncio.gather(_ask(engine), _ask(engine), _ask(engine, "fire hot")))

    first, second, other = run(three())
    assert len(judge.calls) == 2  # one per distinct prompt, whichever finishes first
    assert first.usage.calls == 1
    assert second.usage == Usage(cached_calls=1)
    assert second.value == first.value
    assert other.usage.calls == 1


def test_a_failed_request_in_flight_is_not_shared(tmp_path: Path) -> None:
    judge = ScriptedJudge({"*": [PermanentJudgeError("boom"), GOOD]}, delay=0.05)
    engine = JudgeEngine(judge, cache=Cache(tmp_path / "c.sqlite"))

    async def two() -> list[Any]:
        return list(await asyncio.gather(_ask(engine), _ask(engine)))

    first, second = run(two())
    assert first.failure is not None
    assert second.ok  # the follower made its own call rather than inherit the failure
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
    from ragbridge.core.judging.judge import JudgeTimeout, classify_error

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


# --------------------------------------------------------------------------- reply validation


class Items(BaseModel):
    """A reply with one item per CLAIM block, each citing a context."""

    items: list[Verdict]


def _count_check(expected: int):  # type: ignore[no-untyped-def]
    """A validator with ``facts`` (as `PromptTemplate.checker` builds them)."""

    def check(reply: Items) -> str | None:
        got = len(reply.items)
        return None if got == expected else f"expected {expected} items, got {got}"

    check.facts = {"CLAIM": expected}  # type: ignore[attr-defined]
    return check


def _ask_items(engine: JudgeEngine, validate, question: str = "q"):  # type: ignore[no-untyped-def]
    return engine.ask(
        TEMPLATE.render(question=question),
        Items,
        template_id="test.items",
        template_version="1",
        validate=validate,
    )


ONE = {"items": [GOOD]}
TWO = {"items": [GOOD, GOOD]}


def test_a_reply_that_parses_but_fails_its_request_is_repaired_quoting_the_problem() -> None:
    judge = ScriptedJudge({"*": [TWO, ONE]})
    result = run(_ask_items(JudgeEngine(judge), _count_check(1)))
    assert result.value == Items(items=[Verdict(**GOOD)])
    repair = judge.calls[1].messages
    assert "could not be used: expected 1 items, got 2" in repair[-1]["content"]
    assert result.usage.calls == 2


def test_a_reply_still_wrong_for_its_request_is_a_parse_error_naming_the_task() -> None:
    judge = ScriptedJudge({"*": TWO})
    engine = JudgeEngine(judge, max_retries=1, sleep=Sleeps())
    result = run(_ask_items(engine, _count_check(1)))
    assert result.failure is not None
    assert result.failure.kind is FailureKind.PARSE_ERROR
    assert result.failure.message.startswith("test.items: expected 1 items, got 2; reply: ")
    assert len(judge.calls) == 4  # attempt, repair, fresh attempt (retry), its repair


def test_a_validator_that_raises_rejects_the_reply_not_the_run() -> None:
    def broken(reply: Items) -> str | None:
        raise IndexError("list index out of range")

    result = run(_ask_items(JudgeEngine(ScriptedJudge({"*": ONE}), max_retries=0), broken))
    assert result.failure is not None
    assert "could not be checked (IndexError" in result.failure.message


def test_a_reply_that_failed_validation_is_never_cached(tmp_path: Path) -> None:
    cache = Cache(tmp_path / "c.sqlite")
    wrong = ScriptedJudge({"*": TWO})
    assert run(_ask_items(JudgeEngine(wrong, cache=cache, max_retries=0), _count_check(1))).failure
    assert cache.stats().replies == 0
    right = ScriptedJudge({"*": ONE})
    assert run(_ask_items(JudgeEngine(right, cache=cache), _count_check(1))).ok
    assert len(right.calls) == 1  # nothing stale was served from the cache
    (row,) = cache.reply_rows()
    assert row.facts == {"CLAIM": 1}  # stored so `ragbridge cache prune --failed` can recheck
    assert row.template_id == "test.items"
    assert row.template_version == "1"


def test_an_old_cached_reply_that_fails_todays_check_is_a_miss_and_is_replaced(
    tmp_path: Path,
) -> None:
    cache = Cache(tmp_path / "c.sqlite")
    # An entry written before replies were validated: it parses, but has 2 items for 1 claim.
    unchecked = JudgeEngine(ScriptedJudge({"*": TWO}), cache=cache)
    assert run(_ask_items(unchecked, None)).ok
    judge = ScriptedJudge({"*": ONE})
    engine = JudgeEngine(judge, cache=cache)
    result = run(_ask_items(engine, _count_check(1)))
    assert result.value == Items(items=[Verdict(**GOOD)])
    assert len(judge.calls) == 1
    assert engine.stats.stale == 1
    again = JudgeEngine(ScriptedJudge({"*": TWO}), cache=cache)
    assert run(_ask_items(again, _count_check(1))).usage == Usage(cached_calls=1)  # replaced


# --------------------------------------------------------------------------- stopping early


def _fail_all(error: Exception, **engine: object) -> tuple[ScriptedJudge, JudgeEngine, list]:  # type: ignore[type-arg]
    judge = ScriptedJudge({"*": error}, delay=0.001)
    eng = JudgeEngine(judge, sleep=Sleeps(), **engine)  # type: ignore[arg-type]

    async def many() -> list:  # type: ignore[type-arg]
        return list(await asyncio.gather(*(_ask(eng, f"q{i}") for i in range(20))))

    return judge, eng, run(many())


def test_identical_unusable_provider_failures_stop_the_engine_after_stop_after() -> None:
    from ragbridge.core.judging.judge import ProviderUnusable

    error = ProviderUnusable("HTTP 401: bad key", cause="401 Unauthorized", hint="check the key")
    judge, engine, results = _fail_all(error, max_concurrency=8, stop_after=5)
    # Until the provider replies once, at most stop_after calls are in the air: 5, not 8.
    assert len(judge.calls) == 5
    kinds = [r.failure.kind for r in results]
    assert kinds.count(FailureKind.JUDGE_ERROR) == 5
    assert kinds.count(FailureKind.CANCELLED) == 15
    line = "judge: 401 Unauthorized on 5/5 calls — check the key"
    assert engine.breaker.line == line
    refused = [r for r in results if r.failure.kind is FailureKind.CANCELLED]
    assert all(r.failure.message == f"not sent: {line}" for r in refused)
    assert all(r.usage.calls == 0 for r in refused)
    assert engine.stats.refused == 15


def test_unusable_errors_are_not_retried() -> None:
    from ragbridge.core.judging.judge import ProviderUnusable

    judge = ScriptedJudge({"*": ProviderUnusable("404", cause="404 unknown model")})
    result = run(_ask(JudgeEngine(judge, sleep=Sleeps())))
    assert result.failure is not None
    assert len(judge.calls) == 1


def test_a_reply_in_between_resets_the_count_and_other_causes_do_not_add_up() -> None:
    from ragbridge.core.judging.judge import ProviderUnusable

    def bad(cause: str) -> ProviderUnusable:
        return ProviderUnusable(cause, cause=cause)

    script = [bad("401"), bad("401"), GOOD, bad("401"), bad("401"), bad("403"), bad("401")]
    engine = JudgeEngine(ScriptedJudge({"*": script}), stop_after=3, sleep=Sleeps())

    async def one_by_one() -> None:
        for i in range(len(script)):
            await _ask(engine, f"q{i}")

    run(one_by_one())
    assert not engine.breaker.tripped
    assert engine.breaker.streak == 1


def test_permanent_errors_of_one_request_never_stop_the_run() -> None:
    judge, engine, _ = _fail_all(PermanentJudgeError("400 prompt too long"), stop_after=2)
    assert len(judge.calls) == 20
    assert not engine.breaker.tripped


def test_a_refused_connection_is_retried_once_then_counts_as_unusable() -> None:
    from ragbridge.core.judging.judge import ConnectionRefused

    refused = ConnectionRefused("refused", cause="connection refused at X", hint="is X running?")
    judge, engine, _ = _fail_all(refused, stop_after=3)
    assert len(judge.calls) == 6  # 3 calls, each tried twice
    assert engine.breaker.line == "judge: connection refused at X on 3/3 calls — is X running?"
    blip = ScriptedJudge({"*": [refused, GOOD]})
    assert run(_ask(JudgeEngine(blip, sleep=Sleeps()))).ok  # a server restarting: healed


def test_calls_that_time_out_on_every_attempt_count_towards_stopping() -> None:
    judge = ScriptedJudge({"*": GOOD}, delay=5.0)
    engine = JudgeEngine(judge, timeout=0.01, max_retries=1, stop_after=2, sleep=Sleeps())

    async def many() -> list:  # type: ignore[type-arg]
        return list(await asyncio.gather(*(_ask(engine, f"q{i}") for i in range(6))))

    results = run(many())
    assert len(judge.calls) == 4  # 2 calls x 2 attempts, then the rest are not sent
    assert engine.breaker.line is not None
    assert engine.breaker.line.startswith("judge: no reply within 0.01 s on 2/2 calls")
    assert sum(r.failure.kind is FailureKind.TIMEOUT for r in results) == 2
    # Without retries a single timeout proves little: chance lines those up at high fault rates.
    single = JudgeEngine(
        ScriptedJudge({"*": GOOD}, delay=5.0), timeout=0.01, max_retries=0, stop_after=2
    )

    async def single_attempts() -> None:
        for i in range(4):
            await _ask(single, f"q{i}")

    run(single_attempts())
    assert not single.breaker.tripped


def test_a_tripped_breaker_stops_retries_in_progress() -> None:
    from ragbridge.core.judging.limits import Outcome

    engine = JudgeEngine(ScriptedJudge({"*": ServerError("503")}), stop_after=1)

    async def another_call_trips_it_meanwhile(_: float) -> None:
        engine.breaker.settle(Outcome.UNUSABLE, "401")

    engine.sleep = another_call_trips_it_meanwhile
    result = run(_ask(engine))
    assert result.failure is not None
    assert result.failure.kind is FailureKind.CANCELLED
    assert result.failure.message.startswith("not retried: judge: 401")


def test_the_engine_tells_adapters_its_attempt_timeout() -> None:
    from ragbridge.core.judging.judge import attempt_timeout

    seen: list[float | None] = []

    class Probe:
        model = "probe"

        async def generate(self, messages, *, schema=None):  # type: ignore[no-untyped-def]
            seen.append(attempt_timeout.get())
            return JudgeReply(text='{"ok": true, "why": "w"}')

    run(_ask(JudgeEngine(Probe(), timeout=7.5)))
    assert seen == [7.5]
    assert attempt_timeout.get() is None  # reset after the call


def test_classify_error_gives_unusable_providers_a_cause_and_a_hint() -> None:
    import socket

    from ragbridge.core.judging.judge import ConnectionRefused, ProviderUnusable, classify_error

    class Response:
        def __init__(self, status: int) -> None:
            self.status_code = status
            self.headers: dict[str, str] = {}

    class APIStatusError(Exception):
        def __init__(self, status: int, message: str = "") -> None:
            super().__init__(message or f"HTTP {status}")
            self.response = Response(status)

    class APIConnectionError(Exception):
        pass

    unauthorized = classify_error(APIStatusError(401))
    assert isinstance(unauthorized, ProviderUnusable)
    assert unauthorized.cause == "401 Unauthorized"
    assert unauthorized.hint
    model = classify_error(APIStatusError(404, "The model `gpt-9` does not exist"))
    assert isinstance(model, ProviderUnusable)
    assert model.cause == "404 unknown model"
    assert model.hint == "unknown model: check the model name"
    assert isinstance(classify_error(APIStatusError(400, "too long")), PermanentJudgeError)
    assert not isinstance(classify_error(APIStatusError(400)), ProviderUnusable)
    quota = classify_error(APIStatusError(429, "insufficient_quota: exceeded your current quota"))
    assert isinstance(quota, ProviderUnusable)

    # SDKs wrap the transport error: the fact is down the chain.
    def wrapped(inner: BaseException) -> BaseException:
        try:
            try:
                raise inner
            except BaseException as exc:
                raise APIConnectionError("Connection error.") from exc
        except APIConnectionError as outer:
            return outer

    refused = classify_error(wrapped(ConnectionRefusedError(111, "Connection refused")))
    assert isinstance(refused, ConnectionRefused)
    unresolved = classify_error(wrapped(socket.gaierror(-2, "Name or service not known")))
    assert isinstance(unresolved, ProviderUnusable)
    assert unresolved.cause == "the host name does not resolve"

    class UnsupportedProtocol(Exception):
        pass

    scheme = classify_error(
        UnsupportedProtocol("Request URL is missing an 'http://' or 'https://' protocol.")
    )
    assert isinstance(scheme, ProviderUnusable)
    assert "http://" in (scheme.hint or "")
    reset = classify_error(wrapped(ConnectionResetError(104, "Connection reset by peer")))
    assert isinstance(reset, ServerError)
    assert not isinstance(reset, ConnectionRefused)


def test_calls_queued_for_a_slot_when_the_breaker_trips_are_not_sent_nor_counted() -> None:
    from ragbridge.core.judging.judge import ProviderUnusable

    revoked = ProviderUnusable("401", cause="401 Unauthorized")
    judge = ScriptedJudge({"*": [GOOD, revoked]}, delay=0.001)
    engine = JudgeEngine(judge, max_concurrency=1, stop_after=1)

    async def many() -> list:  # type: ignore[type-arg]
        first = await _ask(engine, "q0")  # a reply: calls are no longer held back
        rest = await asyncio.gather(*(_ask(engine, f"q{i}") for i in range(1, 6)))
        return [first, *rest]

    results = run(many())
    assert len(judge.calls) == 2
    assert engine.breaker.line == "judge: 401 Unauthorized on 1/2 calls"
    assert [r.failure.kind for r in results[2:]] == [FailureKind.CANCELLED] * 4


def _same_name_schemas() -> tuple[type[BaseModel], type[BaseModel]]:
    """Two schema classes both named ``Answer`` whose fields differ."""

    class Answer(BaseModel):
        ok: bool

    first = Answer

    class Answer(BaseModel):  # type: ignore[no-redef]
        ok: bool
        why: str

    return first, Answer


def test_the_memoised_schema_is_per_class_never_per_name(tmp_path: Path) -> None:
    first, second = _same_name_schemas()
    assert first.__name__ == second.__name__
    assert schema_instruction(first) != schema_instruction(second)
    assert '"why"' in schema_instruction(second)
    assert '"why"' not in schema_instruction(first)
    assert schema_key_json(first) != schema_key_json(second)
    # ...and so the same messages asked with either schema are two requests, not one hit.
    judge = ScriptedJudge({"*": GOOD})
    engine = JudgeEngine(judge, cache=Cache(tmp_path / "c.sqlite"))
    messages = [{"role": "user", "content": "Is water wet?"}]
    for schema in (first, second, first, second):
        call = run(engine.ask(messages, schema, template_id="t", template_version="1"))
        assert isinstance(call.value, schema)
    assert len(judge.calls) == 2


def test_the_schema_is_built_once_per_class_not_per_call(monkeypatch: pytest.MonkeyPatch) -> None:
    class Counted(BaseModel):
        ok: bool
        why: str

    built = []
    original = Counted.model_json_schema

    def counting(*args: Any, **kwargs: Any) -> dict[str, Any]:
        built.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(Counted, "model_json_schema", counting)
    template = PromptTemplate(
        id="test.counted", version="1", system="You judge.", user="Is $question?", schema=Counted
    )
    engine = JudgeEngine(ScriptedJudge({"*": GOOD}), cache=Cache(":memory:"))

    async def many() -> None:
        for i in range(20):
            call = await engine.ask(
                template.render(question=f"q{i}"),
                Counted,
                template_id=template.id,
                template_version=template.version,
            )
            assert call.ok

    run(many())
    assert len(built) <= 2  # once for the prompt's schema text, once for the cache key


@pytest.mark.parametrize(
    "text",
    [
        '{"ok": true, "why": "plain"}',
        '  \n{"ok": false, "why": "padded"}\n ',
        '{"ok": true, "why": "x"} and then some prose',
        '{"ok": true, "why": "see ```{\\"ok\\": false, \\"why\\": \\"fenced\\"}```"}',
        '{"ok": "maybe", "why": "wrong type"}',
        '{"ok": true}',
        "{not json}",
    ],
)
def test_parse_reply_agrees_with_extracting_the_object_first(text: str) -> None:
    # The fast path for replies that are just the object must give what the general path gives.
    value, problem = parse_reply(text, Verdict)
    candidate = extract_json(text)
    if candidate is None:
        assert value is None
        assert problem is not None
        return
    try:
        expected: Verdict | None = Verdict.model_validate_json(candidate)
    except Exception:
        expected = None
    assert value == expected
    assert (problem is None) == (expected is not None)


@pytest.mark.parametrize(
    ("error", "refused_once", "retries_left", "step"),
    [
        (ProviderUnusable("401"), False, 4, "unusable"),
        (PermanentJudgeError("400"), False, 4, "permanent"),
        (JudgeError("plain"), False, 4, "permanent"),
        (ConnectionRefused("refused"), False, 4, "retry"),
        (ConnectionRefused("refused"), True, 4, "unusable"),
        (ConnectionRefused("refused"), False, 0, "unusable"),
        (JudgeTimeout("slow"), False, 1, "retry"),
        (JudgeTimeout("slow"), False, 0, "exhausted"),
        (RateLimited("429"), False, 0, "exhausted"),
        (ServerError("500"), True, 2, "retry"),
    ],
)
def test_one_retry_policy_for_judge_and_embedder(
    error: JudgeError, refused_once: bool, retries_left: int, step: str
) -> None:
    assert next_step(error, refused_once=refused_once, retries_left=retries_left) == step
