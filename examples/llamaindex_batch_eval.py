"""LlamaIndex's BatchEvalRunner notebook, with ragbridge's evaluators swapped in, offline.

Run from the repository root:  python examples/llamaindex_batch_eval.py
(needs ``pip install ".[llamaindex]"``; no network, no API key)

The shape follows LlamaIndex's public notebook "BatchEvalRunner - Running Multiple Evaluations"
(run-llama/llama_index, docs/examples/evaluation/batch_eval.ipynb, MIT licence): build an
index, a query engine, ``BatchEvalRunner(evaluators={...}, workers=8)``, then
``aevaluate_queries`` and the share of passing results per evaluator. It is written here in
our own words. Only the evaluator lines differ from the notebook; each is marked by a comment
``# ragbridge, in place of: <the notebook's line>`` above it.

What stands in for what, so that it runs with no network: the notebook's GPT-4 judge is
`RuleJudge`, a LlamaIndex LLM answering ragbridge's judge prompts by plain word rules (a claim
is supported when one context holds all its words); its GPT-3.5 answerer is `ExtractiveLLM`,
which answers with the context sentence that shares most words with the question (and, as real
models sometimes do, adds something the documents do not say when asked about parking); its
wiki pages are the HR corpus every example uses; and its generated questions are the corpus's
labelled questions. A real run passes OpenAI (or any LlamaIndex LLM) in their place.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import io
import json
import re
from typing import Any

from corpus import DOCUMENTS, QUESTIONS  # examples/corpus.py, the shared corpus
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.embeddings import BaseEmbedding
from llama_index.core.evaluation import BatchEvalRunner
from llama_index.core.llms import (
    CompletionResponse,
    CompletionResponseGen,
    CustomLLM,
    LLMMetadata,
)
from llama_index.core.node_parser import SentenceSplitter

# ragbridge, in place of: from llama_index.core.evaluation import FaithfulnessEvaluator, ...
from ragbridge.adapters.llamaindex import RagbridgeEvaluator

# --------------------------------------------------------------------------- offline stand-ins

_WORD = re.compile(r"[a-z0-9]+")


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if len(w) > 3}


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s.strip()]


class HashEmbedding(BaseEmbedding):
    """Bag of words hashed into 128 buckets: deterministic and offline."""

    def _vector(self, text: str) -> list[float]:
        vector = [0.0] * 128
        for word in _WORD.findall(text.lower()):
            vector[int(hashlib.md5(word.encode()).hexdigest(), 16) % 128] += 1.0
        return vector

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._vector(text)


class _TextLLM(CustomLLM):
    """A completion-only LLM whose reply is a function of the prompt."""

    model: str = "offline"

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name=self.model)

    def reply(self, prompt: str) -> str:
        raise NotImplementedError

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return CompletionResponse(text=self.reply(prompt))

    def stream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseGen:
        raise NotImplementedError


class ExtractiveLLM(_TextLLM):
    """Answers LlamaIndex's question-answering prompt with the context sentence sharing most
    words with the query; about parking it also invents a price the documents never state."""

    model: str = "extractive-answerer"

    def reply(self, prompt: str) -> str:
        context = prompt.split("---------------------")[1]
        query = prompt.split("Query:")[-1].split("Answer:")[0]
        best = max(_sentences(context), key=lambda s: len(_words(s) & _words(query)))
        if "parking" in query.lower():
            best += " A parking permit costs 10 euros a month."
        return best


def _blocks(prompt: str, label: str) -> list[str]:
    pattern = rf"<<<BEGIN {label}(?: \d+)?>>>\s*(.*?)\s*<<<END {label}(?: \d+)?>>>"
    return re.findall(pattern, prompt, flags=re.S)


class RuleJudge(_TextLLM):
    """Answers ragbridge's judge prompts by word rules: the claims are the answer's sentences, a
    claim is supported when one context holds all its longer words, and an answer helps when
    it shares a longer word with the question."""

    model: str = "rule-judge"

    def reply(self, prompt: str) -> str:
        task = re.search(r"\[ragbridge task: ([\w.]+)", prompt)
        name = task.group(1) if task else ""
        if name == "answer.analyze":
            answer = _blocks(prompt, "ANSWER")[0]
            claims = _sentences(answer)
            subjects = sorted(_words(answer), key=len, reverse=True)[:3] or ["it"]
            questions = [f"What is said about {s}?" for s in (subjects * 3)[:3]]
            return json.dumps({"claims": claims, "questions": questions, "noncommittal": False})
        if name == "faithfulness.verify":
            contexts = [_words(c) for c in _blocks(prompt, "CONTEXT")]
            verdicts = []
            for claim in _blocks(prompt, "CLAIM"):
                where = [i for i, c in enumerate(contexts, 1) if _words(claim) <= c]
                ok = bool(where)
                verdicts.append(
                    {
                        "reason": "a context states it" if ok else "no context states it",
                        "verdict": "supported" if ok else "unsupported",
                        "context": where[0] if ok else None,
                    }
                )
            return json.dumps({"verdicts": verdicts})
        if name == "grader.helpfulness":
            question, answer = _blocks(prompt, "QUESTION")[0], _blocks(prompt, "ANSWER")[0]
            helps = bool(_words(question) & _words(answer))
            return json.dumps({"explanation": "shares the question's subject", "verdict": helps})
        raise ValueError(f"RuleJudge cannot answer task {name!r}")


# --------------------------------------------------------------------------- the notebook


async def main() -> dict[str, float]:
    # The judge ("gpt4" in the notebook) and the evaluators built on it.
    gpt4 = RuleJudge()
    # ragbridge, in place of: faithfulness_gpt4 = FaithfulnessEvaluator(llm=gpt4)
    faithfulness_gpt4 = RagbridgeEvaluator("faithfulness", llm=gpt4, passing="llamaindex")
    # ragbridge, in place of: relevancy_gpt4 = RelevancyEvaluator(llm=gpt4)
    relevancy_gpt4 = RagbridgeEvaluator("helpfulness", llm=gpt4)

    # The documents, the answering LLM and the index.
    documents = [Document(text=text, id_=doc_id) for doc_id, text in DOCUMENTS.items()]
    llm = ExtractiveLLM()
    splitter = SentenceSplitter(chunk_size=30, chunk_overlap=0)
    with contextlib.redirect_stdout(io.StringIO()):  # LlamaIndex prints a note per tiny chunk
        vector_index = VectorStoreIndex.from_documents(
            documents, transformations=[splitter], embed_model=HashEmbedding(model_name="hash")
        )
    questions = [question for _, question, _ in QUESTIONS]

    runner = BatchEvalRunner(
        {"faithfulness": faithfulness_gpt4, "relevancy": relevancy_gpt4},
        workers=8,
    )
    eval_results = await runner.aevaluate_queries(
        vector_index.as_query_engine(llm=llm, similarity_top_k=2), queries=questions
    )

    print(list(eval_results.keys()))
    first = eval_results["faithfulness"][0]
    print("first response:", first.response)
    print("passing:", first.passing, " score:", first.score)
    for result in eval_results["faithfulness"]:
        if result.passing is False:
            print("not faithful:", result.response)
            print(result.feedback)

    def get_eval_results(key: str, eval_results: dict[str, list[Any]]) -> float:
        results = eval_results[key]
        correct = sum(1 for result in results if result.passing)
        score = correct / len(results)
        print(f"{key} Score: {score}")
        return score

    return {
        "faithfulness": get_eval_results("faithfulness", eval_results),
        "relevancy": get_eval_results("relevancy", eval_results),
    }


if __name__ == "__main__":
    asyncio.run(main())
