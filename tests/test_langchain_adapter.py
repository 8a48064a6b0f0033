"""The LangChain adapter against real langchain-core objects, offline.

Retrievers are real `InMemoryVectorStore` retrievers over `DeterministicFakeEmbedding` (the same
text always embeds to the same vector, so a question equal to a document's text retrieves that
document first); chat models are langchain-core's fakes. What matters most is that, however runs
interleave (batch, abatch, 20 concurrent ainvoke), each result carries *its own* retrieval.
"""

from __future__ import annotations

import asyncio
import itertools
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from typing import Any
from uuid import uuid4

import pytest

pytest.importorskip("langchain_core")

from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models import FakeListChatModel, GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import (
    Runnable,
    RunnableLambda,
    RunnableParallel,
    RunnablePassthrough,
)
from langchain_core.tools import create_retriever_tool
from langchain_core.vectorstores import InMemoryVectorStore
from pydantic import BaseModel

from ragbridge.adapters._extras import install_hint
from ragbridge.adapters.langchain import (
    LangChainEmbedder,
    LangChainJudge,
    RetrievalCapture,
    capture_retrievals,
    document_to_context,
    map_error,
    retrieve_only,
    run_pipeline,
)
from ragbridge.core import JudgeEngine, Sample, evaluate
from ragbridge.core.judging.judge import (
    Embedder,
    Judge,
    JudgeTimeout,
    PermanentJudgeError,
    RateLimited,
    ServerError,
)

TOPICS = [
    "apples grow on trees",
    "rivers flow to the sea",
    "cats chase mice at night",
    "volcanoes erupt molten rock",
    "bees make honey from nectar",
    "glaciers carve deep valleys",
    "owls hunt in the dark",
    "tides follow the moon",
]


def _store(texts: Sequence[str] = TOPICS, prefix: str = "d") -> InMemoryVectorStore:
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=32))
    store.add_documents(
        [
            Document(id=f"{prefix}{i}", page_content=t, metadata={"n": i})
            for i, t in enumerate(texts)
        ]
    )
    return store


def _format(docs: list[Document]) -> str:
    return "\n".join(d.page_content for d in docs)


def _rag_chain(retriever: Runnable[Any, Any], delay: float = 0.0) -> Runnable[Any, Any]:
    async def slow(docs: list[Document]) -> str:
        await asyncio.sleep(delay)  # interleave concurrent runs between retrieval and answer
        return _format(docs)

    fmt: Runnable[Any, Any] = RunnableLambda(_format, afunc=slow)
    prompt = ChatPromptTemplate.from_template("Context:\n{context}\n\nQ: {question}")
    llm = FakeListChatModel(responses=["an answer"])
    return (
        {"context": retriever | fmt, "question": RunnablePassthrough()}
        | prompt
        | llm
        | StrOutputParser()
    )


@pytest.fixture
def retriever() -> Any:
    return _store().as_retriever(search_kwargs={"k": 2})


def _expected_ids(retriever: Any, question: str) -> list[str]:
    return [d.id for d in retriever.invoke(question)]


# --------------------------------------------------------------------------- import fence


def test_import_without_langchain_names_the_extra() -> None:
    code = textwrap.dedent(
        """
        import sys
        for name in ("langchain_core",):
            sys.modules[name] = None  # makes `import langchain_core` raise ImportError
        try:
            import ragbridge.adapters.langchain
        except ImportError as exc:
            print(exc)
        else:
            print("imported")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert install_hint("langchain") in out.stdout
    assert "langchain-core" in out.stdout


# --------------------------------------------------------------------------- documents


def test_document_to_context_ids_scores_and_metadata() -> None:
    doc = Document(id="chunk-1", page_content="t", metadata={"source": "a.md", "score": 0.5})
    ctx = document_to_context(doc)
    assert (ctx.id, ctx.score, ctx.text) == ("chunk-1", 0.5, "t")
    assert document_to_context(doc, id_key="source").id == "a.md"
    no_id = Document(page_content="t", metadata={"source": "b.md", "score": float("nan")})
    ctx2 = document_to_context(no_id)
    assert (ctx2.id, ctx2.score) == ("b.md", None)
    odd = Document(page_content="t", metadata={"obj": object()})
    assert isinstance(document_to_context(odd).metadata["obj"], str)


# --------------------------------------------------------------------------- capture


def test_capture_under_invoke_records_query_docs_and_parents(retriever: Any) -> None:
    chain = _rag_chain(retriever)
    cap = RetrievalCapture()
    run_id = uuid4()
    chain.invoke(TOPICS[3], config={"callbacks": [cap], "run_id": run_id, "tags": ["t1"]})
    (record,) = cap.for_root(run_id)
    assert record.query == TOPICS[3]
    assert record.name == "VectorStoreRetriever"
    assert record.parent_run_id is not None
    assert record.parent_run_id != run_id
    assert "t1" in record.tags
    assert [c.id for c in cap.contexts(run_id)] == _expected_ids(retriever, TOPICS[3])
    assert cap.contexts(run_id)[0].id == "d3"
    assert cap.root_input(run_id) == TOPICS[3]


def test_capture_under_batch_groups_per_input(retriever: Any) -> None:
    chain = _rag_chain(retriever)
    cap = RetrievalCapture()
    ids = [uuid4() for _ in TOPICS]
    chain.batch(
        list(TOPICS),
        config=[{"callbacks": [cap], "run_id": i} for i in ids],
        max_concurrency=4,
    )
    for run_id, question in zip(ids, TOPICS, strict=True):
        (record,) = cap.for_root(run_id)
        assert record.query == question
        assert [c.id for c in cap.contexts(run_id)] == _expected_ids(retriever, question)


def test_capture_under_batch_with_one_shared_config(retriever: Any) -> None:
    chain = _rag_chain(retriever)
    cap = RetrievalCapture()
    chain.batch(list(TOPICS), config={"callbacks": [cap]})
    groups = cap.groups()
    assert len(groups) == len(TOPICS)
    for root, records in groups.items():
        (record,) = records
        assert record.query == cap.root_input(root)


def test_capture_under_abatch(retriever: Any) -> None:
    chain = _rag_chain(retriever, delay=0.01)
    cap = RetrievalCapture()
    ids = [uuid4() for _ in TOPICS]
    asyncio.run(chain.abatch(list(TOPICS), config=[{"callbacks": [cap], "run_id": i} for i in ids]))
    for run_id, question in zip(ids, TOPICS, strict=True):
        assert [r.query for r in cap.for_root(run_id)] == [question]
        assert [c.id for c in cap.contexts(run_id)] == _expected_ids(retriever, question)


def test_capture_under_20_concurrent_ainvoke(retriever: Any) -> None:
    chain = _rag_chain(retriever, delay=0.02)
    cap = RetrievalCapture()
    questions = [TOPICS[i % len(TOPICS)] + f" #{i}" for i in range(20)]
    ids = [uuid4() for _ in questions]

    async def main() -> None:
        await asyncio.gather(
            *(
                chain.ainvoke(q, config={"callbacks": [cap], "run_id": i})
                for q, i in zip(questions, ids, strict=True)
            )
        )

    asyncio.run(main())
    assert len(cap.retrievals) == 20
    for run_id, question in zip(ids, questions, strict=True):
        assert [r.query for r in cap.for_root(run_id)] == [question]
        assert [c.id for c in cap.contexts(run_id)] == _expected_ids(retriever, question)


def test_context_manager_captures_without_callbacks(retriever: Any) -> None:
    chain = _rag_chain(retriever)
    chain.invoke("outside")  # not captured
    with capture_retrievals() as cap:
        chain.invoke(TOPICS[0])
        chain.batch([TOPICS[1], TOPICS[2]])
    chain.invoke("after")  # not captured either
    roots = cap.roots()
    assert len(roots) == 3
    assert sorted(cap.root_input(r) for r in roots) == sorted(TOPICS[:3])
    assert {cap.contexts(r)[0].id for r in roots} == {"d0", "d1", "d2"}


def test_context_manager_under_concurrent_ainvoke_and_nesting(retriever: Any) -> None:
    chain = _rag_chain(retriever, delay=0.01)

    async def main() -> tuple[RetrievalCapture, RetrievalCapture]:
        with capture_retrievals() as outer:
            with capture_retrievals() as inner:
                await asyncio.gather(*(chain.ainvoke(q) for q in TOPICS))
            await chain.ainvoke("only the outer sees this")
        return outer, inner

    outer, inner = asyncio.run(main())
    assert len(inner.roots()) == len(TOPICS)
    assert len(outer.roots()) == len(TOPICS) + 1
    for root in inner.roots():
        assert inner.for_root(root)[0].query == inner.root_input(root)


# --------------------------------------------------------------------------- run_pipeline


def _samples(questions: Sequence[str]) -> list[Sample]:
    return [
        Sample(id=f"q{i}", question=q, reference="ref", relevance={f"d{i}": 1}, metadata={"k": i})
        for i, q in enumerate(questions)
    ]


def test_run_pipeline_fills_contexts_answer_latency(retriever: Any) -> None:
    seen: list[tuple[int, int]] = []
    out = run_pipeline(
        _rag_chain(retriever, delay=0.01),
        _samples(TOPICS),
        max_concurrency=3,
        progress=lambda done, total: seen.append((done, total)),
    )
    assert [s.id for s in out] == [f"q{i}" for i in range(len(TOPICS))]
    for i, sample in enumerate(out):
        assert sample.answer == "an answer"
        assert sample.context_ids == _expected_ids(retriever, TOPICS[i])
        assert sample.context_ids[0] == f"d{i}"
        assert sample.reference == "ref"
        assert sample.relevance == {f"d{i}": 1}
        assert sample.metadata["k"] == i
        assert sample.metadata["latency_s"] > 0
        assert sample.metadata["retrieval_query"] == TOPICS[i]
    assert seen[-1] == (len(TOPICS), len(TOPICS))


def test_run_pipeline_bounds_concurrency(retriever: Any) -> None:
    state = {"now": 0, "max": 0}

    async def tracked(question: str) -> str:
        state["now"] += 1
        state["max"] = max(state["max"], state["now"])
        await asyncio.sleep(0.01)
        state["now"] -= 1
        return question

    chain = RunnableLambda(tracked) | _rag_chain(retriever)
    run_pipeline(chain, _samples(TOPICS), max_concurrency=2)
    assert state["max"] == 2


def test_two_retrievers_selection_by_name_and_default_last() -> None:
    sparse = _store(prefix="s").as_retriever(search_kwargs={"k": 1}).with_config(run_name="sparse")
    dense = _store(prefix="x").as_retriever(search_kwargs={"k": 3}).with_config(run_name="dense")
    # sparse runs first, then a rewrite step feeds the dense retriever: a nested sub-chain.
    rewrite = RunnableLambda(lambda inp: inp["question"]) | dense
    chain = (
        RunnableParallel(question=RunnablePassthrough(), first=sparse)
        | RunnablePassthrough.assign(second=rewrite)
        | RunnableLambda(lambda inp: {"answer": "ok", "n": len(inp["second"])})
    )
    samples = _samples(TOPICS[:3])
    by_default = run_pipeline(chain, samples)
    for sample in by_default:
        assert len(sample.contexts) == 3
        assert sample.context_ids[0].startswith("x")
        assert sample.metadata["retrievals"] == 2
        assert sample.metadata["retriever"] == "dense"
        assert "last to finish" in sample.metadata["retrieval_note"]
        assert sample.answer == "ok"
    by_name = run_pipeline(chain, samples, retriever_name="sparse")
    for i, sample in enumerate(by_name):
        assert sample.context_ids == [f"s{i}"]
        assert "named 'sparse'" in sample.metadata["retrieval_note"]
    missing = run_pipeline(chain, samples[:1], retriever_name="nope")
    assert missing[0].contexts == []
    assert "no completed retrieval named 'nope'" in missing[0].metadata["retrieval_note"]


def test_empty_retrieval_gives_no_contexts() -> None:
    empty = InMemoryVectorStore(DeterministicFakeEmbedding(size=8)).as_retriever()
    (out,) = run_pipeline(_rag_chain(empty), _samples(["anything"]))
    assert out.contexts == []
    assert out.metadata["retrievals"] == 1
    assert out.answer == "an answer"


def test_dict_output_and_answer_key(retriever: Any) -> None:
    chain = RunnableParallel(context=retriever, question=RunnablePassthrough()) | RunnableLambda(
        lambda inp: {
            "result": f"about {inp['question']}",
            "final": AIMessage(content="from key"),
            "context": inp["context"],
        }
    )
    (first,) = run_pipeline(chain, _samples([TOPICS[4]]))
    assert first.answer == f"about {TOPICS[4]}"
    assert first.context_ids[0] == "d4"
    (second,) = run_pipeline(chain, _samples([TOPICS[4]]), answer_key="final")
    assert second.answer == "from key"
    (third,) = run_pipeline(chain, _samples([TOPICS[4]]), answer_key="missing")
    assert third.answer is None
    assert "answer_note" in third.metadata


def test_input_key_and_message_output(retriever: Any) -> None:
    chain = (
        RunnableLambda(lambda inp: inp["q"])
        | retriever
        | RunnableLambda(lambda docs: AIMessage(content=docs[0].page_content))
    )
    (out,) = run_pipeline(chain, _samples([TOPICS[5]]), input_key="q")
    assert out.answer == TOPICS[5]
    assert out.context_ids[0] == "d5"


def test_chain_error_on_one_sample_does_not_stop_the_run(retriever: Any) -> None:
    def explode(docs: list[Document]) -> list[Document]:
        if docs and docs[0].id == "d2":
            raise RuntimeError("boom")
        return docs

    chain = retriever | RunnableLambda(explode) | RunnableLambda(lambda d: d[0].page_content)
    out = run_pipeline(chain, _samples(TOPICS[:4]))
    assert out[2].answer is None
    assert out[2].metadata["error"] == "RuntimeError: boom"
    assert out[2].context_ids[0] == "d2"  # the retrieval before the failure is still captured
    assert [s.answer for s in out[:2]] == TOPICS[:2]
    assert out[3].answer == TOPICS[3]
    assert "error" not in out[3].metadata


def test_run_pipeline_inside_running_loop(retriever: Any) -> None:
    async def main() -> list[Sample]:
        return run_pipeline(_rag_chain(retriever), _samples(TOPICS[:2]))

    out = asyncio.run(main())
    assert [s.context_ids[0] for s in out] == ["d0", "d1"]


class _BrokenRetriever(BaseRetriever):
    """A real retriever whose backend is down."""

    def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[Document]:
        raise ConnectionError("index offline")


def test_failed_retrieval_is_reported_and_a_fallback_is_used(retriever: Any) -> None:
    broken = _BrokenRetriever()
    (failed,) = run_pipeline(broken | RunnableLambda(len), _samples([TOPICS[0]]))
    assert failed.contexts == []
    assert failed.metadata["error"] == "ConnectionError: index offline"
    assert failed.metadata["retrieval_errors"] == ["ConnectionError: index offline"]
    chain = broken.with_fallbacks([retriever]) | RunnableLambda(lambda d: d[0].page_content)
    (rescued,) = run_pipeline(chain, _samples([TOPICS[6]]))
    assert rescued.answer == TOPICS[6]
    assert rescued.context_ids[0] == "d6"
    assert rescued.metadata["retrievals"] == 2
    assert len(rescued.metadata["retrieval_errors"]) == 1


def test_retrieval_inside_a_tool_maps_to_the_root(retriever: Any) -> None:
    tool = create_retriever_tool(retriever, "search", "Searches the corpus.")
    chain = RunnableLambda(lambda q: {"query": q}) | tool
    out = run_pipeline(chain, _samples(TOPICS[:3]))
    for i, sample in enumerate(out):
        assert sample.context_ids[0] == f"d{i}"
        assert TOPICS[i] in (sample.answer or "")


def test_retrieve_only(retriever: Any) -> None:
    wide = _store().as_retriever(search_kwargs={"k": 4})
    out = retrieve_only(wide, _samples(TOPICS[:3]), k=2)
    for i, sample in enumerate(out):
        assert len(sample.contexts) == 2
        assert sample.context_ids[0] == f"d{i}"
        assert sample.answer is None
        assert sample.metadata["latency_s"] >= 0
    full = retrieve_only(wide, _samples(TOPICS[:1]))
    assert len(full[0].contexts) == 4


def test_end_to_end_run_pipeline_then_ranking_metrics(retriever: Any) -> None:
    samples = [
        Sample(id="a", question=TOPICS[0], relevance={"d0": 1}),
        Sample(id="b", question=TOPICS[1], relevance={"nowhere": 1}),
    ]
    ran = run_pipeline(_rag_chain(retriever), samples)
    ev = evaluate(ran, ["recall@2", "mrr"])
    assert ev.get("a", "recall@2").value == 1.0  # type: ignore[union-attr]
    assert ev.get("a", "mrr").value == 1.0  # type: ignore[union-attr]
    assert ev.get("b", "recall@2").value == 0.0  # type: ignore[union-attr]
    assert ev.get("b", "mrr").value == 0.0  # type: ignore[union-attr]


# --------------------------------------------------------------------------- judge


class Verdict(BaseModel):
    reason: str
    supported: bool


class ToolFakeChat(GenericFakeChatModel):
    """A fake chat model that supports ``bind_tools`` (none shipped does)."""

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        return self


def _tool_call(args: dict[str, Any], **extra: Any) -> AIMessage:
    return AIMessage(
        content="",
        tool_calls=[{"name": "Verdict", "args": args, "id": "call-1"}],
        **extra,
    )


MESSAGES = [
    {"role": "system", "content": "You judge."},
    {"role": "user", "content": "Is it supported?"},
]


def test_judge_protocols_and_model_name() -> None:
    judge = LangChainJudge(ToolFakeChat(messages=iter([])))
    assert isinstance(judge, Judge)
    assert judge.model == "ToolFakeChat"
    named = FakeListChatModel(responses=["x"])
    named.__dict__["model_name"] = "gpt-fake"
    assert LangChainJudge(named).model == "gpt-fake"
    embedder = LangChainEmbedder(DeterministicFakeEmbedding(size=4))
    assert isinstance(embedder, Embedder)
    assert embedder.model == "DeterministicFakeEmbedding"


def test_judge_tool_call_parses_with_usage() -> None:
    reply = _tool_call(
        {"reason": "r", "supported": True},
        usage_metadata={"input_tokens": 11, "output_tokens": 3, "total_tokens": 14},
    )
    judge = LangChainJudge(ToolFakeChat(messages=iter([reply])))
    result = asyncio.run(judge.generate(MESSAGES, schema=Verdict))
    assert result.parsed == Verdict(reason="r", supported=True)
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (11, 3)


def test_judge_plain_text_reply_is_parsed_none() -> None:
    judge = LangChainJudge(ToolFakeChat(messages=iter(["I think it is supported."])))
    result = asyncio.run(judge.generate(MESSAGES, schema=Verdict))
    assert result.parsed is None
    assert result.text == "I think it is supported."


def test_judge_engine_repairs_a_prose_reply() -> None:
    replies = iter(
        [
            AIMessage(
                content="Sure, it is supported.",
                usage_metadata={"input_tokens": 5, "output_tokens": 4, "total_tokens": 9},
            ),
            _tool_call(
                {"reason": "fixed", "supported": False},
                usage_metadata={"input_tokens": 8, "output_tokens": 2, "total_tokens": 10},
            ),
        ]
    )
    engine = JudgeEngine(LangChainJudge(ToolFakeChat(messages=replies)), max_retries=0)
    call = asyncio.run(engine.ask(MESSAGES, Verdict, template_id="t", template_version="1"))
    assert call.ok
    assert call.value == Verdict(reason="fixed", supported=False)
    assert call.usage.calls == 2
    assert (call.usage.prompt_tokens, call.usage.completion_tokens) == (13, 6)


def test_judge_without_structured_output_falls_back_to_text() -> None:
    text = '{"reason": "plain", "supported": true}'
    model = GenericFakeChatModel(
        messages=iter(
            [
                AIMessage(
                    content=text,
                    usage_metadata={"input_tokens": 2, "output_tokens": 1, "total_tokens": 3},
                )
            ]
        )
    )
    judge = LangChainJudge(model)
    result = asyncio.run(judge.generate(MESSAGES, schema=Verdict))
    assert result.parsed is None
    assert result.text == text
    assert result.usage.prompt_tokens == 2
    engine = JudgeEngine(LangChainJudge(GenericFakeChatModel(messages=iter([text]))))
    call = asyncio.run(engine.ask(MESSAGES, Verdict, template_id="t", template_version="1"))
    assert call.value == Verdict(reason="plain", supported=True)


class _ApiError(Exception):
    def __init__(self, message: str, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


class APITimeoutError(Exception):
    """Named like openai's timeout class."""


class _Response:
    status_code = 429
    headers = {"retry-after": "7"}  # noqa: RUF012


class _HttpStatusError(Exception):
    response = _Response()


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (asyncio.TimeoutError(), JudgeTimeout),
        (APITimeoutError("slow"), JudgeTimeout),
        (_ApiError("too many", status_code=429), RateLimited),
        (_ApiError("Rate limit reached for model"), RateLimited),
        (_ApiError("bad gateway", status_code=502), ServerError),
        (_ApiError("bad request", status_code=400), PermanentJudgeError),
        (_ApiError("unauthorised", status_code=401), PermanentJudgeError),
    ],
)
def test_map_error(exc: Exception, expected: type[Exception]) -> None:
    assert isinstance(map_error(exc), expected)


def test_map_error_reads_response_and_retry_after() -> None:
    mapped = map_error(_HttpStatusError("x"))
    assert isinstance(mapped, RateLimited)
    assert mapped.retry_after == 7.0
    assert map_error(ValueError("unrelated")) is None


class _FailingChat(GenericFakeChatModel):
    error: Any = None

    def _generate(self, *args: Any, **kwargs: Any) -> Any:
        raise self.error


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (_ApiError("overloaded", status_code=503), ServerError),
        (_ApiError("slow down", status_code=429), RateLimited),
        (_ApiError("bad", status_code=422), PermanentJudgeError),
    ],
)
def test_judge_raises_mapped_errors(error: Exception, expected: type[Exception]) -> None:
    judge = LangChainJudge(_FailingChat(messages=iter([]), error=error))
    with pytest.raises(expected):
        asyncio.run(judge.generate(MESSAGES))
    with pytest.raises(expected):
        asyncio.run(judge.generate(MESSAGES, schema=Verdict))


def test_judge_reraises_unknown_errors() -> None:
    judge = LangChainJudge(_FailingChat(messages=iter([]), error=KeyError("mine")))
    with pytest.raises(KeyError):
        asyncio.run(judge.generate(MESSAGES))


def test_engine_retries_a_mapped_transient_error() -> None:
    class FlakyChat(ToolFakeChat):
        failures: int = 1

        def _generate(self, *args: Any, **kwargs: Any) -> Any:
            if self.failures:
                self.failures -= 1
                raise _ApiError("overloaded", status_code=503)
            return super()._generate(*args, **kwargs)

    model = FlakyChat(messages=iter([_tool_call({"reason": "r", "supported": True})]))
    engine = JudgeEngine(LangChainJudge(model), sleep=_no_sleep)
    call = asyncio.run(engine.ask(MESSAGES, Verdict, template_id="t", template_version="1"))
    assert call.ok
    assert call.usage.calls == 2
    assert engine.stats.retries == 1


async def _no_sleep(_: float) -> None:
    return None


def test_embedder_matches_the_embeddings() -> None:
    emb = DeterministicFakeEmbedding(size=8)
    vectors = asyncio.run(LangChainEmbedder(emb).embed(["a", "b"]))
    assert vectors == emb.embed_documents(["a", "b"])


# --------------------------------------------------------------------------- example


def test_example_runs_offline() -> None:
    import os
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "examples" / "langchain_pipeline.py"
    env = {k: v for k, v in os.environ.items() if k != "LANGSMITH_TRACING"}
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        check=True,
        env={**env, "HF_HUB_OFFLINE": "1"},
        timeout=300,
    )
    assert "captured for: How many days of paid leave" in done.stdout
    rows = {
        line.split()[0]: line.split()[1:] for line in done.stdout.splitlines() if line[:1] == "q"
    }
    assert rows["q1"][:3] == ["leave,carry", "1.000", "1.000"]
    assert rows["q5"][1:3] == ["0.000", "0.000"]  # the miss is scored as a miss
    assert "mean mrr                    0.800" in done.stdout


class _NamedChat(GenericFakeChatModel):
    """A fake chat model that reports a model name, as real integrations do (ls_model_name)."""

    model_name: str = "gpt-4o-mini"


def test_run_pipeline_records_the_generating_model_per_sample(retriever: Any) -> None:
    from langchain_core.output_parsers import StrOutputParser

    def answer_chain(name: str) -> Any:
        chat = _NamedChat(model_name=name, messages=itertools.cycle(["an answer"]))
        return (lambda q: f"{q} {retriever.invoke(q)[0].page_content}") | chat | StrOutputParser()

    out = run_pipeline(answer_chain("gpt-4o-mini"), _samples(TOPICS[:3]), max_concurrency=3)
    assert [s.metadata["generator_model"] for s in out] == ["gpt-4o-mini"] * 3
    assert all("generator_models" not in s.metadata for s in out)
    assert [s.answer for s in out] == ["an answer"] * 3
    # A chain with no model records none, rather than a guess.
    plain = run_pipeline(_rag_chain(retriever), _samples(TOPICS[:1]))
    assert "generator_model" not in plain[0].metadata


def test_the_cli_warns_when_the_judge_is_the_generating_model(retriever: Any) -> None:
    from ragbridge.adapters.cli.options import self_judging_warning

    chat = _NamedChat(model_name="counting-judge", messages=itertools.cycle(["an answer"]))
    chain = (lambda q: q) | chat
    out = run_pipeline(chain, _samples(TOPICS[:2]))

    class _Judge:
        model = "counting-judge"

    warning = self_judging_warning(out, _Judge())  # type: ignore[arg-type]
    assert warning is not None
    assert "generated 2 of the answers it grades" in warning
