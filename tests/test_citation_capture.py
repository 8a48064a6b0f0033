"""Citations captured from the frameworks' own citing pipelines, offline.

* LlamaIndex: a real ``CitationQueryEngine`` over a real ``VectorStoreIndex`` (word-hashing
  embedding, `llamaindex_fakes.HashEmbedding`), answered by a scripted ``CustomLLM`` that reads
  the "Source N:" blocks of its prompt and cites the one stating each of its sentences, so the
  markers are right whatever order retrieval returns.
* LangChain: LangChain's own ``create_retrieval_chain`` (and the same shape built from
  langchain_core runnables) with a retriever and a fake chat model, citing ``[1]`` or
  ``[doc-id]``.

Each captured sample is then read by `ragbridge.core.citations.parse.parse_citations`: the
markers must name the contexts the pipeline cited.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytest.importorskip("llama_index.core")
pytest.importorskip("langchain_core")

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document as LCDocument
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableLambda, RunnablePassthrough
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.llms import CompletionResponse, CompletionResponseGen, CustomLLM, LLMMetadata
from llama_index.core.query_engine import CitationQueryEngine
from llama_index.core.schema import TextNode
from llamaindex_fakes import HashEmbedding

from ragbridge.adapters.langchain.citations import capture_citations as lc_capture
from ragbridge.adapters.langchain.citations import run_citation_chain
from ragbridge.adapters.llamaindex.citations import (
    capture_citations,
    run_citation_engine,
    source_number,
)
from ragbridge.core.sample import Sample

# --------------------------------------------------------------------------- LlamaIndex

FACTS = {
    "france": "Paris is the capital of France. The Eiffel tower stands in Paris.",
    "germany": "Berlin is the capital of Germany. The Brandenburg gate is in Berlin.",
    "italy": "Rome is the capital of Italy. The Colosseum stands in Rome.",
}


class CitingLLM(CustomLLM):
    """Answers with one sentence per needle, each citing the Source block that contains it
    (``[N]``, N read from the prompt's own ``Source N:`` labels); "[?]" when none does."""

    needles: dict[str, str]

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="citing-llm")

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        numbered = prompt.split("numbered sources of information", 1)[-1]
        blocks = re.split(r"(?m)^Source (\d+):\n", numbered)
        sources = {int(n): text for n, text in zip(blocks[1::2], blocks[2::2], strict=True)}
        parts = []
        for sentence, needle in self.needles.items():
            hits = [n for n, text in sorted(sources.items()) if needle in text]
            parts.append(f"{sentence} [{hits[0]}]." if hits else f"{sentence} [?].")
        return CompletionResponse(text=" ".join(parts))

    def stream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseGen:
        raise NotImplementedError


def _index() -> VectorStoreIndex:
    docs = [Document(text=text, id_=doc_id) for doc_id, text in FACTS.items()]
    return VectorStoreIndex.from_documents(docs, embed_model=HashEmbedding())


def _engine(needles: dict[str, str], **kwargs: Any) -> CitationQueryEngine:
    return CitationQueryEngine.from_args(
        _index(), llm=CitingLLM(needles=needles), similarity_top_k=2, **kwargs
    )


NEEDLES = {
    "Paris is the capital of France": "Paris is",
    "Berlin is the capital of Germany": "Berlin is",
}


def test_citation_engine_gives_source_chunks_in_order_named_by_document() -> None:
    engine = _engine(NEEDLES)
    [sample] = run_citation_engine(
        engine, [Sample(id="q1", question="capital of France and Germany Paris Berlin")]
    )
    assert "error" not in sample.metadata
    assert sample.answer is not None
    assert re.search(r"\[\d\]", sample.answer)
    assert [source_number(c.text) for c in sample.contexts] == [1, 2]
    assert [c.metadata["citation_source"] for c in sample.contexts] == [1, 2]
    assert sorted(c.id or "" for c in sample.contexts) == ["france", "germany"]
    # the chunk node's id is fresh; the retrieved node's id is recovered from the capture
    for ctx in sample.contexts:
        assert ctx.metadata["node_id"] != ctx.metadata["citation_node_id"]
    assert "citation_note" not in sample.metadata
    # each marker names the context that states the sentence
    by_id = {c.id: i + 1 for i, c in enumerate(sample.contexts)}
    assert f"Paris is the capital of France [{by_id['france']}]." in sample.answer
    assert f"Berlin is the capital of Germany [{by_id['germany']}]." in sample.answer


def test_node_ids_with_use_ref_doc_id_false_are_the_retrieved_nodes_not_fresh_chunk_ids() -> None:
    nodes = [TextNode(text=text, id_=f"node-{key}") for key, text in FACTS.items()]
    index = VectorStoreIndex(nodes, embed_model=HashEmbedding())
    engine = CitationQueryEngine.from_args(
        index, llm=CitingLLM(needles=NEEDLES), similarity_top_k=2, citation_chunk_size=12,
        citation_chunk_overlap=0,
    )  # fmt: skip
    [sample] = run_citation_engine(
        engine, ["capital of France and Germany Paris Berlin"], use_ref_doc_id=False
    )
    ids = [c.id for c in sample.contexts]
    # a small citation chunk size cuts each node into two Sources, both named by their node
    assert len(ids) == 4
    assert set(ids) == {"node-france", "node-germany"}
    assert ids[0] == ids[1]
    assert ids[2] == ids[3]
    assert [c.metadata["citation_source"] for c in sample.contexts] == [1, 2, 3, 4]


def test_concurrent_questions_each_name_their_own_chunks() -> None:
    nodes = [TextNode(text=text, id_=f"node-{key}") for key, text in FACTS.items()]
    engine = CitationQueryEngine.from_args(
        VectorStoreIndex(nodes, embed_model=HashEmbedding()),
        llm=CitingLLM(needles={"Capitals": "capital"}),
        similarity_top_k=2, citation_chunk_size=12, citation_chunk_overlap=0,
    )  # fmt: skip
    questions = ["Paris France Eiffel", "Berlin Germany gate", "Rome Italy Colosseum"] * 3
    samples = run_citation_engine(engine, questions, use_ref_doc_id=False, max_concurrency=9)
    assert len(samples) == 9
    for sample in samples:
        assert "citation_note" not in sample.metadata
        assert len(sample.contexts) == 4
        for ctx in sample.contexts:  # each chunk is named by the node whose text holds it
            body = ctx.text.split(":", 1)[1].strip()
            assert ctx.id is not None
            assert body in FACTS[ctx.id.removeprefix("node-")]


def test_capture_citations_from_a_response_in_hand() -> None:
    engine = _engine(NEEDLES)
    response = engine.query("capital of France and Germany Paris Berlin")
    sample = capture_citations(response, "capital of France?")
    assert sample.answer == str(response)
    assert len(sample.contexts) == 2
    assert {c.id for c in sample.contexts} == {"france", "germany"}  # by ref_doc_id
    assert sample.contexts[0].text.startswith("Source 1:")


def test_a_response_without_source_labels_is_noted() -> None:
    from llama_index.core.base.response.schema import Response
    from llama_index.core.schema import NodeWithScore

    response = Response(
        response="Paris [1].", source_nodes=[NodeWithScore(node=TextNode(text="Paris."))]
    )
    sample = capture_citations(response, "q")
    assert "no 'Source N:' label" in sample.metadata["citation_note"]
    assert sample.contexts[0].metadata["citation_source"] == 1


# --------------------------------------------------------------------------- LangChain

CORPUS = [
    LCDocument(id="fr", page_content="Paris is the capital of France."),
    LCDocument(id="de", page_content="Berlin is the capital of Germany."),
    LCDocument(id="it", page_content="Rome is the capital of Italy."),
]


class WordRetriever(BaseRetriever):
    """The documents sharing a word with the query, in corpus order."""

    docs: list[LCDocument]

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[LCDocument]:
        words = set(re.findall(r"\w+", query.lower()))
        return [d for d in self.docs if words & set(re.findall(r"\w+", d.page_content.lower()))]


def _numbered(docs: Sequence[LCDocument]) -> str:
    return "\n".join(f"[{i}] {d.page_content}" for i, d in enumerate(docs, start=1))


def test_create_retrieval_chain_output_as_a_sample() -> None:
    classic = pytest.importorskip("langchain_classic.chains")
    from langchain_classic.chains.combine_documents import create_stuff_documents_chain

    prompt = ChatPromptTemplate.from_messages(
        [("system", "Answer citing sources.\n{context}"), ("human", "{input}")]
    )
    llm = FakeListChatModel(responses=["Paris is the capital of France [1]."])
    chain = classic.create_retrieval_chain(
        WordRetriever(docs=CORPUS), create_stuff_documents_chain(llm, prompt)
    )
    [sample] = run_citation_chain(
        chain, [Sample(id="a", question="Paris France")], input_key="input"
    )
    assert sample.answer == "Paris is the capital of France [1]."
    assert [c.id for c in sample.contexts] == ["fr"]
    assert sample.metadata["contexts_from"] == "chain output: context"


def _lcel_chain(replies: list[str], key: str = "source_documents") -> Any:
    """The "answer with sources" shape built from langchain_core runnables: the documents the
    prompt numbered, and the answer, in one dict."""
    prompt = ChatPromptTemplate.from_template("Sources:\n{numbered}\nQuestion: {question}")
    llm = FakeListChatModel(responses=replies)
    retriever = WordRetriever(docs=CORPUS)
    return RunnablePassthrough.assign(
        docs=RunnableLambda(lambda x: x["question"]) | retriever
    ).assign(numbered=RunnableLambda(lambda x: _numbered(x["docs"]))).assign(
        answer=prompt | llm | StrOutputParser()
    ) | RunnableLambda(lambda x: {"answer": x["answer"], key: x["docs"][::-1]})


def test_an_lcel_answer_with_sources_chain_gives_its_documents_in_output_order() -> None:
    # the chain hands back its documents reversed: the output order is the one cited
    chain = _lcel_chain(["Berlin is the capital of Germany [de]."])
    [sample] = run_citation_chain(
        chain, [Sample(id="a", question="Paris Berlin capital")], input_key="question"
    )
    assert sample.answer == "Berlin is the capital of Germany [de]."
    assert [c.id for c in sample.contexts] == ["it", "de", "fr"]
    assert sample.metadata["contexts_from"] == "chain output: source_documents"


def test_an_output_in_hand_and_a_chain_without_documents() -> None:
    out = {"result": "Rome [1].", "source_documents": [CORPUS[2]]}
    sample = lc_capture(out, "Where is Rome?")
    assert sample.answer == "Rome [1]."
    assert [c.id for c in sample.contexts] == ["it"]
    plain = RunnableLambda(lambda q: {"answer": "no sources here"})
    [s] = run_citation_chain(plain, [Sample(id="b", question="x")])
    assert s.contexts == []
    assert "no documents" in s.metadata["citation_note"]


def test_run_citation_chain_keeps_the_callers_callbacks() -> None:
    from langchain_core.callbacks import BaseCallbackHandler

    class Count(BaseCallbackHandler):
        ends = 0

        def on_chain_end(self, outputs: Any, **kwargs: Any) -> None:
            Count.ends += 1

    chain = _lcel_chain(["Rome is the capital of Italy [1]."])
    [sample] = run_citation_chain(
        chain,
        [Sample(id="c", question="Rome")],
        input_key="question",
        config={"callbacks": [Count()]},
    )
    assert Count.ends > 0
    assert [c.id for c in sample.contexts] == ["it"]


# --------------------------------------------------------------------------- dev cases

ROOT = Path(__file__).resolve().parents[1]
DEV = ROOT.parent / "shared" / "data" / "short_answer_dev"


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """``benchmarks/citation_offline.py``, in ``sys.modules`` while the test runs."""
    path = ROOT / "benchmarks" / "citation_offline.py"
    spec = importlib.util.spec_from_file_location("citation_offline", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return module


ROWS = [
    {
        "knowledge": "Peggy Seeger is an American folksinger.",
        "question": "What nationality is Peggy Seeger?",
        "right_answer": "American",
        "hallucinated_answer_one_turn": "Scottish",
        "hallucinated_answer_multi_turn": "Peggy Seeger is a Scottish folksinger.",
    },
    {
        "knowledge": "Skiffle originated in the United States.",
        "question": "Where did skiffle originate?",
        "right_answer": "United States",
        "hallucinated_answer_one_turn": "Scotland",
        "hallucinated_answer_multi_turn": "Scotland",
    },
]


def test_dev_cases_cite_what_their_label_says(bench: ModuleType) -> None:
    cases = bench.build_cases(ROWS, seed=3)
    kinds = [c.kind for c in cases]
    # row 0: two different fabricated answers; row 1: the same one twice, kept once
    assert kinds.count("hallucinated") == 3
    assert kinds.count("good") == kinds.count("distractor") == kinds.count("both") == 2
    for case in cases:
        own = case.sample.metadata["own_context"]
        texts = [c.text for c in case.sample.contexts]
        assert ROWS[int(case.sample.id[3])]["knowledge"] == texts[own - 1]
        marker = {"good": f"[{own}].", "hallucinated": f"[{own}].",
                  "distractor": f"[{3 - own}].", "both": "[1][2]."}[case.kind]  # fmt: skip
        assert case.sample.answer.endswith(marker)
    assert cases[0].sample.answer in ("American [1].", "American [2].")
    framed = bench.build_cases(ROWS, seed=3, form="framed")
    assert framed[0].sample.answer.startswith("The answer to the question what nationality")
    assert framed[3].sample.answer.startswith("Peggy Seeger is a Scottish folksinger [")
    assert bench.build_cases(ROWS, seed=3) == cases  # deterministic in the seed


def test_the_benchmark_on_a_few_dev_rows(bench: ModuleType) -> None:
    if not (DEV / "qa_pairs.jsonl").exists():
        pytest.skip(f"dev data absent: {DEV} (../shared/data/short_answer_dev beside the repo)")
    pytest.importorskip("ragbridge.core.citations.parse")
    result = bench.run(bench.build_cases(bench.load_rows(DEV, 6), seed=0))
    assert result.failures == {}
    good = [result.recall[c.sample.id] for c in result.cases if c.kind == "good"]
    bad = [result.recall[c.sample.id] for c in result.cases if not c.supported]
    assert all(v is not None and 0.0 <= v <= 1.0 for v in good + bad)
    assert sum(good) / len(good) > sum(bad) / len(bad)  # type: ignore[arg-type]
    lines = bench.report(result)
    assert any(line.startswith("  all bad kinds: precision") for line in lines)


# --------------------------------------------------------------------------- read by the parser


def _cited_ids(sample: Sample) -> list[list[str | None]]:
    from ragbridge.core.citations.parse import parse_citations

    assert sample.answer is not None
    cited = parse_citations(sample.answer, sample.contexts)
    assert cited.unresolved == ()
    return [[sample.contexts[c.context].id for c in s.citations if c.context is not None]
            for s in cited.statements]  # fmt: skip


def test_the_parser_resolves_citation_engine_markers_to_the_cited_chunks() -> None:
    pytest.importorskip("ragbridge.core.citations.parse")
    from ragbridge.core import evaluate

    [sample] = run_citation_engine(
        _engine(NEEDLES), [Sample(id="q", question="capital of France and Germany Paris Berlin")]
    )
    assert _cited_ids(sample) == [["france"], ["germany"]]
    # chunked finer than the nodes: the labels, not the ids, say which chunk is which Source
    nodes = [TextNode(text=text, id_=f"node-{key}") for key, text in FACTS.items()]
    engine = CitationQueryEngine.from_args(
        VectorStoreIndex(nodes, embed_model=HashEmbedding()),
        llm=CitingLLM(needles={"The Eiffel tower stands in Paris": "Eiffel"}),
        similarity_top_k=2, citation_chunk_size=12, citation_chunk_overlap=0,
    )  # fmt: skip
    [fine] = run_citation_engine(engine, ["Eiffel tower Paris France"], use_ref_doc_id=False)
    from ragbridge.core.citations.parse import parse_citations

    assert fine.answer is not None
    [statement] = parse_citations(fine.answer, fine.contexts).statements
    [citation] = statement.citations
    assert citation.context is not None
    assert "Eiffel" in fine.contexts[citation.context].text
    assert fine.contexts[citation.context].id == "node-france"
    evaluation = evaluate([sample, fine], ["citation_recall:offline", "citation_precision:offline"])
    for s in (sample, fine):
        assert evaluation.get(s.id, "citation_recall").value == 1.0  # type: ignore[union-attr]
        assert evaluation.get(s.id, "citation_precision").value == 1.0  # type: ignore[union-attr]


def test_the_parser_resolves_a_chains_number_and_id_markers_in_output_order() -> None:
    pytest.importorskip("ragbridge.core.citations.parse")
    # reversed output: [it, de, fr]; "[1]" is the first document of the output, "it"
    chain = _lcel_chain(
        ["Rome is the capital of Italy [1]. Berlin is the capital of Germany [de]."]
    )
    [sample] = run_citation_chain(
        chain, [Sample(id="a", question="Rome Berlin Paris capital")], input_key="question"
    )
    assert _cited_ids(sample) == [["it"], ["de"]]
