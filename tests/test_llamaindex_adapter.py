"""The LlamaIndex adapter against real LlamaIndex objects, offline.

A real `VectorStoreIndex` over `Document`s with ids, split into several nodes each, embedded by
a small word-hashing `BaseEmbedding` (``MockEmbedding`` would give every node the same score, so
ranking could not be checked), and ``MockLLM`` passed explicitly (``Settings.llm`` needs OpenAI).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

pytest.importorskip("llama_index.core")

from llama_index.core import Document, VectorStoreIndex
from llama_index.core.base.response.schema import Response
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.dispatcher import instrument_tags
from llama_index.core.instrumentation.events.retrieval import RetrievalEndEvent
from llama_index.core.llms import (
    CompletionResponse,
    CompletionResponseGen,
    CustomLLM,
    LLMMetadata,
    MockLLM,
)
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.query_engine import CustomQueryEngine
from llama_index.core.schema import NodeWithScore, TextNode
from llamaindex_fakes import HashEmbedding
from pydantic import BaseModel

from ragbridge.adapters._extras import install_hint
from ragbridge.adapters.llamaindex import (
    LlamaIndexEmbedder,
    LlamaIndexJudge,
    RetrievalCapture,
    capture_retrievals,
    map_error,
    run_query_engine,
    usage_of,
)
from ragbridge.adapters.llamaindex import capture as li
from ragbridge.adapters.llamaindex.reading import model_name
from ragbridge.core import evaluate
from ragbridge.core.judging.engine import JudgeEngine
from ragbridge.core.judging.judge import (
    Embedder,
    Judge,
    JudgeTimeout,
    PermanentJudgeError,
    RateLimited,
    ServerError,
)
from ragbridge.core.results.evaluation import FailureKind
from ragbridge.core.sample import Sample

# --------------------------------------------------------------------------- fixtures


TOPICS = {
    "france": "Paris is the capital of France. The Eiffel tower stands in Paris.",
    "germany": "Berlin is the capital of Germany. The Brandenburg gate is in Berlin.",
    "italy": "Rome is the capital of Italy. The Colosseum stands in Rome.",
    "spain": "Madrid is the capital of Spain. The Prado museum is in Madrid.",
}


def _documents() -> list[Document]:
    # Several sentences per document so a small chunk size splits each into several nodes.
    return [
        Document(text=" ".join([body] * 4) + f" Remember {doc_id} well.", id_=doc_id)
        for doc_id, body in TOPICS.items()
    ]


@pytest.fixture(scope="module")
def index() -> VectorStoreIndex:
    return VectorStoreIndex.from_documents(
        _documents(),
        embed_model=HashEmbedding(model_name="hash-64"),
        transformations=[SentenceSplitter(chunk_size=32, chunk_overlap=0)],
    )


@pytest.fixture(scope="module")
def engine(index: VectorStoreIndex) -> Any:
    return index.as_query_engine(llm=MockLLM(), similarity_top_k=3)


QUESTIONS = {
    "france": "Where is the Eiffel tower in Paris France?",
    "germany": "Where is the Brandenburg gate in Berlin Germany?",
    "italy": "Where is the Colosseum in Rome Italy?",
    "spain": "Where is the Prado museum in Madrid Spain?",
}


# --------------------------------------------------------------------------- import fence


def test_import_without_llama_index_names_the_extra() -> None:
    code = textwrap.dedent(
        """
        import sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name == "llama_index" or name.startswith("llama_index."):
                    raise ImportError(f"blocked {name}")
                return None
        sys.meta_path.insert(0, Block())
        try:
            import ragbridge.adapters.llamaindex
        except ImportError as exc:
            print(exc)
        else:
            print("imported")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert install_hint("llamaindex") in out.stdout
    assert "ragbridge.adapters.llamaindex needs llama-index-core" in out.stdout


# --------------------------------------------------------------------------- the index itself


def test_documents_are_split_and_scores_differ(index: VectorStoreIndex, engine: Any) -> None:
    assert len(index.docstore.docs) > 2 * len(TOPICS)  # chunking happened
    response = engine.query(QUESTIONS["france"])
    scores = [n.score for n in response.source_nodes]
    assert len(set(scores)) > 1 or len(scores) == 1
    assert response.source_nodes[0].node.ref_doc_id == "france"


# --------------------------------------------------------------------------- capture


def test_capture_sequential_queries(engine: Any) -> None:
    with capture_retrievals() as cap:
        for question in QUESTIONS.values():
            engine.query(question)
    assert len(cap.retrievals) == len(QUESTIONS)
    assert len(cap.queries) == len(QUESTIONS)
    groups = cap.by_root()
    assert len(groups) == len(QUESTIONS)
    for (doc_id, question), retrieval in zip(QUESTIONS.items(), cap.retrievals, strict=True):
        assert retrieval.query == question
        assert retrieval.root_span_id is not None
        assert retrieval.root_span_id.startswith("RetrieverQueryEngine.query-")
        contexts = retrieval.contexts()
        assert contexts[0].id == doc_id
        assert contexts[0].metadata["node_id"] != doc_id
        assert contexts[0].metadata["ref_doc_id"] == doc_id
        assert contexts[0].score is not None
    # query ends share the root of their retrieval
    roots = {q.root_span_id: q.query for q in cap.queries}
    assert all(roots[r.root_span_id] == r.query for r in cap.retrievals)


def test_capture_under_asyncio_gather(engine: Any) -> None:
    questions = [f"{q} variant {i}" for i in range(5) for q in QUESTIONS.values()]
    assert len(questions) == 20

    async def ask(i: int, q: str) -> Any:
        with instrument_tags({"ask": i}):
            return await engine.aquery(q)

    async def main() -> list[Any]:
        return list(await asyncio.gather(*(ask(i, q) for i, q in enumerate(questions))))

    with capture_retrievals() as cap:
        responses = asyncio.run(main())
    assert len(cap.retrievals) == 20
    groups = cap.by_root()
    assert len(groups) == 20
    query_by_root = {q.root_span_id: q for q in cap.queries}
    for retrievals in groups.values():
        (retrieval,) = retrievals
        assert questions[retrieval.tags["ask"]] == retrieval.query
        query = query_by_root[retrieval.root_span_id]
        assert query.query == retrieval.query
        assert query.tags["ask"] == retrieval.tags["ask"]
        # the captured nodes are the response's sources
        response = responses[retrieval.tags["ask"]]
        assert [n.node.node_id for n in response.source_nodes] == [
            n.node.node_id for n in retrieval.nodes
        ]


def test_capture_under_threads(engine: Any) -> None:
    questions = [f"{q} thread {i}" for i in range(4) for q in QUESTIONS.values()]
    with capture_retrievals() as cap, ThreadPoolExecutor(8) as pool:
        list(pool.map(engine.query, questions))
    groups = cap.by_root()
    assert len(groups) == len(questions)
    assert sorted(r.query for r in cap.retrievals) == sorted(questions)
    query_by_root = {q.root_span_id: q.query for q in cap.queries}
    assert all(query_by_root[r.root_span_id] == r.query for r in cap.retrievals)
    assert len({r.thread_id for r in cap.retrievals}) > 1


def test_capture_chat_engine(index: VectorStoreIndex) -> None:
    chat = index.as_chat_engine(chat_mode="context", llm=MockLLM(), similarity_top_k=2)
    with capture_retrievals() as cap:
        chat.chat("Tell me about Rome Italy Colosseum")
        chat.chat("And Madrid Spain Prado museum?")
    roots = list(cap.by_root())
    assert len(roots) == 2
    assert all(r is not None and r.startswith("ContextChatEngine.chat-") for r in roots)
    assert [r.contexts()[0].id for r in cap.retrievals] == ["italy", "spain"]


class ScriptedReActLLM(CustomLLM):
    """First call: use the ``docs`` tool with ``query``; afterwards: answer."""

    query: str
    calls: int = 0

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="scripted-react")

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        self.calls += 1
        if self.calls == 1:
            action = json.dumps({"input": self.query})
            text = f"Thought: I need the docs.\nAction: docs\nAction Input: {action}"
        else:
            text = "Thought: I can answer without using any more tools.\nAnswer: done"
        return CompletionResponse(text=text)

    def stream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseGen:
        raise NotImplementedError


def test_capture_agent_runs_concurrently(engine: Any) -> None:
    from llama_index.core.agent.workflow import ReActAgent
    from llama_index.core.tools import QueryEngineTool

    def agent(query: str) -> Any:
        tool = QueryEngineTool.from_defaults(engine, name="docs", description="country facts")
        return ReActAgent(tools=[tool], llm=ScriptedReActLLM(query=query), streaming=False)

    async def main() -> list[Any]:
        runs = [agent(QUESTIONS["italy"]).run("q1"), agent(QUESTIONS["spain"]).run("q2")]
        return list(await asyncio.gather(*runs))

    with capture_retrievals() as cap:
        answers = asyncio.run(main())
    assert [str(a) for a in answers] == ["done", "done"]
    groups = cap.by_root()
    assert len(groups) == 2
    assert all(str(root).startswith("ReActAgent.run-") for root in groups)
    firsts = sorted(rs[0].contexts()[0].id or "" for rs in groups.values())
    assert firsts == ["italy", "spain"]


def test_capture_retriever_directly_and_empty_retrieval(index: VectorStoreIndex) -> None:
    empty = VectorStoreIndex([], embed_model=HashEmbedding(model_name="hash-64"))
    with capture_retrievals() as cap:
        index.as_retriever(similarity_top_k=2).retrieve("Berlin Germany")
        nodes = empty.as_retriever().retrieve("anything")
    assert nodes == []
    assert [len(r.nodes) for r in cap.retrievals] == [2, 0]
    assert cap.retrievals[1].contexts() == []


def test_node_ids_instead_of_document_ids(engine: Any, index: VectorStoreIndex) -> None:
    with capture_retrievals(use_ref_doc_id=False) as cap:
        engine.query(QUESTIONS["italy"])
    contexts = cap.contexts()
    assert all(c.id == c.metadata["node_id"] for c in contexts)
    assert all(c.id in index.docstore.docs for c in contexts)
    assert contexts[0].metadata["ref_doc_id"] == "italy"


def test_node_without_document_uses_node_id() -> None:
    node = NodeWithScore(node=TextNode(text="loose", id_="n1"), score=float("nan"))
    context = li.node_to_context(node)
    assert (context.id, context.score, context.text) == ("n1", None, "loose")


def test_closed_capture_records_nothing_and_keeps_nothing(engine: Any) -> None:
    cap = RetrievalCapture()
    with cap:
        engine.query(QUESTIONS["spain"])
    assert len(cap.retrievals) == 1
    assert not cap.active
    assert cap not in li._ROUTER.captures
    assert cap._roots == {}  # no span bookkeeping left behind
    engine.query(QUESTIONS["spain"])
    asyncio.run(engine.aquery(QUESTIONS["spain"]))
    assert len(cap.retrievals) == 1
    assert len(cap.queries) == 1


def test_handlers_are_installed_once_and_overlapping_captures_both_record(engine: Any) -> None:
    with capture_retrievals() as outer:
        with capture_retrievals() as inner:
            engine.query(QUESTIONS["germany"])
        engine.query(QUESTIONS["france"])
    assert len(inner.retrievals) == 1
    assert len(outer.retrievals) == 2
    root = get_dispatcher()
    assert sum(isinstance(h, li._EventHandler) for h in root.event_handlers) == 1
    assert sum(isinstance(h, li._SpanHandler) for h in root.span_handlers) == 1


def test_event_handler_directly() -> None:
    # The dispatcher swallows handler exceptions, so the handler is exercised without it.
    node = NodeWithScore(node=TextNode(text="t", id_="n"), score=0.5)
    event = RetrievalEndEvent(str_or_query_bundle="q", nodes=[node], span_id="s", tags={"a": 1})
    handler, spans = li._install()
    with capture_retrievals() as cap:
        spans.new_span(id_="root", bound_args=None, parent_span_id=None)
        spans.new_span(id_="s", bound_args=None, parent_span_id="root")
        handler.handle(event)
        spans.prepare_to_exit_span(id_="s", bound_args=None)
        spans.prepare_to_drop_span(id_="root", bound_args=None)
        assert cap._roots == {}
    handler.handle(event)
    (retrieval,) = cap.retrievals
    assert (retrieval.query, retrieval.root_span_id, retrieval.tags) == ("q", "root", {"a": 1})
    assert retrieval.contexts()[0].id == "n"


# --------------------------------------------------------------------------- run_query_engine


class FlakyEngine(CustomQueryEngine):
    """Answers from a real retriever, but fails on questions containing "boom"."""

    retriever: Any

    def custom_query(self, query_str: str) -> Response:
        if "boom" in query_str:
            raise RuntimeError("engine exploded")
        nodes = self.retriever.retrieve(query_str)
        return Response(response="answer", source_nodes=nodes)


class NoSourcesEngine(CustomQueryEngine):
    """Retrieves but does not report source nodes: contexts must come from the capture."""

    retriever: Any

    def custom_query(self, query_str: str) -> str:
        self.retriever.retrieve(query_str)
        return "plain"


def _samples() -> list[Sample]:
    return [
        Sample(id=doc_id, question=question, relevance={doc_id: 1})
        for doc_id, question in QUESTIONS.items()
    ]


def test_run_query_engine_fills_samples(engine: Any) -> None:
    seen: list[tuple[int, int]] = []
    out = run_query_engine(
        engine, _samples(), max_concurrency=2, progress=lambda d, t: seen.append((d, t))
    )
    assert [s.id for s in out] == list(QUESTIONS)
    assert seen[-1] == (4, 4)
    for sample in out:
        assert sample.relevance == {sample.id: 1}
        assert sample.answer is not None
        assert sample.answer.startswith("Context information")
        assert sample.contexts[0].id == sample.id
        assert sample.metadata["latency_s"] >= 0
        assert sample.metadata["retrievals"] == 1
        assert "error" not in sample.metadata


class SlowEngine(CustomQueryEngine):
    """Counts how many of its async queries are in flight at once."""

    state: dict[str, int]

    def custom_query(self, query_str: str) -> str:
        raise AssertionError("run_query_engine must use the async path")

    async def acustom_query(self, query_str: str) -> str:
        self.state["now"] += 1
        self.state["max"] = max(self.state["max"], self.state["now"])
        await asyncio.sleep(0.01)
        self.state["now"] -= 1
        return query_str.upper()


def test_run_query_engine_bounds_concurrency() -> None:
    engine = SlowEngine(state={"now": 0, "max": 0})  # pydantic copies the dict: read it back
    questions = [f"q{i}" for i in range(20)]
    out = run_query_engine(engine, questions, max_concurrency=3)
    assert engine.state["max"] == 3
    assert [s.answer for s in out] == [q.upper() for q in questions]
    assert all(s.contexts == [] and s.metadata["retrievals"] == 0 for s in out)


def test_run_query_engine_keeps_the_callers_tags(engine: Any) -> None:
    with instrument_tags({"team": "search"}), capture_retrievals() as cap:
        run_query_engine(engine, _samples())
    assert len(cap.retrievals) == len(QUESTIONS)
    assert all(r.tags["team"] == "search" for r in cap.retrievals)
    assert {r.tags[li.SAMPLE_TAG]: r.query for r in cap.retrievals} == QUESTIONS


def test_concurrent_runs_in_threads_stay_apart(engine: Any) -> None:
    def run(doc_ids: list[str]) -> list[Sample]:
        return run_query_engine(engine, [s for s in _samples() if s.id in doc_ids])

    with ThreadPoolExecutor(2) as pool:
        first, second = pool.map(run, [["france", "italy"], ["germany", "spain"]])
    for sample in [*first, *second]:
        assert sample.metadata["retrievals"] == 1  # only its own retrieval, not the other run's
        assert sample.contexts[0].id == sample.id


def test_run_query_engine_survives_a_failing_query(index: VectorStoreIndex) -> None:
    flaky = FlakyEngine(retriever=index.as_retriever(similarity_top_k=2))
    out = run_query_engine(flaky, ["Rome Italy", "boom", "Berlin Germany"])
    assert [s.id for s in out] == ["0", "1", "2"]
    assert out[1].metadata["error"] == "RuntimeError: engine exploded"
    assert out[1].answer is None
    assert out[1].contexts == []
    assert [out[0].contexts[0].id, out[2].contexts[0].id] == ["italy", "germany"]


def test_run_query_engine_falls_back_to_captured_retrievals(index: VectorStoreIndex) -> None:
    plain = NoSourcesEngine(retriever=index.as_retriever(similarity_top_k=2))
    (sample,) = run_query_engine(plain, [Sample(id="a", question="Madrid Spain Prado")])
    assert sample.answer == "plain"
    assert sample.metadata["contexts_from"] == "instrumentation"
    assert sample.contexts[0].id == "spain"


def test_run_query_engine_inside_a_running_loop(engine: Any) -> None:
    async def main() -> list[Sample]:
        return run_query_engine(engine, ["Rome Italy Colosseum"])

    (sample,) = asyncio.run(main())
    assert sample.contexts[0].id == "italy"


def test_end_to_end_recall_and_mrr_on_document_ids(engine: Any) -> None:
    # The last one is labelled with a document that is not the best match.
    odd = Sample(id="odd", question=QUESTIONS["france"], relevance={"germany": 1})
    samples = [*_samples(), odd]
    out = run_query_engine(engine, samples, max_concurrency=3)
    evaluation = evaluate(out, ["recall@2", "mrr"])

    def expected(sample: Sample) -> tuple[float, float]:
        ranked: list[str] = []
        for c in sample.contexts:  # several chunks of one document count once
            if c.id not in ranked:
                ranked.append(str(c.id))
        relevant = {k for k, g in (sample.relevance or {}).items() if g > 0}
        recall = len(relevant & set(ranked[:2])) / len(relevant)
        rank = next((i + 1 for i, d in enumerate(ranked) if d in relevant), None)
        return recall, (1 / rank if rank else 0.0)

    for sample in out:
        recall, mrr = expected(sample)
        assert evaluation.get(sample.id, "recall@2").value == pytest.approx(recall)
        assert evaluation.get(sample.id, "mrr").value == pytest.approx(mrr)
    for doc_id in QUESTIONS:
        assert evaluation.get(doc_id, "recall@2").value == 1.0
        assert evaluation.get(doc_id, "mrr").value == 1.0


# --------------------------------------------------------------------------- judge and embedder


class Verdict(BaseModel):
    reason: str
    supported: bool


class JsonLLM(CustomLLM):
    """Always answers with a fixed JSON verdict, and reports token usage in ``raw``."""

    reply: str = '{"reason": "stated in context", "supported": true}'

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="json-llm")

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        usage = {"prompt_tokens": len(prompt.split()), "completion_tokens": 6}
        return CompletionResponse(text=self.reply, raw={"usage": usage})

    def stream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseGen:
        raise NotImplementedError


class RaisingLLM(CustomLLM):
    error: Any

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="raising")

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        raise self.error

    def stream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseGen:
        raise NotImplementedError


MESSAGES = [
    {"role": "system", "content": 'You judge support. Answer as JSON {"supported": ...}.'},
    {"role": "user", "content": "Claim: Paris is in France. Context: Paris is in France."},
]


def _ask(judge: Any, schema: type[BaseModel] = Verdict, **kw: Any) -> Any:
    engine = JudgeEngine(judge, max_retries=0, **kw)
    return asyncio.run(engine.ask(MESSAGES, schema, template_id="t", template_version="1"))


def test_judge_and_embedder_satisfy_the_protocols() -> None:
    assert isinstance(LlamaIndexJudge(MockLLM()), Judge)
    assert isinstance(LlamaIndexEmbedder(HashEmbedding(model_name="h")), Embedder)
    assert LlamaIndexJudge(JsonLLM()).model == "json-llm"


def test_judge_with_echoing_mock_llm_is_a_parse_failure() -> None:
    reply = asyncio.run(LlamaIndexJudge(MockLLM()).generate(MESSAGES, schema=Verdict))
    assert "Paris is in France" in reply.text  # MockLLM echoes the prompt
    assert reply.parsed is None
    call = _ask(LlamaIndexJudge(MockLLM()))
    assert call.value is None
    assert call.failure is not None
    assert call.failure.kind == FailureKind.PARSE_ERROR


def test_judge_with_json_llm_parses_and_reports_usage() -> None:
    judge = LlamaIndexJudge(JsonLLM())
    reply = asyncio.run(judge.generate(MESSAGES, schema=Verdict))
    assert reply.parsed is None  # not a function-calling model: the engine parses the text
    assert json.loads(reply.text)["supported"] is True
    assert reply.usage.completion_tokens == 6
    assert reply.usage.prompt_tokens > 0
    call = _ask(judge)
    assert call.value == Verdict(reason="stated in context", supported=True)


def test_judge_structured_path_returns_a_parsed_instance() -> None:
    judge = LlamaIndexJudge(JsonLLM(), structured=True)
    reply = asyncio.run(judge.generate(MESSAGES, schema=Verdict))
    assert isinstance(reply.parsed, Verdict)
    assert reply.parsed.supported is True
    # a structured attempt that cannot parse falls back to plain text
    fallback = asyncio.run(
        LlamaIndexJudge(MockLLM(), structured=True).generate(MESSAGES, schema=Verdict)
    )
    assert fallback.parsed is None
    assert "Paris" in fallback.text


class HTTPError(Exception):
    def __init__(self, status_code: int, headers: dict[str, str] | None = None) -> None:
        super().__init__(f"HTTP {status_code}")
        self.status_code = status_code
        self.response = type("R", (), {"headers": headers or {}})()


class APITimeoutError(Exception):
    pass


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (TimeoutError("slow"), JudgeTimeout),
        (APITimeoutError("slow"), JudgeTimeout),
        (HTTPError(429, {"retry-after": "3"}), RateLimited),
        (HTTPError(503), ServerError),
        (HTTPError(400), PermanentJudgeError),
        (HTTPError(401), PermanentJudgeError),
        (ConnectionError("reset"), ServerError),
    ],
)
def test_judge_maps_provider_errors(error: Exception, expected: type[Exception]) -> None:
    judge = LlamaIndexJudge(RaisingLLM(error=error))
    with pytest.raises(expected) as info:
        asyncio.run(judge.generate(MESSAGES))
    assert info.value.__cause__ is error
    if isinstance(info.value, RateLimited):
        assert info.value.retry_after == 3.0


def test_unknown_errors_pass_through() -> None:
    error = KeyError("x")
    assert map_error(error) is error
    with pytest.raises(KeyError):
        asyncio.run(LlamaIndexJudge(RaisingLLM(error=error)).generate(MESSAGES))


def test_usage_shapes() -> None:
    class Obj:
        usage = type("U", (), {"input_tokens": 7, "output_tokens": 2})()

    assert usage_of(type("R", (), {"raw": Obj(), "additional_kwargs": {}})()).prompt_tokens == 7
    kwargs = {"prompt_tokens": 4, "completion_tokens": 1}
    response = type("R", (), {"raw": None, "additional_kwargs": kwargs})()
    assert usage_of(response).total_tokens == 5
    assert usage_of(object()).total_tokens == 0


def test_embedder_matches_the_model() -> None:
    model = HashEmbedding(model_name="hash-64")
    embedder = LlamaIndexEmbedder(model)
    assert embedder.model == "hash-64"
    vectors = asyncio.run(embedder.embed(["Paris France", "Berlin"]))
    assert vectors == [model.get_text_embedding("Paris France"), model._vec("Berlin")]
    assert asyncio.run(embedder.embed([])) == []
    with pytest.raises(TypeError):
        asyncio.run(embedder.embed("one string"))  # type: ignore[arg-type]


def test_judge_is_usable_from_threads() -> None:
    judge = LlamaIndexJudge(JsonLLM())
    results: list[str] = []

    def work() -> None:
        results.append(asyncio.run(judge.generate(MESSAGES)).text)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4


def test_example_runs_offline() -> None:
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "examples" / "llamaindex_pipeline.py"
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, check=True, timeout=120
    )
    # the shared corpus (examples/corpus.py): five documents split into several chunks each,
    # every chunk still reported under its document's id
    assert "5 documents -> 9 chunks" in done.stdout
    assert "q1: retrieved ['leave', " in done.stdout
    # q5 is worded unlike its document on purpose: the hashed-word retriever misses it
    assert "recall@2  mean 0.800" in done.stdout


class NamedLLM(CustomLLM):
    """A synthesizer LLM that names its model, as hosted LLM classes do (``model`` field)."""

    model: str = "gpt-4o-mini"

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name=self.model)

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return CompletionResponse(text="an answer")

    def stream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseGen:
        raise NotImplementedError


def test_run_query_engine_records_the_generating_model(index: VectorStoreIndex) -> None:
    named = index.as_query_engine(llm=NamedLLM(), similarity_top_k=2)
    out = run_query_engine(named, _samples()[:3], max_concurrency=3)
    assert [s.metadata.get("generator_model") for s in out] == ["gpt-4o-mini"] * 3
    assert all(s.answer == "an answer" for s in out)
    assert model_name({"model": ""}) is None
    assert model_name({"model_name": "m"}) == "m"
