"""Two small, offline RAG pipelines over the demo handbook: one in LangChain, one in LlamaIndex.

Why they exist: ragbridge's examples, CLI demo and tests need *real* framework pipelines whose
output is worth scoring, with no API key, no network and the same answers on every run. Both
pipelines therefore use a local embedding model for retrieval (ragbridge's `LocalEmbedder`, i.e.
all-MiniLM-L6-v2 shipped with ragbridge and run in numpy, or any ragbridge `Embedder` passed in)
and an `ExtractiveAnswerer` in place of an LLM.

Design choices, each for a reason:

* **An extractive stand-in for the LLM.** `ExtractiveAnswerer` answers by copying the one or two
  context sentences that share the most (IDF-weighted) content words with the question, and says
  "The handbook does not say." when nothing overlaps enough. It cannot paraphrase or combine
  facts, so its answers are plainly grounded in what was retrieved: faithfulness-style metrics
  have something real to measure, and wrong retrievals show up as wrong or missing answers.
* **The two pipelines genuinely differ.** LangChain indexes each whole document text in an
  `InMemoryVectorStore`; LlamaIndex splits documents into small sentence chunks in a
  `VectorStoreIndex` and embeds each chunk with its document's title (LlamaIndex includes
  metadata in what it embeds). They rank differently, which is what a comparison report needs.
* **Document ids survive.** LangChain documents carry ``Document.id`` = handbook id; LlamaIndex
  documents carry ``doc_id`` = handbook id, which chunks keep as ``ref_doc_id``. Both adapters
  report contexts under those ids, so the questions' relevance labels apply unchanged.
* **Bridges, not re-implementations.** A ragbridge `Embedder` is async; `langchain_embeddings`
  and `llamaindex_embedding` wrap one as a LangChain ``Embeddings`` and a LlamaIndex
  ``BaseEmbedding`` (sync calls go through `ragbridge.core.scoring.runner.run_sync`, so they also
  work inside a running event loop).
* **Lazy framework imports.** Importing this module needs neither framework: each builder
  imports its own and raises an ImportError naming the extra to install.
* **Tagged results.** `run_langchain_demo` / `run_llamaindex_demo` run the pipelines through the
  adapters (`run_pipeline`, `run_query_engine`) and tag every sample's metadata with the pipeline
  name and ``generator_model`` = ``"extractive-answerer"``, so reports (and the CLI's "judge
  equals generator" warning) know what produced the answers.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ragbridge.adapters._extras import install_hint, require
from ragbridge.adapters._frameworks import quiet_frameworks
from ragbridge.core.cache.disk import Cache
from ragbridge.core.judging.embedding import EmbeddingEngine
from ragbridge.core.judging.judge import Embedder
from ragbridge.core.sample import Sample
from ragbridge.core.scoring.runner import run_sync

from .handbook import documents, questions

quiet_frameworks()  # before LangChain or LlamaIndex is imported (lazily, by the builders)

if TYPE_CHECKING:  # only for annotations; the frameworks are imported lazily
    from langchain_core.embeddings import Embeddings
    from langchain_core.runnables import Runnable
    from llama_index.core.base.base_query_engine import BaseQueryEngine
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from llama_index.core.ingestion import IngestionCache

__all__ = [
    "FALLBACK_ANSWER",
    "GENERATOR_MODEL",
    "LANGCHAIN_PIPELINE",
    "LLAMAINDEX_PIPELINE",
    "CachedEmbedder",
    "ExtractiveAnswerer",
    "ScoredSentence",
    "default_embedder",
    "langchain_embeddings",
    "langchain_pipeline",
    "llamaindex_embedding",
    "llamaindex_pipeline",
    "run_langchain_demo",
    "run_llamaindex_demo",
    "split_sentences",
    "tag_samples",
]

GENERATOR_MODEL = "extractive-answerer"
"""The ``generator_model`` recorded in the metadata of every demo answer."""

FALLBACK_ANSWER = "The handbook does not say."
"""What `ExtractiveAnswerer` answers when no context sentence overlaps the question enough."""

LANGCHAIN_PIPELINE = "demo-langchain"
"""``metadata["pipeline"]`` of samples answered by `langchain_pipeline`."""

LLAMAINDEX_PIPELINE = "demo-llamaindex"
"""``metadata["pipeline"]`` of samples answered by `llamaindex_pipeline`."""

LANGCHAIN_HINT = install_hint("langchain")
LLAMAINDEX_HINT = install_hint("llamaindex")

# --------------------------------------------------------------------------- the answerer

# Function words and question words: they carry no topic, so they never count as overlap.
_STOPWORD_TEXT = """
    a about above after again against all also am an and any are as at be because been
    before being below between both but by can cannot could did do does doing don down
    during each either else ever every few for from further get gets got had has have having
    he her here hers him his how i if in into is it its itself just let may me might more
    most much must my myself no nor not now of off on once only or other our ours out over
    own per s same shall she should so some such t than that the their them then there these
    they this those through to too under until up upon us very was we were what when where
    whether which while who whom whose why will with within would you your yours yourself
"""
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())

_WORD = re.compile(r"[a-z0-9]+(?:[.:,][0-9]+)*")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")


def _stem(word: str) -> str:
    """A deliberately tiny suffix stripper: plural and verb endings, so ``days``/``day`` and
    ``booked``/``booking``/``book`` meet. Numbers are kept as they are."""
    if word[0].isdigit() or len(word) <= 3:
        return word
    for suffix, replacement in (("ies", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)] + replacement
    return word


def _terms(text: str) -> set[str]:
    """The content-word stems of ``text`` (lower-cased, stopwords dropped)."""
    return {_stem(w) for w in _WORD.findall(text.lower()) if w not in _STOPWORDS}


def split_sentences(text: str) -> list[str]:
    """Split a passage into sentences at ``.``/``!``/``?`` followed by a capital or digit."""
    return [s.strip() for s in _SENTENCE_END.split(text.strip()) if s.strip()]


@dataclass(frozen=True)
class ScoredSentence:
    """A context sentence and how much of the question it covers (IDF-weighted, in [0, 1])."""

    text: str
    coverage: float
    context_rank: int
    position: int
    terms: frozenset[str]


class ExtractiveAnswerer:
    """A deterministic, pure-Python stand-in for an LLM: it answers by quoting the context.

    Each sentence of the retrieved contexts is scored by its *coverage* of the question: the
    summed IDF of the question's content words it contains, divided by the summed IDF of all of
    them. The best sentence is the answer; a second sentence joins it when it adds question
    words the first lacks worth at least ``second_gain`` of the total (so a two-part question
    can get both parts); chosen sentences are quoted in reading order. When the best coverage
    is below ``threshold``, the answer is ``fallback`` ("The handbook does not say.").

    IDF comes from ``idf_texts`` (e.g. the whole corpus) when given, else from the sentences of
    the contexts at hand. A question word that occurs in none of them gets the highest weight:
    a question about something the texts never mention cannot reach the threshold.

    It does not understand anything: paraphrased questions may get the fallback or a wrong
    sentence. That is the point of a demo generator whose answers are easy to audit.
    """

    def __init__(
        self,
        idf_texts: Iterable[str] | None = None,
        *,
        threshold: float = 0.35,
        second_gain: float = 0.15,
        max_sentences: int = 2,
        fallback: str = FALLBACK_ANSWER,
    ) -> None:
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"threshold must be in [0, 1], got {threshold!r}")
        if not 0.0 <= second_gain <= 1.0:
            raise ValueError(f"second_gain must be in [0, 1], got {second_gain!r}")
        if max_sentences < 1:
            raise ValueError(f"max_sentences must be >= 1, got {max_sentences!r}")
        self.threshold = threshold
        self.second_gain = second_gain
        self.max_sentences = max_sentences
        self.fallback = fallback
        self.model = GENERATOR_MODEL
        self._df: dict[str, int] | None = None
        self._n = 0
        if idf_texts is not None:
            self._df, self._n = self._doc_freq(list(idf_texts))

    @staticmethod
    def _doc_freq(texts: Sequence[str]) -> tuple[dict[str, int], int]:
        df: dict[str, int] = {}
        for text in texts:
            for term in _terms(text):
                df[term] = df.get(term, 0) + 1
        return df, len(texts)

    @staticmethod
    def _idf(term: str, df: dict[str, int], n: int) -> float:
        # Smoothed so that a word found everywhere weighs ~0 and an unseen word weighs most.
        return max(0.0, math.log((n + 1) / (df.get(term, 0) + 0.5)))

    def rank(self, question: str, contexts: Sequence[str]) -> list[ScoredSentence]:
        """Every context sentence scored against ``question``, best first (ties: earlier
        context, then earlier sentence)."""
        sentences: list[tuple[int, int, str]] = []
        for rank, context in enumerate(contexts):
            for position, sentence in enumerate(split_sentences(context)):
                sentences.append((rank, position, sentence))
        if self._df is not None:
            df, n = self._df, self._n
        else:
            df, n = self._doc_freq([s for _, _, s in sentences])
        wanted = _terms(question)
        weights = {t: self._idf(t, df, n) for t in wanted}
        total = math.fsum(weights.values())
        scored: list[ScoredSentence] = []
        seen: set[str] = set()
        for rank, position, sentence in sentences:
            if sentence in seen:  # overlapping chunks may repeat a sentence
                continue
            seen.add(sentence)
            hits = frozenset(wanted & _terms(sentence))
            coverage = math.fsum(weights[t] for t in hits) / total if total > 0 else 0.0
            scored.append(ScoredSentence(sentence, coverage, rank, position, hits))
        scored.sort(key=lambda s: (-s.coverage, s.context_rank, s.position))
        return scored

    def answer(self, question: str, contexts: Sequence[str]) -> str:
        """The answer to ``question`` from ``contexts`` (ranked passages), or the fallback."""
        if isinstance(contexts, str):
            raise TypeError("contexts must be a sequence of passages, not a single string")
        ranked = self.rank(question, contexts)
        if not ranked or ranked[0].coverage < self.threshold:
            return self.fallback
        wanted = _terms(question)
        df, n = (self._df, self._n) if self._df is not None else (None, 0)
        if df is None:
            df, n = self._doc_freq([s.text for s in ranked])
        weights = {t: self._idf(t, df, n) for t in wanted}
        total = math.fsum(weights.values()) or 1.0
        chosen = [ranked[0]]
        covered = set(ranked[0].terms)
        while len(chosen) < self.max_sentences:
            best: ScoredSentence | None = None
            best_gain = 0.0
            for candidate in ranked[1:]:
                if candidate in chosen:
                    continue
                gain = math.fsum(weights[t] for t in candidate.terms - covered) / total
                if gain > best_gain:
                    best, best_gain = candidate, gain
            if best is None or best_gain < self.second_gain:
                break
            chosen.append(best)
            covered |= best.terms
        # Quoted in reading order (context rank, then position), as a person would.
        chosen.sort(key=lambda s: (s.context_rank, s.position))
        return " ".join(s.text for s in chosen)


# --------------------------------------------------------------------------- embeddings


@functools.lru_cache(maxsize=1)
def default_embedder() -> Embedder:
    """The shared offline embedder (all-MiniLM-L6-v2 via `LocalEmbedder`), created once per
    process so both pipelines load the model only once. Needs the ``local`` extra.
    """
    from ragbridge.adapters.local import LocalEmbedder

    return LocalEmbedder()


class CachedEmbedder:
    """An `Embedder` whose vectors are kept in a ragbridge `Cache` (keyed by model and text).

    Why: building a pipeline embeds the whole handbook, and answering embeds every question.
    With the cache in the demo's output folder, a rerun there computes no vector at all (the
    model is not even loaded), and the scoring reads the same vectors. Vectors go through
    `EmbeddingEngine`, so a cold run and a cached rerun see the same float32-rounded values.
    """

    def __init__(self, embedder: Embedder, cache: Cache) -> None:
        self.model: str = embedder.model
        self._engine = EmbeddingEngine(embedder, cache=cache)

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return await self._engine.embed(texts)


_FRAMEWORKS = {  # extra: (the module a pipeline imports, what needs it, its distribution)
    "langchain": ("langchain_core", "the LangChain demo pipeline", "langchain-core"),
    "llamaindex": ("llama_index.core", "the LlamaIndex demo pipeline", "llama-index-core"),
}


def _import_framework(extra: str) -> None:
    """Import the framework a demo pipeline needs, or raise the ImportError naming ``extra``."""
    module, what, package = _FRAMEWORKS[extra]
    require(module, extra=extra, what=what, package=package)


def _import_langchain() -> None:
    _import_framework("langchain")


def _import_llamaindex() -> None:
    _import_framework("llamaindex")


@functools.lru_cache(maxsize=1)
def _langchain_embeddings_class() -> type[Embeddings]:
    _import_langchain()
    from langchain_core.embeddings import Embeddings

    class RagbridgeEmbeddings(Embeddings):
        """A ragbridge `Embedder` seen through LangChain's ``Embeddings`` interface."""

        def __init__(self, embedder: Embedder) -> None:
            self.embedder = embedder
            self.model = embedder.model

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return run_sync(self.embedder.embed(list(texts)))

        def embed_query(self, text: str) -> list[float]:
            return run_sync(self.embedder.embed([text]))[0]

        async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
            return await self.embedder.embed(list(texts))

        async def aembed_query(self, text: str) -> list[float]:
            return (await self.embedder.embed([text]))[0]

    return RagbridgeEmbeddings


def langchain_embeddings(embedder: Embedder) -> Embeddings:
    """A ragbridge `Embedder` (async ``embed``) as a LangChain ``Embeddings``."""
    return _langchain_embeddings_class()(embedder)  # type: ignore[call-arg]


@functools.lru_cache(maxsize=1)
def _llamaindex_embedding_class() -> type[BaseEmbedding]:
    _import_llamaindex()
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from llama_index.core.bridge.pydantic import PrivateAttr

    class RagbridgeEmbedding(BaseEmbedding):
        """A ragbridge `Embedder` seen through LlamaIndex's ``BaseEmbedding`` interface."""

        _embedder: Any = PrivateAttr()

        def __init__(self, embedder: Embedder, **kwargs: Any) -> None:
            super().__init__(model_name=embedder.model, **kwargs)
            self._embedder = embedder

        @classmethod
        def class_name(cls) -> str:
            return "RagbridgeEmbedding"

        def _get_query_embedding(self, query: str) -> list[float]:
            vectors: list[list[float]] = run_sync(self._embedder.embed([query]))
            return vectors[0]

        async def _aget_query_embedding(self, query: str) -> list[float]:
            vectors: list[list[float]] = await self._embedder.embed([query])
            return vectors[0]

        def _get_text_embedding(self, text: str) -> list[float]:
            return self._get_query_embedding(text)

        def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            vectors: list[list[float]] = run_sync(self._embedder.embed(list(texts)))
            return vectors

        async def _aget_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            vectors: list[list[float]] = await self._embedder.embed(list(texts))
            return vectors

    return RagbridgeEmbedding


def llamaindex_embedding(embedder: Embedder, *, embed_batch_size: int = 64) -> BaseEmbedding:
    """A ragbridge `Embedder` as a LlamaIndex ``BaseEmbedding`` (``model_name`` = its model)."""
    cls: Any = _llamaindex_embedding_class()
    embedding: BaseEmbedding = cls(embedder, embed_batch_size=embed_batch_size)
    return embedding


# --------------------------------------------------------------------------- pipelines


def _answerer() -> ExtractiveAnswerer:
    """The answerer both pipelines use, with IDF from the whole handbook."""
    return ExtractiveAnswerer(d.full_text for d in documents())


def _check_k(k: int) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")


def langchain_pipeline(embedder: Embedder | None = None, k: int = 4) -> Runnable[str, str]:
    """A LangChain RAG chain over the handbook: question in, answer string out.

    Retrieval: an ``InMemoryVectorStore`` holding one ``Document`` per handbook document (the
    whole text, ``Document.id`` = document id, the title in metadata), searched with
    ``embedder`` (default: the shared `LocalEmbedder`) for the top ``k``. Generation:
    `ExtractiveAnswerer` as a ``RunnableLambda``. Run it over samples with
    `ragbridge.adapters.langchain.run_pipeline` (or `run_langchain_demo`, which also tags the
    samples). The retriever run is named ``handbook_retriever``.
    """
    _check_k(k)
    _import_langchain()
    from langchain_core.documents import Document
    from langchain_core.runnables import RunnableLambda, RunnableParallel, RunnablePassthrough
    from langchain_core.vectorstores import InMemoryVectorStore

    store = InMemoryVectorStore(langchain_embeddings(embedder or default_embedder()))
    store.add_documents(
        [Document(id=d.id, page_content=d.text, metadata={"title": d.title}) for d in documents()]
    )
    retriever = store.as_retriever(search_kwargs={"k": k}).with_config(
        run_name="handbook_retriever"
    )
    answerer = _answerer()

    def generate(inputs: dict[str, Any]) -> str:
        passages = [doc.page_content for doc in inputs["documents"]]
        return answerer.answer(inputs["question"], passages)

    chain: Runnable[str, str] = RunnableParallel(
        question=RunnablePassthrough(), documents=retriever
    ) | RunnableLambda(generate).with_config(run_name=GENERATOR_MODEL)
    return chain.with_config(run_name=LANGCHAIN_PIPELINE)


def llamaindex_pipeline(
    embedder: Embedder | None = None,
    k: int = 4,
    *,
    chunk_size: int = 64,
    ingestion_cache: IngestionCache | None = None,
) -> BaseQueryEngine:
    """A LlamaIndex query engine over the handbook, answering with `ExtractiveAnswerer`.

    Retrieval: a ``VectorStoreIndex`` over the handbook (``Document.doc_id`` = document id, the
    title in metadata), split by a ``SentenceSplitter`` into chunks of about ``chunk_size``
    tokens (so most documents become two or three chunks, unlike the LangChain pipeline's whole
    documents), embedded with ``embedder`` (default: the shared `LocalEmbedder`), top ``k``
    chunks. Generation: a ``CustomQueryEngine`` that answers from the retrieved chunk texts and
    returns them as ``source_nodes``. Run it with
    `ragbridge.adapters.llamaindex.run_query_engine` (or `run_llamaindex_demo`).

    The documents are split by LlamaIndex's own ``IngestionPipeline``. With an
    ``ingestion_cache`` (LlamaIndex's ``IngestionCache``), documents and splitter settings it has
    seen give back the nodes it kept, node ids included, without splitting again: the
    splitter's sentence tokenizer is nltk's Punkt, and importing nltk is a large share of a
    demo rerun. Without one, every call splits (the same chunks, new node ids).
    """
    _check_k(k)
    _import_llamaindex()
    from llama_index.core import Document, VectorStoreIndex
    from llama_index.core.base.response.schema import Response
    from llama_index.core.ingestion import IngestionPipeline
    from llama_index.core.node_parser import SentenceSplitter
    from llama_index.core.query_engine import CustomQueryEngine
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import MetadataMode, NodeWithScore

    ingestion = IngestionPipeline(
        transformations=[SentenceSplitter(chunk_size=chunk_size, chunk_overlap=0)],
        cache=ingestion_cache,
        disable_cache=ingestion_cache is None,
    )
    nodes = ingestion.run(
        documents=[
            Document(text=d.text, id_=d.id, metadata={"title": d.title}) for d in documents()
        ]
    )
    index = VectorStoreIndex(
        nodes, embed_model=llamaindex_embedding(embedder or default_embedder())
    )
    retriever = index.as_retriever(similarity_top_k=k)

    class HandbookQueryEngine(CustomQueryEngine):
        """Retrieve chunks, answer extractively from their texts, report them as sources."""

        retriever: BaseRetriever
        answerer: ExtractiveAnswerer

        def _respond(self, query_str: str, nodes: list[NodeWithScore]) -> Response:
            texts = [n.node.get_content(metadata_mode=MetadataMode.NONE) for n in nodes]
            return Response(
                response=self.answerer.answer(query_str, texts),
                source_nodes=nodes,
                metadata={"generator_model": GENERATOR_MODEL},
            )

        def custom_query(self, query_str: str) -> Response:
            return self._respond(query_str, self.retriever.retrieve(query_str))

        async def acustom_query(self, query_str: str) -> Response:
            return self._respond(query_str, await self.retriever.aretrieve(query_str))

    return HandbookQueryEngine(retriever=retriever, answerer=_answerer())


# --------------------------------------------------------------------------- running


def tag_samples(samples: Iterable[Sample], pipeline: str, **extra: Any) -> list[Sample]:
    """Copies of ``samples`` whose metadata records the ``pipeline`` name, ``generator_model``
    (`GENERATOR_MODEL`) and any ``extra`` keys (JSON values)."""
    return [
        s.model_copy(
            update={
                "metadata": {
                    **s.metadata,
                    "pipeline": pipeline,
                    "generator_model": GENERATOR_MODEL,
                    **extra,
                }
            }
        )
        for s in samples
    ]


def run_langchain_demo(
    samples: Iterable[Sample] | None = None,
    *,
    embedder: Embedder | None = None,
    k: int = 4,
    max_concurrency: int = 4,
    chain: Runnable[str, str] | None = None,
) -> list[Sample]:
    """Answer ``samples`` (default: all handbook `questions`) with `langchain_pipeline` through
    `ragbridge.adapters.langchain.run_pipeline`; returns tagged samples with contexts (document
    ids) and answers.

    ``chain``: a `langchain_pipeline` already built with ``embedder`` and ``k`` (building one
    embeds the whole handbook), so a caller that runs the pipeline again elsewhere, as the CLI
    demo does for LangSmith, builds it once."""
    from ragbridge.adapters.langchain import run_pipeline

    used = embedder or default_embedder()
    ran = run_pipeline(
        chain if chain is not None else langchain_pipeline(used, k),
        questions() if samples is None else samples,
        retriever_name="handbook_retriever",
        max_concurrency=max_concurrency,
    )
    return tag_samples(ran, LANGCHAIN_PIPELINE, embedding_model=used.model, retrieval_k=k)


def run_llamaindex_demo(
    samples: Iterable[Sample] | None = None,
    *,
    embedder: Embedder | None = None,
    k: int = 4,
    max_concurrency: int = 4,
    ingestion_cache: IngestionCache | None = None,
) -> list[Sample]:
    """Answer ``samples`` (default: all handbook `questions`) with `llamaindex_pipeline` through
    `ragbridge.adapters.llamaindex.run_query_engine`; returns tagged samples with contexts
    (chunks reported under their document ids) and answers. ``ingestion_cache``: see
    `llamaindex_pipeline`."""
    from ragbridge.adapters.llamaindex import run_query_engine

    used = embedder or default_embedder()
    engine = llamaindex_pipeline(used, k, ingestion_cache=ingestion_cache)
    ran = run_query_engine(
        engine,
        list(questions() if samples is None else samples),
        max_concurrency=max_concurrency,
    )
    return tag_samples(ran, LLAMAINDEX_PIPELINE, embedding_model=used.model, retrieval_k=k)
