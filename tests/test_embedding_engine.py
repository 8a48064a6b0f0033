"""The embedding engine gets the judge's discipline: retries with backoff, typed failures, the
run's in-flight cap, a breaker that stops an unusable embedder, and nothing bad in the cache."""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragbridge.core import Context, Sample, Settings, evaluate
from ragbridge.core.cache.disk import Cache
from ragbridge.core.judging.embedding import EmbeddingEngine, EmbeddingFailed
from ragbridge.core.judging.judge import (
    ConnectionRefused,
    JudgeTimeout,
    PermanentJudgeError,
    ProviderUnusable,
    RateLimited,
    ServerError,
)
from ragbridge.core.judging.limits import Slots
from ragbridge.core.metrics import AnswerRelevance, Faithfulness
from ragbridge.core.results.evaluation import FailureKind
from ragbridge.core.testing import CountingJudge, HashEmbedder


class Sleeps:
    def __init__(self) -> None:
        self.durations: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.durations.append(seconds)


@dataclass
class Scripted:
    """Answers each call from a list (the last repeats): an exception to raise, or vectors
    (a callable of the texts) to return."""

    script: list[Any]
    model: str = "scripted-embedder"
    delay: float = 0.0
    calls: list[list[str]] = field(default_factory=list)

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        step = self.script[min(len(self.calls) - 1, len(self.script) - 1)]
        if self.delay:
            await asyncio.sleep(self.delay)
        if isinstance(step, BaseException):
            raise step
        if callable(step):
            return list(step(list(texts)))
        return await HashEmbedder(dim=8).embed(texts)


def ok(texts: list[str]) -> list[list[float]]:
    return [HashEmbedder(dim=8)._vector(t) for t in texts]


def f32(texts: list[str]) -> list[list[float]]:
    """`ok` as the engine returns it: rounded to float32, like the cache stores vectors."""
    return [[float(np.float32(x)) for x in v] for v in ok(texts)]


def embed(engine: EmbeddingEngine, texts: Sequence[str]) -> list[list[float]]:
    return asyncio.run(engine.embed(texts))


def failure_of(engine: EmbeddingEngine, texts: Sequence[str]) -> Any:
    with pytest.raises(EmbeddingFailed) as info:
        embed(engine, texts)
    return info.value.failure


def test_transient_errors_are_retried_with_backoff_then_succeed() -> None:
    sleeps = Sleeps()
    embedder = Scripted([ServerError("503"), RateLimited(retry_after=2.5), ok])
    engine = EmbeddingEngine(embedder, sleep=sleeps, seed=0)
    vectors = embed(engine, ["a b", "c"])
    assert vectors == f32(["a b", "c"])
    assert len(embedder.calls) == 3
    assert 0.0 <= sleeps.durations[0] <= 0.5
    assert sleeps.durations[1] == 2.5  # the provider's Retry-After wins
    assert engine.stats.retries == 2


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (JudgeTimeout("slow"), FailureKind.TIMEOUT),
        (RateLimited("429"), FailureKind.RATE_LIMITED),
        (ServerError("502"), FailureKind.JUDGE_ERROR),
    ],
)
def test_an_exhausted_budget_is_a_typed_failure(error: Exception, kind: FailureKind) -> None:
    embedder = Scripted([error])
    failure = failure_of(EmbeddingEngine(embedder, max_retries=2, sleep=Sleeps()), ["x"])
    assert failure.kind is kind
    assert "gave up after 3 attempts" in failure.message
    assert len(embedder.calls) == 3


@pytest.mark.parametrize(
    ("reply", "problem"),
    [
        (lambda texts: ok(texts)[:-1], "1 vectors for 2 texts"),
        (lambda texts: [[math.nan, 1.0], [1.0, 0.0]], "NaN"),
        (lambda texts: [[1.0, 0.0], [1.0]], "has 1 dimensions"),
        (lambda texts: [[], [1.0]], "non-empty"),
    ],
)
def test_unusable_replies_are_asked_again_then_a_parse_error(reply: Any, problem: str) -> None:
    embedder = Scripted([reply])
    failure = failure_of(EmbeddingEngine(embedder, max_retries=1, sleep=Sleeps()), ["a", "b"])
    assert failure.kind is FailureKind.PARSE_ERROR
    assert problem in failure.message
    assert len(embedder.calls) == 2
    healed = Scripted([reply, ok])
    assert embed(EmbeddingEngine(healed, sleep=Sleeps()), ["a", "b"]) == f32(["a", "b"])


def test_exceptions_an_adapter_did_not_classify_are_classified_like_the_judges() -> None:
    flaky = Scripted([TimeoutError(), ConnectionResetError("reset by peer"), ok])
    assert embed(EmbeddingEngine(flaky, sleep=Sleeps()), ["a"]) == f32(["a"])
    bug = Scripted([KeyError("adapter bug")])
    failure = failure_of(EmbeddingEngine(bug, sleep=Sleeps()), ["a"])
    assert failure.kind is FailureKind.JUDGE_ERROR
    assert "KeyError" in failure.message
    assert len(bug.calls) == 1  # a bug is not retried


def test_permanent_errors_are_not_retried() -> None:
    for error in (PermanentJudgeError("400"), ProviderUnusable("401", cause="401")):
        embedder = Scripted([error])
        failure = failure_of(EmbeddingEngine(embedder, sleep=Sleeps()), ["a"])
        assert failure.kind is FailureKind.JUDGE_ERROR
        assert len(embedder.calls) == 1


def test_timeout_per_attempt() -> None:
    embedder = Scripted([ok], delay=5.0)
    engine = EmbeddingEngine(embedder, timeout=0.01, max_retries=1, sleep=Sleeps())
    failure = failure_of(engine, ["a"])
    assert failure.kind is FailureKind.TIMEOUT
    assert len(embedder.calls) == 2


def test_a_refused_connection_is_retried_once_then_stops_the_embedder() -> None:
    refused = ConnectionRefused("refused", cause="connection refused at U", hint="is U running?")
    embedder = Scripted([refused])
    engine = EmbeddingEngine(embedder, stop_after=2, sleep=Sleeps(), linger=0)
    for text in ("a", "b"):
        failure_of(engine, [text])
    assert len(embedder.calls) == 4  # two requests, each tried twice
    assert engine.breaker.line == "embedder: connection refused at U on 2/2 calls — is U running?"
    refusal = failure_of(engine, ["c"])
    assert refusal.kind is FailureKind.CANCELLED
    assert refusal.message.startswith("not sent: embedder: connection refused")
    assert len(embedder.calls) == 4  # not sent


def test_failed_batches_are_not_cached_and_cached_texts_are_not_sent(tmp_path: Path) -> None:
    cache = Cache(tmp_path / "c.sqlite")
    failing = Scripted([PermanentJudgeError("400")])
    failure_of(EmbeddingEngine(failing, cache=cache, sleep=Sleeps()), ["a", "b"])
    assert cache.stats().embeddings == 0
    good = Scripted([ok])
    assert embed(EmbeddingEngine(good, cache=cache), ["a", "b"]) == f32(["a", "b"])
    again = Scripted([ok])
    engine = EmbeddingEngine(again, cache=cache)
    assert embed(engine, ["b", "a"]) == f32(["b", "a"])
    assert again.calls == []
    assert engine.stats.cached == 2


# ------------------------------------------------------------------------- inside a run


def _samples(n: int) -> list[Sample]:
    return [
        Sample(
            id=f"s{i}",
            question=f"What does policy {i} say?",
            answer=f"Policy {i} grants {i} days.",
            contexts=[Context(text=f"Policy {i} text.", id=f"p{i}")],
        )
        for i in range(n)
    ]


@dataclass
class Live:
    """Counts provider calls in flight across the judge and the embedder together."""

    now: int = 0
    most: int = 0

    def __enter__(self) -> None:
        self.now += 1
        self.most = max(self.most, self.now)

    def __exit__(self, *_: object) -> None:
        self.now -= 1


class TrackedJudge(CountingJudge):
    live: Live

    async def generate(self, messages: Any, *, schema: Any = None) -> Any:
        with self.live:
            return await super().generate(messages, schema=schema)


@dataclass
class FlakyEmbedder:
    """Fails ``rate`` of calls with a timeout, a 429 or a 503; counts calls in flight."""

    live: Live
    rate: float = 0.3
    seed: int = 0
    model: str = "flaky-embedder"
    injected: int = 0

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)
        self._inner = HashEmbedder()

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        with self.live:
            await asyncio.sleep(0.002)
            if self._rng.random() < self.rate:
                self.injected += 1
                raise self._rng.choice(
                    [JudgeTimeout("injected"), RateLimited("injected"), ServerError("injected")]
                )
            return await self._inner.embed(texts)


async def _no_wait(_: float) -> None:
    return None


def test_thirty_percent_embedding_faults_lose_no_cell() -> None:
    """Before this engine, 30% injected faults lost 11-12 of 50 answer_relevance cells."""
    live = Live()
    judge = TrackedJudge(delay=0.005)
    judge.live = live
    flaky = FlakyEmbedder(live)
    embedder = EmbeddingEngine(flaky, sleep=_no_wait, seed=1, slots=Slots(4), timeout=10.0)
    faulty = evaluate(
        _samples(50), [AnswerRelevance(), Faithfulness()], judge=judge, embedder=embedder
    )
    clean = evaluate(
        _samples(50),
        [AnswerRelevance(), Faithfulness()],
        judge=CountingJudge(),
        embedder=HashEmbedder(),
    )
    assert flaky.injected > 0
    relevance = {c.sample_id: c.score.value for c in faulty if c.metric == "answer_relevance"}
    expected = {c.sample_id: c.score.value for c in clean if c.metric == "answer_relevance"}
    assert None not in relevance.values()
    assert relevance == pytest.approx(expected)


def test_judge_and_embedder_calls_in_flight_share_the_cap() -> None:
    """Before: 5 in flight at a cap of 4 (the embedder had a semaphore of its own)."""
    live = Live()
    judge = TrackedJudge(delay=0.01)
    judge.live = live
    embedder = FlakyEmbedder(live, rate=0.0)
    evaluation = evaluate(
        _samples(40),
        [AnswerRelevance(), Faithfulness()],
        settings=Settings(judge=judge, embedder=embedder, max_concurrency=4),
    )
    assert live.most == 4
    assert evaluation.metadata["max_in_flight"] == 4
    assert "embedding_stats" in evaluation.metadata


def test_an_unusable_embedder_stops_the_run_with_one_line() -> None:
    error = ProviderUnusable("HTTP 401", cause="401 Unauthorized", hint="check the key")
    embedder = Scripted([error])
    # Small batches, so the failing calls are many (texts of concurrent samples share batches).
    engine = EmbeddingEngine(embedder, batch_size=4, stop_after=3)
    evaluation = evaluate(
        _samples(60), [AnswerRelevance()], settings=Settings(judge=CountingJudge(), embedder=engine)
    )
    assert evaluation.metadata["aborted"].startswith("embedder: 401 Unauthorized on ")
    assert evaluation.metadata["aborted"].endswith(" — check the key")
    assert len(embedder.calls) == 3  # until it replied once, at most stop_after in the air
    cells = [c.score for c in evaluation]
    assert len(cells) < 60  # samples not started are absent
    kinds = {s.failure.kind for s in cells if s.failure is not None}
    assert kinds <= {FailureKind.JUDGE_ERROR, FailureKind.CANCELLED}
