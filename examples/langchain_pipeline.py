"""Evaluate a LangChain RAG chain with ragbridge, offline: capture what it retrieved, score it.

Run from the repository root (needs the ``langchain`` extra: ``pip install -e ".[langchain]"``):

    python examples/langchain_pipeline.py

It builds a tiny in-memory corpus, a real `InMemoryVectorStore` retriever over a bag-of-words
embedding (so similar wording retrieves similar passages, with no model and no network), and an
LCEL chain ending in a fake chat model. Then:

1. ``capture_retrievals()`` shows what one ``chain.invoke`` retrieved, with no change to the chain;
2. ``run_pipeline`` runs the chain over labelled `Sample`s (concurrently) and fills in each
   sample's retrieved contexts and answer;
3. ``evaluate`` scores recall@2 and MRR against the relevance labels (document ids), and — when
   the ``local`` extra is installed — offline faithfulness with all-MiniLM-L6-v2.
"""

from __future__ import annotations

import hashlib
import importlib.util
import math
import re
from typing import Any

from corpus import ANSWERS, DOCUMENTS, QUESTIONS  # examples/corpus.py, the shared corpus
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.language_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import Runnable, RunnableLambda, RunnablePassthrough
from langchain_core.vectorstores import InMemoryVectorStore

from ragbridge.adapters.langchain import capture_retrievals, run_pipeline
from ragbridge.core import Sample, evaluate

CORPUS = DOCUMENTS  # the shared example corpus (examples/corpus.py)
SAMPLES = [Sample(id=qid, question=q, relevance=rel) for qid, q, rel in QUESTIONS]


class BagOfWordsEmbeddings(Embeddings):
    """Hashed bag-of-words vectors: a real LangChain `Embeddings`, deterministic and model-free."""

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim

    def _vector(self, text: str) -> list[float]:
        vec = [0.0] * self.dim
        for word in re.findall(r"\w+", text.lower()):
            digest = hashlib.blake2b(word.encode(), digest_size=4).digest()
            vec[int.from_bytes(digest, "little") % self.dim] += 1.0
        norm = math.sqrt(sum(v * v for v in vec)) or 1.0
        return [v / norm for v in vec]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


def format_docs(docs: list[Document]) -> str:
    return "\n".join(d.page_content for d in docs)


def build_chain() -> Runnable[Any, Any]:
    store = InMemoryVectorStore(BagOfWordsEmbeddings())
    store.add_documents([Document(id=key, page_content=text) for key, text in CORPUS.items()])
    retriever = store.as_retriever(search_kwargs={"k": 2})
    prompt = ChatPromptTemplate.from_template(
        "Answer from the context.\n{context}\n\nQ: {question}"
    )
    llm = FakeListChatModel(responses=ANSWERS)  # answers in order; stands in for a real model
    return (
        {"context": retriever | RunnableLambda(format_docs), "question": RunnablePassthrough()}
        | prompt
        | llm
        | StrOutputParser()
    )


def main() -> None:
    chain = build_chain()

    # 1. Capture with no change to the chain.
    with capture_retrievals() as cap:
        chain.invoke(SAMPLES[0].question)
    (root,) = cap.roots()
    print("captured for:", cap.root_input(root))
    for ctx in cap.contexts(root):
        print(f"  {ctx.id:<9} {ctx.text}")

    # 2. Run the chain over the samples; max_concurrency=1 keeps the fake LLM's answers in order.
    ran = run_pipeline(build_chain(), SAMPLES, max_concurrency=1)

    # 3. Score.
    metrics: list[str] = ["recall@2", "mrr"]
    if importlib.util.find_spec("tokenizers"):  # the default embedder's one extra dependency
        metrics.append("faithfulness:offline")
    else:
        print('\n(offline faithfulness skipped: pip install ".[local]")')
    evaluation = evaluate(ran, metrics)
    metrics = evaluation.metrics  # "faithfulness:offline" is scored under the name "faithfulness"
    print(f"\n{'sample':<7} {'retrieved':<20} " + " ".join(f"{m:>20}" for m in metrics))
    for sample in ran:
        cells = []
        for metric in metrics:
            score = evaluation.get(sample.id, metric)
            value = None if score is None else score.value
            cells.append(f"{'-' if value is None else f'{value:.3f}':>20}")
        retrieved = ",".join(str(i) for i in sample.context_ids)
        print(f"{sample.id:<7} {retrieved:<20} " + " ".join(cells))
    print()
    for metric, summary in evaluation.summary(seed=0).items():
        mean = "-" if summary.mean is None else f"{summary.mean:.3f}"
        print(f"mean {metric:<22} {mean}  (scored {summary.n_scored})")


if __name__ == "__main__":
    main()
