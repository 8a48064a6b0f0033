"""G-Eval's probability-weighted score (issue 30): by hand on token lists, through the engine
with a judge that gives log-probabilities, and end to end on the fake OpenAI-compatible server."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic import BaseModel

from ragbridge.core.criteria import Aspect, Criterion, criteria_metrics
from ragbridge.core.criteria.weighting import value_offset, weighted_score
from ragbridge.core.judging.engine import JudgeEngine
from ragbridge.core.judging.judge import JudgeReply, Message, TokenLogprob, logprobs_wanted
from ragbridge.core.metrics import MetricContext
from ragbridge.core.results.evaluation import Score, Usage
from ragbridge.core.sample import Sample

SAMPLE = Sample(id="w1", question="Is it polite?", answer="Thank you for asking.")

P = {"4": 0.6, "3": 0.3, "5": 0.1}
EXPECTED = 0.6 * 4 + 0.3 * 3 + 0.1 * 5  # 3.8, by hand


def tok(text: str, p: float = 1.0, top: dict[str, float] | None = None) -> TokenLogprob:
    return TokenLogprob(text, math.log(p), {k: math.log(v) for k, v in (top or {}).items()})


def scored_tokens(top: dict[str, float], chosen: str = "4") -> list[TokenLogprob]:
    return [
        tok('{"'),
        tok("reason"),
        tok('":"'),
        tok('Polite, \\"score\\": 1 is wrong'),  # a reason that mentions the key
        tok('","'),
        tok("score"),
        tok('":'),
        tok(chosen, top.get(chosen, 0.5), top),
        tok("}"),
    ]


def text_of(tokens: Sequence[TokenLogprob]) -> str:
    return "".join(t.token for t in tokens)


# -------------------------------------------------------------------- by hand


def test_weighted_score_is_the_hand_computed_expectation() -> None:
    tokens = scored_tokens(P)
    assert weighted_score(text_of(tokens), tokens, field="score", scale=(1, 5)) == (
        pytest.approx(EXPECTED),
        "logprobs",
    )


def test_mass_outside_the_scale_is_dropped_and_the_rest_renormalised() -> None:
    top = {"4": 0.5, "2": 0.25, "four": 0.15, "9": 0.1}  # "four" is no level, 9 is off the scale
    tokens = scored_tokens(top)
    weighted = weighted_score(text_of(tokens), tokens, field="score", scale=(1, 5))
    assert weighted is not None
    assert weighted[0] == pytest.approx((0.5 * 4 + 0.25 * 2) / 0.75)


def test_spellings_of_one_level_count_together() -> None:
    top = {"4": 0.4, " 4": 0.2, "3": 0.4}
    tokens = scored_tokens(top)
    weighted = weighted_score(text_of(tokens), tokens, field="score", scale=(1, 5))
    assert weighted is not None
    assert weighted[0] == pytest.approx(0.6 * 4 + 0.4 * 3)


def test_a_nested_field_of_a_batch_reply() -> None:
    tokens = [
        tok('{"short":{"reason":"ok","verdict":true},'),
        tok('"tone":{"reason":"fine","score":'),
        tok("2", 0.5, {"2": 0.5, "1": 0.5}),
        tok("}}"),
    ]
    weighted = weighted_score(text_of(tokens), tokens, field="tone.score", scale=(1, 5))
    assert weighted == (pytest.approx(1.5), "logprobs")
    assert weighted_score(text_of(tokens), tokens, field="score", scale=(1, 5)) is None


@pytest.mark.parametrize(
    ("tokens", "text"),
    [
        (None, '{"score":4}'),
        ([], '{"score":4}'),
        ([tok('{"score":'), tok("4"), tok("}")], '{"score":4}'),  # no alternatives given
        ([tok('{"score":'), tok("1", 0.9, {"1": 0.9}), tok("0"), tok("}")], '{"score":10}'),
        ([tok('{"reason":"x"}')], '{"reason":"x"}'),  # no score at all
        ([tok('{"score":'), tok("4", 0.9, {"4": 0.9}), tok("}")], '{"score":3}'),  # other reply
        ([tok('{"score":'), tok("x", 0.9, {"x": 0.9}), tok("4}")], '{"score":4}'),
    ],
    ids=["none", "empty", "no-top", "two-tokens", "no-score", "other-reply", "not-a-level"],
)
def test_no_weighted_score_when_the_logprobs_cannot_say(
    tokens: list[TokenLogprob] | None, text: str
) -> None:
    assert weighted_score(text, tokens, field="score", scale=(1, 10)) is None


def test_value_offset_finds_keys_not_mentions() -> None:
    text = '{"reason":"the \\"score\\": 5 here","score": 3}'
    at = value_offset(text, "score")
    assert at is not None
    assert text[at] == "3"
    assert value_offset('{"a":{"score":1},"score":2}', "score") == len('{"a":{"score":1},"score":')
    assert value_offset('{"a":[{"score":1}]}', "score") is None
    assert value_offset("no json", "score") is None


# -------------------------------------------------------------------- through the engine


@dataclass
class LogprobJudge:
    """Answers a scored criterion and gives log-probabilities when the engine asks for them."""

    top: dict[str, float] = field(default_factory=lambda: dict(P))
    give: bool = True
    model: str = "logprob-judge"
    asked: list[int | None] = field(default_factory=list)

    async def generate(
        self, messages: Sequence[Message], *, schema: type[BaseModel] | None = None
    ) -> JudgeReply:
        wanted = logprobs_wanted.get()
        self.asked.append(wanted)
        tokens = scored_tokens(self.top)
        text = text_of(tokens)
        return JudgeReply(
            text=text,
            usage=Usage(prompt_tokens=10, completion_tokens=10),
            logprobs=tuple(tokens) if wanted and self.give else None,
        )


def score_with(judge: Any, spec: Criterion) -> Score:
    ctx = MetricContext(judge=JudgeEngine(judge, max_retries=0, timeout=None))
    return asyncio.run(spec.metric().score(SAMPLE, ctx))


SPEC = Criterion("polite", "Is the answer polite?", evaluation_steps=("Read it.",))


def test_a_scored_criterion_asks_for_logprobs_and_weights_its_score() -> None:
    judge = LogprobJudge()
    s = score_with(judge, SPEC)
    assert judge.asked == [20]
    assert isinstance(s.details, dict)
    assert s.details["weighting"] == "logprobs"
    assert s.details["raw"] == pytest.approx(EXPECTED)
    assert s.details["score"] == 4  # the integer the judge wrote, kept beside
    assert s.value == pytest.approx((EXPECTED - 1) / 4)


def test_without_logprobs_the_score_is_the_integer() -> None:
    s = score_with(LogprobJudge(give=False), SPEC)
    assert isinstance(s.details, dict)
    assert s.details["weighting"] == "integer"
    assert s.details["raw"] == 4
    assert s.value == pytest.approx(0.75)


def test_aspects_and_rubrics_ask_for_no_logprobs() -> None:
    asked: list[int | None] = []

    class Judge(LogprobJudge):
        async def generate(
            self, messages: Sequence[Message], *, schema: type[BaseModel] | None = None
        ) -> JudgeReply:
            asked.append(logprobs_wanted.get())
            return JudgeReply(text='{"reason":"r","verdict":true}')

    ctx = MetricContext(judge=JudgeEngine(Judge(), max_retries=0, timeout=None))
    asyncio.run(Aspect("a", "x").metric().score(SAMPLE, ctx))
    assert asked == [None]


def test_a_batch_weights_each_criterion_at_its_own_score() -> None:
    class BatchJudge(LogprobJudge):
        async def generate(
            self, messages: Sequence[Message], *, schema: type[BaseModel] | None = None
        ) -> JudgeReply:
            self.asked.append(logprobs_wanted.get())
            tokens = [
                tok('{"polite":{"reason":"ok","score":'),
                tok("4", 0.6, P),
                tok('},"short":{"reason":"yes","verdict":true}}'),
            ]
            return JudgeReply(text=text_of(tokens), logprobs=tuple(tokens))

    judge = BatchJudge()
    metrics = criteria_metrics([SPEC, Aspect("short", "Short?")], batch=True)
    ctx = MetricContext(judge=JudgeEngine(judge, max_retries=0, timeout=None))

    async def both() -> list[Score]:
        return list(await asyncio.gather(*(m.score(SAMPLE, ctx) for m in metrics)))

    polite, short = asyncio.run(both())
    assert judge.asked == [20]
    assert isinstance(polite.details, dict)
    assert polite.details["weighting"] == "logprobs"
    assert polite.details["raw"] == pytest.approx(EXPECTED)
    assert short.value == 1.0


# -------------------------------------------------------------------- the fake server


def test_on_a_fake_openai_server_the_weighted_score_is_the_expectation() -> None:
    pytest.importorskip("httpx")
    from fake_openai import FakeOpenAI

    from ragbridge.adapters.openai import OpenAIJudge

    tokens: list[Any] = [
        '{"',
        "reason",
        '":"',
        "polite",
        '","',
        "score",
        '":',
        ("4", math.log(0.6), {k: math.log(v) for k, v in P.items()}),
        "}",
    ]
    text = '{"reason":"polite","score":4}'
    with FakeOpenAI(answer=lambda _: text, logprobs=[tokens]) as server:
        judge = OpenAIJudge("gpt-fake", base_url=server.base_url, api_key="dummy")
        s = score_with(judge, SPEC)
        bodies = [r.body for r in server.requests if r.route == "chat"]
    assert bodies[0]["logprobs"] is True
    assert bodies[0]["top_logprobs"] == 20
    assert isinstance(s.details, dict)
    assert s.details["weighting"] == "logprobs"
    assert s.details["raw"] == pytest.approx(EXPECTED)

    with FakeOpenAI(answer=lambda _: text, refuse_logprobs=True) as server:
        judge = OpenAIJudge("gpt-fake", base_url=server.base_url, api_key="dummy")
        s = score_with(judge, SPEC)
    assert isinstance(s.details, dict)
    assert s.details["weighting"] == "integer"
    assert s.details["raw"] == 4
