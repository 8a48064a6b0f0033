"""Shadow scoring of LlamaIndex query engines: `ragbridge.adapters.llamaindex.shadow`.

Real LlamaIndex objects, offline: a `VectorStoreIndex` embedded by a small word-hashing
`BaseEmbedding` (so retriever scores differ), its ``RetrieverQueryEngine`` answering with
``MockLLM``, and scripted judges from `ragbridge.core.testing`. The wrapper must answer exactly
as the engine does and never wait for the judge; the records must carry what the
instrumentation events measured. One test shares a scorer with the LangChain wrapper.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("llama_index.core")

from llama_index.core import Document, VectorStoreIndex
from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.base.response.schema import Response
from llama_index.core.instrumentation.dispatcher import instrument_tags
from llama_index.core.llms import MockLLM
from llama_index.core.schema import QueryBundle
from llama_index.core.tools import QueryEngineTool
from llamaindex_fakes import HashEmbedding

from ragbridge.adapters.llamaindex import ShadowQueryEngine, shadow
from ragbridge.core.monitoring import MonitorStore, RequestRecord
from ragbridge.core.monitoring.shadow import ShadowScorer
from ragbridge.core.results.evaluation import FailureKind
from ragbridge.core.scoring.background import sampled_by_id
from ragbridge.core.testing import CountingJudge

TOPICS = {
    "france": "Paris is the capital of France. The Eiffel tower stands in Paris.",
    "germany": "Berlin is the capital of Germany. The Brandenburg gate is in Berlin.",
    "italy": "Rome is the capital of Italy. The Colosseum stands in Rome.",
}
QUESTIONS = {
    "france": "Where is the Eiffel tower in Paris France?",
    "germany": "Where is the Brandenburg gate in Berlin Germany?",
    "italy": "Where is the Colosseum in Rome Italy?",
}


@pytest.fixture(scope="module")
def index() -> VectorStoreIndex:
    documents = [Document(text=text, id_=doc_id) for doc_id, text in TOPICS.items()]
    return VectorStoreIndex.from_documents(documents, embed_model=HashEmbedding())


@pytest.fixture
def engine(index: VectorStoreIndex) -> Any:
    return index.as_query_engine(llm=MockLLM(max_tokens=12), similarity_top_k=2)


class Sink:
    def __init__(self) -> None:
        self.served: list[RequestRecord] = []
        self.with_scores: list[RequestRecord] = []

    def request(self, record: RequestRecord) -> None:
        self.served.append(record)

    def scored(self, record: RequestRecord) -> None:
        self.with_scores.append(record)


def _wrapped(engine: Any, **options: Any) -> tuple[ShadowQueryEngine, Sink]:
    sink = Sink()
    options.setdefault("judge", CountingJudge())
    options.setdefault("sample_rate", 1.0)
    return shadow(engine, ["faithfulness"], sinks=[sink], **options), sink


def _id(rate: float, chosen: bool = True) -> str:
    ids = (f"req-{n}" for n in itertools.count())
    return next(r for r in ids if sampled_by_id(r, rate) == chosen)


Q = QUESTIONS["france"]


# --------------------------------------------------------------------------- serving


def test_the_wrapper_answers_exactly_as_the_engine(engine: Any) -> None:
    wrapped, sink = _wrapped(engine)
    with wrapped:
        plain, shadowed = engine.query(Q), wrapped.query(Q)
        assert type(shadowed) is type(plain)
        assert str(shadowed) == str(plain)
        assert [n.node_id for n in shadowed.source_nodes] == [n.node_id for n in plain.source_nodes]
        assert str(asyncio.run(wrapped.aquery(QueryBundle(Q)))) == str(plain)
        assert isinstance(wrapped, BaseQueryEngine)
        assert wrapped.get_prompts().keys() == engine.get_prompts().keys()
        assert wrapped.retriever is engine.retriever  # any other attribute is the engine's
        tool = QueryEngineTool.from_defaults(query_engine=wrapped, name="capitals")
        assert str(tool.call(Q)) == str(plain)
        assert wrapped.scorer.wait(timeout=30)
        assert wrapped._capture._buckets == {}  # nothing held once the queries returned
    assert len(sink.served) == len(sink.with_scores) == 3
    assert all(r.answer_chars == len(str(plain)) for r in sink.served)


def test_concurrent_queries_keep_their_own_measurements(engine: Any) -> None:
    wrapped, sink = _wrapped(engine, sample_rate=0.0)

    async def ask(doc_id: str, n: int) -> Any:
        with instrument_tags({"request_id": f"{doc_id}-{n}"}):
            return await wrapped.aquery(QUESTIONS[doc_id])

    async def serve() -> list[Any]:
        return await asyncio.gather(*(ask(d, n) for n in range(4) for d in QUESTIONS))

    with wrapped:
        assert len(asyncio.run(serve())) == 12
        assert wrapped.scorer.wait(timeout=30)
    assert len(sink.served) == 12
    for record in sink.served:
        doc_id = record.request_id.split("-")[0]
        assert record.question == QUESTIONS[doc_id]
        assert record.attributes["context_ids"][0] == doc_id
        assert record.attributes["request_id_from"] == "instrument_tags"
        assert record.attributes["retrievals"] == 1


def test_an_error_is_raised_as_is_and_recorded() -> None:
    boom = RuntimeError("index offline")

    class Broken(BaseQueryEngine):
        def __init__(self) -> None:
            super().__init__(callback_manager=None)

        def _get_prompt_modules(self) -> dict[str, Any]:
            return {}

        def _query(self, query_bundle: QueryBundle) -> Response:
            raise boom

        async def _aquery(self, query_bundle: QueryBundle) -> Response:
            raise boom

    wrapped, sink = _wrapped(Broken())
    with wrapped:
        with pytest.raises(RuntimeError) as caught:
            wrapped.query(Q)
        assert caught.value is boom
        with pytest.raises(RuntimeError, match="index offline"):
            asyncio.run(wrapped.aquery(Q))
        assert wrapped.scorer.wait(timeout=30)
    assert [r.error for r in sink.served] == ["RuntimeError: index offline"] * 2
    assert not any(r.sampled for r in sink.served)


def test_a_streaming_response_is_recorded_not_scored(index: VectorStoreIndex) -> None:
    streaming = index.as_query_engine(llm=MockLLM(max_tokens=8), streaming=True)
    wrapped, sink = _wrapped(streaming)
    with wrapped:
        response = wrapped.query(Q)
        assert "".join(response.response_gen)  # the caller still reads the whole stream
        assert wrapped.scorer.wait(timeout=30)
    (record,) = sink.served
    assert not record.sampled
    assert "streaming response" in record.attributes["not_scored"]
    assert record.chunks_retrieved == 2


def test_chat_engines_are_refused(index: VectorStoreIndex) -> None:
    chat = index.as_chat_engine(chat_mode="context", llm=MockLLM())
    with pytest.raises(TypeError, match="chat engine"):
        shadow(chat, ["faithfulness"], judge=CountingJudge(), store=None)


# --------------------------------------------------------------------------- measurements


def test_records_reach_the_store_with_timings_chunks_and_scores(
    engine: Any, tmp_path: Path
) -> None:
    store_path = tmp_path / "monitor.sqlite"
    wrapped = shadow(
        engine,
        ["faithfulness"],
        judge=CountingJudge(),
        sample_rate=0.5,
        relevance_threshold=0.5,
        store=store_path,
    )
    sampled, other = _id(0.5), _id(0.5, chosen=False)
    plain = engine.query(Q)
    with wrapped:
        for request_id in (sampled, other):
            with instrument_tags({"request_id": request_id}):
                wrapped.query(Q)
    with MonitorStore(store_path) as store:
        records = {r.request_id: r for r in store.requests()}
    assert set(records) == {sampled, other}
    scored = records[sampled]
    assert scored.pipeline == "RetrieverQueryEngine"
    assert scored.question == Q
    assert scored.retrieval_ms is not None
    assert scored.generation_ms is not None
    assert scored.retrieval_ms + scored.generation_ms <= scored.attributes["latency_ms"]
    assert scored.chunks_retrieved == 2
    expected_used = sum(1 for n in plain.source_nodes if (n.score or 0) >= 0.5)
    assert scored.chunks_used == expected_used == 1  # the France node alone is similar enough
    assert scored.retrieval_miss is False
    assert scored.answer_chars == len(str(plain))
    assert scored.attributes["context_ids"][0] == "france"
    assert scored.attributes["model"]  # MockLLM reports a model name
    assert scored.sampled
    assert scored.scores["faithfulness"].value is not None
    assert not records[other].sampled
    assert records[other].scores == {}


def test_queries_are_sampled_by_their_id(engine: Any) -> None:
    wrapped, sink = _wrapped(engine, sample_rate=0.3)
    ids = [f"user-{i}" for i in range(30)]
    with wrapped:
        for request_id in ids:
            with instrument_tags({"request_id": request_id}):
                wrapped.query(Q)
        assert wrapped.scorer.wait(timeout=60)
    chosen = {r.request_id for r in sink.served if r.sampled}
    assert chosen == {i for i in ids if sampled_by_id(i, 0.3)}
    unnamed = shadow(engine, ["faithfulness"], judge=CountingJudge(), sinks=[sink])
    with unnamed:
        unnamed.query(Q)
        assert unnamed.scorer.wait(timeout=30)
    assert sink.served[-1].attributes["request_id_from"] == "generated"


# --------------------------------------------------------------------------- latency & shutdown


def test_no_added_latency_with_a_slow_judge(engine: Any) -> None:
    """Every query returns while its scoring is still pending: the judge sleeps 5 s per call,
    and 20 queries come back before the first judge call could have finished."""
    wrapped, _ = _wrapped(engine, judge=CountingJudge(delay=5.0))
    try:
        start = time.perf_counter()
        for _ in range(20):
            wrapped.query(Q)
        elapsed = time.perf_counter() - start
        stats = wrapped.scorer.stats()
        assert stats["scored"] == 0  # no query waited for a score
        assert stats["pending"] == 20
        assert elapsed < 5.0
    finally:
        assert wrapped.close(timeout=0.2) is False


def test_close_scores_what_is_pending_or_records_it_cancelled(engine: Any) -> None:
    wrapped, sink = _wrapped(engine, judge=CountingJudge(delay=0.2))
    for _ in range(3):
        wrapped.query(Q)
    assert wrapped.close(timeout=30) is True
    assert all(r.scores["faithfulness"].value is not None for r in sink.with_scores)
    assert len(sink.with_scores) == 3

    slow, late = _wrapped(engine, judge=CountingJudge(delay=5.0))
    slow.query(Q)
    assert slow.close(timeout=0.1) is False
    (record,) = late.with_scores
    assert record.scores["faithfulness"].failure == FailureKind.CANCELLED.value


def test_llm_is_the_llamaindex_name_for_the_judge(engine: Any) -> None:
    wrapped = shadow(engine, ["faithfulness"], llm=MockLLM(), store=None)
    with wrapped:
        assert wrapped.scorer.scorer.judge is not None
    with pytest.raises(ValueError, match="same model"):
        shadow(engine, ["faithfulness"], llm=MockLLM(), judge=CountingJudge(), store=None)


# --------------------------------------------------------------------------- both frameworks


def test_one_scorer_for_a_langchain_chain_and_a_llamaindex_engine(
    engine: Any, tmp_path: Path
) -> None:
    pytest.importorskip("langchain_core")
    from langchain_core.runnables import RunnableLambda

    from ragbridge.adapters import langchain as lc

    store_path = tmp_path / "monitor.sqlite"
    scorer = ShadowScorer(
        ["faithfulness"], judge=CountingJudge(), sample_rate=1.0, store=store_path
    )
    chain = lc.shadow(RunnableLambda(lambda q: "Paris is the capital of France."), scorer,
                      pipeline="langchain")  # fmt: skip
    queries = shadow(engine, scorer, pipeline="llamaindex")
    with scorer:
        chain.invoke(Q, {"metadata": {"request_id": "lc-1"}})
        with instrument_tags({"request_id": "li-1"}):
            queries.query(Q)
    with MonitorStore(store_path) as store:
        records = {r.request_id: r for r in store.requests()}
    assert {r.pipeline for r in records.values()} == {"langchain", "llamaindex"}
    assert all(set(r.scores) == {"faithfulness"} for r in records.values())
    assert records["lc-1"].chunks_retrieved is None  # that chain retrieves nothing
    assert records["li-1"].chunks_retrieved == 2
