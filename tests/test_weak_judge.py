"""A weak local judge (issue 28): constrained replies in the server's dialect, a completion
budget per request, and a breaker for replies that never fit.

The dialect tests run the real adapter and engine against `tests/fake_openai.py` on 127.0.0.1,
speaking three servers' dialects of ``response_format``: llama-cpp-python's (a 500 for OpenAI's
``json_schema``, a grammar for ``json_object`` with a ``schema``), OpenAI's (strict
``json_schema``), and a server that takes plain requests only. The breaker tests use scripted
judges that reply in JSON that never fits, as Gemma 3 270M does in JSON mode.
"""

from __future__ import annotations

import asyncio
import re
import textwrap
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("httpx")

from fake_openai import FakeOpenAI, response_format_kind

from ragbridge.adapters.cli import main
from ragbridge.adapters.openai import DEFAULT_MAX_TOKENS, OpenAIJudge
from ragbridge.adapters.openai_dialect import dialects, forget_dialects, strict_schema
from ragbridge.core import JudgeEngine, Sample, evaluate
from ragbridge.core.judging.engine import JudgeCall
from ragbridge.core.judging.judge import JudgeReply, Message
from ragbridge.core.judging.reply_format import ReplySpec, reply_spec, spec_of
from ragbridge.core.metrics import Faithfulness
from ragbridge.core.prompts.answer_analyze import ANSWER_ANALYZE
from ragbridge.core.prompts.faithfulness import FAITHFULNESS_VERIFY, ClaimVerdicts
from ragbridge.core.results.evaluation import FailureKind
from ragbridge.core.sample import Context, save_samples
from ragbridge.core.testing import ScriptedJudge, minimal_reply

CLAIMS = ["Leave is 20 days.", "Leave needs a manager's approval.", "The canteen opens at 8."]
CONTEXTS = ["Leave is 20 days a year.", "Managers approve leave."]
NOT_THE_SCHEMA = '{"claims": [true], "questions": [true], "noncommittal": false}'
"""What Gemma 3 270M answered ``answer.analyze`` with in JSON mode: JSON, not the schema."""

NEVER_FIT = re.compile(
    r"judge gemma: (\d+) of \1 replies to answer\.analyze did not follow the reply format "
    r"\(last: claims\.0: Input should be a valid string; [^)]*\) — use a stronger model$"
)
FEW = 2 * (1 + 4) + 8
"""Calls a judge whose replies never fit may cost at most: one request's attempts and repairs
(``max_retries=4``) plus one reply of each other call in flight (``max_concurrency=8``)."""


@pytest.fixture(autouse=True)
def _fresh_dialects() -> Iterator[None]:
    forget_dialects()
    yield
    forget_dialects()


def _verify_many(judge: OpenAIJudge, n: int, **engine: Any) -> tuple[list[JudgeCall[Any]], Any]:
    """``n`` different faithfulness.verify requests at once through one engine."""
    eng = JudgeEngine(judge, **{"timeout": 10.0, "max_retries": 0, **engine})

    async def one(i: int) -> JudgeCall[Any]:
        values = {"claims": CLAIMS, "contexts": [*CONTEXTS, f"Note {i}."]}
        return await eng.ask(
            FAITHFULNESS_VERIFY.render(**values),
            ClaimVerdicts,
            template_id=FAITHFULNESS_VERIFY.id,
            template_version=FAITHFULNESS_VERIFY.version,
            validate=FAITHFULNESS_VERIFY.checker(**values),
        )

    async def go() -> list[JudgeCall[Any]]:
        async with judge:
            return list(await asyncio.gather(*(one(i) for i in range(n))))

    return asyncio.run(go()), eng


def _judge(server: FakeOpenAI, **kw: Any) -> OpenAIJudge:
    return OpenAIJudge("local-model", base_url=server.base_url, api_key=None, **kw)


VERIFY_BUDGET = FAITHFULNESS_VERIFY.reply_budget(claims=CLAIMS, contexts=[*CONTEXTS, "Note 0."])


# --------------------------------------------------------------------------- the dialect ladder


def test_llamacpp_python_500_on_json_schema_is_a_dialect_detected_once_per_endpoint() -> None:
    with FakeOpenAI(formats={"json_object_schema", "json_object"}, refuse="llamacpp") as server:
        calls, engine = _verify_many(_judge(server), 6)

        assert all(c.ok for c in calls), [c.failure for c in calls]
        # One detection round for six calls in flight: one json_schema request refused (a 500
        # that is not retried as a server fault), then every request on the grammar rung.
        assert [response_format_kind(b) for b in server.refused] == ["json_schema"]
        assert engine.stats.retries == 0
        assert dialects.known(server.base_url, "local-model") == "json_object_schema"
        sent = [r.body for r in server.requests]
        assert len(sent) == 6
        for body in sent:
            shape = body["response_format"]
            assert shape["type"] == "json_object"
            verdicts = shape["schema"]["properties"]["verdicts"]
            assert verdicts["minItems"] == verdicts["maxItems"] == len(CLAIMS)  # one per claim
            assert body["max_tokens"] == VERIFY_BUDGET

        # Remembered for the endpoint: a new judge (a new run in this process) detects nothing.
        again, _ = _verify_many(_judge(server), 2)
        assert all(c.ok for c in again)
        assert len(server.refused) == 1
        assert dialects.endpoint(server.base_url, "local-model").probes == 1


def test_a_server_that_takes_openai_strict_json_schema_gets_it_closed() -> None:
    with FakeOpenAI(formats={"json_schema"}, refuse="400") as server:
        calls, _ = _verify_many(_judge(server), 3)
        assert all(c.ok for c in calls)
        assert server.refused == []
        for request in server.requests:
            shape = request.body["response_format"]
            assert shape["type"] == "json_schema"
            assert shape["json_schema"]["strict"] is True
            schema = shape["json_schema"]["schema"]
            assert schema == strict_schema(ClaimVerdicts)
            item = schema["properties"]["verdicts"]["items"]
            assert "$ref" not in str(schema)  # self-contained
            assert item["additionalProperties"] is False
            assert item["required"] == ["reason", "verdict", "context"]
            assert request.body["max_tokens"] == VERIFY_BUDGET
        assert dialects.known(server.base_url, "local-model") == "json_schema"


def test_a_plain_only_server_is_detected_once_then_asked_in_plain_text() -> None:
    with (
        FakeOpenAI(formats=(), refuse="400") as plain,
        FakeOpenAI(formats={"json_schema"}, refuse="400") as strict,
    ):
        calls, _ = _verify_many(_judge(plain), 4)
        assert all(c.ok for c in calls)
        refused = [response_format_kind(b) for b in plain.refused]
        assert refused == ["json_schema", "json_object_schema", "json_object"]
        assert len(plain.requests) == 4
        assert all("response_format" not in r.body for r in plain.requests)
        assert all("tools" not in r.body for r in plain.requests)  # plain text, not a tool
        assert all(r.body["max_tokens"] == VERIFY_BUDGET for r in plain.requests)

        # Per endpoint: the other server keeps its own dialect.
        _verify_many(_judge(strict), 1)
        assert dialects.known(plain.base_url, "local-model") == "none"
        assert dialects.known(strict.base_url, "local-model") == "json_schema"
        _verify_many(_judge(plain), 2)
        assert len(plain.refused) == 3  # nothing detected again


def test_a_500_that_is_not_about_the_format_is_still_a_server_fault() -> None:
    with FakeOpenAI() as server:
        server.script("chat", "500", "ok")
        calls, engine = _verify_many(_judge(server), 1, max_retries=2)
        assert calls[0].ok
        assert engine.stats.retries == 1  # retried as a fault, not stepped past as a dialect
        assert dialects.known(server.base_url, "local-model") == "json_schema"


# --------------------------------------------------------------------------- completion budgets


def test_budgets_grow_with_what_the_reply_lists() -> None:
    few = FAITHFULNESS_VERIFY.reply_budget(claims=CLAIMS[:1], contexts=CONTEXTS)
    many = FAITHFULNESS_VERIFY.reply_budget(claims=CLAIMS * 10, contexts=CONTEXTS)
    assert few is not None
    assert many is not None
    assert few < DEFAULT_MAX_TOKENS < many  # 30 verdicts need more than the old flat 1024
    short = ANSWER_ANALYZE.reply_budget(question="q", answer="Paris.")
    long = ANSWER_ANALYZE.reply_budget(question="q", answer="Paris is the capital. " * 40)
    assert short is not None
    assert long is not None
    assert short < long
    check = FAITHFULNESS_VERIFY.checker(claims=CLAIMS, contexts=CONTEXTS)
    assert spec_of(check) == ReplySpec(max_tokens=check.budget, counts={"verdicts": 3})


def test_every_request_of_a_run_carries_its_budget_and_an_explicit_cap_bounds_it() -> None:
    samples = [
        Sample(
            id=f"s{i}",
            question="How long is leave?",
            answer="Leave is 20 days. Managers approve it.",
            contexts=CONTEXTS,
        )
        for i in range(3)
    ]
    with FakeOpenAI() as server:
        result = evaluate(samples, [Faithfulness()], judge=_judge(server), max_retries=0)
        assert all(row.score.value is not None for row in result)
        budgets = {r.body["messages"][0]["content"].split("]")[0]: r.body["max_tokens"]
                   for r in server.requests}  # fmt: skip
        assert len(budgets) == 2  # answer.analyze and faithfulness.verify, each its own
        assert all(0 < b < DEFAULT_MAX_TOKENS for b in budgets.values())

        capped = _judge(server, max_tokens=100)
        evaluate(samples[:1], [Faithfulness()], judge=capped, max_retries=0, cache=None)
        assert server.requests[-1].body["max_tokens"] == 100


def test_judges_without_budget_support_are_called_as_before() -> None:
    """The budget travels in a context variable: the Judge protocol is unchanged."""
    seen: list[ReplySpec | None] = []

    class Plain:
        model = "plain"

        async def generate(self, messages: Sequence[Message], *, schema: Any = None) -> JudgeReply:
            seen.append(reply_spec.get())
            return JudgeReply(text=minimal_reply(messages, schema))

    sample = Sample(id="s", question="q?", answer="Leave is 20 days.", contexts=CONTEXTS)
    (row,) = list(evaluate([sample], [Faithfulness()], judge=Plain()))
    assert row.score.value is not None
    assert seen
    assert all(s is not None and s.max_tokens for s in seen)
    assert reply_spec.get() is None  # reset after the run


# --------------------------------------------------------------------------- the format breaker


def _samples(n: int) -> list[Sample]:
    return [
        Sample(
            id=f"q{i}",
            question=f"What is fact {i}?",
            answer=f"Fact {i} is that the sky is blue.",
            contexts=[Context(text=f"Fact {i}: the sky is blue.", id=f"d{i}")],
        )
        for i in range(n)
    ]


def test_replies_that_never_fit_stop_the_run_early_with_one_line() -> None:
    judge = ScriptedJudge({"*": NOT_THE_SCHEMA}, model="gemma")
    result = evaluate(_samples(40), [Faithfulness()], judge=judge, max_retries=4)
    line = result.metadata["aborted"]
    assert NEVER_FIT.match(line), line
    assert line.endswith("— use a stronger model")
    assert "\n" not in line
    # A few calls, not 40 samples x (1 + 4 retries) x 2 (each repaired) = 400: the first
    # request's own attempts, then the next request's first reply (two requests at least).
    assert len(judge.calls) <= FEW, len(judge.calls)
    kinds = {row.score.failure.kind for row in result if row.score.failure is not None}
    assert kinds <= {FailureKind.CANCELLED, FailureKind.PARSE_ERROR}


def test_one_request_the_judge_cannot_answer_does_not_stop_the_run() -> None:
    """All ten replies to one sample fail, the others fit: a hard sample, not a weak judge."""

    def analyze(messages: list[Message]) -> str:
        user = messages[1]["content"]
        return NOT_THE_SCHEMA if "fact 3?" in user else minimal_reply(messages)

    judge = ScriptedJudge({"answer.analyze": analyze, "*": minimal_reply}, model="able")
    result = evaluate(_samples(8), [Faithfulness()], judge=judge, max_concurrency=1)
    assert "aborted" not in result.metadata
    failed = [row.sample_id for row in result if row.score.failure is not None]
    assert failed == ["q3"]
    assert list(result)[-1].score.value is not None  # later samples still ran


def test_cli_exit_3_with_one_line_for_a_judge_whose_replies_never_fit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "weak_judge.py").write_text(
        textwrap.dedent(
            f"""
            from ragbridge.core.judging.judge import JudgeReply

            class Weak:
                model = "gemma"
                calls = 0

                async def generate(self, messages, *, schema=None):
                    Weak.calls += 1
                    return JudgeReply(text={NOT_THE_SCHEMA!r})
            """
        )
    )
    monkeypatch.chdir(tmp_path)
    data = tmp_path / "eval.jsonl"
    save_samples(_samples(40), data)
    code = main(
        ["eval", str(data), "--metrics", "faithfulness", "--judge", "python:weak_judge:Weak",
         "--timeout", "120", "--out", str(tmp_path / "r.jsonl")]
    )  # fmt: skip
    _, err = capsys.readouterr()
    assert code == 3, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("ragbridge: error: ")
    assert NEVER_FIT.match(lines[0].removeprefix("ragbridge: error: ")), lines[0]
    import weak_judge  # type: ignore[import-not-found]

    assert weak_judge.Weak.calls <= FEW  # few calls paid, not 400
