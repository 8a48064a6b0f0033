"""30% of judge calls fail at random: with retries every cell still gets its fault-free value;
without retries every unscored cell is a typed failure with a message. Never NaN."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest
from pydantic import BaseModel

from ragbridge.core import Context, JudgeEngine, Sample, evaluate
from ragbridge.core.judging.judge import JudgeReply, JudgeTimeout, Message, RateLimited, ServerError
from ragbridge.core.metrics import AnswerRelevance, ContextPrecision, ContextRecall, Faithfulness
from ragbridge.core.testing import CountingJudge, HashEmbedder


@dataclass
class FlakyJudge:
    """Wraps a judge; fails ``rate`` of calls: timeout, rate limit, malformed or truncated JSON."""

    inner: CountingJudge
    rate: float = 0.3
    seed: int = 0
    model: str = "flaky"
    injected: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    async def generate(
        self, messages: Sequence[Message], *, schema: type[BaseModel] | None = None
    ) -> JudgeReply:
        if self._rng.random() >= self.rate:
            return await self.inner.generate(messages, schema=schema)
        fault = self._rng.choice(["timeout", "rate_limit", "malformed", "truncated"])
        self.injected[fault] = self.injected.get(fault, 0) + 1
        if fault == "timeout":
            raise JudgeTimeout("injected timeout")
        if fault == "rate_limit":
            raise RateLimited("injected rate limit")
        if fault == "malformed":
            return JudgeReply(text="Sorry, I cannot produce JSON today.")
        good = await self.inner.generate(messages, schema=schema)
        return JudgeReply(text=good.text[: len(good.text) // 2])


async def _no_wait(_: float) -> None:
    return None


def _samples(n: int) -> list[Sample]:
    rng = random.Random(5)
    return [
        Sample(
            id=f"s{i}",
            question=f"What does policy {i} say about leave?",
            answer=f"Policy {i} grants {rng.randint(10, 30)} days. It needs manager approval.",
            contexts=[Context(text=f"Policy {i} text part {k}.", id=f"p{i}-{k}") for k in range(3)],
            reference=f"Policy {i} grants leave with manager approval.",
        )
        for i in range(n)
    ]


METRICS = (Faithfulness, AnswerRelevance, ContextPrecision, ContextRecall)


def _run(judge: object, **engine: object) -> dict[tuple[str, str], object]:
    result = evaluate(
        _samples(25),
        [cls() for cls in METRICS],
        judge=JudgeEngine(judge, sleep=_no_wait, seed=1, **engine),  # type: ignore[arg-type]
        embedder=HashEmbedder(),
    )
    return {(c.sample_id, c.metric): c.score for c in result}


def test_with_retries_every_cell_gets_its_fault_free_value() -> None:
    clean = _run(CountingJudge())
    flaky = FlakyJudge(CountingJudge(), seed=3)
    faulty = _run(flaky, max_retries=8)
    assert sum(flaky.injected.values()) > 20
    assert set(flaky.injected) == {"timeout", "rate_limit", "malformed", "truncated"}
    for key, score in faulty.items():
        assert score.status == "scored", (key, score.failure)  # type: ignore[attr-defined]
        assert score.value == clean[key].value  # type: ignore[attr-defined]
        assert not math.isnan(score.value)  # type: ignore[attr-defined]


def test_without_retries_every_failure_is_typed_with_a_reason() -> None:
    flaky = FlakyJudge(CountingJudge(), seed=4)
    cells = _run(flaky, max_retries=0, repair=False)
    kinds: dict[str, int] = {}
    for score in cells.values():
        if score.status == "scored":  # type: ignore[attr-defined]
            continue
        failure = score.failure  # type: ignore[attr-defined]
        assert failure is not None
        assert failure.message
        kinds[failure.kind.value] = kinds.get(failure.kind.value, 0) + 1
    assert {"timeout", "rate_limited", "parse_error"} <= set(kinds)
    assert sum(kinds.values()) >= 10


@pytest.mark.parametrize("cap", [1, 5])
def test_the_cap_holds_for_a_whole_run(cap: int) -> None:
    judge = CountingJudge(delay=0.001)
    evaluate(
        _samples(12), [cls() for cls in METRICS], judge=judge, embedder=HashEmbedder(),
        max_concurrency=cap,
    )  # fmt: skip
    assert judge.max_in_flight == cap
    assert judge.calls == 12 * 3  # analyze, verify, and one shared context assessment


@dataclass
class FlakyEmbedder:
    """Wraps an embedder; fails ``rate`` of calls: timeout, rate limit, 5xx, a vector short."""

    inner: HashEmbedder
    rate: float = 0.3
    seed: int = 0
    model: str = "flaky-embedder"
    injected: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if self._rng.random() >= self.rate:
            return await self.inner.embed(texts)
        fault = self._rng.choice(["timeout", "rate_limit", "server", "short"])
        self.injected[fault] = self.injected.get(fault, 0) + 1
        if fault == "timeout":
            raise JudgeTimeout("injected timeout")
        if fault == "rate_limit":
            raise RateLimited("injected rate limit")
        if fault == "server":
            raise ServerError("injected 503")
        return (await self.inner.embed(texts))[:-1]


def test_embedding_faults_are_retried_like_judge_faults() -> None:
    """Before: 30% embedding faults lost 11 of 50 answer_relevance cells (no retries)."""
    from ragbridge.core.judging.embedding import EmbeddingEngine

    clean = _run(CountingJudge())
    flaky = FlakyEmbedder(HashEmbedder(), seed=2)
    both = evaluate(
        _samples(25),
        [cls() for cls in METRICS],
        judge=JudgeEngine(FlakyJudge(CountingJudge(), seed=5), sleep=_no_wait, seed=1),
        embedder=EmbeddingEngine(flaky, sleep=_no_wait, seed=1, batch_size=4),
    )
    assert sum(flaky.injected.values()) >= 3
    for cell in both:
        expected = clean[(cell.sample_id, cell.metric)]
        assert cell.score.status == "scored", (cell.metric, cell.score.failure)
        assert cell.score.value == expected.value  # type: ignore[attr-defined]
