"""Token log-probabilities through the judging stack, for a criterion that weights its score.

End to end against the suite's fake OpenAI-compatible server (`tests/fake_openai.py`, a real
socket on 127.0.0.1): `OpenAIJudge` asks for them when the engine says so, they arrive as
`TokenLogprob`s in order and spell the reply, the cache (SQLite and Redis, the same bytes)
gives them back on a rerun with no call, a server that refuses them still answers (without),
and a judge that knows nothing of them (the scripted test judges) gives None.
"""

from __future__ import annotations

import asyncio
import math
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, SecretStr

pytest.importorskip("httpx")

from fake_openai import DEFAULT_LOGPROB, FakeOpenAI

from ragbridge.adapters.openai import OpenAIJudge
from ragbridge.core.cache.backend import CacheBackend
from ragbridge.core.cache.disk import Cache
from ragbridge.core.cache.request_key import cache_key
from ragbridge.core.cache.stored import CachedReply, logprobs_json, read_logprobs
from ragbridge.core.judging.engine import JudgeCall, JudgeEngine
from ragbridge.core.judging.judge import JudgeReply, Message, TokenLogprob, logprobs_wanted
from ragbridge.core.judging.logprobs import FLOOR, openai_logprobs
from ragbridge.core.metrics.base import MetricContext
from ragbridge.core.prompts.graders import GRADER_CORRECTNESS, GraderVerdict
from ragbridge.core.testing import ScriptedJudge

pytest_plugins = ["redis_server"]


class Scored(BaseModel):
    """The reply of a scored criterion, as small as it gets."""

    reason: str
    score: int


MESSAGES: list[Message] = [
    {"role": "system", "content": "You score answers from 1 to 5."},
    {"role": "user", "content": "Score the answer. Reply with a JSON object."},
]

# P(4) = 0.7, P(3) = 0.2, P(5) = 0.1: the expected score is 0.7*4 + 0.2*3 + 0.1*5 = 3.9.
SCORE_TOKEN = ("4", math.log(0.7), {"4": math.log(0.7), "3": math.log(0.2), "5": math.log(0.1)})
SCORED = ['{"', "reason", '":"', "fine", '","', "score", '":', SCORE_TOKEN, "}"]
SCORED_TEXT = '{"reason":"fine","score":4}'


def serve(**kw: Any) -> FakeOpenAI:
    """The fake server answering `SCORED_TEXT`: as `SCORED`'s tokens when asked for them."""
    return FakeOpenAI(**{"answer": lambda _: SCORED_TEXT, "logprobs": [SCORED], **kw})


def expected_score(logprobs: Sequence[TokenLogprob]) -> float:
    """The probability-weighted score of the first digit token, by hand (G-Eval's mean)."""
    token = next(t for t in logprobs if t.token.isdigit())
    weights = {int(k): math.exp(v) for k, v in token.top.items() if k.isdigit()}
    return sum(score * p for score, p in weights.items()) / sum(weights.values())


def engine_for(server: FakeOpenAI, cache: CacheBackend | None = None, **kw: Any) -> JudgeEngine:
    judge = OpenAIJudge("gpt-fake", base_url=server.base_url, api_key="dummy", **kw)
    return JudgeEngine(judge, cache=cache, max_retries=1, sleep=_no_wait, seed=0)


async def _no_wait(_: float) -> None:
    return None


def ask(engine: JudgeEngine, logprobs: int | None, messages: list[Message] = MESSAGES) -> Any:
    async def run() -> JudgeCall[Scored]:
        try:
            return await engine.ask(
                messages, Scored, template_id="t", template_version="1", logprobs=logprobs
            )
        finally:
            await engine.judge.aclose()  # type: ignore[attr-defined]

    return asyncio.run(run())


def chat_bodies(server: FakeOpenAI) -> list[dict[str, Any]]:
    return [r.body for r in server.requests if r.route == "chat"]


# ------------------------------------------------------------------- through the wire


def test_logprobs_arrive_in_order_and_spell_the_reply() -> None:
    with serve() as server:
        call = ask(engine_for(server), 20)
        (body,) = chat_bodies(server)
    assert call.ok
    assert call.value.score == 4
    assert call.text == SCORED_TEXT
    assert call.logprobs is not None
    tokens = [t.token for t in call.logprobs]
    assert tokens == [t if isinstance(t, str) else t[0] for t in SCORED]
    assert "".join(tokens) == call.text
    four = call.logprobs[tokens.index("4")]
    assert four == TokenLogprob("4", SCORE_TOKEN[1], SCORE_TOKEN[2])
    assert list(four.top) == ["4", "3", "5"]  # the server's order, best first
    assert expected_score(call.logprobs) == pytest.approx(3.9)
    assert (body["logprobs"], body["top_logprobs"]) == (True, 20)


@pytest.mark.parametrize(("asked", "sent"), [(0, 0), (1, 1), (5, 5), (20, 20), (50, 20)])
def test_top_logprobs_sent_is_what_the_request_asked_capped_at_openais_20(
    asked: int, sent: int
) -> None:
    # no script: the answer cut into tokens, each at DEFAULT_LOGPROB with made-up rivals
    with FakeOpenAI(answer=lambda _: SCORED_TEXT) as server:
        call = ask(engine_for(server), asked)
        (body,) = chat_bodies(server)
    assert body["top_logprobs"] == sent
    assert call.ok
    assert call.logprobs
    assert "".join(t.token for t in call.logprobs) == call.text
    assert {len(t.top) for t in call.logprobs} == {sent}
    assert {t.logprob for t in call.logprobs} == {DEFAULT_LOGPROB}


def test_a_request_without_logprobs_sends_none_and_gets_none() -> None:
    with serve() as server:
        call = ask(engine_for(server), None)
        (body,) = chat_bodies(server)
    assert call.ok
    assert call.logprobs is None
    assert "logprobs" not in body
    assert "top_logprobs" not in body


def test_after_a_repair_the_repaired_replys_logprobs_are_the_calls() -> None:
    broken = ["I", " think", " ", ("4", -0.1, {"4": -0.1})]  # prose: not the schema
    with serve(logprobs=[broken, SCORED]) as server:
        call = ask(engine_for(server), 5)
        first, second = chat_bodies(server)
    assert call.ok
    assert call.text == SCORED_TEXT
    assert second["messages"][-2] == {"role": "assistant", "content": "I think 4"}  # the repair
    assert (first["top_logprobs"], second["top_logprobs"]) == (5, 5)
    assert call.logprobs is not None
    assert "".join(t.token for t in call.logprobs) == SCORED_TEXT


def test_a_forced_tool_call_asks_for_no_logprobs() -> None:
    with serve() as server:
        call = ask(engine_for(server, structured="tool"), 20)
        (body,) = chat_bodies(server)
    assert "tools" in body
    assert "logprobs" not in body
    assert call.logprobs is None


def test_a_server_refusing_logprobs_is_asked_again_without_and_remembered() -> None:
    with serve(refuse_logprobs=True) as server:
        engine = engine_for(server)
        call = ask(engine, 20)
        assert len(server.refused_logprobs) == 1  # one 400, then the call without
        (body,) = chat_bodies(server)
        assert "logprobs" not in body
        assert call.ok
        assert call.value.score == 4
        assert call.logprobs is None
        assert call.failure is None
        assert call.usage.calls == 1
        other = engine_for(server)  # another judge object on the same endpoint: remembered
        assert other.judge.logprobs_refused  # type: ignore[attr-defined]
        again = ask(other, 20, [*MESSAGES, {"role": "user", "content": "Again."}])
        assert len(server.refused_logprobs) == 1
        assert again.ok
        assert again.logprobs is None


# ------------------------------------------------------------------- the cache


@pytest.fixture(params=["sqlite", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[CacheBackend]:
    """One cache, SQLite file or Redis database (the redis tests' session server)."""
    if request.param == "sqlite":
        cache: CacheBackend = Cache(tmp_path / "cache.sqlite")
    else:
        pytest.importorskip("redis")
        from ragbridge.adapters.redis_cache import RedisCache

        cache = RedisCache(request.getfixturevalue("redis_url"))
    yield cache
    cache.close()


def test_a_rerun_answers_from_the_cache_with_the_same_logprobs(store: CacheBackend) -> None:
    with serve() as server:
        first = ask(engine_for(server, store), 20)
        rerun_engine = engine_for(server, store)
        rerun = ask(rerun_engine, 20)
        assert server.count("chat") == 1  # 0 calls on the rerun
    assert rerun_engine.stats.cached == 1
    assert rerun.usage.calls == 0
    assert first.logprobs is not None
    assert rerun.logprobs == first.logprobs
    assert expected_score(rerun.logprobs) == expected_score(first.logprobs)  # same weighting


def test_logprobs_are_part_of_the_request(store: CacheBackend) -> None:
    """A reply cached without them is not reused as if it had them, nor one with k=5 for
    k=20; the integer reply text is the same, the weighted score would not be."""
    with serve() as server:
        plain = ask(engine_for(server, store), None)
        five = ask(engine_for(server, store), 5)
        five_again = ask(engine_for(server, store), 5)
        twenty = ask(engine_for(server, store), 20)
        plain_again = ask(engine_for(server, store), None)
        assert server.count("chat") == 3  # None, 5, 20; the repeats are cache hits
    assert plain.logprobs is None
    assert plain_again.logprobs is None
    assert five.logprobs is not None
    assert five_again.logprobs == five.logprobs
    assert twenty.logprobs == five.logprobs  # this server's alternatives fit in 5
    key: dict[str, Any] = {
        "model": "m",
        "template_id": "t",
        "template_version": "1",
        "messages": MESSAGES,
    }
    keys = {cache_key(**key, schema=None, logprobs=k) for k in (None, 0, 5, 20)}
    assert len(keys) == 4
    assert cache_key(**key, schema=None) == cache_key(**key, schema=None, logprobs=None)


def test_a_refusing_servers_reply_is_cached_without_logprobs_and_reused(
    store: CacheBackend,
) -> None:
    """The fallback is kept as it was: a rerun weights nothing either, instead of paying a
    call on every run to find again that the server has none."""
    with serve(refuse_logprobs=True) as server:
        first = ask(engine_for(server, store), 20)
        rerun = ask(engine_for(server, store), 20)
        assert server.count("chat") == 1
        assert len(server.refused_logprobs) == 1
    assert first.ok
    assert rerun.ok
    assert first.logprobs is None
    assert rerun.logprobs is None
    assert rerun.usage.calls == 0


def test_redis_stores_the_bytes_sqlite_stores(redis_url: str, tmp_path: Path) -> None:
    pytest.importorskip("redis")
    import redis

    from ragbridge.adapters.redis_cache import RedisCache

    logprobs = openai_logprobs({"content": [{"token": "é", "logprob": -0.5, "top_logprobs": []}]})
    reply = CachedReply("é", 3, 1, (*(logprobs or ()), TokenLogprob("!", -1e-9, {"?": -3.25})))
    with Cache(tmp_path / "c.sqlite") as sqlite_cache, RedisCache(redis_url) as redis_cache:
        for cache in (sqlite_cache, redis_cache):
            cache.put_reply("k", reply, model="m", template_id="t")
            assert cache.get_reply("k") == reply
    with closing(sqlite3.connect(tmp_path / "c.sqlite")) as raw:
        (in_sqlite,) = raw.execute("SELECT logprobs FROM replies WHERE key = 'k'").fetchone()
    in_redis = redis.Redis.from_url(redis_url).hget("ragbridge:1:reply:k", "logprobs")
    stored = logprobs_json(reply.logprobs)
    assert stored is not None
    assert in_redis == in_sqlite.encode("utf-8") == stored.encode("utf-8")


_LAYOUT_BEFORE_LOGPROBS = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);
INSERT INTO meta VALUES ('schema_version', '1');
CREATE TABLE replies (key TEXT PRIMARY KEY, model TEXT, template_id TEXT, text TEXT,
    prompt_tokens INT, completion_tokens INT, created REAL, template_version TEXT, facts TEXT);
CREATE TABLE embeddings (model TEXT, text_hash TEXT, dim INT, vector BLOB, created REAL,
    PRIMARY KEY (model, text_hash));
INSERT INTO replies VALUES ('old', 'gpt-x', 't', '{"reason":"x","score":2}', 5, 6, 1.0, '1', NULL);
"""


def test_a_cache_file_without_the_column_keeps_working(tmp_path: Path) -> None:
    db = tmp_path / "old.sqlite"
    with closing(sqlite3.connect(db)) as raw, raw:
        raw.executescript(_LAYOUT_BEFORE_LOGPROBS)
    with Cache(db) as cache:
        assert cache.get_reply("old") == CachedReply('{"reason":"x","score":2}', 5, 6)
        with_logprobs = CachedReply(SCORED_TEXT, 1, 2, (TokenLogprob("4", -0.1, {"3": -2.5}),))
        cache.put_reply("new", with_logprobs, model="gpt-x", template_id="t")
        assert cache.get_reply("new") == with_logprobs
        assert [r.key for r in cache.reply_rows()] == ["old", "new"]  # `ragbridge cache` reads
    with closing(sqlite3.connect(db)) as raw, raw:
        # an older ragbridge names the columns it writes: its rows read back without logprobs
        raw.execute(
            "INSERT INTO replies (key, text, prompt_tokens, completion_tokens, created, model, "
            "template_id, template_version, facts) VALUES ('older', 'x', 1, 1, 2.0, 'm', 't', "
            "NULL, NULL)"
        )
    with Cache(db) as cache:
        assert cache.get_reply("older") == CachedReply("x", 1, 1)
        assert cache.get_reply("new") == with_logprobs


def test_unreadable_stored_logprobs_are_a_miss_and_get_replaced(tmp_path: Path) -> None:
    db = tmp_path / "c.sqlite"
    with serve() as server, Cache(db) as cache:
        first = ask(engine_for(server, cache), 20)
        with closing(sqlite3.connect(db)) as raw, raw:
            raw.execute('UPDATE replies SET logprobs = \'[["4", "not a number", []]]\'')
        again = ask(engine_for(server, cache), 20)
        assert server.count("chat") == 2  # asked again, not answered without its logprobs
        assert again.logprobs == first.logprobs
        third = ask(engine_for(server, cache), 20)
        assert server.count("chat") == 2
        assert third.logprobs == first.logprobs


@pytest.mark.parametrize("stored", ["{", "[1]", '[["a", true, []]]', '[["a", -1, [["b"]]]]'])
def test_read_logprobs_refuses_what_logprobs_json_never_writes(stored: str) -> None:
    with pytest.raises(ValueError, match="unreadable"):
        read_logprobs(stored)


# ------------------------------------------------------------------- judges and callers


class _Noting:
    """A judge that notes what `logprobs_wanted` says during each call and may return some."""

    model = "noting"

    def __init__(self, reply: JudgeReply) -> None:
        self.reply = reply
        self.seen: list[int | None] = []

    async def generate(
        self, messages: Sequence[Message], *, schema: type[BaseModel] | None = None
    ) -> JudgeReply:
        self.seen.append(logprobs_wanted.get())
        return self.reply


def test_a_judge_that_ignores_the_wish_gives_none() -> None:
    scripted = ScriptedJudge({"*": {"reason": "fine", "score": 4}})
    call = ask(_closing(scripted), 20)
    assert call.ok
    assert call.value.score == 4
    assert call.logprobs is None


def test_the_engine_says_what_each_call_wants_and_nothing_outside() -> None:
    judge = _Noting(JudgeReply(SCORED_TEXT))
    engine = _closing(judge)
    ask(engine, 7)
    ask(engine, None, [*MESSAGES, {"role": "user", "content": "plain"}])
    token = logprobs_wanted.set(3)  # an outer wish does not leak into a request without one
    try:
        ask(engine, None, [*MESSAGES, {"role": "user", "content": "outer"}])
    finally:
        logprobs_wanted.reset(token)
    assert judge.seen == [7, None, None]
    assert logprobs_wanted.get() is None


def test_prompt_template_and_metric_context_pass_logprobs_on() -> None:
    verdict = GraderVerdict(explanation="ok", verdict=True).model_dump_json()
    tokens = (TokenLogprob(verdict, -0.5, {verdict: -0.5}),)
    judge = _Noting(JudgeReply(verdict, logprobs=tokens))
    values: dict[str, Any] = {"question": "q?", "answer": "a", "reference": "a"}

    async def run() -> tuple[JudgeCall[Any], JudgeCall[Any], JudgeCall[Any]]:
        engine = JudgeEngine(judge)
        by_template = await GRADER_CORRECTNESS.ask(engine, logprobs=4, **values)
        by_metric = await MetricContext(judge=engine).ask(
            GRADER_CORRECTNESS, logprobs=9, **{**values, "answer": "b"}
        )
        plain = await MetricContext(judge=engine).ask(GRADER_CORRECTNESS, **values)
        return by_template, by_metric, plain

    by_template, by_metric, plain = asyncio.run(run())
    assert judge.seen == [4, 9, None]
    assert by_template.logprobs == tokens
    assert by_metric.logprobs == tokens
    assert plain.logprobs is None  # given by the judge, but not asked for: not kept


def test_logprobs_are_checked_before_they_are_kept() -> None:
    nan = (TokenLogprob("{", float("nan")),)
    rough = (TokenLogprob(SCORED_TEXT, 1e-12, {"x": float("-inf"), "y": float("nan")}),)
    assert ask(_closing(_Noting(JudgeReply(SCORED_TEXT, logprobs=nan))), 5).logprobs is None
    kept = ask(_closing(_Noting(JudgeReply(SCORED_TEXT, logprobs=rough))), 5).logprobs
    assert kept == (TokenLogprob(SCORED_TEXT, 0.0, {"x": FLOOR}),)


def test_a_native_parsed_replys_logprobs_are_kept_only_when_they_spell_its_text() -> None:
    parsed = Scored(reason="fine", score=4)
    tokens = (TokenLogprob("4", -0.1),)
    native = _Noting(JudgeReply("ignored", parsed=parsed, logprobs=tokens))
    assert ask(_closing(native), 5).logprobs is None
    spelt = (TokenLogprob(parsed.model_dump_json(), -0.1),)
    same = _Noting(JudgeReply(parsed.model_dump_json(), parsed=parsed, logprobs=spelt))
    assert ask(_closing(same), 5).logprobs == spelt


def test_a_negative_count_is_refused() -> None:
    with pytest.raises(ValueError, match="logprobs must be None or an int >= 0"):
        ask(_closing(_Noting(JudgeReply(SCORED_TEXT))), -1)


def _closing(judge: Any) -> JudgeEngine:
    """An engine whose judge has an ``aclose`` (what `ask` calls after the request)."""

    async def aclose() -> None:
        return None

    judge.aclose = aclose
    return JudgeEngine(judge, max_retries=0, sleep=_no_wait)


# ------------------------------------------------------------------- LangChain chat models


def test_chatopenai_is_asked_for_logprobs_and_they_are_read_from_its_metadata() -> None:
    pytest.importorskip("langchain_openai")
    from langchain_openai import ChatOpenAI

    from ragbridge.adapters.langchain.models import LangChainJudge

    with serve() as server:
        model = ChatOpenAI(model="gpt-fake", base_url=server.base_url, api_key=SecretStr("dummy"))
        engine = JudgeEngine(LangChainJudge(model), max_retries=0, sleep=_no_wait)

        async def run() -> JudgeCall[str]:
            return await engine.complete(
                MESSAGES, template_id="t", template_version="1", logprobs=20
            )

        call = asyncio.run(run())
        (body,) = chat_bodies(server)
    assert (body["logprobs"], body["top_logprobs"]) == (True, 20)
    assert call.text == SCORED_TEXT
    assert call.logprobs is not None
    assert expected_score(call.logprobs) == pytest.approx(3.9)


def test_chatopenai_refusing_logprobs_answers_without() -> None:
    pytest.importorskip("langchain_openai")
    from langchain_openai import ChatOpenAI

    from ragbridge.adapters.langchain.models import LangChainJudge

    with serve(refuse_logprobs=True) as server:
        model = ChatOpenAI(
            model="gpt-fake", base_url=server.base_url, api_key=SecretStr("dummy"), max_retries=0
        )
        judge = LangChainJudge(model)
        engine = JudgeEngine(judge, max_retries=0, sleep=_no_wait)

        async def run() -> list[JudgeCall[str]]:
            return [
                await engine.complete(
                    [*MESSAGES, {"role": "user", "content": text}],
                    template_id="t",
                    template_version="1",
                    logprobs=5,
                )
                for text in ("one", "two")
            ]

        calls = asyncio.run(run())
        assert len(server.refused_logprobs) == 1  # refused once, not asked again
    assert [c.text for c in calls] == [SCORED_TEXT, SCORED_TEXT]
    assert [c.logprobs for c in calls] == [None, None]


def test_a_langchain_models_metadata_logprobs_are_read_when_present() -> None:
    pytest.importorskip("langchain_core")
    from langchain_core.language_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage

    from ragbridge.adapters.langchain.models import LangChainJudge

    raw = {"content": [{"token": "ok", "logprob": -0.2, "top_logprobs": []}]}
    model = GenericFakeChatModel(
        messages=iter([AIMessage(content="ok", response_metadata={"logprobs": raw})] * 2)
    )
    engine = JudgeEngine(LangChainJudge(model), max_retries=0, sleep=_no_wait)

    async def run(logprobs: int | None, text: str) -> JudgeCall[str]:
        messages = [*MESSAGES, {"role": "user", "content": text}]
        return await engine.complete(
            messages, template_id="t", template_version="1", logprobs=logprobs
        )

    asked = asyncio.run(run(3, "a"))
    assert asked.text == "ok"
    assert asked.logprobs == (TokenLogprob("ok", -0.2, {}),)
    assert asyncio.run(run(None, "b")).logprobs is None
