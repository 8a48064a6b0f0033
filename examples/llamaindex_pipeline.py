"""Evaluate the retrieval of a LlamaIndex query engine on questions labelled by document id.

Run from the repository root:  python examples/llamaindex_pipeline.py
(needs ``pip install ".[llamaindex]"``; no network, no API key)

Why this shape: relevance is labelled on the *documents* a team owns, while the index splits them
into chunks with fresh node ids. `run_query_engine` reports each retrieved chunk under its source
document id (``node.ref_doc_id``), so the labels still match, and the core's ranking measures
count several chunks of one document once. The models are passed explicitly (LlamaIndex's
``Settings`` defaults need OpenAI): a tiny word-hashing embedding that ranks chunks differently
(``MockEmbedding`` scores every chunk the same) and ``MockLLM``, which just echoes its prompt.
A real deployment passes its own embedding model and LLM instead.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import re

from corpus import DOCUMENTS, QUESTIONS  # examples/corpus.py, the shared corpus
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.embeddings import BaseEmbedding
from llama_index.core.llms import MockLLM
from llama_index.core.node_parser import SentenceSplitter

from ragbridge.adapters.llamaindex import capture_retrievals, run_query_engine
from ragbridge.core import evaluate
from ragbridge.core.sample import Sample


class HashEmbedding(BaseEmbedding):
    """Bag-of-words hashed into 128 buckets: deterministic and offline."""

    def _vector(self, text: str) -> list[float]:
        vector = [0.0] * 128
        for word in re.findall(r"[a-z0-9]+", text.lower()):
            vector[int(hashlib.md5(word.encode()).hexdigest(), 16) % 128] += 1.0
        return vector

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._vector(text)


def main() -> None:
    # Chunks this small are on purpose (several per document); LlamaIndex prints a warning on
    # stdout for each document about it, which is kept out of the example's output.
    with contextlib.redirect_stdout(io.StringIO()):
        index = VectorStoreIndex.from_documents(
            [Document(text=text, id_=doc_id) for doc_id, text in DOCUMENTS.items()],
            embed_model=HashEmbedding(model_name="hash-128"),
            transformations=[SentenceSplitter(chunk_size=30, chunk_overlap=0)],
        )
    print(f"{len(DOCUMENTS)} documents -> {len(index.docstore.docs)} chunks")
    engine = index.as_query_engine(llm=MockLLM(), similarity_top_k=4)

    samples = [Sample(id=i, question=q, relevance=rel) for i, q, rel in QUESTIONS]
    filled = run_query_engine(engine, samples, max_concurrency=4)
    for sample in filled:
        ranked = [c.id for c in sample.contexts]
        print(f"  {sample.id}: retrieved {ranked}  ({sample.metadata['latency_s'] * 1000:.1f} ms)")

    evaluation = evaluate(filled, ["recall@2", "mrr", "ndcg@3"])
    for name, summary in evaluation.summary().items():
        print(f"{name:<9} mean {summary.mean:.3f}  (n={summary.n_scored})")

    # The same retrievals can be captured from any LlamaIndex code, without run_query_engine.
    with capture_retrievals() as capture:
        engine.query("Who approves leave requests?")
    (retrieval,) = capture.retrievals
    print(f"captured: {retrieval.query!r} -> {[c.id for c in retrieval.contexts()]}")


if __name__ == "__main__":
    main()
