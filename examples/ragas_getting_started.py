"""RAGAS's getting-started evaluation with ragbridge's metrics swapped in — fully offline.

The shape follows RAGAS's guide "Evaluate a simple RAG system" (docs/getstarted/rag_eval.md in
github.com/explodinggradients/ragas): a tiny RAG over five documents, its queries run to collect
``user_input`` / ``retrieved_contexts`` / ``response`` / ``reference`` rows, an
``EvaluationDataset.from_list``, then ``evaluate(dataset=..., metrics=[...], llm=...)`` and the
result as a table. The documents, queries and code here are our own.

What differs from the guide:

* the metric lines (marked ``# <- ragbridge``): ragbridge's measures inside ``ragas.evaluate``,
  given the same ``llm=`` / ``embeddings=`` RAGAS hands its own metrics;
* the models, because this runs with no network and no key: the guide's ``ChatOpenAI`` and
  ``OpenAIEmbeddings`` are replaced by offline stand-ins (`OverlapJudge`, a word-overlap judge,
  and ragbridge's hashing embedder). In your code keep your models:
  ``evaluator_llm = LangchainLLMWrapper(ChatOpenAI(model="gpt-4o"))`` works as it is.

Run: ``python examples/ragas_getting_started.py`` (needs ``pip install ".[ragas]"``).
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Sequence
from typing import Any

os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")

import numpy as np
import pandas as pd
from pydantic import BaseModel

from ragbridge.core import JudgeReply
from ragbridge.core.testing import HashEmbedder

# --------------------------------------------------------------------------- offline models

_WORD = re.compile(r"[a-z0-9]+(?:[.,][0-9]+)*")
_STOP = frozenset(
    {"a", "an", "and", "are", "as", "at", "by", "does", "for", "from", "has", "in", "is", "it"}
    | {"its", "of", "on", "one", "the", "to", "was", "what", "where", "which", "who", "with"}
)
_BLOCK = re.compile(r"<<<BEGIN (?P<label>[A-Z]+)(?: (?P<n>\d+))?>>>\s*(?P<text>.*?)\s*<<<END")
_TASK = re.compile(r"\[ragbridge task: (?P<task>[\w.]+) v")


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


def _covered(text: str, by: Sequence[str], share: float = 0.75) -> int | None:
    """The 1-based number of the first text in ``by`` holding ``share`` of ``text``'s words."""
    words = _words(text)
    for number, other in enumerate(by, start=1):
        if words and len(words & _words(other)) >= share * len(words):
            return number
    return None


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if s.strip()]


class OverlapJudge:
    """A stand-in for an LLM judge, for running offline: it answers ragbridge's judge tasks by
    word overlap (a claim is "supported" when a context holds 3/4 of its words). Crude but
    deterministic; swap in a real model (any LangChain chat model, OpenAI-compatible server,
    ...) for real evaluations."""

    model = "overlap-judge"

    async def generate(
        self, messages: Sequence[dict[str, str]], *, schema: type[BaseModel] | None = None
    ) -> JudgeReply:
        found = _TASK.search(messages[0]["content"])
        blocks: dict[str, list[str]] = {}
        for match in _BLOCK.finditer(messages[-1]["content"]):
            blocks.setdefault(match["label"], []).append(match["text"])
        reply = self.reply(found["task"] if found else "", blocks)
        return JudgeReply(text=json.dumps(reply))

    def reply(self, task: str, blocks: dict[str, list[str]]) -> dict[str, Any]:
        contexts = blocks.get("CONTEXT", [])
        if task == "answer.analyze":
            answer = blocks["ANSWER"][0]
            dodges = "don't know" in answer.lower()
            claims = [] if dodges else _sentences(answer)
            # The questions the answer replies to: its own first sentence, asked back.
            asked = (claims or [answer])[0].rstrip(".") + "?"
            return {"claims": claims, "questions": [asked] * 3, "noncommittal": dodges}
        if task == "faithfulness.verify":
            verdicts = []
            for claim in blocks.get("CLAIM", []):
                number = _covered(claim, contexts)
                verdict = "supported" if number else "unsupported"
                verdicts.append({"reason": "word overlap", "verdict": verdict, "context": number})
            return {"verdicts": verdicts}
        if task == "context_recall.attribute":
            statements = []
            for statement in _sentences(blocks["REFERENCE"][0]):
                number = _covered(statement, contexts)
                statements.append(
                    {
                        "statement": statement,
                        "reason": "word overlap",
                        "attributed": number is not None,
                        "context": number,
                    }
                )
            return {"statements": statements}
        if task == "answer_correctness.classify":
            claims, reference = blocks.get("CLAIM", []), _sentences(blocks["REFERENCE"][0])
            tp = [c for c in claims if _covered(c, reference)]
            fp = [c for c in claims if c not in tp]
            fn = [r for r in reference if not _covered(r, claims)]
            return {"tp": tp, "fp": fp, "fn": fn}
        raise ValueError(f"OverlapJudge has no rule for task {task!r}")


# --------------------------------------------------------------------------- a simple RAG

sample_docs = [
    "The Rhine rises in the Swiss Alps and reaches the North Sea near Rotterdam.",
    "Kilimanjaro in Tanzania is the highest mountain in Africa at 5,895 metres.",
    "The Great Barrier Reef lies off the coast of Queensland in north-eastern Australia.",
    "Lake Baikal in Siberia is the deepest lake on Earth at 1,642 metres.",
    "The Atacama Desert in northern Chile is one of the driest places on Earth.",
]

# What the generator says (the guide asks an LLM); two answers go wrong on purpose.
_CANNED_ANSWERS = {
    "Where does the Rhine reach the sea?": "The Rhine reaches the North Sea near Rotterdam.",
    "What is the highest mountain in Africa?": "Kilimanjaro is the highest mountain in Africa.",
    "Where is the Great Barrier Reef?": "The Great Barrier Reef lies off Queensland, Australia.",
    "Which lake is the deepest on Earth?": (
        "Lake Baikal is the deepest lake on Earth. Lake Baikal lies in Canada."
    ),
    "Where is the Atacama Desert?": "The Atacama Desert covers most of southern Argentina.",
}


class RAG:
    """Retrieves the closest document by embedding similarity, then answers from it."""

    def __init__(self, embeddings: Any) -> None:
        self.embeddings = embeddings
        self.docs: list[str] = []
        self.doc_embeddings: list[list[float]] = []

    def load_documents(self, documents: list[str]) -> None:
        self.docs = documents
        self.doc_embeddings = self.embeddings.embed_texts(documents)

    def get_most_relevant_docs(self, query: str) -> list[str]:
        query_embedding = self.embeddings.embed_text(query)
        similarities = [float(np.dot(query_embedding, doc)) for doc in self.doc_embeddings]
        return [self.docs[int(np.argmax(similarities))]]

    def generate_answer(self, query: str, relevant_docs: list[str]) -> str:
        return _CANNED_ANSWERS[query]  # a real RAG prompts its LLM with the documents here


sample_queries = list(_CANNED_ANSWERS)
expected_responses = [
    "The Rhine reaches the North Sea near Rotterdam.",
    "Kilimanjaro is the highest mountain in Africa.",
    "The Great Barrier Reef lies off the coast of Queensland, Australia.",
    "Lake Baikal is the deepest lake on Earth.",
    "The Atacama Desert is in northern Chile.",
]


def main() -> pd.DataFrame:
    os.chdir(tempfile.mkdtemp(prefix="ragbridge-ragas-"))  # RAGAS may write state files here
    from ragbridge.adapters.ragas import RagasEmbedder, RagasJudge

    # Models. The guide: llm = ChatOpenAI(model="gpt-4o"), embeddings = OpenAIEmbeddings(...).
    llm = OverlapJudge()
    embeddings = RagasEmbedder(HashEmbedder(dim=256)).for_collections()

    rag = RAG(embeddings)
    rag.load_documents(sample_docs)

    dataset = []
    for query, reference in zip(sample_queries, expected_responses, strict=True):
        relevant_docs = rag.get_most_relevant_docs(query)
        response = rag.generate_answer(query, relevant_docs)
        dataset.append(
            {
                "user_input": query,
                "retrieved_contexts": relevant_docs,
                "response": response,
                "reference": reference,
            }
        )

    from ragas import EvaluationDataset

    evaluation_dataset = EvaluationDataset.from_list(dataset)

    from ragas import evaluate

    evaluator_llm = RagasJudge(llm)  # the guide: LangchainLLMWrapper(llm)
    from ragbridge.adapters.ragas import ragbridge_metrics  # <- ragbridge

    # The guide: metrics=[LLMContextRecall(), Faithfulness(), FactualCorrectness()]. Metrics made
    # by one ragbridge_metrics call share each row's claims (one judge call, not three);
    # [RagbridgeMetric("context_recall"), RagbridgeMetric("faithfulness"), ...] works too.
    metrics = ragbridge_metrics(  # <- ragbridge
        "context_recall", "faithfulness", "answer_correctness", "answer_relevancy"
    )
    result = evaluate(
        dataset=evaluation_dataset,
        metrics=metrics,
        llm=evaluator_llm,
        embeddings=embeddings,
        show_progress=False,
    )
    print(result)
    table = result.to_pandas()
    columns = ["user_input", "context_recall", "faithfulness", "answer_correctness"]
    with pd.option_context("display.width", 120, "display.max_colwidth", 40):
        print(table[[*columns, "answer_relevancy"]].round(3).to_string())
    return table


if __name__ == "__main__":
    main()
