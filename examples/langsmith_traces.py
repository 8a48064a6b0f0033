"""Score a LangSmith-traced RAG pipeline's retrieval with ragbridge, fully offline.

Run from the repository root:  python examples/langsmith_traces.py
Needs the langsmith extra (``pip install ".[langsmith]"``); no network, no API key.

Why this shape: a pipeline already traced with ``@traceable`` records everything a `Sample`
needs. ``langsmith.evaluate`` runs the pipeline over a labelled dataset and hands each trace (a
live run tree) with its dataset example to an evaluator; `sample_from_run` turns that pair into a
`Sample` (question, retrieved contexts, answer, relevance labels), and ragbridge scores them.
`offline_client` keeps LangSmith from connecting anywhere (``upload_results=False`` alone does
not stop the ``/info`` probe).

Traces read back from a LangSmith project or an export work the same way: see
`ragbridge.adapters.langsmith.samples_from_project` and `load_runs`.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

os.environ.pop("LANGSMITH_TRACING", None)  # this demo must never try to reach the API

import langsmith
from corpus import DOCUMENTS, QUESTIONS  # examples/corpus.py, the shared corpus
from langsmith import traceable
from langsmith.schemas import Example

from ragbridge.adapters.langsmith import offline_client, sample_from_run
from ragbridge.core import Sample, evaluate

CORPUS = DOCUMENTS  # the shared example corpus (examples/corpus.py)


@traceable(run_type="retriever", name="keyword_search")
def keyword_search(query: str, k: int = 2) -> list[dict[str, Any]]:
    """A toy retriever; traced as a retriever run whose outputs LangSmith stores as a list."""
    words = {w.strip("?.,").lower() for w in query.split() if len(w) > 3}
    scored = [(sum(w in text.lower() for w in words), doc_id) for doc_id, text in CORPUS.items()]
    ranked = sorted((s for s in scored if s[0] > 0), key=lambda s: (-s[0], s[1]))[:k]
    return [
        {"page_content": CORPUS[doc_id], "metadata": {"id": doc_id, "score": float(hits)}}
        for hits, doc_id in ranked
    ]


@traceable(name="rag_pipeline")
def rag_pipeline(inputs: dict[str, Any]) -> dict[str, Any]:
    """Retrieve, then "answer" with the top passage (a stand-in for an LLM call)."""
    docs = keyword_search(inputs["question"])
    return {"answer": docs[0]["page_content"] if docs else "I don't know."}


DATASET = [(question, list(relevance)) for _, question, relevance in QUESTIONS]


def main() -> None:
    examples = [
        Example(
            id=uuid.UUID(int=i + 1),
            inputs={"question": question},
            outputs={"relevant_ids": relevant},
        )
        for i, (question, relevant) in enumerate(DATASET)
    ]
    samples: list[Sample] = []

    def to_sample(run: Any, example: Any) -> dict[str, Any]:
        # Inside langsmith.evaluate, `run` is the live trace with its child runs.
        sample = sample_from_run(run, example)
        samples.append(sample)
        return {"key": "contexts_retrieved", "score": len(sample.contexts)}

    langsmith.evaluate(
        rag_pipeline,
        data=examples,
        evaluators=[to_sample],
        upload_results=False,
        client=offline_client(),
    )
    samples.sort(key=lambda s: s.id)
    for sample in samples:
        print(f"{sample.question:<40} retrieved {sample.context_ids}  relevant {sample.relevance}")

    evaluation = evaluate(samples, ["recall@2", "mrr"])
    print(f"\n{'measure':<10} {'mean':>6} {'scored':>6}")
    for metric, summary in evaluation.summary(seed=0).items():
        mean = "-" if summary.mean is None else f"{summary.mean:.3f}"
        print(f"{metric:<10} {mean:>6} {summary.n_scored:>6}")


if __name__ == "__main__":
    main()
