"""One settings value and one Scorer for every sink (issue 14, items 3 and 4).

* every entry point that calls models takes ``settings=`` or the `Settings` fields as keywords,
  and none retypes a field (a new setting is added in one place);
* ``price=`` reaches the judge engine through the LangSmith, DeepEval and LlamaIndex sinks
  (it was missing from the first two);
* the metrics of one record are computed once whoever asks: two threads each on its own event
  loop, two coroutines on one loop, LangSmith's async path under ``gather``; a cancelled
  computation is started again; the records kept are bounded.
"""

from __future__ import annotations

import asyncio
import gc
import importlib
import inspect
import threading
import uuid
import weakref
from collections.abc import Callable
from dataclasses import fields
from types import SimpleNamespace
from typing import Any

import pytest

from ragbridge.adapters import deepeval as deepeval_adapter
from ragbridge.adapters import pytest_plugin
from ragbridge.core import Price
from ragbridge.core.sample import Context, Sample
from ragbridge.core.scoring.scorer import Scorer
from ragbridge.core.settings import Settings, SettingsOptions
from ragbridge.core.testing import CountingJudge

# The packages export functions named like these modules: import the modules by path.
langsmith_evaluators = importlib.import_module("ragbridge.adapters.langsmith.evaluators")
llamaindex_evaluators = importlib.import_module("ragbridge.adapters.llamaindex.evaluators")
runner = importlib.import_module("ragbridge.core.scoring.runner")

FIELDS = {f.name for f in fields(Settings)}
PRICE = Price(prompt_per_million=1.0, completion_per_million=2.0)

ENTRY_POINTS: list[Callable[..., Any]] = [
    runner.evaluate,
    runner.aevaluate,
    Scorer,
    langsmith_evaluators.RagbridgeEvaluators,
    langsmith_evaluators.evaluators,
    deepeval_adapter.RagbridgeMetric,
    deepeval_adapter.as_deepeval_metric,
    deepeval_adapter.DeepEvalJudge,
    llamaindex_evaluators.RagbridgeEvaluator,
    llamaindex_evaluators.evaluators_for,
    llamaindex_evaluators.LiveScoring,
    llamaindex_evaluators.score_queries,
    pytest_plugin.assert_rag,
]

SAMPLE = Sample(
    id="s",
    question="Where is the Eiffel Tower?",
    answer="The Eiffel Tower is in Paris. It was finished in 1889.",
    contexts=[Context(id="d1", text="The Eiffel Tower stands in Paris and opened in 1889.")],
)


def test_the_keyword_options_are_the_settings_fields() -> None:
    assert set(SettingsOptions.__annotations__) == FIELDS


@pytest.mark.parametrize("entry", ENTRY_POINTS, ids=lambda e: e.__qualname__)
def test_no_entry_point_retypes_a_setting(entry: Callable[..., Any]) -> None:
    """Before: judge, embedder, nli, cache, max_concurrency, timeout, max_retries (and
    sometimes price) were parameters of ~15 signatures in 7 files, and had drifted."""
    parameters = inspect.signature(entry).parameters
    wrapped = {"judge"} if entry is deepeval_adapter.DeepEvalJudge else set()  # what it wraps
    assert set(parameters) & FIELDS == wrapped
    assert "settings" in parameters
    kinds = [p.kind for p in parameters.values()]
    assert kinds[-1] is inspect.Parameter.VAR_KEYWORD


def test_a_setting_given_twice_or_unknown_is_refused() -> None:
    with pytest.raises(TypeError, match="given both as keyword and in settings"):
        Scorer(["faithfulness"], settings=Settings(judge=CountingJudge()), judge=CountingJudge())
    with pytest.raises(TypeError, match="unknown setting"):
        Scorer(["faithfulness"], judge=CountingJudge(), max_concurency=2)  # type: ignore[call-arg]


def test_price_reaches_the_judge_engine_of_every_sink() -> None:
    judge = CountingJudge()
    langsmith = langsmith_evaluators.evaluators(["faithfulness"], judge=judge, price=PRICE)
    deepeval = deepeval_adapter.RagbridgeMetric("faithfulness", judge=judge, price=PRICE)
    llamaindex = llamaindex_evaluators.evaluators_for(["faithfulness"], judge=judge, price=PRICE)
    model = deepeval_adapter.DeepEvalJudge(judge, price=PRICE)
    scorers = [langsmith[0].suite.scorer, deepeval.scorer, llamaindex["faithfulness"].scorer]
    for scorer in scorers:
        assert scorer.judge is not None
        assert scorer.judge.price == PRICE
    assert model.engine.price == PRICE


def test_deepeval_copies_keep_the_settings_and_the_scorer() -> None:
    """DeepEval's evaluate copies a metric by calling its class with the attributes named like
    its parameters: the copy must share the Scorer (its cache, its usage)."""
    from deepeval.metrics.utils import copy_metrics

    metric = deepeval_adapter.RagbridgeMetric("faithfulness", judge=CountingJudge(), price=PRICE)
    (copy,) = copy_metrics([metric])
    assert copy.scorer is metric.scorer
    assert copy.settings == metric.settings


def _two_threads(scorer: Scorer, first: list[str], second: list[str]) -> None:
    """Each thread scores on its own event loop (`Scorer.score` outside a loop)."""
    start = threading.Barrier(2)
    errors: list[BaseException] = []

    def work(names: list[str]) -> None:
        try:
            start.wait()
            scorer.score(SAMPLE, only=names)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in (first, second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


def test_two_threads_on_two_loops_share_one_records_sub_results() -> None:
    judge = CountingJudge(delay=0.05)
    scorer = Scorer(["faithfulness", "hallucination"], judge=judge)
    _two_threads(scorer, ["faithfulness"], ["hallucination"])
    assert judge.by_task == {"answer.analyze": 1, "faithfulness.verify": 1}
    assert scorer.kept == 0  # both metrics were asked for: the record is dropped


def test_one_metric_asked_twice_at_once_is_computed_once() -> None:
    judge = CountingJudge(delay=0.05)
    scorer = Scorer(["faithfulness", "hallucination"], judge=judge)
    _two_threads(scorer, ["faithfulness"], ["faithfulness"])
    assert judge.calls == 2

    async def both() -> list[dict[str, Any]]:
        return await asyncio.gather(
            *(scorer.ascore(SAMPLE, only=["hallucination"]) for _ in range(3))
        )

    scores = asyncio.run(both())
    assert judge.calls == 2  # hallucination reads the kept claims and verdicts
    assert len({s["hallucination"].value for s in scores}) == 1


def test_records_are_bounded_and_forgotten() -> None:
    scorer = Scorer(["faithfulness", "hallucination"], judge=CountingJudge(), records=2)
    for i in range(5):
        scorer.score(SAMPLE.model_copy(update={"question": f"q{i}"}), only=["faithfulness"])
    assert scorer.kept == 2
    scorer.forget()
    assert scorer.kept == 0
    with pytest.raises(ValueError, match="not scored here: recall@5"):
        scorer.score(SAMPLE, only=["recall@5"])


def test_a_cancelled_computation_is_started_again() -> None:
    judge = CountingJudge(delay=0.2)
    scorer = Scorer(["faithfulness"], judge=judge)

    async def main() -> float | None:
        first = asyncio.ensure_future(scorer.ascore(SAMPLE, only=["faithfulness"]))
        await asyncio.sleep(0.05)
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        again = await asyncio.wait_for(scorer.ascore(SAMPLE, only=["faithfulness"]), 5)
        return again["faithfulness"].value

    assert asyncio.run(main()) is not None


def _run() -> Any:
    return SimpleNamespace(
        id=uuid.uuid4(),
        name="rag",
        run_type="chain",
        inputs={"question": SAMPLE.question},
        outputs={"answer": SAMPLE.answer, "contexts": [c.text for c in SAMPLE.contexts]},
        child_runs=[],
    )


def test_langsmiths_async_path_scores_a_run_once_under_gather() -> None:
    """Before: two evaluators awaiting one run at once could both score it."""
    judge = CountingJudge(delay=0.05)
    suite = langsmith_evaluators.RagbridgeEvaluators(["faithfulness", "hallucination"], judge=judge)
    run = _run()

    async def main() -> None:
        await asyncio.gather(*(ev.aevaluate_run(run) for ev in suite.evaluators()))

    asyncio.run(main())
    assert judge.by_task == {"answer.analyze": 1, "faithfulness.verify": 1}
    suite.scores(run)  # the summary evaluators read it back: no new call
    assert judge.calls == 2
    suite.forget()
    suite.scores(run)
    assert judge.calls == 4


def test_cancelling_one_caller_does_not_fail_the_others() -> None:
    """Two callers of one record on one loop: cancelling the one that computes makes the other
    compute it again; cancelling a waiter leaves the computation alone."""
    judge = CountingJudge(delay=0.1)
    scorer = Scorer(["faithfulness", "hallucination"], judge=judge)

    async def main() -> tuple[Any, Any]:
        computing = asyncio.ensure_future(scorer.ascore(SAMPLE, only=["faithfulness"]))
        await asyncio.sleep(0.02)
        waiting = asyncio.ensure_future(scorer.ascore(SAMPLE, only=["faithfulness"]))
        await asyncio.sleep(0.02)
        computing.cancel()
        first = await asyncio.wait_for(waiting, 5)
        other = SAMPLE.model_copy(update={"question": "Another question?"})
        busy = asyncio.ensure_future(scorer.ascore(other, only=["hallucination"]))
        await asyncio.sleep(0.02)
        idle = asyncio.ensure_future(scorer.ascore(other, only=["hallucination"]))
        await asyncio.sleep(0.02)
        idle.cancel()
        second = await asyncio.wait_for(busy, 5)
        return first, second

    first, second = asyncio.run(main())
    assert first["faithfulness"].value is not None
    assert second["hallucination"].value is not None


def test_deepeval_metrics_on_one_scorer_share_a_test_cases_sub_results() -> None:
    """Before: a shared ``scorer=`` had to score exactly the one metric, so faithfulness and
    hallucination as two DeepEval metrics each extracted the claims."""
    judge = CountingJudge(delay=0.02)
    scorer = Scorer(["faithfulness", "hallucination"], judge=judge)
    metrics = [deepeval_adapter.RagbridgeMetric(n, scorer=scorer) for n in scorer.names]
    case = deepeval_adapter.to_test_case(SAMPLE)

    async def main() -> list[float | None]:
        return await asyncio.gather(*(m.a_measure(case) for m in metrics))

    faithfulness, hallucination = asyncio.run(main())
    assert judge.by_task == {"answer.analyze": 1, "faithfulness.verify": 1}
    assert faithfulness is not None
    assert hallucination is not None
    assert metrics[1].measure(case) == hallucination  # the record is gone: scored again
    assert judge.calls == 4
    with pytest.raises(ValueError, match="not 'answer_relevance'"):
        deepeval_adapter.RagbridgeMetric("answer_relevance", scorer=scorer)


def test_a_kept_record_lets_its_sub_results_go_once_complete(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A Scorer keeping every record (LangSmith's, for its summary evaluators) holds a run's
    Scores, not its claims and verdicts, once every metric was scored."""
    contexts: list[weakref.ref[Any]] = []
    made = Scorer._context

    def remembered(self: Scorer) -> Any:
        ctx = made(self)
        contexts.append(weakref.ref(ctx))
        return ctx

    monkeypatch.setattr(Scorer, "_context", remembered)
    judge = CountingJudge()
    scorer = Scorer(["faithfulness", "hallucination"], judge=judge, records=None)
    scorer.score(SAMPLE, key="run-1", only=["faithfulness"])
    gc.collect()
    assert contexts[0]() is not None  # hallucination may still ask for the claims
    first = scorer.score(SAMPLE, key="run-1", only=["hallucination"])
    gc.collect()
    assert [c() for c in contexts] == [None]
    assert scorer.kept == 1
    again = scorer.score(SAMPLE, key="run-1")  # read back, not scored again
    assert again["hallucination"] == first["hallucination"]
    assert judge.calls == 2
    assert len(contexts) == 1
