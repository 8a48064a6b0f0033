"""ragbridge metrics inside real ``langsmith.evaluate`` / ``aevaluate`` runs, all offline.

Every experiment runs langsmith 0.14's own runner with `offline_client` and
``upload_results=False``; judges are ragbridge's `ScriptedJudge` / `CountingJudge`. Expected
values are what `ragbridge.core.scoring.scorer.Scorer` gives on the same `Sample` directly.
"""

from __future__ import annotations

import asyncio
import socket
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("langsmith")
pytest.importorskip("langchain_core")

import langsmith
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langsmith import traceable
from langsmith.evaluation.evaluator import EvaluationResult
from langsmith.schemas import Example

from ragbridge.adapters.langsmith import (
    RagbridgeEvaluators,
    RagbridgeRunEvaluator,
    evaluators,
    offline_client,
    sample_from_run,
    summary_evaluators,
)
from ragbridge.core.judging.judge import PermanentJudgeError
from ragbridge.core.results.evaluation import Score
from ragbridge.core.results.stats import mean_ci
from ragbridge.core.sample import Context, Sample
from ragbridge.core.scoring.scorer import Scorer, explain
from ragbridge.core.testing import CountingJudge, HashEmbedder, ScriptedJudge

CORPUS = {
    "d1": "Paris is the capital of France.",
    "d2": "Berlin is the capital of Germany.",
    "d3": "France borders Spain and Italy.",
}

CLAIMS = ["Paris is the capital of France.", "Paris has 40 million inhabitants."]
ANALYSIS = {
    "claims": CLAIMS,
    "questions": ["What is the capital of France?"],
    "noncommittal": False,
}
VERIFY = {
    "verdicts": [
        {"reason": "context 1 says so", "verdict": "supported", "context": 1},
        {"reason": "no context gives a population", "verdict": "unsupported", "context": None},
    ]
}
SCRIPT = {"answer.analyze": ANALYSIS, "faithfulness.verify": VERIFY}
ANSWER = "Paris is the capital of France; it has 40 million inhabitants."


@pytest.fixture(autouse=True)
def _no_tracing_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2", "LANGSMITH_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LANGSMITH_TEST_TRACKING", "false")


@pytest.fixture(autouse=True)
def connects(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """Every attempted socket connection, each refused; no test may attempt any."""
    attempts: list[Any] = []

    def refuse(self: socket.socket, address: Any) -> None:
        attempts.append(address)
        raise OSError(f"network disabled in tests: {address!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    yield attempts
    assert attempts == [], f"a test tried to connect to {attempts}"


class KeywordRetriever(BaseRetriever):
    """A real LangChain retriever: traced as a ``run_type="retriever"`` child run."""

    k: int = 2

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        words = {w.strip("?.,").lower() for w in query.split()}
        hits = [(sum(w in t.lower() for w in words), i, t) for i, t in CORPUS.items()]
        ranked = sorted((h for h in hits if h[0] > 0), key=lambda h: (-h[0], h[1]))
        return [Document(id=i, page_content=t) for _, i, t in ranked][: self.k]


def example(
    question: str = "What is the capital of France?", n: int = 1, **outputs: Any
) -> Example:
    return Example(id=uuid.UUID(int=n), inputs={"question": question}, outputs=outputs)


def run_evaluate(target: Any, data: list[Example], **kwargs: Any) -> Any:
    results = langsmith.evaluate(
        target, data=data, upload_results=False, client=offline_client(), **kwargs
    )
    results.wait()
    return results


def by_key(row: dict[str, Any]) -> dict[str, EvaluationResult]:
    found = row["evaluation_results"]["results"]
    keys = [r.key for r in found]
    assert len(keys) == len(set(keys)), keys
    return {r.key: r for r in found}


def rows_by_example(results: Any) -> dict[str, dict[str, EvaluationResult]]:
    return {str(row["example"].id): by_key(row) for row in results}


def plain_target(inputs: dict[str, Any]) -> dict[str, Any]:
    return {
        "answer": ANSWER,
        "contexts": [Document(id="d1", page_content=CORPUS["d1"]), {"text": CORPUS["d3"], "id": 3}],
    }


def assert_same(result: EvaluationResult, expected: Score, key: str) -> None:
    """An evaluator result carries exactly what the Scorer gave, field by field."""
    assert result.key == key
    assert result.score == expected.value
    assert result.comment == explain(expected)
    info = result.evaluator_info
    assert info["ragbridge_metric"] == key
    assert info["status"] == expected.status
    assert info["reason"] == expected.reason
    assert info["details"] == expected.details
    assert info["provider"] == expected.provider
    assert info["judge_model"] == expected.judge_model
    assert info["prompt_version"] == expected.prompt_version
    assert info["usage"] == expected.usage.model_dump()


# ----------------------------------------------------------------- one metric, plain target


def test_plain_target_result_equals_the_scorer_on_the_same_sample(connects: list[Any]) -> None:
    judge = ScriptedJudge(dict(SCRIPT))
    evs = evaluators(["faithfulness"], judge=judge, max_retries=0)
    assert len(evs) == 1
    assert isinstance(evs[0], RagbridgeRunEvaluator)
    assert evs[0].feedback_keys == ["faithfulness"]
    ex = example(answer="Paris")
    results = run_evaluate(plain_target, [ex], evaluators=evs)
    (row,) = list(results)
    result = by_key(row)["faithfulness"]

    sample = Sample(
        id=str(ex.id),
        question="What is the capital of France?",
        answer=ANSWER,
        contexts=[Context(text=CORPUS["d1"], id="d1"), Context(text=CORPUS["d3"], id="3")],
        reference="Paris",
    )
    expected = Scorer(["faithfulness"], judge=ScriptedJudge(dict(SCRIPT)), max_retries=0).score(
        sample
    )["faithfulness"]
    assert expected.value == 0.5
    assert_same(result, expected, "faithfulness")
    assert result.comment is not None
    assert "✓ [supported] Paris is the capital of France." in result.comment
    assert "✗ [unsupported] Paris has 40 million inhabitants." in result.comment
    assert result.evaluator_info["details"]["claims"][0]["context_id"] == "d1"
    assert result.evaluator_info["usage"]["calls"] == 2
    assert result.evaluator_info["sample_id"] == str(ex.id)
    assert result.extra is None
    assert result.feedback_config == {"type": "continuous", "min": 0, "max": 1}
    assert judge.tasks() == ["answer.analyze", "faithfulness.verify"]
    # the contexts given in the outputs reached the judge, in order
    verify = judge.calls[1].messages[1]["content"]
    assert verify.index(CORPUS["d1"]) < verify.index(CORPUS["d3"])
    assert connects == []


# ----------------------------------------------------------------- contexts from child runs


def _langchain_pipeline() -> Any:
    retriever = KeywordRetriever()

    @traceable(name="rag")
    def rag(inputs: dict[str, Any]) -> dict[str, Any]:
        docs = retriever.invoke(inputs["question"])
        return {"answer": ANSWER if docs else "I don't know."}

    return rag


def _traceable_pipeline() -> Any:
    @traceable(run_type="retriever", name="search")
    def search(query: str) -> list[dict[str, Any]]:
        words = {w.strip("?.,").lower() for w in query.split()}
        hits = [i for i, t in CORPUS.items() if any(w in t.lower() for w in words if len(w) > 3)]
        return [{"page_content": CORPUS[i], "metadata": {"id": i}} for i in hits[:2]]

    @traceable(name="rag")
    def rag(inputs: dict[str, Any]) -> dict[str, Any]:
        search(inputs["question"])
        return {"answer": ANSWER}

    return rag


@pytest.mark.parametrize("make_pipeline", [_langchain_pipeline, _traceable_pipeline])
def test_contexts_come_from_the_retriever_child_run(make_pipeline: Any) -> None:
    judge = ScriptedJudge(dict(SCRIPT))
    metrics = ["faithfulness", "recall@2", "mrr"]
    evs = evaluators(metrics, judge=judge, max_retries=0)
    data = [
        example(n=1, answer="Paris", relevance={"d1": 1}),
        example("Which country borders Spain?", n=2, relevance={"d3": 1, "d2": 1}),
    ]
    results = run_evaluate(make_pipeline(), data, evaluators=evs)
    rows = list(results)
    assert len(rows) == 2
    direct = Scorer(metrics, judge=ScriptedJudge(dict(SCRIPT)), max_retries=0)
    for row in rows:
        run = row["run"]
        assert [c.run_type for c in run.child_runs] == ["retriever"]
        sample = sample_from_run(run, row["example"])
        assert sample.contexts, "the child run holds the retrieved documents"
        expected = direct.score(sample)
        found = by_key(row)
        for name in metrics:
            assert_same(found[name], expected[name], name)
    first, second = (by_key(r) for r in rows)
    assert first["recall@2"].score == 1.0
    assert first["mrr"].score == 1.0
    # "Which country borders Spain?" retrieves d3 only: one of the two relevant documents
    assert second["recall@2"].score == 0.5
    assert second["faithfulness"].score == 0.5
    verify = [c for c in judge.calls if c.task == "faithfulness.verify"]
    assert any(CORPUS["d3"] in c.messages[1]["content"] for c in verify)


# --------------------------------------------------------------------------- several metrics


def _multi_data() -> list[Example]:
    return [
        example(n=1, answer="Paris", relevance={"d1": 1}),
        example(n=2, answer="Paris", relevance={"d2": 1, "d9": 2}),
    ]


METRICS = ["faithfulness", "hallucination", "recall@2", "ndcg@2", "answer_relevance:offline"]


@pytest.mark.parametrize("combined", [False, True])
def test_several_metrics_share_one_scoring_per_run(combined: bool) -> None:
    judge = CountingJudge()
    evs = evaluators(METRICS, judge=judge, embedder=HashEmbedder(), combined=combined)
    names = ["faithfulness", "hallucination", "recall@2", "ndcg@2", "answer_relevance"]
    if combined:
        assert len(evs) == 1
        assert evs[0].feedback_keys == names
    else:
        assert [e.feedback_keys for e in evs] == [[n] for n in names]
    results = run_evaluate(plain_target, _multi_data(), evaluators=evs)
    rows = list(results)
    # faithfulness and hallucination share their claims: one analyze + one verify per run,
    # however many evaluators there are
    assert judge.by_task == {"answer.analyze": 2, "faithfulness.verify": 2}
    direct = Scorer(METRICS, judge=CountingJudge(), embedder=HashEmbedder())
    for row in rows:
        found = by_key(row)
        assert sorted(found) == sorted(names)
        expected = direct.score(sample_from_run_outputs(row))
        for name in names:
            assert_same(found[name], expected[name], name)
    values = {str(r["example"].id)[-1]: {k: v.score for k, v in by_key(r).items()} for r in rows}
    assert values["1"]["recall@2"] == 1.0
    assert values["2"]["recall@2"] == 0.0
    assert values["2"]["ndcg@2"] == 0.0
    assert values["1"]["hallucination"] == 1.0 - values["1"]["faithfulness"]  # type: ignore[operator]
    assert values["1"]["answer_relevance"] is not None


def sample_from_run_outputs(row: dict[str, Any]) -> Sample:
    """The Sample a plain_target run stands for, written out by hand."""
    ex = row["example"]
    return Sample(
        id=str(ex.id),
        question=ex.inputs["question"],
        answer=ANSWER,
        contexts=[Context(text=CORPUS["d1"], id="d1"), Context(text=CORPUS["d3"], id="3")],
        reference=ex.outputs["answer"],
        relevance=ex.outputs["relevance"],
    )


def test_direct_call_and_combined_results_shape() -> None:
    suite = RagbridgeEvaluators(["recall@2", "mrr"])
    (combined,) = suite.evaluators(combined=True)
    results = run_evaluate(
        plain_target, [example(answer="Paris", relevance={"d1": 1})], evaluators=[combined]
    )
    (row,) = list(results)
    assert {k: v.score for k, v in by_key(row).items()} == {"recall@2": 1.0, "mrr": 1.0}
    direct = combined(row["run"], row["example"])
    assert isinstance(direct, dict)
    assert [(r.key, r.score) for r in direct["results"]] == [("recall@2", 1.0), ("mrr", 1.0)]
    assert suite.sample(row["run"], row["example"]).context_ids == ["d1", "3"]


# --------------------------------------------------------------------------- overrides


def test_key_overrides_by_name() -> None:
    def target(inputs: dict[str, Any]) -> dict[str, Any]:
        return {
            "final": ANSWER,
            "passages": [
                {"page_content": CORPUS["d2"], "id": "d2"},
                {"content": CORPUS["d1"], "id": 1},
            ],
            "answer": "not this one",
        }

    data = [
        Example(
            id=uuid.UUID(int=5),
            inputs={"q": "Capital?", "user": "u1"},
            outputs={"gold": "Paris", "labels": ["d2"], "answer": "wrong"},
        )
    ]
    judge = ScriptedJudge(dict(SCRIPT))
    evs = evaluators(
        ["faithfulness", "recall@2"],
        judge=judge,
        question_key="q",
        answer_key=["missing", "final"],
        contexts_from="passages",
        reference_key="gold",
        relevance_key="labels",
        keys={"recall@2": "rb_recall"},
    )
    assert [e.feedback_keys for e in evs] == [["faithfulness"], ["rb_recall"]]
    (row,) = list(run_evaluate(target, data, evaluators=evs))
    found = by_key(row)
    assert found["rb_recall"].score == 1.0
    assert found["rb_recall"].evaluator_info["ragbridge_metric"] == "recall@2"
    assert found["faithfulness"].score == 0.5
    analyze = judge.calls[0].messages[1]["content"]
    assert "Capital?" in analyze
    assert ANSWER in analyze
    assert "not this one" not in analyze
    suite = evs[0].suite
    sample = suite.sample(row["run"], row["example"])
    assert (sample.question, sample.answer, sample.reference) == ("Capital?", ANSWER, "Paris")
    assert sample.relevance == {"d2": 1}
    assert [c.text for c in sample.contexts] == [CORPUS["d2"], CORPUS["d1"]]


def test_key_overrides_by_callable() -> None:
    def target(inputs: dict[str, Any]) -> dict[str, Any]:
        return {"reply": {"text": ANSWER}, "hits": [("d3", 0.9), ("d1", 0.2)]}

    evs = evaluators(
        ["recall@1", "mrr"],
        question_key=lambda run, ex: ex.inputs["question"].upper(),
        answer_key=lambda run, ex: run.outputs["reply"]["text"],
        contexts_from=lambda run, ex: [
            Context(text=CORPUS[i], id=i, score=s) for i, s in run.outputs["hits"]
        ],
        reference_key=lambda run, ex: "Paris",
        relevance_key=lambda run, ex: {"d1": 1},
    )
    (row,) = list(run_evaluate(target, [example()], evaluators=evs))
    assert {k: v.score for k, v in by_key(row).items()} == {"recall@1": 0.0, "mrr": 0.5}
    sample = evs[0].suite.sample(row["run"], row["example"])
    assert sample.question == "WHAT IS THE CAPITAL OF FRANCE?"
    assert (sample.answer, sample.reference, sample.context_ids) == (ANSWER, "Paris", ["d3", "d1"])
    assert [c.score for c in sample.contexts] == [0.9, 0.2]


def test_sample_from_replaces_the_extraction() -> None:
    def build(run: Any, ex: Any) -> Sample:
        return Sample(
            id="mine", question="q", contexts=[Context(text="t", id="d1")], relevance={"d1": 1}
        )

    evs = evaluators(["recall@1"], sample_from=build)
    (row,) = list(run_evaluate(plain_target, [example()], evaluators=evs))
    result = by_key(row)["recall@1"]
    assert (result.score, result.evaluator_info["sample_id"]) == (1.0, "mine")


def test_bad_options_fail_at_construction() -> None:
    with pytest.raises(TypeError, match="answer_key must be a key name"):
        evaluators(["mrr"], answer_key=3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"keys names metrics that are not in this set: nope"):
        evaluators(["mrr"], keys={"nope": "x"})
    with pytest.raises(ValueError, match="faithfulness need a judge"):
        evaluators(["faithfulness"])
    evs = evaluators(["mrr"])
    with pytest.raises(TypeError, match="only apply when summary_evaluators builds"):
        summary_evaluators(evs, judge=CountingJudge())


# --------------------------------------------------------------------------- failures


def test_judge_failure_is_a_failed_result_and_the_experiment_completes() -> None:
    judge = ScriptedJudge({"*": PermanentJudgeError("quota exhausted")})
    evs = evaluators(["faithfulness", "recall@2"], judge=judge, max_retries=0)
    data = [example(n=i, answer="Paris", relevance={"d1": 1}) for i in (1, 2, 3)]
    rows = list(run_evaluate(plain_target, data, evaluators=evs))
    assert len(rows) == 3
    for row in rows:
        found = by_key(row)
        failed = found["faithfulness"]
        assert failed.score is None
        assert failed.comment is not None
        assert failed.comment.startswith("failed (judge_error): ")
        assert "quota exhausted" in failed.comment
        assert failed.extra == {"error": True}
        assert failed.evaluator_info["status"] == "failed"
        assert failed.evaluator_info["failure"]["kind"] == "judge_error"
        # the ranking metric of the same run is unaffected
        assert found["recall@2"].score == 1.0
        assert found["recall@2"].extra is None


def test_missing_answer_names_the_run_and_the_keys_tried() -> None:
    def target(inputs: dict[str, Any]) -> dict[str, Any]:
        return {"result": "Paris", "contexts": [{"page_content": CORPUS["d1"], "id": "d1"}]}

    judge = CountingJudge()
    evs = evaluators(["faithfulness", "recall@2"], judge=judge)
    (row,) = list(run_evaluate(target, [example(relevance={"d1": 1})], evaluators=evs))
    found = by_key(row)
    comment = found["faithfulness"].comment
    assert found["faithfulness"].score is None
    assert comment is not None
    assert comment.startswith("failed (missing_input): faithfulness needs the sample's 'answer'")
    assert f"run {row['run'].id} ({row['run'].name!r})" in comment
    assert "keys tried: answer, output" in comment
    assert "outputs have: result, contexts" in comment
    assert "pass answer_key=<output name>" in comment
    assert found["recall@2"].score == 1.0
    assert judge.calls == 0


def test_a_failed_target_says_so_in_the_comment() -> None:
    def target(inputs: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError("index unavailable")

    evs = evaluators(["faithfulness"], judge=CountingJudge(), contexts_from=lambda r, e: ["c"])
    (row,) = list(run_evaluate(target, [example()], evaluators=evs))
    comment = by_key(row)["faithfulness"].comment
    assert comment is not None
    assert "no answer in the run's outputs" in comment
    assert "the target failed: RuntimeError('index unavailable')" in comment


def test_unreadable_runs_fail_every_metric_with_a_clear_message() -> None:
    def no_contexts(inputs: dict[str, Any]) -> dict[str, Any]:
        return {"answer": "Paris"}

    evs = evaluators(["answer_relevance:offline", "mrr"], embedder=HashEmbedder())
    (row,) = list(run_evaluate(no_contexts, [example()], evaluators=evs))
    for result in by_key(row).values():
        assert result.score is None
        assert result.comment is not None
        assert result.comment.startswith("failed (missing_input): no contexts")
        assert "none of contexts, documents, context (outputs have: answer)" in result.comment
        assert "no retriever child run" in result.comment
        assert str(row["run"].id) in result.comment

    evs = evaluators(["mrr"], question_key="nope")
    (row,) = list(run_evaluate(plain_target, [example()], evaluators=evs))
    result = by_key(row)["mrr"]
    assert result.comment == (
        f"failed (missing_input): run {row['run'].id} ({row['run'].name!r}): no question in the "
        "run's inputs (keys tried: nope; inputs have: question); pass question_key=<input name>"
    )

    def bad_docs(inputs: dict[str, Any]) -> dict[str, Any]:
        return {"answer": "x", "documents": [{"title": "no text"}]}

    evs = evaluators(["mrr"])
    (row,) = list(run_evaluate(bad_docs, [example(relevance={"d1": 1})], evaluators=evs))
    result = by_key(row)["mrr"]
    assert result.comment is not None
    assert result.comment.startswith("failed (invalid_input): ")
    assert "no page_content in item 0 (keys: title)" in result.comment


# --------------------------------------------------------------------------- event loops


@pytest.mark.parametrize("max_concurrency", [None, 0])
def test_sync_evaluate_inside_a_running_event_loop(max_concurrency: int | None) -> None:
    judge = ScriptedJudge(dict(SCRIPT))
    evs = evaluators(["faithfulness", "recall@2"], judge=judge, max_retries=0)
    data = [example(n=i, answer="Paris", relevance={"d1": 1}) for i in (1, 2)]

    async def main() -> list[Any]:
        asyncio.get_running_loop()  # a loop is running around the sync evaluate call
        results = run_evaluate(plain_target, data, evaluators=evs, max_concurrency=max_concurrency)
        return list(results)

    rows = asyncio.run(main())
    assert [{k: v.score for k, v in by_key(r).items()} for r in rows] == [
        {"faithfulness": 0.5, "recall@2": 1.0}
    ] * 2


def test_aevaluate_awaits_the_same_evaluators_natively() -> None:
    judge = ScriptedJudge(dict(SCRIPT))
    evs = evaluators(["faithfulness", "recall@2"], judge=judge, max_retries=0)
    sums = summary_evaluators(evs)
    data = [example(n=i, answer="Paris", relevance={"d1": 1}) for i in (1, 2)]

    async def target(inputs: dict[str, Any]) -> dict[str, Any]:
        return plain_target(inputs)

    async def main() -> tuple[list[Any], dict[str, Any]]:
        results = await langsmith.aevaluate(
            target,
            data=data,
            evaluators=evs,
            summary_evaluators=sums,
            upload_results=False,
            client=offline_client(),
        )
        rows = [row async for row in results]
        return rows, results._summary_results

    rows, summary = asyncio.run(main())
    assert [{k: v.score for k, v in by_key(r).items()} for r in rows] == [
        {"faithfulness": 0.5, "recall@2": 1.0}
    ] * 2
    assert judge.tasks() == ["answer.analyze", "faithfulness.verify"] * 2
    means = {r.key: r.score for r in summary["results"]}
    assert means["faithfulness_mean"] == 0.5
    assert means["recall@2_failed"] == 0


# --------------------------------------------------------------------------- summaries


def _summary_data() -> list[Example]:
    relevance = [{"d1": 1}, {"d1": 1, "d3": 1}, {"d2": 1}, {"d3": 1, "d9": 1}, {"d1": 1}]
    return [example(n=i, answer="Paris", relevance=r) for i, r in enumerate(relevance, 1)]


def _summary_target(inputs: dict[str, Any]) -> dict[str, Any]:
    out = plain_target(inputs)
    out["contexts"] = [
        Document(id="d1", page_content=CORPUS["d1"]),
        {"page_content": CORPUS["d3"], "id": "d3"},
    ]
    if inputs.get("drop_answer"):
        del out["answer"]
    return out


def test_summary_mean_and_ci_match_core_stats() -> None:
    judge = CountingJudge()
    evs = evaluators(["recall@2", "faithfulness"], judge=judge)
    sums = summary_evaluators(evs, n_resamples=500, seed=7)
    data = _summary_data()
    data[4] = Example(
        id=data[4].id, inputs={"question": "q", "drop_answer": True}, outputs=data[4].outputs
    )
    results = run_evaluate(_summary_target, data, evaluators=evs, summary_evaluators=sums)
    rows = list(results)
    calls_after_runs = judge.calls
    summary = {r.key: r for r in results._summary_results["results"]}
    assert sorted(summary) == [
        "faithfulness_failed",
        "faithfulness_mean",
        "recall@2_failed",
        "recall@2_mean",
    ]
    recalls = [by_key(r)["recall@2"].score for r in rows]
    assert recalls == [1.0, 1.0, 0.0, 0.5, 1.0]
    expected = mean_ci(recalls, n_resamples=500, seed=7)
    mean = summary["recall@2_mean"]
    assert mean.score == pytest.approx(expected.mean)
    assert (mean.evaluator_info["ci_low"], mean.evaluator_info["ci_high"]) == (
        expected.low,
        expected.high,
    )
    assert mean.evaluator_info["n"] == 5
    assert mean.comment == (
        f"mean {expected.mean:.3f}, 95% CI [{expected.low:.3f}, {expected.high:.3f}]; "
        "n=5 scored, 0 failed, 0 skipped"
    )
    # faithfulness: one run has no answer, so 4 scored and 1 failed
    faith = [by_key(r)["faithfulness"].score for r in rows]
    values = [v for v in faith if v is not None]
    assert len(values) == 4
    assert summary["faithfulness_mean"].score == pytest.approx(mean_ci(values).mean)
    assert summary["faithfulness_mean"].evaluator_info["failed_by_kind"] == {"missing_input": 1}
    assert summary["faithfulness_failed"].score == 1
    assert summary["faithfulness_failed"].comment == "1 of 5 runs failed (missing_input: 1)"
    assert "n=4 scored, 1 failed (missing_input: 1), 0 skipped" in (
        summary["faithfulness_mean"].comment or ""
    )
    # read from the per-run results: the summaries made no judge call of their own
    assert judge.calls == calls_after_runs == 8


def test_summary_from_metric_names_scores_the_runs_itself() -> None:
    sums = summary_evaluators(["recall@2", "mrr"], combined=True, seed=3)
    assert len(sums) == 1
    results = run_evaluate(_summary_target, _summary_data(), summary_evaluators=sums)
    list(results)
    summary = {r.key: r.score for r in results._summary_results["results"]}
    assert summary["recall@2_mean"] == pytest.approx(0.7)
    assert summary["mrr_mean"] == pytest.approx(mean_ci([1.0, 1.0, 0.0, 0.5, 1.0]).mean)
    assert summary["mrr_failed"] == 0


def test_summary_with_nothing_scored_reports_no_mean() -> None:
    suite = RagbridgeEvaluators(["mrr"])
    (summary,) = suite.summary_evaluators()
    # no relevant document: ranking measures skip; no labels at all: they fail, saying where
    # the labels were looked for
    data = [example(n=1, relevance={}), example(n=2, relevance={}), example(n=3)]
    results = run_evaluate(plain_target, data, summary_evaluators=[summary])
    rows = list(results)
    found = {r.key: r for r in results._summary_results["results"]}
    assert found["mrr_mean"].score is None
    assert found["mrr_mean"].comment == (
        "no run scored; n=0 scored, 1 failed (missing_input: 1), 2 skipped"
    )
    assert found["mrr_failed"].score == 1
    third = suite.scores(rows[2]["run"], rows[2]["example"])["mrr"]
    assert third.failure is not None
    assert third.failure.message == (
        "ranking measures need relevance labels: the sample's 'relevance' is null: "
        f"example {uuid.UUID(int=3)}: no relevance labels in the example's outputs (keys tried: "
        "relevance, qrels, relevant_ids; outputs have: none); pass relevance_key=<output name>"
    )


# ----------------------------------------------------------------- ids that never match labels


def _vector_store_pipeline() -> Any:
    """LangChain's default: a vector store gives each chunk a fresh UUID as ``Document.id``;
    the labelled document name sits in ``metadata["source"]``."""
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_core.vectorstores import InMemoryVectorStore

    store = InMemoryVectorStore.from_texts(
        list(CORPUS.values()),
        DeterministicFakeEmbedding(size=16),
        metadatas=[{"source": doc_id} for doc_id in CORPUS],
    )
    retriever = store.as_retriever(search_kwargs={"k": 3})

    @traceable(name="rag")
    def rag(inputs: dict[str, Any]) -> dict[str, Any]:
        retriever.invoke(inputs["question"])
        return {"answer": ANSWER}

    return rag


def test_uuid_document_ids_are_said_in_comments_and_summary() -> None:
    """Before: recall@2 0.0 on every run, comment "score 0.000". After: a typed failure naming
    id_key='source', and the run-level warning in the comment and the summary."""
    suite = RagbridgeEvaluators(["recall@2", "mrr"])
    data = [example(n=i, relevance={d: 1}) for i, d in enumerate(CORPUS, 1)]
    results = run_evaluate(
        _vector_store_pipeline(),
        data,
        evaluators=suite.evaluators(),
        summary_evaluators=suite.summary_evaluators(),
    )
    rows = list(results)
    assert len(rows) == 3
    for row in rows:
        recall = by_key(row)["recall@2"]
        assert recall.score is None
        assert recall.comment is not None
        assert recall.comment.startswith("failed (invalid_input): none of the 3 retrieved")
        assert "metadata['source'] holds labelled ids" in recall.comment
        assert "id_key='source'" in recall.comment
        assert "warning: ranking measures" in recall.comment  # the cause is certain: said at once
    # once every run was seen, the comment counts all of them
    again = suite.result("recall@2", suite.outcome(rows[0]["run"], rows[0]["example"]))
    (warning,) = suite.scorer.warnings
    assert warning.startswith("ranking measures: 3 of 3 labelled samples retrieved no labelled")
    hint = "hint: with these evaluators, pass id_key='source' to evaluators(...)"
    assert again.comment is not None
    assert again.comment.endswith(f"\nwarning: {warning}\n{hint}")
    assert again.evaluator_info["warnings"] == [warning]
    assert again.evaluator_info["hint"] == hint
    summary = {r.key: r for r in results._summary_results["results"]}
    assert summary["recall@2_mean"].comment is not None
    assert f"warning: {warning}\n{hint}" in summary["recall@2_mean"].comment
    assert summary["recall@2_mean"].evaluator_info["warnings"] == [warning]
