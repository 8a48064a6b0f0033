"""Drop-in for LlamaIndex users (issue 16): code as LlamaIndex users write it, offline.

* Chat engines (``chat_mode="context"``, ``"condense_plus_context"`` on ``MockLLM``) through
  ``run_query_engine`` and live scoring.
* One ``contexts`` shape for the LlamaIndex and LangChain captures.

Real LlamaIndex objects throughout: a ``VectorStoreIndex`` over nodes embedded by a small
word-hashing embedding (``MockEmbedding`` gives every node the same score, so ranking could
not be compared), ``MockLLM``, LlamaIndex's own evaluators. Judges are ragbridge's
``ScriptedJudge`` or a ``CustomLLM`` that follows fixed rules.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from typing import Any

import pytest

pytest.importorskip("llama_index.core")

from llama_index.core import Document, VectorStoreIndex
from llama_index.core.embeddings import BaseEmbedding
from llama_index.core.llms import MockLLM
from llama_index.core.node_parser import SentenceSplitter

from ragbridge.adapters.llamaindex import (
    capture_retrievals,
    run_query_engine,
    score_queries,
)
from ragbridge.core import evaluate
from ragbridge.core.sample import Sample
from ragbridge.core.testing import ScriptedJudge

# --------------------------------------------------------------------------- fixtures


class HashEmbedding(BaseEmbedding):
    """Bag of words hashed into a small vector: deterministic, texts score differently."""

    dim: int = 64

    def _vec(self, text: str) -> list[float]:
        vector = [0.0] * self.dim
        for word in re.findall(r"[a-z0-9]+", text.lower()):
            vector[int(hashlib.md5(word.encode()).hexdigest(), 16) % self.dim] += 1.0
        return vector

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._vec(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._vec(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._vec(text)


TOPICS = {
    "france": "Paris is the capital of France. The Eiffel tower stands in Paris.",
    "germany": "Berlin is the capital of Germany. The Brandenburg gate is in Berlin.",
    "italy": "Rome is the capital of Italy. The Colosseum stands in Rome.",
    "spain": "Madrid is the capital of Spain. The Prado museum is in Madrid.",
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


# --------------------------------------------------------------------------- 3. chat engines

ANALYZE = {"claims": ["Rome is the capital of Italy."], "questions": ["a", "b", "c"],
           "noncommittal": False}  # fmt: skip
VERIFY = {"verdicts": [{"reason": "c1", "verdict": "supported", "context": 1}]}


@pytest.mark.parametrize("mode", ["context", "condense_plus_context"])
def test_run_query_engine_asks_a_chat_engine_each_question_fresh(
    index: VectorStoreIndex, mode: str
) -> None:
    chat = index.as_chat_engine(chat_mode=mode, llm=MockLLM(), similarity_top_k=2)
    samples = [
        Sample(id="it", question="Tell me about Rome Italy Colosseum", relevance={"italy": 1}),
        Sample(id="es", question="And Madrid Spain Prado museum?", relevance={"spain": 1}),
        "Berlin Germany Brandenburg gate",
    ]
    filled = run_query_engine(chat, samples, max_concurrency=8)
    assert [s.id for s in filled] == ["it", "es", "2"]
    for sample in filled:
        assert "error" not in sample.metadata
        assert sample.answer  # MockLLM echoes its prompt
        assert sample.metadata["engine"] == type(chat).__name__
        assert sample.metadata["retrievals"] == 1
    assert [s.contexts[0].id for s in filled] == ["italy", "spain", "germany"]
    # each question was a fresh conversation: the engine holds only the last turn
    assert len(chat.chat_history) == 2
    assert "Rome" not in str(chat.chat_history)
    scores = evaluate(filled[:2], ["hit_rate@1"])
    assert [scores.get(s, "hit_rate@1").value for s in ("it", "es")] == [1.0, 1.0]


def test_run_query_engine_refuses_what_it_cannot_ask_up_front(index: VectorStoreIndex) -> None:
    with pytest.raises(TypeError, match="a retriever: use run_retriever"):
        run_query_engine(index.as_retriever(), ["q"])

    class Agentish:
        def run(self, question: str) -> str:
            return question

    with pytest.raises(TypeError, match=r"query engine \(aquery\) or chat engine .*agent"):
        run_query_engine(Agentish(), ["q"])


def test_live_scoring_scores_chat_turns(index: VectorStoreIndex) -> None:
    chat = index.as_chat_engine(chat_mode="context", llm=MockLLM(), similarity_top_k=2)
    judge = ScriptedJudge({"answer.analyze": ANALYZE, "faithfulness.verify": VERIFY})
    with score_queries(["faithfulness"], judge=judge) as live:
        chat.chat("Tell me about Rome Italy Colosseum")
        asyncio.run(chat.achat("And Madrid Spain Prado museum?"))
        streamed = chat.stream_chat("Berlin Germany?")
        for _ in streamed.response_gen:
            pass
    assert live.seen == 3
    by_question = {s.question: s for s in live.samples}
    rome = by_question["Tell me about Rome Italy Colosseum"]
    assert rome.metadata["engine"] == "ContextChatEngine"
    assert rome.answer
    assert rome.contexts[0].id == "italy"
    assert by_question["And Madrid Spain Prado museum?"].contexts[0].id == "spain"
    assert live.evaluation.get(rome.id, "faithfulness").value == 1.0
    berlin = by_question["Berlin Germany?"]
    skipped = live.evaluation.get(berlin.id, "faithfulness")
    assert skipped.value is None
    assert "streaming chat response" in (skipped.reason or "")
    assert not live.errors


def test_live_scoring_names_chat_samples_by_tag(index: VectorStoreIndex) -> None:
    from llama_index.core.instrumentation.dispatcher import instrument_tags

    chat = index.as_chat_engine(chat_mode="condense_plus_context", llm=MockLLM())
    judge = ScriptedJudge({"answer.analyze": ANALYZE, "faithfulness.verify": VERIFY})
    with (
        score_queries(["faithfulness"], judge=judge) as live,
        instrument_tags({"ragbridge_sample": "turn-1"}),
    ):
        chat.chat("Tell me about Rome Italy Colosseum")
    assert [s.id for s in live.samples] == ["turn-1"]
    assert live.samples[0].metadata["engine"] == "CondensePlusContextChatEngine"


# --------------------------------------------------------------------------- 4. contexts shape


def test_llamaindex_retrievals_follow_the_capture_and_share_the_langchain_shape(
    index: VectorStoreIndex,
) -> None:
    engine = index.as_query_engine(llm=MockLLM(), similarity_top_k=2)
    with capture_retrievals(use_ref_doc_id=False) as cap:
        engine.query("Rome Italy Colosseum")
        engine.query("Madrid Spain Prado")
    first = cap.retrievals[0]
    assert all(c.id == c.metadata["node_id"] for c in first.contexts())  # node ids, as asked
    assert first.contexts(use_ref_doc_id=True)[0].id == "italy"
    roots = cap.roots()
    assert len(roots) == 2
    assert [c.id for c in cap.contexts(roots[0])] == [c.id for c in first.contexts()]
    assert cap.contexts(roots[1], retriever_name="VectorIndexRetriever")
    assert cap.contexts(roots[1], retriever_name="OtherRetriever") == []
    assert len(cap.contexts()) == 4
    with pytest.warns(DeprecationWarning, match="pass a root"):
        legacy = cap.contexts(cap.retrievals[:1])
    assert legacy == first.contexts()


def test_langchain_retrievals_follow_the_capture_and_share_the_shape() -> None:
    pytest.importorskip("langchain_core")
    from langchain_core.documents import Document as LCDocument
    from langchain_core.retrievers import BaseRetriever

    from ragbridge.adapters import langchain as lc

    class Fixed(BaseRetriever):
        def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[LCDocument]:
            return [
                LCDocument(id=f"uuid-{query}-1", page_content="a", metadata={"source": query}),
                LCDocument(id=f"uuid-{query}-2", page_content="b", metadata={"source": "x"}),
            ]

    retriever = Fixed()
    with lc.capture_retrievals(id_key="source") as cap:
        retriever.invoke("q1")
        retriever.invoke("q2")
    assert [c.id for c in cap.retrievals[0].contexts()] == ["q1", "x"]  # the capture's id_key
    assert cap.retrievals[0].contexts(id_key=None)[0].id == "uuid-q1-1"
    roots = cap.roots()
    assert [c.id for c in cap.contexts(roots[1])] == ["q2", "x"]
    assert [c.id for c in cap.contexts()] == ["q1", "x", "q2"]  # every call, each id once
    with pytest.warns(DeprecationWarning, match="positionally"):
        assert cap.contexts(root_run_id=roots[0]) == cap.contexts(roots[0])
