"""ragbridge metrics as LlamaIndex evaluators, and live scoring of every query, offline.

Real LlamaIndex objects throughout: a `VectorStoreIndex` over `Document`s with ids (split into
several nodes each, embedded by a small word-hashing `BaseEmbedding` so ranking is meaningful),
a real ``RetrieverQueryEngine`` with ``MockLLM`` and a `CustomQueryEngine` giving short answers,
`BatchEvalRunner` as LlamaIndex ships it. Judges are ragbridge's `ScriptedJudge` and
`CountingJudge`.
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

import pytest

pytest.importorskip("llama_index.core")

from llama_index.core import Document, VectorStoreIndex
from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.base.response.schema import Response, StreamingResponse
from llama_index.core.evaluation import BatchEvalRunner, EvaluationResult
from llama_index.core.instrumentation.dispatcher import instrument_tags
from llama_index.core.llms import MockLLM
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.query_engine import CustomQueryEngine
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from llamaindex_fakes import HashEmbedding

from ragbridge.adapters.llamaindex import (
    LiveScoring,
    RagbridgeEvaluationResult,
    RagbridgeEvaluator,
    evaluators_for,
    score_queries,
)
from ragbridge.adapters.llamaindex import capture as li
from ragbridge.adapters.llamaindex import evaluators as ev
from ragbridge.core.judging.judge import PermanentJudgeError
from ragbridge.core.results.evaluation import FailureKind
from ragbridge.core.sample import Context, Sample
from ragbridge.core.scoring.scorer import Scorer
from ragbridge.core.testing import CountingJudge, ScriptedJudge

# --------------------------------------------------------------------------- fixtures


TOPICS = {
    "france": "Paris is the capital of France. The Eiffel tower stands in Paris.",
    "germany": "Berlin is the capital of Germany. The Brandenburg gate is in Berlin.",
    "italy": "Rome is the capital of Italy. The Colosseum stands in Rome.",
    "spain": "Madrid is the capital of Spain. The Prado museum is in Madrid.",
    "greece": "Athens is the capital of Greece. The Parthenon stands in Athens.",
}

QUESTIONS = {
    "france": "Where is the Eiffel tower in Paris France?",
    "germany": "Where is the Brandenburg gate in Berlin Germany?",
    "italy": "Where is the Colosseum in Rome Italy?",
    "spain": "Where is the Prado museum in Madrid Spain?",
    "greece": "Where is the Parthenon in Athens Greece?",
}


@pytest.fixture(scope="module")
def index() -> VectorStoreIndex:
    documents = [
        Document(text=" ".join([body] * 4) + f" Remember {doc_id} well.", id_=doc_id)
        for doc_id, body in TOPICS.items()
    ]
    return VectorStoreIndex.from_documents(
        documents,
        embed_model=HashEmbedding(model_name="hash-64"),
        transformations=[SentenceSplitter(chunk_size=32, chunk_overlap=0)],
    )


class ShortAnswerEngine(BaseQueryEngine):
    """A real retriever; the answer is the first sentence of the best node.

    A `BaseQueryEngine` subclass, not a `CustomQueryEngine`: the latter overrides
    ``query``/``aquery`` without the instrumentation span and emits no ``QueryEndEvent``.
    """

    def __init__(self, retriever: Any) -> None:
        self.retriever = retriever
        super().__init__(callback_manager=None)

    def _get_prompt_modules(self) -> dict[str, Any]:
        return {}

    def _answer(self, nodes: list[NodeWithScore]) -> Response:
        first = nodes[0].node.get_content().split(". ")[0] + "."
        return Response(response=first, source_nodes=nodes)

    def _query(self, query_bundle: QueryBundle) -> Response:
        return self._answer(self.retriever.retrieve(query_bundle))

    async def _aquery(self, query_bundle: QueryBundle) -> Response:
        nodes = await self.retriever.aretrieve(query_bundle)
        await asyncio.sleep(0.01)  # let concurrent queries interleave
        return self._answer(nodes)


@pytest.fixture(scope="module")
def short_engine(index: VectorStoreIndex) -> ShortAnswerEngine:
    return ShortAnswerEngine(retriever=index.as_retriever(similarity_top_k=2))


@pytest.fixture(scope="module")
def engine(index: VectorStoreIndex) -> Any:
    return index.as_query_engine(llm=MockLLM(), similarity_top_k=3)


SAMPLE_Q = "Where is the Eiffel Tower?"
SAMPLE_A = "The Eiffel Tower is in Paris. It is 500 metres tall."
SAMPLE_C = ["The Eiffel Tower is a tower in Paris."]
ANALYZE = {
    "claims": ["The Eiffel Tower is in Paris.", "It is 500 metres tall."],
    "questions": ["Where is the Eiffel Tower?"],
    "noncommittal": False,
}


def verdicts(*supported: bool) -> dict[str, Any]:
    return {
        "verdicts": [
            {
                "reason": "context 1 says so" if ok else "no height is given",
                "verdict": "supported" if ok else "unsupported",
                "context": 1 if ok else None,
            }
            for ok in supported
        ]
    }


def judge_for(*supported: bool) -> ScriptedJudge:
    return ScriptedJudge({"answer.analyze": ANALYZE, "faithfulness.verify": verdicts(*supported)})


# --------------------------------------------------------------------------- evaluator


def test_passing_result_field_by_field_and_equal_to_the_scorer() -> None:
    evaluator = RagbridgeEvaluator("faithfulness", judge=judge_for(True, True), threshold=0.8)
    result = evaluator.evaluate(query=SAMPLE_Q, response=SAMPLE_A, contexts=SAMPLE_C)
    assert isinstance(result, EvaluationResult)
    assert isinstance(result, RagbridgeEvaluationResult)
    assert result.query == SAMPLE_Q
    assert result.response == SAMPLE_A
    assert result.contexts == SAMPLE_C
    assert result.score == 1.0
    assert result.passing is True
    assert result.invalid_result is False
    assert result.invalid_reason is None
    assert result.metric == "faithfulness"
    lines = result.feedback.splitlines() if result.feedback else []
    assert len(lines) == 3
    assert lines[1].strip().startswith("✓ [supported] The Eiffel Tower is in Paris.")
    assert lines[2].strip().startswith("✓ [supported] It is 500 metres tall.")
    direct = Scorer(["faithfulness"], judge=judge_for(True, True)).score(
        Sample(id="x", question=SAMPLE_Q, answer=SAMPLE_A, contexts=SAMPLE_C)
    )["faithfulness"]
    assert result.ragbridge_score is not None
    assert result.ragbridge_score.value == direct.value
    assert result.ragbridge_score.details == direct.details
    assert result.ragbridge_score.usage.calls == direct.usage.calls == 2


def test_failing_result_and_hallucination_reads_lower_is_better() -> None:
    faithful = RagbridgeEvaluator("faithfulness", judge=judge_for(True, False), threshold=0.6)
    result = faithful.evaluate(query=SAMPLE_Q, response=SAMPLE_A, contexts=SAMPLE_C)
    assert (result.score, result.passing, result.invalid_result) == (0.5, False, False)
    assert result.feedback is not None
    assert "✗ [unsupported] It is 500 metres tall. — no height is given" in result.feedback

    lenient = RagbridgeEvaluator("hallucination", judge=judge_for(True, False), threshold=0.6)
    strict = RagbridgeEvaluator("hallucination", judge=judge_for(True, False), threshold=0.4)
    assert lenient.lower_is_better
    assert not faithful.lower_is_better
    first = lenient.evaluate(query=SAMPLE_Q, response=SAMPLE_A, contexts=SAMPLE_C)
    second = strict.evaluate(query=SAMPLE_Q, response=SAMPLE_A, contexts=SAMPLE_C)
    assert (first.score, first.passing) == (0.5, True)  # 0.5 <= 0.6
    assert (second.score, second.passing) == (0.5, False)  # 0.5 > 0.4


def test_judge_failure_is_an_invalid_result_not_a_low_score() -> None:
    judge = ScriptedJudge({"*": PermanentJudgeError("HTTP 401 bad key")})
    evaluator = RagbridgeEvaluator("faithfulness", judge=judge, max_retries=0)
    result = evaluator.evaluate(query=SAMPLE_Q, response=SAMPLE_A, contexts=SAMPLE_C)
    score = result.ragbridge_score
    assert score is not None
    assert score.failure is not None
    assert score.failure.kind == FailureKind.JUDGE_ERROR
    assert result.invalid_result is True
    assert result.invalid_reason == score.failure.message
    assert "HTTP 401 bad key" in result.invalid_reason
    assert result.score is None
    assert result.passing is None
    assert result.feedback == f"failed (judge_error): {score.failure.message}"


def test_missing_answer_and_skipped_ranking_are_invalid_with_reasons() -> None:
    evaluator = RagbridgeEvaluator("faithfulness", judge=judge_for(True))
    result = evaluator.evaluate(query=SAMPLE_Q, response=None, contexts=SAMPLE_C)
    assert result.invalid_result is True
    assert result.invalid_reason == "faithfulness needs the sample's 'answer', which is empty"
    assert result.score is None
    assert result.passing is None

    recall = RagbridgeEvaluator("recall@2")
    skipped = recall.evaluate(
        query="q", response="a", contexts=[Context(text="t", id="d1")], relevance={"d9": 0}
    )
    assert skipped.invalid_result is True
    assert skipped.invalid_reason is not None
    assert skipped.invalid_reason.startswith("skipped: ")
    assert skipped.score is None


def test_bad_input_names_the_query_and_the_field() -> None:
    evaluator = RagbridgeEvaluator("faithfulness", judge=judge_for(True))
    with pytest.raises(TypeError, match=r"query 'q1': contexts\[1\] must be a str.*got int"):
        evaluator.evaluate(query="q1", response="a", contexts=["ok", 3])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="query 'q2': contexts must be a list of texts"):
        evaluator.evaluate(query="q2", response="a", contexts="one string")
    with pytest.raises(ValueError, match=r"query 'q3': relevance\.d1: a grade must be an integer"):
        evaluator.evaluate(query="q3", response="a", contexts=["t"], relevance={"d1": True})
    with pytest.raises(ValueError, match="not one of the scorer's"):
        RagbridgeEvaluator("mrr", scorer=Scorer(["faithfulness"], judge=judge_for(True)))
    with pytest.raises(ValueError, match="threshold"):
        RagbridgeEvaluator("mrr", threshold=1.5)
    with pytest.raises(ValueError, match="unknown metrics"):
        evaluators_for(["mrr"], thresholds={"ndcg@3": 0.2})


def test_prompt_mixin_is_implemented() -> None:
    evaluator = RagbridgeEvaluator("mrr")
    assert evaluator.get_prompts() == {}
    evaluator.update_prompts({})
    assert evaluator.get_prompts() == {}
    assert repr(evaluator) == "RagbridgeEvaluator('mrr', threshold=0.5)"


def test_evaluate_response_keeps_document_ids_for_ranking(short_engine: Any) -> None:
    response = short_engine.query(QUESTIONS["italy"])
    recall = RagbridgeEvaluator("recall@1")
    result = recall.evaluate_response(
        query=QUESTIONS["italy"], response=response, relevance={"italy": 1}
    )
    assert result.sample is not None
    assert [c.id for c in result.sample.contexts] == [
        n.node.ref_doc_id for n in response.source_nodes
    ]
    assert [c.metadata["node_id"] for c in result.sample.contexts] == [
        n.node.node_id for n in response.source_nodes
    ]
    assert result.contexts == [n.node.get_content() for n in response.source_nodes]
    assert result.response == response.response
    assert (result.score, result.passing) == (1.0, True)
    wrong = recall.evaluate_response(
        query=QUESTIONS["italy"], response=response, relevance={"spain": 1}
    )
    assert (wrong.score, wrong.passing) == (0.0, False)


def test_evaluate_response_refuses_an_unconsumed_stream() -> None:
    stream = StreamingResponse(response_gen=iter(["a", "b"]))
    with pytest.raises(ValueError, match="streaming response"):
        RagbridgeEvaluator("mrr").evaluate_response(query="q", response=stream)
    assert "".join(stream.response_gen) == "ab"  # the caller's stream is untouched


def test_evaluate_inside_a_running_loop() -> None:
    evaluator = RagbridgeEvaluator("faithfulness", judge=judge_for(True, False))

    async def main() -> EvaluationResult:
        return evaluator.evaluate(query=SAMPLE_Q, response=SAMPLE_A, contexts=SAMPLE_C)

    assert asyncio.run(main()).score == 0.5


def test_shared_evaluators_cost_what_one_scorer_costs() -> None:
    names = ["faithfulness", "hallucination", "answer_relevance"]
    sample = Sample(id="s", question=SAMPLE_Q, answer=SAMPLE_A, contexts=SAMPLE_C)

    embedder = HashEmbedding()  # answer_relevance needs one: refused at construction without
    direct_judge = CountingJudge()
    direct = Scorer(names, judge=direct_judge, embedder=embedder).score(sample)

    shared_judge = CountingJudge()
    group = evaluators_for(names, judge=shared_judge, embed_model=embedder)
    runner = BatchEvalRunner(evaluators=dict(group), workers=3)
    results = runner.evaluate_response_strs(
        queries=[SAMPLE_Q], response_strs=[SAMPLE_A], contexts_list=[SAMPLE_C]
    )
    assert shared_judge.calls == direct_judge.calls
    assert shared_judge.by_task == direct_judge.by_task
    for name in names:
        (result,) = results[name]
        assert result.score == direct[name].value
    assert group["faithfulness"].scorer.kept == 0  # every metric took its score: record dropped

    separate_judge = CountingJudge()
    for name in names:
        RagbridgeEvaluator(name, judge=separate_judge, embed_model=embedder).evaluate(
            query=SAMPLE_Q, response=SAMPLE_A, contexts=SAMPLE_C
        )
    assert separate_judge.calls > shared_judge.calls
    assert separate_judge.by_task["answer.analyze"] == 3  # each of the three pays for it
    assert shared_judge.by_task["answer.analyze"] == 1


def test_shared_memo_carries_finished_work_across_event_loops() -> None:
    # Sync evaluate() calls each run on their own event loop.
    judge = CountingJudge()
    group = evaluators_for(["faithfulness", "hallucination"], judge=judge)
    first = group["faithfulness"].evaluate(query=SAMPLE_Q, response=SAMPLE_A, contexts=SAMPLE_C)
    calls = judge.calls
    second = group["hallucination"].evaluate(query=SAMPLE_Q, response=SAMPLE_A, contexts=SAMPLE_C)
    assert judge.calls == calls  # the claims and verdicts were reused
    assert first.score is not None
    assert second.score is not None
    assert second.ragbridge_score is not None
    assert second.ragbridge_score.usage.calls == 0


def test_memo_is_bounded() -> None:
    group = evaluators_for(["faithfulness", "hallucination"], judge=CountingJudge())
    shared = group["faithfulness"].scorer
    shared.records = 3
    for i in range(6):
        group["faithfulness"].evaluate(query=f"q{i}", response=SAMPLE_A, contexts=SAMPLE_C)
    assert shared.kept == 3


def test_batch_eval_runner_over_a_real_query_engine(short_engine: Any) -> None:
    judge = CountingJudge()
    evaluators = evaluators_for(
        ["faithfulness", "recall@2"], judge=judge, thresholds={"faithfulness": 0.0}
    )
    doc_ids = list(QUESTIONS)
    queries = [QUESTIONS[d] for d in doc_ids]
    runner = BatchEvalRunner(evaluators=dict(evaluators), workers=2)
    results = asyncio.run(
        runner.aevaluate_queries(short_engine, queries=queries, relevance=[{d: 1} for d in doc_ids])
    )
    assert set(results) == {"faithfulness", "recall@2"}
    check = Scorer(["faithfulness", "recall@2"], judge=CountingJudge())
    for doc_id, question, faith, recall in zip(
        doc_ids, queries, results["faithfulness"], results["recall@2"], strict=True
    ):
        response = short_engine.query(question)
        for result in (faith, recall):
            assert result.query == question
            assert result.response == response.response
            assert result.contexts == [n.node.get_content() for n in response.source_nodes]
            assert result.invalid_result is False
        assert recall.score == 1.0
        assert recall.passing is True
        assert faith.sample is not None
        assert faith.sample.contexts[0].id == doc_id
        expected = check.score(faith.sample)
        assert faith.score == expected["faithfulness"].value
        assert faith.passing is True


def test_batch_eval_runner_evaluate_responses_sync(engine: Any) -> None:
    questions = [QUESTIONS["spain"], QUESTIONS["greece"]]
    responses = [engine.query(q) for q in questions]
    runner = BatchEvalRunner(evaluators={"mrr": RagbridgeEvaluator("mrr")}, workers=2)
    results = runner.evaluate_responses(
        queries=questions, responses=responses, relevance=[{"spain": 1}, {"france": 1}]
    )
    spain, greece = results["mrr"]
    assert (spain.score, spain.passing) == (1.0, True)
    # greece's question retrieves no france chunk in its top 3
    assert greece.sample is not None
    assert "france" not in [c.id for c in greece.sample.contexts]
    assert (greece.score, greece.passing) == (0.0, False)


# --------------------------------------------------------------------------- live scoring


def _expected_contexts(response: Any) -> list[tuple[str | None, str]]:
    return [(n.node.ref_doc_id, n.node.get_content()) for n in response.source_nodes]


def _contexts(sample: Sample) -> list[tuple[str | None, str]]:
    return [(c.id, c.text) for c in sample.contexts]


def test_live_scoring_of_sync_queries(engine: Any) -> None:
    judge = CountingJudge()
    with score_queries(["faithfulness", "hallucination"], judge=judge) as live:
        assert isinstance(live, LiveScoring)
        assert live.active
        responses = {d: engine.query(q) for d, q in QUESTIONS.items()}
    assert not live.active
    assert (live.seen, live.scored, live.skipped, live.dropped, live.pending) == (5, 5, 0, 0, 0)
    assert live.evaluation.sample_ids == [f"query-{i}" for i in range(1, 6)]
    assert live.evaluation.metrics == ["faithfulness", "hallucination"]
    assert len(live.evaluation) == 10
    check = Scorer(["faithfulness", "hallucination"], judge=CountingJudge())
    for sample, (doc_id, question) in zip(live.samples, QUESTIONS.items(), strict=True):
        response = responses[doc_id]
        assert sample.question == question
        assert sample.answer == response.response
        assert _contexts(sample) == _expected_contexts(response)
        assert sample.contexts[0].id == doc_id
        assert sample.metadata["retrievals"] == 1
        assert sample.metadata["span_id"].startswith("RetrieverQueryEngine.query-")
        expected = check.score(sample)
        for name in ("faithfulness", "hallucination"):
            score = live.evaluation.get(sample.id, name)
            assert score is not None
            assert score.status == "scored"
            assert score.value == expected[name].value
    assert live.evaluation.metadata["seen"] == 5
    assert live.evaluation.metadata["judge_stats"]["calls"] == judge.calls
    assert live.errors == []


def test_live_scoring_of_concurrent_async_queries(short_engine: Any) -> None:
    async def ask(doc_id: str) -> Any:
        with instrument_tags({li.SAMPLE_TAG: f"req-{doc_id}", "team": "search"}):
            return await short_engine.aquery(QUESTIONS[doc_id])

    async def main() -> dict[str, Any]:
        async with score_queries(["faithfulness"], judge=CountingJudge()) as live:
            responses = await asyncio.gather(*(ask(d) for d in QUESTIONS))
        assert not live.active
        return {"live": live, **dict(zip(QUESTIONS, responses, strict=True))}

    out = asyncio.run(main())
    live = out.pop("live")
    assert (live.seen, live.scored, live.pending) == (5, 5, 0)
    assert sorted(live.evaluation.sample_ids) == sorted(f"req-{d}" for d in QUESTIONS)
    by_id = {s.id: s for s in live.samples}
    for doc_id, response in out.items():
        sample = by_id[f"req-{doc_id}"]
        assert sample.question == QUESTIONS[doc_id]
        assert sample.answer == response.response
        assert _contexts(sample) == _expected_contexts(response)
        assert sample.metadata["tags"]["team"] == "search"
        assert sample.metadata["span_id"].startswith("ShortAnswerEngine.aquery-")
        score = live.evaluation.get(sample.id, "faithfulness")
        assert score is not None
        assert score.status == "scored"


def test_sampling_is_seeded_and_counts_the_rest(short_engine: Any) -> None:
    questions = [f"{q} round {r}" for r in range(2) for q in QUESTIONS.values()]
    with score_queries(["faithfulness"], judge=CountingJudge(), sample_rate=0.5, seed=7) as live:
        for question in questions:
            short_engine.query(question)
    rng = random.Random(7)
    chosen = [q for q in questions if rng.random() < 0.5]
    assert 0 < len(chosen) < len(questions)
    assert [s.question for s in live.samples] == chosen
    assert live.seen == 10
    assert live.scored == len(chosen)
    assert live.skipped == 10 - len(chosen)
    numbers = [i + 1 for i, q in enumerate(questions) if q in chosen]
    assert live.evaluation.sample_ids == [f"query-{n}" for n in numbers]

    with score_queries(["faithfulness"], judge=CountingJudge(), sample_rate=0.0) as none:
        short_engine.query(QUESTIONS["spain"])
    assert (none.seen, none.skipped, none.scored, len(none.evaluation)) == (1, 1, 0, 0)


def test_failing_judge_gives_failure_rows_and_queries_still_answer(engine: Any) -> None:
    judge = ScriptedJudge({"*": PermanentJudgeError("HTTP 400 context too long")})
    with score_queries(["faithfulness", "recall@3"], judge=judge, max_retries=0) as live:
        answers = [str(engine.query(q)) for q in QUESTIONS.values()]
    assert all(a.startswith("Context information") for a in answers)
    assert live.scored == 5
    for sample_id in live.evaluation.sample_ids:
        faith = live.evaluation.get(sample_id, "faithfulness")
        assert faith is not None
        assert faith.failure is not None
        assert faith.failure.kind == FailureKind.JUDGE_ERROR
        assert "HTTP 400 context too long" in faith.failure.message
        recall = live.evaluation.get(sample_id, "recall@3")
        assert recall is not None
        assert recall.failure is not None
        assert recall.failure.kind == FailureKind.MISSING_INPUT


def test_after_close_no_query_is_scored(engine: Any) -> None:
    live = score_queries(["faithfulness"], judge=CountingJudge())
    engine.query(QUESTIONS["france"])
    assert live.close() is True
    assert live._capture not in li._ROUTER.captures
    assert live._thread is not None
    assert not live._thread.is_alive()
    engine.query(QUESTIONS["germany"])
    asyncio.run(engine.aquery(QUESTIONS["italy"]))
    assert (live.seen, live.scored, len(live.samples)) == (1, 1, 1)
    assert live.close() is True  # closing twice is harmless
    with pytest.raises(RuntimeError, match="closed"):
        live.open()


def test_close_timeout_records_cancelled_rows(short_engine: Any) -> None:
    judge = ScriptedJudge({"*": {"claims": []}}, delay=5.0)
    live = score_queries(["faithfulness"], judge=judge)
    short_engine.query(QUESTIONS["greece"])
    started = time.perf_counter()
    assert live.close(timeout=0.2) is False
    assert time.perf_counter() - started < 3.0
    (sample_id,) = live.evaluation.sample_ids
    score = live.evaluation.get(sample_id, "faithfulness")
    assert score is not None
    assert score.failure is not None
    assert score.failure.kind == FailureKind.CANCELLED
    assert (live.pending, live.scored) == (0, 1)


class StreamingEngine(ShortAnswerEngine):
    def _query(self, query_bundle: QueryBundle) -> StreamingResponse:  # type: ignore[override]
        nodes = self.retriever.retrieve(query_bundle)
        return StreamingResponse(response_gen=iter(["Par", "is"]), source_nodes=nodes)


def test_streaming_response_is_skipped_and_left_to_the_caller(index: VectorStoreIndex) -> None:
    streaming = StreamingEngine(retriever=index.as_retriever(similarity_top_k=1))
    with score_queries(["faithfulness"], judge=CountingJudge()) as live:
        response = streaming.query(QUESTIONS["france"])
    assert "".join(response.response_gen) == "Paris"
    (sample,) = live.samples
    assert sample.contexts[0].id == "france"
    score = live.evaluation.get(sample.id, "faithfulness")
    assert score is not None
    assert score.status == "skipped"
    assert score.reason is not None
    assert "streaming response" in score.reason


class NoSourcesEngine(ShortAnswerEngine):
    def _query(self, query_bundle: QueryBundle) -> Response:
        self.retriever.retrieve(query_bundle)
        return Response(response="plain")


class CustomEngine(CustomQueryEngine):
    retriever: Any

    def custom_query(self, query_str: str) -> Response:
        return Response(response="x", source_nodes=self.retriever.retrieve(query_str))


def test_custom_query_engine_emits_no_query_end_and_is_not_scored(
    index: VectorStoreIndex,
) -> None:
    custom = CustomEngine(retriever=index.as_retriever(similarity_top_k=1))
    with score_queries(["faithfulness"], judge=CountingJudge()) as live:
        custom.query(QUESTIONS["france"])
    assert (live.seen, live.samples) == (0, [])


def test_contexts_fall_back_to_captured_retrievals(index: VectorStoreIndex) -> None:
    plain = NoSourcesEngine(retriever=index.as_retriever(similarity_top_k=2))
    with score_queries(["faithfulness"], judge=CountingJudge()) as live:
        plain.query("Madrid Spain Prado")
        index.as_retriever(similarity_top_k=1).retrieve("Berlin")  # not a query: not scored
    (sample,) = live.samples
    assert sample.answer == "plain"
    assert sample.metadata["contexts_from"] == "instrumentation"
    assert sample.contexts[0].id == "spain"
    assert live.seen == 1
    assert live._capture._by_root == {}  # nothing kept once the calls ended


def test_handler_records_errors_instead_of_raising() -> None:
    # The dispatcher swallows handler exceptions, so the handler is driven directly here.
    live = LiveScoring(["mrr"])
    live.open()
    try:
        capture = live._capture
        _, spans = li._install()
        spans.new_span(id_="root", bound_args=None, parent_span_id=None)

        class Broken:
            @property
            def source_nodes(self) -> list[Any]:
                raise RuntimeError("no sources")

        event = ev.QueryEndEvent(query="q", response=Response(response="a"), span_id="root")
        object.__setattr__(event, "response", Broken())
        capture._event(event)
        spans.prepare_to_exit_span(id_="root", bound_args=None)
        assert live.wait(timeout=5)
    finally:
        live.close()
    (sample,) = live.samples
    score = live.evaluation.get(sample.id, "mrr")
    assert score is not None
    assert score.failure is not None
    assert score.failure.kind == FailureKind.INVALID_INPUT
    assert "RuntimeError: no sources" in score.failure.message


def test_invalid_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="sample_rate"):
        LiveScoring(["mrr"], sample_rate=1.5)
    with pytest.raises(ValueError, match="max_pending"):
        LiveScoring(["mrr"], max_pending=0)


def test_node_contexts_are_accepted_directly() -> None:
    node = NodeWithScore(node=TextNode(text="Paris is in France.", id_="n1"), score=0.3)
    result = RagbridgeEvaluator("mrr").evaluate(
        query="q", response="a", contexts=[node, TextNode(text="x", id_="n2")], relevance={"n2": 1}
    )
    assert result.sample is not None
    assert [(c.id, c.score) for c in result.sample.contexts] == [("n1", 0.3), ("n2", None)]
    assert result.score == 0.5


def test_provider_suffixed_metric_names_resolve() -> None:
    from ragbridge.core.testing import HashEmbedder

    evaluator = RagbridgeEvaluator("faithfulness:offline", embedder=HashEmbedder())
    result = evaluator.evaluate(
        query="Where is Paris?", response="Paris is in France.", contexts=["Paris is in France."]
    )
    assert evaluator.metric.provider == "offline"
    assert result.score == 1.0
    shared = evaluators_for(["faithfulness:offline", "mrr"], embedder=HashEmbedder())
    assert set(shared) == {"faithfulness", "mrr"}


# --------------------------------------------------------------------------- ids vs labels


def test_node_labels_against_document_ids_say_use_ref_doc_id_false(short_engine: Any) -> None:
    """Labels name nodes, contexts are named by document (the default): before, recall 0.0 with
    no word; after, each result fails naming use_ref_doc_id=False, and the feedback carries the
    run-level warning. With use_ref_doc_id=False the same labels score."""
    doc_ids = list(QUESTIONS)[:3]
    queries = [QUESTIONS[d] for d in doc_ids]
    responses = [short_engine.query(q) for q in queries]
    relevance = [{r.source_nodes[0].node.node_id: 1} for r in responses]  # labelled nodes

    by_document = RagbridgeEvaluator("recall@2")
    runner = BatchEvalRunner(evaluators={"recall@2": by_document}, workers=1)
    results = runner.evaluate_responses(queries=queries, responses=responses, relevance=relevance)
    for result in results["recall@2"]:
        assert result.invalid_result is True
        assert result.score is None
        assert "use_ref_doc_id=False" in (result.invalid_reason or "")
        assert "use_ref_doc_id=False" in (result.feedback or "")
    (warning,) = by_document.scorer.warnings
    assert warning.startswith("ranking measures: 3 of 3 labelled samples retrieved no labelled")
    assert "use_ref_doc_id=False" in warning
    assert f"warning: {warning}" in (results["recall@2"][-1].feedback or "")

    by_node = RagbridgeEvaluator("recall@2", use_ref_doc_id=False)
    for query, response, labels in zip(queries, responses, relevance, strict=True):
        fixed = by_node.evaluate_response(query=query, response=response, relevance=labels)
        assert (fixed.score, fixed.passing) == (1.0, True)
        assert "warning" not in (fixed.feedback or "")
    assert by_node.scorer.warnings == []
