"""The OpenAI-compatible adapter against an in-process fake server (``httpx.MockTransport``).

Every test is hermetic: the handler plays the server, records what was sent, and answers the
way OpenAI, vLLM, Ollama or llama.cpp would. The engine tests drive the real `JudgeEngine` so
the adapter's errors and replies are checked for what they make the engine do (retry, repair,
give up), not only for their types.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel

pytest.importorskip("httpx")

import httpx
from fake_openai import FakeOpenAI, free_port

from ragbridge.adapters.openai import (
    DEFAULT_MAX_TOKENS,
    DEFAULT_TIMEOUT,
    INSTALL_HINT,
    KEY_HINT,
    OpenAIEmbedder,
    OpenAIJudge,
)
from ragbridge.adapters.openai_dialect import forget_dialects
from ragbridge.core import Embedder, Judge, JudgeEngine, Sample, evaluate
from ragbridge.core.judging.embedding import EmbeddingEngine, EmbeddingFailed
from ragbridge.core.judging.engine import JudgeCall
from ragbridge.core.judging.judge import (
    ConnectionRefused,
    JudgeError,
    JudgeTimeout,
    PermanentJudgeError,
    ProviderUnusable,
    RateLimited,
    ServerError,
    attempt_timeout,
)
from ragbridge.core.metrics import Correctness
from ragbridge.core.prompts.faithfulness import FAITHFULNESS_VERIFY, ClaimVerdicts
from ragbridge.core.prompts.graders import GRADER_CORRECTNESS
from ragbridge.core.results.evaluation import FailureKind, Usage

KEY = "sk-test-SECRET-0123456789abcdef"
BASE = "http://fake.local/v1"


class Verdict(BaseModel):
    """A tiny schema for engine round trips."""

    reason: str
    ok: bool


MESSAGES = [
    {"role": "system", "content": "You grade things."},
    {"role": "user", "content": "Is water wet? Reply with a JSON object."},
]

Handler = Callable[[httpx.Request], httpx.Response]


class FakeServer:
    """A scripted OpenAI-compatible server: answers from a list (or a function) and records
    every request body and header."""

    def __init__(self, *replies: httpx.Response | Handler) -> None:
        self.replies = list(replies)
        self.requests: list[httpx.Request] = []
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        self.bodies.append(json.loads(request.content))
        reply = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
        return reply(request) if callable(reply) else reply

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(self))


def chat(
    content: str | None = None,
    *,
    tool_args: str | None = None,
    prompt_tokens: int = 11,
    completion_tokens: int = 7,
) -> httpx.Response:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_args is not None:
        message["tool_calls"] = [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "Verdict", "arguments": tool_args},
            }
        ]
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }
    return httpx.Response(200, json=body)


def error(status: int, message: str, headers: dict[str, str] | None = None) -> httpx.Response:
    body = {"error": {"message": message, "type": "invalid_request_error", "code": None}}
    return httpx.Response(status, json=body, headers=headers)


@pytest.fixture(autouse=True)
def _fresh_dialects() -> Any:
    """Every test here talks to its own scripted server behind the same URL: none inherits the
    dialect (``structured="auto"``) a previous test's server answered on."""
    forget_dialects()
    yield
    forget_dialects()


def judge_for(server: FakeServer, **kw: Any) -> OpenAIJudge:
    return OpenAIJudge("gpt-test", base_url=BASE, api_key=KEY, client=server.client(), **kw)


def engine_for(judge: OpenAIJudge, **kw: Any) -> tuple[JudgeEngine, list[float]]:
    """An engine whose backoff sleeps are recorded instead of slept."""
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    return JudgeEngine(judge, sleep=sleep, seed=0, **kw), waits


def ask(engine: JudgeEngine) -> Any:
    return asyncio.run(engine.ask(MESSAGES, Verdict, template_id="t", template_version="1"))


def raised(judge: OpenAIJudge, schema: type[BaseModel] | None = Verdict) -> JudgeError:
    with pytest.raises(JudgeError) as info:
        asyncio.run(judge.generate(MESSAGES, schema=schema))
    return info.value


# --------------------------------------------------------------------------- import fence


def test_import_without_httpx_names_the_extra() -> None:
    code = textwrap.dedent(
        """
        import sys
        sys.modules["httpx"] = None  # makes `import httpx` raise ImportError
        try:
            import ragbridge.adapters.openai
        except ImportError as exc:
            print(exc)
        else:
            print("imported")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert INSTALL_HINT in out.stdout
    assert INSTALL_HINT == 'pip install ".[openai]" (in your ragbridge clone)'
    assert "needs httpx" in out.stdout


# --------------------------------------------------------------------------- requests


def test_json_mode_request_body_and_headers() -> None:
    server = FakeServer(chat('{"reason": "it is", "ok": true}'))
    judge = judge_for(server, max_tokens=256, temperature=0.2, structured="json_object")
    assert isinstance(judge, Judge)
    reply = asyncio.run(judge.generate(MESSAGES, schema=Verdict))

    (request,), (body,) = server.requests, server.bodies
    assert request.method == "POST"
    assert str(request.url) == f"{BASE}/chat/completions"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert body["model"] == "gpt-test"
    assert body["messages"] == MESSAGES  # kept as given: the engine's prompt states the schema
    assert body["max_tokens"] == 256
    assert "max_completion_tokens" not in body  # llama.cpp ignores it
    assert body["temperature"] == 0.2
    assert body["response_format"] == {"type": "json_object"}
    assert "tools" not in body
    assert reply.text == '{"reason": "it is", "ok": true}'
    assert reply.parsed is None  # the engine parses JSON-mode text (and repairs it)


def test_plain_chat_without_schema_or_with_structured_none() -> None:
    server = FakeServer(chat("hello"))
    judge = judge_for(server, structured="none", extra_body={"seed": 7})
    asyncio.run(judge.generate(MESSAGES))
    asyncio.run(judge.generate(MESSAGES, schema=Verdict))
    for body in server.bodies:
        assert "response_format" not in body
        assert "tools" not in body
        assert body["seed"] == 7


def test_key_from_environment_and_none_without_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    server = FakeServer(chat("x"))
    asyncio.run(OpenAIJudge("m", base_url=BASE, client=server.client()).generate(MESSAGES))
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"

    monkeypatch.delenv("OPENAI_API_KEY")
    local = FakeServer(chat("x"))
    asyncio.run(OpenAIJudge("m", base_url=BASE, client=local.client()).generate(MESSAGES))
    assert "authorization" not in local.requests[0].headers  # local servers need none


def test_usage_is_reported() -> None:
    server = FakeServer(
        chat('{"reason": "r", "ok": false}', prompt_tokens=123, completion_tokens=45)
    )
    reply = asyncio.run(judge_for(server).generate(MESSAGES, schema=Verdict))
    assert reply.usage == Usage(prompt_tokens=123, completion_tokens=45)

    engine, _ = engine_for(judge_for(server))
    call = ask(engine)
    assert call.usage == Usage(calls=1, prompt_tokens=123, completion_tokens=45)


def test_missing_usage_is_zero() -> None:
    body = {"choices": [{"message": {"role": "assistant", "content": "hi"}}]}
    server = FakeServer(httpx.Response(200, json=body))
    reply = asyncio.run(judge_for(server).generate(MESSAGES))
    assert reply.usage == Usage()
    assert reply.text == "hi"


# --------------------------------------------------------------------------- structured output


def test_engine_parses_a_json_mode_reply() -> None:
    server = FakeServer(chat('Sure! {"reason": "water is wet", "ok": true}'))
    engine, _ = engine_for(judge_for(server))
    call = ask(engine)
    assert call.ok
    assert call.value == Verdict(reason="water is wet", ok=True)


def test_tool_fallback_after_response_format_is_refused() -> None:
    server = FakeServer(
        error(400, "response_format is not supported by this model"),
        chat(tool_args='{"reason": "by tool", "ok": true}'),
    )
    judge = judge_for(server, structured="json_object")
    reply = asyncio.run(judge.generate(MESSAGES, schema=Verdict))

    first, second = server.bodies
    assert first["response_format"] == {"type": "json_object"}
    assert "response_format" not in second
    assert second["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "Verdict",
                "description": "A tiny schema for engine round trips.",
                "parameters": Verdict.model_json_schema(),
            },
        }
    ]
    assert second["tool_choice"] == {"type": "function", "function": {"name": "Verdict"}}
    assert second["max_tokens"] == 1024
    assert reply.parsed == Verdict(reason="by tool", ok=True)
    assert reply.text == '{"reason": "by tool", "ok": true}'

    # Remembered: the next call goes straight to the tool.
    server.replies = [chat(tool_args='{"reason": "again", "ok": false}')]
    asyncio.run(judge.generate(MESSAGES, schema=Verdict))
    assert "tools" in server.bodies[2]
    assert "response_format" not in server.bodies[2]


def test_unrelated_400_is_not_a_fallback() -> None:
    server = FakeServer(error(400, "messages: too long for the context window"))
    err = raised(judge_for(server))
    assert isinstance(err, PermanentJudgeError)
    assert "too long for the context window" in str(err)
    assert len(server.requests) == 1


def test_tool_mode_arguments_are_parsed() -> None:
    server = FakeServer(chat(tool_args='{"reason": "ok", "ok": true}'))
    judge = judge_for(server, structured="tool")
    reply = asyncio.run(judge.generate(MESSAGES, schema=Verdict))
    assert "tools" in server.bodies[0]
    assert "response_format" not in server.bodies[0]
    assert reply.parsed == Verdict(reason="ok", ok=True)

    engine, _ = engine_for(judge)
    server.replies = [chat(tool_args='{"reason": "ok", "ok": true}')]
    assert ask(engine).value == Verdict(reason="ok", ok=True)


def test_tool_arguments_as_an_object_are_accepted() -> None:
    body = {
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"function": {"name": "Verdict", "arguments": {"reason": "r", "ok": True}}}
                    ],
                }
            }
        ]
    }
    server = FakeServer(httpx.Response(200, json=body))
    reply = asyncio.run(judge_for(server, structured="tool").generate(MESSAGES, schema=Verdict))
    assert reply.parsed == Verdict(reason="r", ok=True)


def test_bad_tool_arguments_go_through_the_engine_repair() -> None:
    server = FakeServer(
        chat(tool_args='{"reason": "forgot the verdict"}'),
        chat(tool_args='{"reason": "fixed", "ok": false}'),
    )
    judge = judge_for(server, structured="tool")
    reply = asyncio.run(judge.generate(MESSAGES, schema=Verdict))
    assert reply.parsed is None
    assert reply.text == '{"reason": "forgot the verdict"}'

    server.replies = [
        chat(tool_args='{"reason": "forgot the verdict"}'),
        chat(tool_args='{"reason": "fixed", "ok": false}'),
    ]
    engine, waits = engine_for(judge)
    call = ask(engine)
    assert call.value == Verdict(reason="fixed", ok=False)
    assert call.usage.calls == 2
    assert waits == []  # a repair is re-asked at once, not backed off
    repair = server.bodies[-1]["messages"]
    assert repair[-2] == {"role": "assistant", "content": '{"reason": "forgot the verdict"}'}
    assert "could not be used" in repair[-1]["content"]
    assert "ok" in repair[-1]["content"]


def test_tool_mode_reply_in_prose_is_left_to_the_engine() -> None:
    server = FakeServer(chat('I will not call tools. {"reason": "prose", "ok": true}'))
    judge = judge_for(server, structured="tool")
    reply = asyncio.run(judge.generate(MESSAGES, schema=Verdict))
    assert reply.parsed is None
    engine, _ = engine_for(judge)
    assert ask(engine).value == Verdict(reason="prose", ok=True)


# --------------------------------------------------------------------------- errors


def test_429_is_rate_limited_with_retry_after_and_the_engine_waits() -> None:
    server = FakeServer(
        error(429, "Rate limit reached", headers={"Retry-After": "7"}),
        chat('{"reason": "after the wait", "ok": true}'),
    )
    judge = judge_for(server)
    err = raised(judge)
    assert isinstance(err, RateLimited)
    assert err.retry_after == 7.0
    assert "Rate limit reached" in str(err)

    server.replies = [
        error(429, "Rate limit reached", headers={"Retry-After": "7"}),
        chat('{"reason": "after the wait", "ok": true}'),
    ]
    engine, waits = engine_for(judge)
    call = ask(engine)
    assert call.value == Verdict(reason="after the wait", ok=True)
    assert waits == [7.0]
    assert call.usage.calls == 2


def test_429_with_retry_after_ms_and_without_header() -> None:
    server = FakeServer(error(429, "slow down", headers={"retry-after-ms": "1500"}))
    err = raised(judge_for(server))
    assert isinstance(err, RateLimited)
    assert err.retry_after == 1.5
    err = raised(judge_for(FakeServer(error(429, "slow down"))))
    assert isinstance(err, RateLimited)
    assert err.retry_after is None


def test_503_is_a_server_error_and_is_retried() -> None:
    server = FakeServer(
        error(503, "overloaded"), error(502, "bad gateway"), chat('{"reason": "up", "ok": true}')
    )
    judge = judge_for(server)
    assert isinstance(raised(judge), ServerError)
    server.replies = [
        error(503, "overloaded"),
        httpx.Response(502, text="<html>bad gateway</html>"),
        chat('{"reason": "up", "ok": true}'),
    ]
    engine, waits = engine_for(judge)
    call = ask(engine)
    assert call.value == Verdict(reason="up", ok=True)
    assert len(waits) == 2
    assert call.usage.calls == 3


def test_5xx_until_the_budget_is_spent_is_a_typed_failure() -> None:
    server = FakeServer(error(500, "boom"))
    engine, waits = engine_for(judge_for(server), max_retries=2)
    call = ask(engine)
    assert call.value is None
    assert call.failure is not None
    assert call.failure.kind == FailureKind.JUDGE_ERROR
    assert len(server.requests) == 3
    assert len(waits) == 2


def test_timeout_is_judge_timeout() -> None:
    def hang(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    server = FakeServer(hang)
    err = raised(judge_for(server, timeout=3.0))
    assert isinstance(err, JudgeTimeout)
    engine, waits = engine_for(judge_for(server), max_retries=1)
    call = ask(engine)
    assert call.failure is not None
    assert call.failure.kind == FailureKind.TIMEOUT
    assert len(waits) == 1


def test_connection_error_is_a_server_error() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    err = raised(judge_for(FakeServer(refuse)))
    assert isinstance(err, ServerError)
    assert "connection refused" in str(err)


def test_401_is_permanent_and_not_retried() -> None:
    server = FakeServer(error(401, f"Incorrect API key provided: {KEY}."))
    judge = judge_for(server)
    err = raised(judge)
    assert isinstance(err, PermanentJudgeError)
    assert "Incorrect API key provided" in str(err)
    assert KEY not in str(err)  # the server echoed it; we do not

    engine, waits = engine_for(judge)
    call = ask(engine)
    assert call.failure is not None
    assert call.failure.kind == FailureKind.JUDGE_ERROR
    assert KEY not in call.failure.message
    assert len(server.requests) == 2  # one direct, one through the engine: no retry
    assert waits == []


def test_the_key_never_leaks() -> None:
    def echo_key(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError(
            f"refused with {request.headers['authorization']}", request=request
        )

    judge = OpenAIJudge(
        "gpt-test", base_url=BASE, api_key=KEY, client=FakeServer(chat("")).client()
    )
    embedder = OpenAIEmbedder("emb", base_url=BASE, api_key=KEY)
    for obj in (judge, embedder):
        assert KEY not in repr(obj)
        assert KEY not in str(obj)
        assert KEY not in str(vars(obj).get("model", ""))
    replies: list[httpx.Response | Handler] = [
        error(400, f"bad key {KEY}"),
        error(401, f"Incorrect API key provided: {KEY}"),
        error(403, f"forbidden for {KEY}"),
        error(429, f"rate limited {KEY}", headers={"Retry-After": "1"}),
        error(500, f"internal {KEY}"),
        httpx.Response(502, text=f"gateway {KEY}"),
        echo_key,
    ]
    for reply in replies:
        for structured in ("json_object", "tool", "none"):
            err = raised(judge_for(FakeServer(reply), structured=structured))
            assert KEY not in str(err)
            assert KEY not in repr(err)
            assert err.__cause__ is None  # httpx errors hold the request, and so the header
        emb = OpenAIEmbedder("emb", base_url=BASE, api_key=KEY, client=FakeServer(reply).client())
        with pytest.raises(JudgeError) as info:
            asyncio.run(emb.embed(["x"]))
        assert KEY not in str(info.value)


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="structured"):
        OpenAIJudge("m", structured="json_schema")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_tokens"):
        OpenAIJudge("m", max_tokens=0)


def test_malformed_success_body_is_a_server_error() -> None:
    assert isinstance(
        raised(judge_for(FakeServer(httpx.Response(200, text="<html>")))), ServerError
    )
    empty = FakeServer(httpx.Response(200, json={"choices": []}))
    assert isinstance(raised(judge_for(empty)), ServerError)


# --------------------------------------------------------------------------- lifecycle


def test_aclose_and_context_manager() -> None:
    async def run() -> None:
        server = FakeServer(chat("x"))
        client = server.client()
        async with OpenAIJudge("m", base_url=BASE, client=client) as judge:
            await judge.generate(MESSAGES)
        assert not client.is_closed  # an injected client is the caller's to close
        await client.aclose()

        own = OpenAIJudge("m", base_url=BASE)
        async with own:
            pass
        assert own._client.is_closed
        emb = OpenAIEmbedder("e", base_url=BASE)
        await emb.aclose()
        assert emb._client.is_closed

    asyncio.run(run())


# --------------------------------------------------------------------------- embeddings


def test_embeddings_request_order_and_errors() -> None:
    def embeddings(request: httpx.Request) -> httpx.Response:
        texts = json.loads(request.content)["input"]
        data = [
            {"object": "embedding", "index": i, "embedding": [float(len(t)), float(i)]}
            for i, t in enumerate(texts)
        ]
        data.reverse()  # servers may answer out of order; "index" says where each goes
        return httpx.Response(200, json={"data": data, "usage": {"prompt_tokens": 3}})

    server = FakeServer(embeddings)
    emb = OpenAIEmbedder(
        "text-embedding-test", base_url=BASE, api_key=KEY, dimensions=2, client=server.client()
    )
    assert isinstance(emb, Embedder)
    vectors = asyncio.run(emb.embed(["a", "bbb", "cc"]))
    assert vectors == [[1.0, 0.0], [3.0, 1.0], [2.0, 2.0]]
    (request,), (body,) = server.requests, server.bodies
    assert str(request.url) == f"{BASE}/embeddings"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert body == {"model": "text-embedding-test", "input": ["a", "bbb", "cc"], "dimensions": 2}
    assert asyncio.run(emb.embed([])) == []
    assert len(server.requests) == 1

    for reply, kind in (
        (error(429, "slow", headers={"Retry-After": "2"}), RateLimited),
        (error(503, "down"), ServerError),
        (error(400, "bad input"), PermanentJudgeError),
        (httpx.Response(200, json={"data": []}), ServerError),
    ):
        bad = OpenAIEmbedder("e", base_url=BASE, client=FakeServer(reply).client())
        with pytest.raises(kind):
            asyncio.run(bad.embed(["x"]))

    def hang(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    slow = OpenAIEmbedder("e", base_url=BASE, client=FakeServer(hang).client())
    with pytest.raises(JudgeTimeout):
        asyncio.run(slow.embed(["x"]))


# --------------------------------------------------------------------------- end to end


def test_evaluate_end_to_end_with_correctness() -> None:
    """The real metric, prompt, engine and runner; the fake server grades by the task tag."""

    def grader(request: httpx.Request) -> httpx.Response:
        messages = json.loads(request.content)["messages"]
        system, user = messages[0]["content"], messages[-1]["content"]
        if "[ragbridge task: grader.correctness v2]" not in system:
            return error(400, f"unexpected task: {system[:80]}")
        correct = "Paris" in user.split("<<<BEGIN ANSWER>>>")[-1].split("<<<END ANSWER>>>")[0]
        verdict = {"explanation": "compared with the reference", "verdict": correct}
        return chat(json.dumps(verdict), prompt_tokens=100, completion_tokens=20)

    server = FakeServer(grader)
    judge = judge_for(server)
    samples = [
        Sample(id="s1", question="Capital of France?", answer="Paris.", reference="Paris"),
        Sample(id="s2", question="Capital of France?", answer="Lyon.", reference="Paris"),
    ]
    result = evaluate(samples, [Correctness()], judge=judge, max_retries=0)
    scores = {row.sample_id: row.score for row in result}
    assert scores["s1"].value == 1.0
    assert scores["s2"].value == 0.0
    assert scores["s1"].reason == "compared with the reference"
    assert scores["s1"].usage.prompt_tokens == 100
    assert len(server.requests) == 2
    for body in server.bodies:
        # the server took the first rung: OpenAI's strict JSON schema, closed
        assert body["response_format"]["type"] == "json_schema"
        assert body["response_format"]["json_schema"]["strict"] is True
        assert body["response_format"]["json_schema"]["schema"]["additionalProperties"] is False
        assert body["max_tokens"] == GRADER_CORRECTNESS.reply_budget() < DEFAULT_MAX_TOKENS
        assert body["model"] == "gpt-test"


# --------------------------------------------------------------------------- llama.cpp (opt-in)

LLAMACPP_URL = os.environ.get("RAGBRIDGE_LLAMACPP_URL")


class Flag(BaseModel):
    """A one-boolean schema: a tool-call grammar makes a tiny model's reply short and valid."""

    ok: bool


async def _wait_until_up(client: httpx.AsyncClient, url: str, seconds: float = 120.0) -> None:
    """The server was just started by tox: poll ``/models`` until it answers."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while True:
        try:
            if (await client.get(f"{url}/models", timeout=5.0)).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if loop.time() > deadline:
            pytest.fail(f"no llama.cpp server answered at {url} within {seconds:g} s")
        await asyncio.sleep(0.5)


@pytest.mark.llamacpp
@pytest.mark.skipif(
    not LLAMACPP_URL,
    reason="set RAGBRIDGE_LLAMACPP_URL to a llama.cpp server's /v1 URL (tox -e llamacpp does)",
)
def test_llamacpp_server_end_to_end() -> None:
    """The adapter against a real OpenAI-compatible server: a forced tool call, the detected
    dialect of constrained replies with its budget, usage, and `evaluate` with a real metric.
    Gemma 3 270M is a base model that grades at chance, so this checks the plumbing (every cell
    scored or a parse failure, never a judge error), not the grades."""
    assert LLAMACPP_URL is not None
    url = LLAMACPP_URL.rstrip("/")

    async def run() -> None:
        async with httpx.AsyncClient() as client:
            await _wait_until_up(client, url)
            tool = OpenAIJudge(
                "gemma3-270m", base_url=url, structured="tool", max_tokens=64, client=client
            )
            reply = await tool.generate(
                [{"role": "user", "content": "Is the sky blue? Answer with the tool."}],
                schema=Flag,
            )
            assert isinstance(reply.parsed, Flag), reply.text
            assert reply.usage.prompt_tokens > 0
            assert reply.usage.completion_tokens > 0

            # The default, structured="auto": llama-cpp-python's server answers OpenAI's
            # json_schema with an HTTP 500 and takes the schema as a grammar with json_object.
            auto = OpenAIJudge("gemma3-270m", base_url=url, client=client)
            engine = JudgeEngine(auto, timeout=180.0, max_retries=1)
            values = {"claims": ["The sky is blue."], "contexts": ["The sky is blue by day."]}
            call = await engine.ask(
                FAITHFULNESS_VERIFY.render(**values),
                ClaimVerdicts,
                template_id=FAITHFULNESS_VERIFY.id,
                template_version=FAITHFULNESS_VERIFY.version,
                validate=FAITHFULNESS_VERIFY.checker(**values),
            )
            assert auto.dialect == "json_object_schema"
            assert engine.stats.retries == 0  # the 500 was a dialect, not a fault
            # The grammar makes the reply parse, with one verdict per claim; a context number
            # out of range can still fail the request's check.
            assert call.ok or (call.failure and call.failure.kind == FailureKind.PARSE_ERROR)
            budget = FAITHFULNESS_VERIFY.reply_budget(**values)
            assert budget is not None
            assert 0 < call.usage.completion_tokens <= budget * engine.stats.calls

    asyncio.run(run())

    judge = OpenAIJudge("gemma3-270m", base_url=url, structured="tool", max_tokens=192)
    samples = [Sample(id="s1", question="Capital of France?", answer="Paris.", reference="Paris")]
    result = evaluate(samples, [Correctness()], judge=judge, timeout=300.0, max_retries=1)
    (row,) = list(result)
    assert row.score.value is not None or (
        row.score.failure is not None and row.score.failure.kind == FailureKind.PARSE_ERROR
    ), row.score
    assert row.score.usage.prompt_tokens > 0


# --------------------------------------------------------------------------- a real server
#
# The same adapter against `tests/fake_openai.py`: a real HTTP server on 127.0.0.1, so timeouts,
# resets and refused connections happen on a socket, as they do in production.

CLAIMS = ["Leave is 20 days.", "Leave needs a manager's approval."]
CONTEXTS = ["Leave is 20 days a year.", "Managers approve leave.", "The canteen opens at 8."]
TRANSIENT = ("500", "429", "hang", "reset", "garbage", "truncated")


@pytest.fixture
def fake_openai() -> Any:
    with FakeOpenAI(retry_after=0.05, hang_seconds=30) as server:
        yield server


def _verify(judge: OpenAIJudge, **engine: Any) -> tuple[JudgeCall[Any], JudgeEngine, list[float]]:
    """faithfulness.verify through a real engine (its reply check included)."""
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    eng = JudgeEngine(judge, sleep=sleep, seed=0, **{"timeout": 1.0, **engine})
    values = {"claims": CLAIMS, "contexts": CONTEXTS}

    async def go() -> JudgeCall[Any]:
        async with judge:
            return await eng.ask(
                FAITHFULNESS_VERIFY.render(**values),
                ClaimVerdicts,
                template_id=FAITHFULNESS_VERIFY.id,
                template_version=FAITHFULNESS_VERIFY.version,
                validate=FAITHFULNESS_VERIFY.checker(**values),
            )

    return asyncio.run(go()), eng, waits


def _embed(embedder: OpenAIEmbedder, **engine: Any) -> tuple[Any, EmbeddingEngine, list[float]]:
    """Two texts through a real embedding engine; the vectors, or the EmbeddingFailed."""
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    eng = EmbeddingEngine(embedder, sleep=sleep, seed=0, **{"timeout": 1.0, **engine})

    async def go() -> Any:
        async with embedder:
            try:
                return await eng.embed(["leave policy", "canteen hours"])
            except EmbeddingFailed as exc:
                return exc

    return asyncio.run(go()), eng, waits


def _judge(server: FakeOpenAI, model: str = "gpt-fake") -> OpenAIJudge:
    return OpenAIJudge(model, base_url=server.base_url, api_key="dummy")


def _embedder(server: FakeOpenAI) -> OpenAIEmbedder:
    return OpenAIEmbedder("embed-fake", base_url=server.base_url, api_key="dummy")


def test_fake_server_ok_on_both_routes(fake_openai: FakeOpenAI) -> None:
    call, _, _ = _verify(_judge(fake_openai))
    assert call.ok
    assert len(call.value.verdicts) == len(CLAIMS)
    vectors, _, _ = _embed(_embedder(fake_openai))
    assert isinstance(vectors, list)
    assert len(vectors) == 2
    (chat_request,) = [r for r in fake_openai.requests if r.route == "chat"]
    assert chat_request.headers["authorization"] == "Bearer dummy"
    assert chat_request.body["model"] == "gpt-fake"
    assert fake_openai.count("embeddings") == 1


@pytest.mark.parametrize("mode", TRANSIENT)
def test_transient_faults_on_the_judge_route_are_retried(
    fake_openai: FakeOpenAI, mode: str
) -> None:
    fake_openai.script("chat", mode, "ok")
    started = time.monotonic()
    call, engine, waits = _verify(_judge(fake_openai))
    assert call.ok, call.failure
    assert fake_openai.count("chat") == 2
    assert engine.stats.retries == 1
    if mode == "429":
        assert waits == [0.05]  # the server's Retry-After
    if mode == "hang":
        assert time.monotonic() - started < 5  # bounded by the engine's 1 s attempt timeout


@pytest.mark.parametrize("mode", [*TRANSIENT, "wrong"])
def test_transient_faults_on_the_embeddings_route_are_retried(
    fake_openai: FakeOpenAI, mode: str
) -> None:
    fake_openai.script("embeddings", mode, "ok")
    vectors, engine, _ = _embed(_embedder(fake_openai))
    assert isinstance(vectors, list), vectors
    assert len(vectors) == 2
    assert fake_openai.count("embeddings") == 2
    assert engine.stats.retries == 1


def test_a_wrong_but_valid_judge_reply_is_repaired(fake_openai: FakeOpenAI) -> None:
    fake_openai.script("chat", "wrong", "ok")
    call, _, waits = _verify(_judge(fake_openai))
    assert call.ok
    assert len(call.value.verdicts) == 2
    repair = fake_openai.requests[1].body["messages"]
    assert "expected 2 verdicts (one per claim), got 3" in repair[-1]["content"]
    assert waits == []  # a repair is asked at once
    fake_openai.script("chat", "wrong")
    call, _, _ = _verify(_judge(fake_openai), max_retries=0)
    assert call.failure is not None
    assert call.failure.kind is FailureKind.PARSE_ERROR
    assert call.failure.message.startswith("faithfulness.verify: expected 2 verdicts")


@pytest.mark.parametrize(
    ("mode", "cause", "hint"),
    [
        ("401", "401 Unauthorized", KEY_HINT),
        ("404", "404 unknown model 'gpt-fake'", "unknown model: check the model name"),
    ],
)
def test_unusable_provider_errors_are_not_retried_and_say_the_fix(
    fake_openai: FakeOpenAI, mode: str, cause: str, hint: str
) -> None:
    fake_openai.script("chat", mode)
    fake_openai.script("embeddings", mode)
    call, engine, waits = _verify(_judge(fake_openai), stop_after=1)
    assert call.failure is not None
    assert call.failure.kind is FailureKind.JUDGE_ERROR
    assert fake_openai.count("chat") == 1
    assert waits == []
    assert engine.breaker.line == f"judge: {cause} on 1/1 calls — {hint}"
    failed, embed_engine, _ = _embed(_embedder(fake_openai), stop_after=1)
    assert isinstance(failed, EmbeddingFailed)
    assert fake_openai.count("embeddings") == 1
    assert embed_engine.breaker.line is not None
    assert embed_engine.breaker.line.startswith(f"embedder: {mode} ")
    assert embed_engine.breaker.line.endswith(hint)
    err = raised(_judge(fake_openai))
    assert isinstance(err, ProviderUnusable)
    assert (err.cause, err.hint) == (cause, hint)


def test_a_hung_server_costs_the_engine_timeout_per_attempt(fake_openai: FakeOpenAI) -> None:
    fake_openai.script("chat", "hang")
    fake_openai.script("embeddings", "hang")
    started = time.monotonic()
    call, _, _ = _verify(_judge(fake_openai), timeout=0.3, max_retries=1)
    assert call.failure is not None
    assert call.failure.kind is FailureKind.TIMEOUT
    failed, _, _ = _embed(_embedder(fake_openai), timeout=0.3, max_retries=1)
    assert isinstance(failed, EmbeddingFailed)
    assert failed.failure.kind is FailureKind.TIMEOUT
    assert time.monotonic() - started < 4  # 2 x 2 attempts of 0.3 s, not 2 x 2 x 60 s
    assert fake_openai.count() == 4


def test_the_adapter_follows_the_engine_timeout_and_an_explicit_one_caps_it(
    fake_openai: FakeOpenAI,
) -> None:
    fake_openai.script("chat", "hang")

    async def direct(judge: OpenAIJudge, engine_timeout: float | None) -> JudgeError:
        token = attempt_timeout.set(engine_timeout)
        try:
            async with judge:
                with pytest.raises(JudgeError) as info:
                    await judge.generate(MESSAGES)
                return info.value
        finally:
            attempt_timeout.reset(token)

    started = time.monotonic()
    err = asyncio.run(direct(_judge(fake_openai), 0.2))
    assert isinstance(err, JudgeTimeout)
    assert err.cause == "no reply within 0.2 s"
    capped = OpenAIJudge("m", base_url=fake_openai.base_url, api_key="k", timeout=0.2)
    err = asyncio.run(direct(capped, 30.0))
    assert err.cause == "no reply within 0.2 s"
    assert time.monotonic() - started < 3
    assert _judge(fake_openai).timeout is None  # follows the engine; alone: DEFAULT_TIMEOUT
    assert DEFAULT_TIMEOUT == 60.0


def test_connection_refused_is_retried_once_then_stops_with_the_url() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    call, engine, waits = _verify(OpenAIJudge("m", base_url=url, api_key="k"), stop_after=1)
    assert call.failure is not None
    assert call.usage.calls == 2
    assert len(waits) == 1
    assert engine.breaker.line == (
        f"judge: connection refused at {url} on 1/1 calls — is the server at {url} running?"
    )
    err = raised(OpenAIJudge("m", base_url=url, api_key="k"))
    assert isinstance(err, ConnectionRefused)
    failed, embed_engine, _ = _embed(OpenAIEmbedder("e", base_url=url), stop_after=1)
    assert isinstance(failed, EmbeddingFailed)
    assert embed_engine.breaker.tripped


def test_a_password_in_the_base_url_stays_out_of_every_message() -> None:
    """A base_url may carry credentials (``//user:secret@host``): the breaker line, the
    failure and the judge's repr show it masked (before, the password was printed)."""
    port = free_port()
    url = f"http://amy:hunter2@127.0.0.1:{port}/v1"
    judge = OpenAIJudge("m", base_url=url, api_key="k")
    call, engine, _ = _verify(judge, stop_after=1)
    assert call.failure is not None
    shown = [engine.breaker.line or "", call.failure.message, repr(judge)]
    assert all("hunter2" not in text for text in shown), shown
    assert f"http://amy:***@127.0.0.1:{port}/v1" in engine.breaker.line


@pytest.mark.parametrize("url", ["127.0.0.1:8000/v1", "localhost:8000/v1", "ftp://host/v1"])
def test_a_base_url_without_http_scheme_is_refused_at_once(url: str) -> None:
    for cls in (OpenAIJudge, OpenAIEmbedder):
        with pytest.raises(ValueError, match="--base-url must start with http:// or https://"):
            cls("m", base_url=url)


def test_quota_exhausted_is_unusable_not_rate_limited() -> None:
    server = FakeServer(error(429, "You exceeded your current quota, please check your plan"))
    err = raised(judge_for(server))
    assert isinstance(err, ProviderUnusable)
    assert err.cause == "429 quota exceeded"


def test_404_without_model_in_the_message_points_at_the_base_url() -> None:
    err = raised(judge_for(FakeServer(error(404, "Not Found"))))
    assert isinstance(err, ProviderUnusable)
    assert err.cause == f"404 Not Found at {BASE}/chat/completions"
    assert err.hint == "check --base-url (it usually ends in /v1)"


def test_the_fake_server_stops_at_once_while_a_request_hangs() -> None:
    server = FakeOpenAI(hang_seconds=60)
    server.script("chat", "hang")
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{server.base_url}/chat/completions", json={"messages": []}, timeout=0.2)
    started = time.monotonic()
    server.close()
    assert time.monotonic() - started < 3
    assert server.count("chat", "hang") == 1
    with pytest.raises(httpx.ConnectError):
        httpx.post(f"{server.base_url}/chat/completions", json={}, timeout=1)


def test_a_host_that_does_not_resolve_is_unusable_and_names_the_host() -> None:
    def unresolved(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno -2] Name or service not known", request=request)

    err = raised(judge_for(FakeServer(unresolved)))
    assert isinstance(err, ProviderUnusable)
    assert err.cause == "cannot resolve host 'fake.local'"
    assert err.hint == "check the host in --base-url"
