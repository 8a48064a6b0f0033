"""Shadow scoring, offline: serve a RAG pipeline, score 5% of its live requests in the
background, and read what the monitor store recorded.

Run from the repository root (needs the ``langchain`` extra; the LlamaIndex half runs when the
``llamaindex`` extra is installed too):

    python examples/shadow_scoring.py [STORE]

``STORE`` is the SQLite file to record into (default: a fresh temporary file; the wrappers'
own default is ``ragbridge-monitor.sqlite`` in the working directory).

What it shows:

1. ``shadow(chain, metrics, ...)`` wraps a LangChain chain; the wrapper answers exactly as the
   chain does. ``shadow(engine, scorer)`` wraps a LlamaIndex query engine with the SAME scorer:
   one judge, one queue, one store for both frameworks.
2. The judge here is a scripted one that takes 0.3 s per call, like a real LLM judge; the
   requests do not wait for it: each returns in about a millisecond while scoring runs behind.
3. Which requests are scored is decided by their request id (``metadata={"request_id": ...}``
   in LangChain, ``instrument_tags({"request_id": ...})`` in LlamaIndex): the same id is always
   in or always out.
4. ``close()`` finishes the scoring in progress; the store then holds every request with its
   timings, chunk counts and retrieval misses, and the sampled ones with their scores.

To use a real judge, give any judge ragbridge accepts instead of the scripted one, e.g. an
OpenAI-compatible endpoint (``pip install ".[openai]"``)::

    from ragbridge.adapters.openai import OpenAIJudge
    judge = OpenAIJudge("gpt-4o-mini")                      # reads OPENAI_API_KEY
    # or a LangChain chat model / LlamaIndex LLM object: judge=ChatOpenAI(model="gpt-4o-mini")

and add an OpenTelemetry exporter next to the store (``pip install ".[otel]"``)::

    from ragbridge.adapters.otel import OpenTelemetrySink
    from ragbridge.core.monitoring import MonitorStore, StoreSink
    scorer = ShadowScorer(METRICS, judge=judge, sinks=[StoreSink(MonitorStore(path)),
                                                      OpenTelemetrySink()])
"""

from __future__ import annotations

import importlib.util
import re
import sys
import tempfile
import time
from pathlib import Path
from statistics import mean, median
from typing import Any

from corpus import ANSWERS, DOCUMENTS, QUESTIONS  # examples/corpus.py, the shared corpus
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable, RunnableLambda, RunnablePassthrough

from ragbridge.adapters import langchain as lc
from ragbridge.core.monitoring import MonitorStore
from ragbridge.core.monitoring.shadow import ShadowScorer
from ragbridge.core.testing import CountingJudge

METRICS = ["faithfulness"]  # any metric names; answer_relevance also needs embedder=...
REQUESTS = 200
SAMPLE_RATE = 0.05
RELEVANCE_THRESHOLD = 0.3  # this retriever's scores: the share of the question's words found


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower())) - {"the", "a", "of", "do", "is", "to"}


class WordRetriever(BaseRetriever):
    """Ranks the corpus by the share of the question's words each document holds, and reports
    that share as the score in metadata (where LangChain retrievers put scores)."""

    k: int = 2

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        time.sleep(0.002)  # a vector store round trip
        asked = _words(query)
        ranked = sorted(
            ((len(asked & _words(text)) / max(len(asked), 1), doc_id, text)
             for doc_id, text in DOCUMENTS.items()),
            reverse=True,
        )  # fmt: skip
        return [
            Document(id=doc_id, page_content=text, metadata={"score": round(score, 3)})
            for score, doc_id, text in ranked[: self.k]
        ]


def langchain_rag() -> Runnable[Any, Any]:
    prompt = ChatPromptTemplate.from_template("Context:\n{context}\n\nQuestion: {question}")
    joined = RunnableLambda(lambda docs: "\n".join(d.page_content for d in docs))
    inputs = {"context": WordRetriever() | joined, "question": RunnablePassthrough()}
    llm = FakeListChatModel(responses=ANSWERS)  # answers the questions in order, then again
    return inputs | prompt | llm | StrOutputParser()


def llamaindex_engine() -> Any:
    """A LlamaIndex query engine over the same corpus, or None without the extra."""
    if importlib.util.find_spec("llama_index") is None:
        return None
    from llama_index.core import Document as LIDocument
    from llama_index.core import VectorStoreIndex
    from llama_index.core.embeddings import MockEmbedding
    from llama_index.core.llms import MockLLM

    documents = [LIDocument(text=text, id_=doc_id) for doc_id, text in DOCUMENTS.items()]
    index = VectorStoreIndex.from_documents(documents, embed_model=MockEmbedding(embed_dim=8))
    return index.as_query_engine(llm=MockLLM(max_tokens=16), similarity_top_k=2)


def main(store_path: Path) -> None:
    judge = CountingJudge(delay=0.3)  # stands in for an LLM judge: 0.3 s per call
    scorer = ShadowScorer(
        METRICS,
        judge=judge,
        sample_rate=SAMPLE_RATE,
        relevance_threshold=RELEVANCE_THRESHOLD,
        store=store_path,
    )
    plain = langchain_rag()
    chain = lc.shadow(plain, scorer, pipeline="handbook-langchain")
    questions = [q for _, q, _ in QUESTIONS]

    def served_ms(runnable: Runnable[Any, Any], n: int) -> float:
        config: Any = {"metadata": {"request_id": f"lc-{n}"}}
        start = time.perf_counter()
        runnable.invoke(questions[n % len(questions)], config)
        return (time.perf_counter() - start) * 1000

    with scorer:  # opened here, closed (scoring finished) at the end of the block
        unwrapped = median(served_ms(plain, n) for n in range(REQUESTS))
        wrapped = median(served_ms(chain, n) for n in range(REQUESTS))
        print(
            f"LangChain: {REQUESTS} requests served; median {unwrapped:.1f} ms unwrapped, "
            f"{wrapped:.1f} ms wrapped (the judge takes 300 ms per call)"
        )
        print(f"  right after serving: {scorer.stats()}")

        engine = llamaindex_engine()
        if engine is not None:
            from llama_index.core.instrumentation.dispatcher import instrument_tags

            from ragbridge.adapters import llamaindex as li

            queries = li.shadow(engine, scorer, pipeline="handbook-llamaindex")
            for n in range(REQUESTS):
                with instrument_tags({"request_id": f"li-{n}"}):
                    queries.query(questions[n % len(questions)])
            print(f"LlamaIndex: {REQUESTS} queries served through the same scorer")
    print(f"after close(): {scorer.stats()}")

    with MonitorStore(store_path) as store:
        records = store.requests()
    for pipeline in sorted({r.pipeline or "" for r in records}):
        mine = [r for r in records if r.pipeline == pipeline]
        sampled = [r for r in mine if r.sampled]
        timed = [r.retrieval_ms for r in mine if r.retrieval_ms is not None]
        misses = [r for r in mine if r.retrieval_miss]
        print(f"\n{pipeline}: {len(mine)} requests in {store_path.name}")
        print(f"  retrieval {mean(timed):.1f} ms on average; retrieval misses: {len(misses)}")
        print(f"  abstained: {sum(bool(r.abstained) for r in mine)}; scored: {len(sampled)}")
        for metric in METRICS:
            values = [r.scores[metric].value for r in sampled if metric in r.scores]
            scored = [v for v in values if v is not None]
            shown = f"{mean(scored):.2f} over {len(scored)}" if scored else "no value"
            print(f"  {metric}: {shown} ({len(values) - len(scored)} without a value)")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]))
    else:
        with tempfile.TemporaryDirectory() as folder:
            main(Path(folder) / "ragbridge-monitor.sqlite")
