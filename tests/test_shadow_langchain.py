"""Shadow scoring of LangChain runnables: `ragbridge.adapters.langchain.shadow`.

Real LangChain objects, offline: a retriever that scores documents by shared words (scores in
metadata, as a retriever that reports them does), an LCEL chain with ``FakeListChatModel``, and
scripted judges from `ragbridge.core.testing`. The wrapper must serve exactly as the chain does
and never wait for the judge; the records must carry what the callbacks measured.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import re
import statistics
import time
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import pytest

pytest.importorskip("langchain_core")

from langchain_core.callbacks import BaseCallbackHandler, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable, RunnableLambda, RunnablePassthrough

from ragbridge.adapters.langchain import ShadowRunnable, shadow
from ragbridge.core.monitoring import MonitorStore, RequestRecord
from ragbridge.core.monitoring.shadow import ShadowScorer
from ragbridge.core.results.evaluation import FailureKind
from ragbridge.core.scoring.background import sampled_by_id
from ragbridge.core.testing import CountingJudge

DOCS = {
    "eiffel": "The Eiffel Tower stands in Paris, the capital of France.",
    "gate": "The Brandenburg Gate stands in Berlin, the capital of Germany.",
    "colosseum": "The Colosseum stands in Rome, the capital of Italy.",
}
ANSWER = "The Eiffel Tower stands in Paris."


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]+", text.lower()))


class WordRetriever(BaseRetriever):
    """Ranks the documents by the share of the question's words they contain; the score goes
    into metadata (LangChain's ``Document`` has no score field)."""

    k: int = 2
    delay: float = 0.0

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        if self.delay:
            time.sleep(self.delay)
        asked = _words(query)
        scored = sorted(
            ((len(asked & _words(text)) / max(len(asked), 1), doc_id, text)
             for doc_id, text in DOCS.items()),
            reverse=True,
        )  # fmt: skip
        return [
            Document(id=doc_id, page_content=text, metadata={"score": round(score, 4)})
            for score, doc_id, text in scored[: self.k]
        ]


def _chain(retrieval_delay: float = 0.0, answer: str = ANSWER) -> Runnable[Any, Any]:
    prompt = ChatPromptTemplate.from_template("Context:\n{context}\n\nQuestion: {question}")
    fmt = RunnableLambda(lambda docs: "\n".join(d.page_content for d in docs))
    return (
        {"context": WordRetriever(delay=retrieval_delay) | fmt, "question": RunnablePassthrough()}
        | prompt
        | FakeListChatModel(responses=[answer])
        | StrOutputParser()
    )


class Sink:
    def __init__(self) -> None:
        self.served: list[RequestRecord] = []
        self.with_scores: list[RequestRecord] = []

    def request(self, record: RequestRecord) -> None:
        self.served.append(record)

    def scored(self, record: RequestRecord) -> None:
        self.with_scores.append(record)


def _wrapped(**options: Any) -> tuple[ShadowRunnable, Sink]:
    sink = Sink()
    options.setdefault("judge", CountingJudge())
    options.setdefault("sample_rate", 1.0)
    wrapped = shadow(_chain(), ["faithfulness"], sinks=[sink], **options)
    return wrapped, sink


def _id(rate: float, chosen: bool = True) -> str:
    """The first request id the sampling rule chooses (or not) at ``rate``."""
    ids = (f"req-{n}" for n in itertools.count())
    return next(r for r in ids if sampled_by_id(r, rate) == chosen)


QUESTION = "Where does the Eiffel Tower stand?"


# --------------------------------------------------------------------------- serving


def test_the_wrapper_serves_exactly_as_the_chain() -> None:
    chain = _chain()
    wrapped, sink = _wrapped()
    with wrapped:
        assert wrapped.invoke(QUESTION) == chain.invoke(QUESTION) == ANSWER
        assert asyncio.run(wrapped.ainvoke(QUESTION)) == ANSWER
        assert wrapped.batch([QUESTION, "Rome?"]) == chain.batch([QUESTION, "Rome?"])
        assert asyncio.run(wrapped.abatch([QUESTION])) == [ANSWER]
        assert list(wrapped.stream(QUESTION)) == list(chain.stream(QUESTION))

        async def collect() -> list[Any]:
            return [chunk async for chunk in wrapped.astream(QUESTION)]

        assert "".join(asyncio.run(collect())) == ANSWER
        composed = wrapped | RunnableLambda(str.upper)
        assert composed.invoke(QUESTION) == ANSWER.upper()
        assert wrapped.with_config(tags=["x"]).invoke(QUESTION) == ANSWER
        assert wrapped.get_input_schema().model_json_schema() == (
            chain.get_input_schema().model_json_schema()
        )
        assert wrapped.scorer.wait(timeout=30)
    # one record per request: 1 + 1 + 2 + 1 + 1 + 1 + 1 + 1, each scored (the streamed ones
    # from their chunks added up)
    assert len(sink.served) == len(sink.with_scores) == 9
    assert all(r.answer_chars == len(ANSWER) for r in sink.served)
    assert all(r.pipeline == "RunnableSequence" for r in sink.served)


def test_an_error_is_raised_as_is_and_recorded() -> None:
    boom = ValueError("upstream down")

    def fail(_: Any) -> str:
        raise boom

    sink = Sink()
    wrapped = shadow(RunnableLambda(fail), ["faithfulness"], judge=CountingJudge(),
                     sample_rate=1.0, sinks=[sink])  # fmt: skip
    with wrapped:
        with pytest.raises(ValueError, match="upstream down") as caught:
            wrapped.invoke("q")
        assert caught.value is boom
        outputs = wrapped.batch(["a", "b"], return_exceptions=True)
        assert outputs == [boom, boom]
        with pytest.raises(ValueError, match="upstream down"):
            wrapped.batch(["a", "b"])
        assert wrapped.scorer.wait(timeout=30)
    assert len(sink.served) == 5
    assert all(r.error == "ValueError: upstream down" for r in sink.served)
    assert not any(r.sampled for r in sink.served)  # a failed request is never scored
    assert sink.with_scores == []


def test_a_stream_left_early_is_recorded_not_scored() -> None:
    wrapped, sink = _wrapped()
    with wrapped:
        stream = wrapped.stream(QUESTION)
        assert next(stream) == ANSWER[0]
        stream.close()
        assert wrapped.scorer.wait(timeout=30)
    (record,) = sink.served
    assert not record.sampled
    assert "stopped reading" in record.attributes["not_scored"]


# --------------------------------------------------------------------------- measurements


def test_records_reach_the_store_with_timings_chunks_and_scores(tmp_path: Path) -> None:
    store_path = tmp_path / "monitor.sqlite"
    chain = _chain(retrieval_delay=0.02)
    wrapped = shadow(
        chain,
        ["faithfulness"],
        judge=CountingJudge(),
        sample_rate=0.5,
        relevance_threshold=0.5,
        store=store_path,
        pipeline="handbook-rag",
    )
    sampled, other = _id(0.5), _id(0.5, chosen=False)
    with wrapped:
        for request_id in (sampled, other):
            wrapped.invoke(QUESTION, {"metadata": {"request_id": request_id}})
    with MonitorStore(store_path) as store:
        records = {r.request_id: r for r in store.requests()}
    assert set(records) == {sampled, other}
    scored = records[sampled]
    assert scored.pipeline == "handbook-rag"
    assert scored.question == QUESTION
    assert scored.retrieval_ms is not None
    assert scored.retrieval_ms >= 20.0  # the retriever slept 20 ms
    assert scored.generation_ms is not None
    assert 0.0 <= scored.generation_ms < scored.attributes["latency_ms"]
    assert scored.chunks_retrieved == 2
    assert scored.chunks_used == 1  # only the Eiffel document shares half the words
    assert scored.retrieval_miss is False
    assert (scored.answer_chars, scored.abstained) == (len(ANSWER), False)
    assert scored.attributes["context_ids"] == ["eiffel", "gate"]
    assert scored.sampled
    assert scored.scores["faithfulness"].value == 1.0
    assert not records[other].sampled
    assert records[other].scores == {}


def test_concurrent_requests_keep_their_own_measurements() -> None:
    questions = {
        "eiffel": "Where does the Eiffel Tower stand?",
        "gate": "Where does the Brandenburg Gate stand?",
        "colosseum": "Where does the Colosseum stand?",
    }
    wrapped, sink = _wrapped(sample_rate=0.0)

    async def serve() -> list[Any]:
        calls = [
            wrapped.ainvoke(question, {"metadata": {"request_id": f"{doc_id}-{n}"}})
            for n in range(5)
            for doc_id, question in questions.items()
        ]
        return await asyncio.gather(*calls)

    with wrapped:
        assert asyncio.run(serve()) == [ANSWER] * 15
        assert wrapped.scorer.wait(timeout=30)
    assert len(sink.served) == 15
    for record in sink.served:
        doc_id = record.request_id.split("-")[0]
        assert record.question == questions[doc_id]
        assert record.attributes["context_ids"][0] == doc_id


def test_the_request_id_comes_from_metadata_then_run_id_else_is_generated() -> None:
    class Roots(BaseCallbackHandler):
        def __init__(self) -> None:
            self.roots: list[UUID] = []

        def on_chain_start(self, *args: Any, run_id: UUID, parent_run_id: Any = None,
                           **kwargs: Any) -> None:  # fmt: skip
            if parent_run_id is None:
                self.roots.append(run_id)

    wrapped, sink = _wrapped(sample_rate=0.0)
    given = uuid4()
    roots = Roots()
    with wrapped:
        wrapped.invoke(QUESTION, {"metadata": {"request_id": "user-42"}})
        wrapped.invoke(QUESTION, {"run_id": given})
        wrapped.invoke(QUESTION, {"callbacks": [roots]})
        assert wrapped.scorer.wait(timeout=30)
    named, by_run, generated = sink.served
    assert (named.request_id, named.attributes["request_id_from"]) == ("user-42", "metadata")
    assert (by_run.request_id, by_run.attributes["request_id_from"]) == (str(given), "run_id")
    assert generated.attributes["request_id_from"] == "generated"
    assert roots.roots == [UUID(generated.request_id)]  # the trace carries the request id


def test_requests_are_sampled_by_their_id() -> None:
    wrapped, sink = _wrapped(sample_rate=0.3)
    ids = [f"user-{i}" for i in range(40)]
    with wrapped:
        for request_id in ids:
            wrapped.invoke(QUESTION, {"metadata": {"request_id": request_id}})
        assert wrapped.scorer.wait(timeout=60)
    chosen = {r.request_id for r in sink.served if r.sampled}
    assert chosen == {i for i in ids if sampled_by_id(i, 0.3)}
    assert {r.request_id for r in sink.with_scores} == chosen


# --------------------------------------------------------------------------- latency


def test_no_added_latency_with_a_slow_judge() -> None:
    """Every request returns while its scoring is still pending: the judge sleeps 5 s per
    call, and 20 requests come back before the first judge call could have finished."""
    chain = _chain()
    wrapped = shadow(
        chain, ["faithfulness"], judge=CountingJudge(delay=5.0), sample_rate=1.0, sinks=[Sink()]
    )
    try:
        start = time.perf_counter()
        for i in range(20):
            assert wrapped.invoke(QUESTION, {"metadata": {"request_id": f"r{i}"}}) == ANSWER
        elapsed = time.perf_counter() - start
        stats = wrapped.scorer.stats()
        assert stats["scored"] == 0  # no request waited for a score
        assert stats["pending"] == 20  # every one of them is being scored
        assert elapsed < 5.0
    finally:
        assert wrapped.close(timeout=0.2) is False  # cut short: recorded as cancelled


def test_the_wrapper_costs_about_a_millisecond_per_request() -> None:
    """Median wall time per call, unwrapped vs wrapped with every request scored by a slow
    judge (1 s per call): the difference is the callback handler and the hand-off."""
    chain = _chain()
    wrapped = shadow(
        chain, ["faithfulness"], judge=CountingJudge(delay=1.0), sample_rate=1.0, sinks=[Sink()],
        max_pending=1000,
    )  # fmt: skip

    def timed_ms(runnable: Runnable[Any, Any]) -> float:
        start = time.perf_counter()
        runnable.invoke(QUESTION)
        return (time.perf_counter() - start) * 1000

    try:
        for _ in range(10):  # warm-up
            timed_ms(chain)
            timed_ms(wrapped)
        pairs = [(timed_ms(chain), timed_ms(wrapped)) for _ in range(100)]  # interleaved
        assert wrapped.scorer.scored < wrapped.scorer.sampled  # scoring still going on
    finally:
        wrapped.close(timeout=0.2)
    plain = statistics.median(p for p, _ in pairs)
    shadowed = statistics.median(w for _, w in pairs)
    print(f"\nmedian per request: unwrapped {plain:.2f} ms, wrapped {shadowed:.2f} ms")
    assert shadowed < plain + 25.0  # generous: a judge call here takes 1,000 ms


def test_a_full_queue_drops_and_counts_without_slowing_requests() -> None:
    wrapped, sink = _wrapped(judge=CountingJudge(delay=0.5), max_pending=1)
    with wrapped:
        for i in range(4):
            wrapped.invoke(QUESTION, {"metadata": {"request_id": f"r{i}"}})
        assert wrapped.scorer.dropped == 3
    assert [r.sampled for r in sink.served] == [True, False, False, False]
    assert len(sink.with_scores) == 1


def test_a_failing_sink_is_counted_and_does_not_break_serving() -> None:
    class Broken:
        def request(self, record: RequestRecord) -> None:
            raise OSError("disk full")

        def scored(self, record: RequestRecord) -> None:
            raise OSError("disk full")

    wrapped = shadow(_chain(), ["faithfulness"], judge=CountingJudge(), sample_rate=1.0,
                     sinks=[Broken()])  # fmt: skip
    with wrapped:
        assert wrapped.invoke(QUESTION) == ANSWER
        assert wrapped.scorer.wait(timeout=30)
    assert wrapped.scorer.sink_errors == 2
    assert "disk full" in wrapped.scorer.errors[-1]


def test_close_scores_what_is_pending_or_records_it_cancelled() -> None:
    wrapped, sink = _wrapped(judge=CountingJudge(delay=0.2))
    for i in range(3):
        wrapped.invoke(QUESTION, {"metadata": {"request_id": f"a{i}"}})
    assert wrapped.close(timeout=30) is True
    assert [r.scores["faithfulness"].value for r in sink.with_scores] == [1.0, 1.0, 1.0]

    slow, late = _wrapped(judge=CountingJudge(delay=5.0))
    slow.invoke(QUESTION)
    assert slow.close(timeout=0.1) is False
    (record,) = late.with_scores
    assert record.scores["faithfulness"].failure == FailureKind.CANCELLED.value


def test_a_shared_scorer_is_left_to_its_owner() -> None:
    sink = Sink()
    scorer = ShadowScorer(["faithfulness"], judge=CountingJudge(), sample_rate=1.0, sinks=[sink])
    one = shadow(_chain(), scorer, pipeline="one")
    two = shadow(_chain(), scorer, pipeline="two")
    one.invoke(QUESTION)
    two.invoke(QUESTION)
    assert one.close() is True
    assert scorer.active  # still serving the other wrapper
    assert scorer.close(timeout=30)
    assert sorted(r.pipeline or "" for r in sink.with_scores) == ["one", "two"]
    with pytest.raises(ValueError, match="sample_rate"):
        shadow(_chain(), scorer, sample_rate=0.5)


# --------------------------------------------------------------------------- memory


def test_the_wrapper_keeps_nothing_per_request() -> None:
    """2,000 requests through a wrapped LCEL chain (fake retriever, fake chat model), 5%
    scored: nothing the wrapper or the scorer holds grows with the number of requests. Counted
    in objects the garbage collector tracks (every record, capture, sample or row kept would be
    several per request), not in time. The 10,000-request traced-memory test of the same
    scorer is tests/test_shadow_core.py::test_memory_stays_flat_over_10000_requests."""
    from ragbridge.adapters.langchain.shadow import _RequestCapture

    sink = CountingSink()
    wrapped = shadow(_chain(), ["faithfulness"], judge=CountingJudge(), sample_rate=0.05,
                     sinks=[sink])  # fmt: skip
    scorer = wrapped.scorer

    def serve(n: int) -> None:
        for i in range(n):
            wrapped.invoke(QUESTION)
            if i % 500 == 499:
                assert scorer.wait(timeout=60)
        assert scorer.wait(timeout=60)

    try:
        serve(500)  # warm-up
        gc.collect()
        before = len(gc.get_objects())
        serve(2_000)
        gc.collect()
        after = len(gc.get_objects())
        captures = sum(type(o) is _RequestCapture for o in gc.get_objects())
        sizes = (len(scorer._queue), len(scorer._awaiting), len(scorer._pending))
    finally:
        wrapped.close(timeout=30)
    print(f"\n2,000 LangChain requests: {after - before:+d} gc-tracked objects")
    assert sink.served == 2_500
    assert sink.with_scores == scorer.scored == scorer.sampled
    assert 0 < scorer.sampled < 250  # 5% of 2,500 = 125
    assert sizes == (0, 0, 0)
    assert captures == 0  # each request's callback handler went with its request
    assert scorer.samples == []
    assert len(scorer.evaluation) == 0
    assert after - before < 200  # 0.1 per request: one kept record alone is 1 per request


class CountingSink:
    def __init__(self) -> None:
        self.served = 0
        self.with_scores = 0

    def request(self, record: RequestRecord) -> None:
        self.served += 1

    def scored(self, record: RequestRecord) -> None:
        self.with_scores += 1
