"""The orchestrator: order, streaming, progress, caching and resume, failures, loops, estimate."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel

from ragbridge.core import Context, Sample
from ragbridge.core.cache.disk import Cache
from ragbridge.core.metrics.base import Metric, MetricContext, PlannedCall
from ragbridge.core.prompts import PromptTemplate
from ragbridge.core.results.evaluation import FailureKind, Score
from ragbridge.core.scoring.runner import aevaluate, estimate, evaluate, resolve_metrics
from ragbridge.core.testing import ScriptedJudge


class Verdict(BaseModel):
    ok: bool


TEMPLATE = PromptTemplate(
    id="test.judged", version="1", system="You judge.", user="Answer: $answer", schema=Verdict
)


class Judged(Metric):
    """1.0 when the judge says ok; one call per sample."""

    requires = ("answer",)
    prompt_version = "1"

    async def _score(self, sample: Sample, ctx: MetricContext) -> Score:
        assert sample.answer is not None
        call = await ctx.ask(TEMPLATE, answer=sample.answer)
        if call.failure is not None:
            return Score(failure=call.failure, usage=call.usage)
        assert call.value is not None
        return Score(value=1.0 if call.value.ok else 0.0, reason="judged", usage=call.usage)

    def plan(self, sample: Sample, shared_tags: frozenset[str] = frozenset()) -> list[PlannedCall]:
        text = "".join(m["content"] for m in TEMPLATE.render(answer=sample.answer or ""))
        return [PlannedCall(TEMPLATE.id, len(text))]


class Exploding(Metric):
    needs_judge = False

    async def _score(self, sample: Sample, ctx: MetricContext) -> Score:
        raise RuntimeError("bug in a metric")


def samples(n: int) -> list[Sample]:
    return [
        Sample(
            id=f"s{i:02d}",
            question="q",
            answer=f"answer {i}" if i % 7 else "",
            contexts=[Context(text="t", id="d1"), Context(text="u", id="d2")],
            relevance={"d2": 1},
        )
        for i in range(n)
    ]


def ok_judge(delay: float = 0.0) -> ScriptedJudge:
    return ScriptedJudge({"test.judged": {"ok": True}}, delay=delay)


def test_cells_in_input_order_with_progress_and_stats() -> None:
    seen: list[tuple[int, int | None]] = []
    judge = ScriptedJudge({"test.judged": {"ok": True}}, delay=0.001)
    result = evaluate(
        samples(30), [Judged(), "recall@1", "mrr"], judge=judge, max_concurrency=3,
        progress=lambda done, total: seen.append((done, total)),
    )  # fmt: skip
    assert result.sample_ids == [f"s{i:02d}" for i in range(30)]
    assert result.metrics == ["judged", "recall@1", "mrr"]
    assert seen == [(i, 30) for i in range(1, 31)]
    judged = result.summary()["judged"]
    # s00, s07, s14, s21, s28 have an empty answer: missing_input, no call spent
    assert (judged.n_scored, judged.failures_by_kind) == (25, {"missing_input": 5})
    assert len(judge.calls) == 25
    assert result.summary()["mrr"].mean == 0.5
    assert result.metadata["judge_stats"]["calls"] == 25
    assert result.metadata["judge_stats"]["max_in_flight"] <= 3
    assert result.get("s01", "judged") == result.get("s01", "judged")
    score = result.get("s01", "judged")
    assert score is not None
    assert score.judge_model == "scripted-judge"
    assert score.provider == "llm"
    assert score.usage.calls == 1


def test_streams_a_generator_with_a_bounded_window() -> None:
    pulled: list[int] = []
    judge = ok_judge(delay=0.002)

    def stream() -> Iterator[Sample]:
        for i, sample in enumerate(samples(40)):
            pulled.append(i)
            # never more than window samples ahead of the judge's finished work
            assert i - len(judge.calls) <= 8 + 8
            yield sample

    totals: list[int | None] = []
    result = evaluate(
        stream(), [Judged()], judge=judge, window=8,
        progress=lambda done, total: totals.append(total),
    )  # fmt: skip
    assert len(result.sample_ids) == 40
    assert set(totals) == {None}


class HeadWaits:
    """A judge whose answer to the first sample comes only after later samples were judged."""

    model = "head-waits"

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.later_when_first_done = -1

    async def generate(self, messages, *, schema=None):  # type: ignore[no-untyped-def]
        from ragbridge.core.judging.judge import JudgeReply

        text = messages[-1]["content"]
        self.asked.append(text)
        if "alpha-first" in text:
            for _ in range(100):
                if self._later() >= 3:
                    break
                await asyncio.sleep(0.01)
            self.later_when_first_done = self._later()
        return JudgeReply(text='{"ok": true}')

    def _later(self) -> int:
        return sum("zeta-later" in t for t in self.asked)


def test_a_slow_first_sample_does_not_hold_back_the_next_ones_and_order_is_kept() -> None:
    data = [Sample(id="s0", question="q", answer="alpha-first")] + [
        Sample(id=f"s{i}", question="q", answer=f"zeta-later {i}") for i in range(1, 10)
    ]
    judge = HeadWaits()
    result = evaluate(data, [Judged()], judge=judge, window=2)
    # window 2: while the first sample waits, finished ones make room for new ones, up to
    # twice the window started and not yet handed back (first + 3 later).
    assert judge.later_when_first_done == 3
    assert result.sample_ids == [s.id for s in data]
    assert all(c.score.value == 1.0 for c in result)


def test_metric_exceptions_and_missing_judge_become_typed_failures() -> None:
    result = evaluate(samples(3), [Exploding(), Judged()])
    exploded = result.get("s01", "exploding")
    assert exploded is not None
    assert exploded.failure is not None
    assert exploded.failure.kind is FailureKind.JUDGE_ERROR
    assert "bug in a metric" in exploded.failure.message
    no_judge = result.get("s01", "judged")
    assert no_judge is not None
    assert no_judge.failure is not None
    assert no_judge.failure.kind is FailureKind.MISSING_INPUT
    assert "needs a judge" in no_judge.failure.message


def test_sync_evaluate_works_inside_a_running_loop() -> None:
    async def notebook_cell() -> int:
        return len(evaluate(samples(4), [Judged()], judge=ok_judge()))

    assert asyncio.run(notebook_cell()) == 4


def test_second_run_makes_zero_calls(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    first_judge, second_judge = ok_judge(), ok_judge()
    first = evaluate(samples(10), [Judged()], judge=first_judge, cache=path)
    second = evaluate(samples(10), [Judged()], judge=second_judge, cache=path)
    assert len(first_judge.calls) == 8
    assert second_judge.calls == []
    assert [c.score.value for c in first] == [c.score.value for c in second]
    assert second.usage().cached_calls == 8
    assert second.usage().calls == 0


def test_an_interrupted_run_resumes_without_repeating_finished_calls(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    data = samples(30)  # 25 judged samples

    async def interrupted() -> int:
        judge = ok_judge(delay=0.003)
        task = asyncio.ensure_future(
            aevaluate(data, [Judged()], judge=judge, cache=path, max_concurrency=2)
        )
        while len(judge.calls) < 10:
            await asyncio.sleep(0.001)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return len(judge.calls)

    started = asyncio.run(interrupted())
    finished = Cache(path).stats().replies
    assert 8 <= finished <= started  # calls in flight at the kill were lost, finished ones kept
    judge = ok_judge()
    result = evaluate(data, [Judged()], judge=judge, cache=path)
    assert len(judge.calls) == 25 - finished
    assert result.summary()["judged"].n_scored == 25


def test_names_resolve_and_duplicates_are_refused() -> None:
    assert [m.name for m in resolve_metrics(["recall@5", "ndcg@10", Judged()])] == [
        "recall@5", "ndcg@10", "judged",
    ]  # fmt: skip
    with pytest.raises(ValueError, match="given twice"):
        resolve_metrics(["mrr", "recip_rank"])
    with pytest.raises(ValueError, match="unknown measure"):
        resolve_metrics(["not_a_metric"])
    with pytest.raises(ValueError, match="duplicate sample id"):
        evaluate([*samples(2), *samples(1)], ["mrr"])


def test_estimate_counts_calls_before_sending_anything() -> None:
    plan = estimate(samples(14), [Judged(), "mrr"])
    assert plan.samples == 14
    assert plan.calls == 14  # plan() does not know the empty answers are skipped at run time
    assert plan.by_template == {"test.judged": 14}
    assert plan.prompt_tokens > 14 * 40
    assert plan.calls_per_sample == 1.0


# -- one settings value --------------------------------------------------------------------


def test_settings_and_the_old_keywords_give_the_same_run() -> None:
    from ragbridge.core import Settings

    by_keywords = evaluate(samples(6), [Judged()], judge=ok_judge(), max_concurrency=2)
    by_settings = evaluate(
        samples(6), [Judged()], settings=Settings(judge=ok_judge(), max_concurrency=2)
    )
    assert [c.score.value for c in by_settings] == [c.score.value for c in by_keywords]
    assert by_settings.metadata["max_concurrency"] == 2


def test_a_setting_given_both_ways_is_an_error_naming_it() -> None:
    from ragbridge.core import Settings

    with pytest.raises(TypeError, match=r"^max_retries=, timeout= given both as keyword and in"):
        evaluate(
            samples(1), [Judged()], settings=Settings(judge=ok_judge()), timeout=5, max_retries=0
        )
    with pytest.raises(TypeError, match="judge="):
        evaluate(samples(1), [Judged()], settings=Settings(), judge=ok_judge())


@pytest.mark.parametrize(
    "bad",
    [
        {"max_concurrency": 0},
        {"max_retries": -1},
        {"stop_after": 0},
        {"timeout": 0},
        {"timeout": float("nan")},
        {"timeout": float("inf")},
        {"max_concurrency": 2.5},
    ],
)
def test_settings_refuse_values_that_cannot_work(bad: dict[str, object]) -> None:
    from ragbridge.core import Settings

    with pytest.raises((ValueError, TypeError)):
        Settings(**bad)  # type: ignore[arg-type]


def test_the_scorer_takes_settings_too() -> None:
    from ragbridge.core import Scorer, Settings

    scorer = Scorer([Judged()], settings=Settings(judge=ok_judge(), timeout=3.0, stop_after=2))
    assert scorer.judge is not None
    assert scorer.judge.timeout == 3.0
    assert scorer.judge.breaker.stop_after == 2
    assert scorer.score(samples(2)[1])["judged"].value == 1.0
    assert scorer.aborted is None
    with pytest.raises(TypeError, match="timeout="):
        Scorer([Judged()], settings=Settings(judge=ok_judge()), timeout=1.0)


def test_an_unusable_judge_stops_the_run_and_says_why() -> None:
    from ragbridge.core import Settings
    from ragbridge.core.judging.judge import ProviderUnusable

    error = ProviderUnusable("HTTP 401", cause="401 Unauthorized", hint="check the key")
    judge = ScriptedJudge({"test.judged": error})
    started: list[str] = []

    def stream() -> Iterator[Sample]:
        for sample in samples(100):
            started.append(sample.id)
            yield sample

    evaluation = evaluate(
        stream(), [Judged()], settings=Settings(judge=judge, max_concurrency=4, stop_after=3)
    )
    assert evaluation.metadata["aborted"] == "judge: 401 Unauthorized on 3/3 calls — check the key"
    assert len(judge.calls) == 3
    assert len(started) < 100  # no new samples once the judge is known to be unusable
    cells = list(evaluation)
    assert len(cells) == len(started)  # samples never started are simply absent
    refused = [c.score.failure for c in cells if c.score.failure is not None]
    assert any(
        f.kind is FailureKind.CANCELLED and f.message.startswith("not sent: ") for f in refused
    )
    assert evaluation.metadata["judge_stats"]["refused"] >= 1


def test_settings_are_exported_from_the_core() -> None:
    import ragbridge.core
    from ragbridge.core.settings import Settings

    assert ragbridge.core.Settings is Settings
    assert "Settings" in ragbridge.core.__all__


def test_a_cached_rerun_of_the_four_llm_metrics_makes_no_calls_and_gives_the_same_cells(
    tmp_path: Path,
) -> None:
    from ragbridge.core.testing import CountingJudge, HashEmbedder

    data = [
        Sample(
            id=f"s{i}",
            question=f"When was the museum {i} founded?",
            answer=f"The museum {i} was founded in {1900 + i}. It has a garden.",
            contexts=[
                Context(text=f"The museum {i} opened in {1900 + i}.", id=f"s{i}-a"),
                Context(text="Its garden is large.", id=f"s{i}-b"),
                Context(text="The river floods in spring.", id=f"s{i}-c"),
            ],
            reference=f"It was founded in {1900 + i}.",
        )
        for i in range(6)
    ]
    names = ["faithfulness", "answer_relevance", "context_precision", "context_recall"]
    path = tmp_path / "cache.sqlite"
    first_judge, second_judge = CountingJudge(), CountingJudge()
    first = evaluate(data, names, judge=first_judge, embedder=HashEmbedder(), cache=path)
    second = evaluate(data, names, judge=second_judge, embedder=HashEmbedder(), cache=path)
    assert first_judge.calls > 0
    assert second_judge.calls == 0
    assert all(c.score.failure is None for c in first)
    assert [(c.sample_id, c.metric, c.score.value, c.score.details) for c in first] == [
        (c.sample_id, c.metric, c.score.value, c.score.details) for c in second
    ]
    assert second.usage().cached_calls == first.usage().calls


def test_a_metric_that_paid_for_nothing_shares_one_zero_usage() -> None:
    from ragbridge.core.judging.engine import JudgeCall
    from ragbridge.core.metrics.base import usage_of
    from ragbridge.core.results.evaluation import Usage

    paid = JudgeCall(None, None, Usage(calls=1, prompt_tokens=5))
    assert usage_of(None) is usage_of(paid, owned=(False,))  # no new object per kept cell
    assert usage_of(None) == Usage()
    assert usage_of(paid, paid, owned=(True, False)) == Usage(calls=1, prompt_tokens=5)
    assert usage_of(None) == Usage()  # the shared zero was not changed by the sum
