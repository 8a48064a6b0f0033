"""`BackgroundScoring`: the worker thread and bounded hand-off any live-scoring sink builds on.

The LlamaIndex live scoring (tests/test_llamaindex_evaluators.py) exercises it through a
framework; these tests hold the core piece alone, with no framework installed or imported.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field

import pytest

from ragbridge.core.judging.judge import JudgeReply, Message
from ragbridge.core.results.evaluation import FailureKind, Score
from ragbridge.core.sample import Context, Sample
from ragbridge.core.scoring.background import BackgroundScoring
from ragbridge.core.scoring.scorer import Scorer
from ragbridge.core.testing import CountingJudge


def _sample(sample_id: str) -> Sample:
    return Sample(
        id=sample_id,
        question="Where is the Eiffel Tower?",
        answer="The Eiffel Tower is in Paris.",
        contexts=[Context(id="d1", text="The Eiffel Tower stands in Paris.")],
    )


@dataclass
class _ThreadJudge(CountingJudge):
    """Remembers the threads its calls ran on."""

    threads: set[int] = field(default_factory=set)

    async def generate(self, messages: list[Message], **kwargs: object) -> JudgeReply:  # type: ignore[override]
        self.threads.add(threading.get_ident())
        return await super().generate(messages, **kwargs)  # type: ignore[arg-type]


def test_samples_are_scored_on_the_worker_and_recorded() -> None:
    judge = _ThreadJudge()
    with BackgroundScoring(Scorer(["faithfulness"], judge=judge), id_prefix="req-") as live:
        for tag in ("a", None, "a"):
            sample_id = live.admit(tag)
            assert sample_id is not None
            live.submit(_sample(sample_id))
        assert live.wait(timeout=10)
    assert [s.id for s in live.samples] == ["a", "req-2", "a#2"]
    assert (live.seen, live.scored, live.pending, live.skipped, live.dropped) == (3, 3, 0, 0, 0)
    assert all(live.evaluation.get(s.id, "faithfulness").value is not None for s in live.samples)
    assert live._thread is not None
    assert judge.threads == {live._thread.ident}  # the worker's, not this thread's
    assert not live._thread.is_alive()
    assert live.evaluation.metadata["judge_stats"]["calls"] == judge.calls
    assert live.admit("late") is None  # closed: nothing more is taken
    with pytest.raises(RuntimeError, match="closed"):
        live.open()


def test_pending_is_bounded_and_sampling_is_reproducible() -> None:
    judge = CountingJudge(delay=0.3)
    live = BackgroundScoring(Scorer(["faithfulness"], judge=judge), max_pending=2).open()
    try:
        taken = []
        for _ in range(4):
            sample_id = live.admit()
            taken.append(sample_id)
            if sample_id is not None:
                live.submit(_sample(sample_id))
        assert taken[2:] == [None, None]
        assert (live.seen, live.dropped, live.pending) == (4, 2, 2)
    finally:
        assert live.close(timeout=10)
    assert live.scored == 2

    def chosen(seed: int) -> list[str | None]:
        other = BackgroundScoring(Scorer(["mrr"]), sample_rate=0.5, seed=seed).open()
        try:
            return [other.admit() for _ in range(20)]
        finally:
            other.close()

    first = chosen(3)
    assert first == chosen(3)
    assert 0 < sum(s is None for s in first) < 20


def test_close_with_a_timeout_records_what_is_left_as_cancelled() -> None:
    live = BackgroundScoring(Scorer(["faithfulness"], judge=CountingJudge(delay=5))).open()
    sample_id = live.admit()
    assert sample_id is not None
    live.submit(_sample(sample_id))
    assert live.close(timeout=0.2) is False
    score = live.evaluation.get(sample_id, "faithfulness")
    assert score.failure is not None
    assert score.failure.kind is FailureKind.CANCELLED
    assert (live.pending, live.scored) == (0, 1)


def test_settled_rows_and_a_stopped_worker_are_rows_not_lost_samples() -> None:
    live = BackgroundScoring(Scorer(["mrr"])).open()
    sample_id = live.admit()
    assert sample_id is not None
    live.settle(_sample(sample_id), {"mrr": Score.skip("streaming response")})
    assert live.evaluation.get(sample_id, "mrr").reason == "streaming response"
    late = live.admit()
    assert late is not None
    live.close()
    live.submit(_sample(late))  # the worker is gone: a cancelled row, not an exception
    score = live.evaluation.get(late, "mrr")
    assert score.failure is not None
    assert score.failure.kind is FailureKind.CANCELLED
    assert (live.scored, live.pending) == (2, 0)


def test_async_context_manager_and_subclass_hooks() -> None:
    calls: list[str] = []

    class Sink(BackgroundScoring):
        def _start_listening(self) -> None:
            calls.append(f"start {self.active}")

        def _stop_listening(self) -> None:
            calls.append(f"stop {self.active}")

    async def main() -> Sink:
        async with Sink(Scorer(["mrr"])) as sink:
            assert sink.active
        return sink

    sink = asyncio.run(main())
    assert calls == ["start True", "stop False"]
    assert not sink.active


def test_bad_options_are_refused() -> None:
    with pytest.raises(ValueError, match="sample_rate"):
        BackgroundScoring(Scorer(["mrr"]), sample_rate=-0.1)
    with pytest.raises(ValueError, match="max_pending"):
        BackgroundScoring(Scorer(["mrr"]), max_pending=0)
