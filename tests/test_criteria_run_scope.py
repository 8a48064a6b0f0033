"""A criterion's "steps written once per run" means per run (issue 30 follow-up).

Planning a run (`ragbridge.core.estimate`, `Metric.plan`) changes nothing, so an estimate
repeated on the same metric objects gives the same figures. Two runs in one process — by
name through the registry, or with the same metric objects — each write their steps (or read
them from the reply cache) and each record that call in their own usage: no run inherits
another's steps with a recorded cost of zero.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ragbridge.core import estimate, evaluate
from ragbridge.core.criteria import Aspect, Criterion, criteria_metrics, register_criteria
from ragbridge.core.judging.engine import JudgeEngine
from ragbridge.core.metrics import MetricContext
from ragbridge.core.registry import REGISTRY
from ragbridge.core.results.evaluation import Usage
from ragbridge.core.sample import Sample
from ragbridge.core.testing import CountingJudge


def samples(n: int) -> list[Sample]:
    return [Sample(id=f"s{i}", question=f"Question {i}?", answer=f"Answer {i}.") for i in range(n)]


# -------------------------------------------------------------------- planning is pure


@pytest.mark.parametrize("batch", [False, True])
def test_an_estimate_repeated_on_the_same_metrics_gives_the_same_figures(batch: bool) -> None:
    specs = [Criterion("tone", "Polite?"), Criterion("short", "Concise?"), Aspect("c", "Cited?")]
    metrics = criteria_metrics(specs, batch=batch)
    first = estimate(samples(3), metrics)
    second = estimate(samples(3), metrics)
    assert first.by_template["criteria.steps"] == 2  # once per criterion per run
    assert second.by_template == first.by_template
    assert (second.calls, second.prompt_tokens) == (first.calls, first.prompt_tokens)


def test_planning_a_sample_twice_plans_the_same_calls() -> None:
    metric = Criterion("tone", "Polite?").metric()
    sample = samples(1)[0]
    first = metric.plan(sample)
    assert metric.plan(sample) == first
    assert [c.template_id for c in first] == ["criteria.steps", "criteria.score"]


def test_a_plan_before_a_run_leaves_the_run_its_steps_call() -> None:
    metrics = criteria_metrics([Criterion("tone", "Polite?")])
    planned = estimate(samples(2), metrics)
    judge = CountingJudge()
    done = evaluate(samples(2), metrics, judge=judge)
    assert judge.by_task == planned.by_template == {"criteria.steps": 1, "criteria.score": 2}
    assert done.usage().calls == judge.calls


# -------------------------------------------------------------------- once per run, per run


@pytest.fixture
def registered() -> Iterator[list[str]]:
    specs = [Criterion("run_scope_tone", "Polite?"), Criterion("run_scope_short", "Concise?")]
    register_criteria(specs, batch=True)
    try:
        yield [s.name for s in specs]
    finally:
        for spec in specs:
            REGISTRY.remove_measure(spec.name)


def test_two_runs_by_name_each_write_and_record_their_steps(registered: list[str]) -> None:
    for _ in range(2):
        judge = CountingJudge()
        done = evaluate(samples(3), registered, judge=judge)
        assert judge.by_task == {"criteria.steps": 2, "criteria.batch": 3}
        assert done.usage().calls == judge.calls == 5


def test_two_runs_with_the_same_metric_objects_each_record_their_steps() -> None:
    metrics = criteria_metrics([Criterion("tone", "Polite?")])
    for _ in range(2):
        judge = CountingJudge()
        done = evaluate(samples(3), metrics, judge=judge)
        assert judge.by_task == {"criteria.steps": 1, "criteria.score": 3}
        assert done.usage().calls == 4


def test_a_second_run_on_the_cache_counts_its_steps_as_cached(
    registered: list[str], tmp_path: Path
) -> None:
    cache = str(tmp_path / "c.sqlite")
    first = evaluate(samples(3), registered, judge=CountingJudge(), cache=cache)
    assert first.usage().calls == 5
    again = CountingJudge()
    second = evaluate(
        samples(3), registered, judge=again, cache=cache, reuse_results=False
    )  # every reply from the cache, the steps included
    assert again.calls == 0
    assert second.usage() == Usage(cached_calls=5)


def test_one_run_still_writes_its_steps_once_across_engines_of_its_own() -> None:
    # the scope is the run's judge engine: samples of one run share it, from any loop
    judge = CountingJudge()
    eng = JudgeEngine(judge, max_retries=0, timeout=None)
    metric = Criterion("tone", "Polite?").metric()

    async def one(sample: Sample) -> Any:
        return await metric.score(sample, MetricContext(judge=eng))

    for sample in samples(3):
        asyncio.run(one(sample))
    assert judge.by_task == {"criteria.steps": 1, "criteria.score": 3}
    other = CountingJudge()
    asyncio.run(metric.score(samples(1)[0], MetricContext(judge=JudgeEngine(other))))
    assert other.by_task == {"criteria.steps": 1, "criteria.score": 1}  # another run
