"""LangSmith's RAG evaluation tutorial, with ragbridge's graders in place of the hand-written ones.

Run from the repository root:  python examples/langsmith_rag_tutorial.py
Needs the langsmith and langchain extras; no network, no API key.

The shape follows LangSmith's public tutorial "Evaluate a RAG application"
(docs.smith.langchain.com, evaluation tutorials): a ``@traceable`` RAG bot whose retriever is a
child run, a dataset of question / answer examples, four LLM graders (correctness, relevance,
groundedness, retrieval relevance) and ``client.evaluate(...)``. The code is written in our own
words. To run offline, the parts that call a service have stand-ins, each marked "offline":
the web pages are short passages written here, the embeddings are word counts, the bot's chat
model answers from a script, the grader is a rule-based scripted judge and the client never
connects (``upload_results=False``).

Only the evaluator lines differ from the tutorial: its four grader functions (each a prompt, a
structured-output schema and an LLM call, about a hundred lines) become one ``evaluators(...)``
call. ``keys="langsmith-tutorial"`` keeps the tutorial's feedback keys, so an experiment lands in
the same columns; the ``client.evaluate`` line itself is unchanged.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Sequence
from typing import Any

os.environ.pop("LANGSMITH_TRACING", None)  # this example must never try to reach the API

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.vectorstores import InMemoryVectorStore
from langsmith import traceable
from langsmith.schemas import Example

from ragbridge.adapters.langsmith import evaluators, offline_client
from ragbridge.core.testing import ScriptedJudge

# ----------------------------------------------------------------------------- the documents
# Offline: the tutorial loads three blog posts about LLM agents from the web and splits them
# into chunks; here are a few chunks of three short posts on the same subjects, in our words.
POSTS = {
    "https://example.org/agents/planning": [
        "An agent facing a complex task first breaks it into smaller steps. Chain-of-thought "
        "prompting asks the model to think step by step; a tree of thoughts explores several "
        "possible next steps at each stage.",
        "Self-reflection lets an agent look back at its earlier actions, notice mistakes and "
        "refine its plan. ReAct interleaves reasoning traces with actions in the environment.",
    ],
    "https://example.org/agents/memory": [
        "The post compares an agent's memory to human memory and names three kinds: sensory "
        "memory, short-term memory and long-term memory.",
        "Long-term memory is often an external vector store that the agent searches with "
        "maximum inner product search when it needs a fact it saw long ago.",
    ],
    "https://example.org/agents/tools": [
        "Tool use lets a model call external APIs: a calculator for arithmetic, a search engine "
        "for recent events, or a code interpreter for data analysis.",
    ],
}
doc_splits = [
    Document(page_content=text, metadata={"source": url})
    for url, chunks in POSTS.items()
    for text in chunks
]


class WordCountEmbeddings(Embeddings):
    """Offline: stands in for the tutorial's hosted embeddings (counts of a fixed vocabulary)."""

    vocabulary = sorted(
        {w for chunks in POSTS.values() for t in chunks for w in re.findall(r"[a-z]+", t.lower())}
    )

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.embed_query(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        words = re.findall(r"[a-z]+", text.lower())
        return [float(words.count(w)) for w in self.vocabulary] + [1e-3]


vectorstore = InMemoryVectorStore.from_documents(
    documents=doc_splits, embedding=WordCountEmbeddings()
)
retriever = vectorstore.as_retriever(search_kwargs={"k": 2})

# ----------------------------------------------------------------------------- the RAG bot
ANSWERS = {  # offline: what the bot's chat model says to each question
    "How does an agent break down a complex task?": (
        "It splits the task into smaller steps, for example with chain-of-thought prompting or "
        "a tree of thoughts that explores several next steps."
    ),
    "How many kinds of memory does the post describe?": (
        "It describes four kinds of memory: sensory, short-term, long-term and episodic memory."
    ),
    "Who won the football world cup in 2022?": "I don't know.",
}


class ScriptedChatModel(BaseChatModel):
    """Offline: stands in for the tutorial's chat model; answers each question from a script."""

    answers: dict[str, str]

    @property
    def _llm_type(self) -> str:
        return "scripted-chat"

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        question = str(messages[-1].content)
        reply = AIMessage(content=self.answers.get(question, "I don't know."))
        return ChatResult(generations=[ChatGeneration(message=reply)])


llm = ScriptedChatModel(answers=ANSWERS)


@traceable()
def rag_bot(question: str) -> dict[str, Any]:
    """Retrieve, then answer from the retrieved documents only."""
    docs = retriever.invoke(question)
    docs_string = "\n\n".join(doc.page_content for doc in docs)
    instructions = (
        "You answer questions about the documents below. Use them and nothing else; if they do "
        "not hold the answer, say that you don't know. Keep it to three sentences.\n\n"
        f"Documents:\n{docs_string}"
    )
    ai_msg = llm.invoke(
        [{"role": "system", "content": instructions}, {"role": "user", "content": question}]
    )
    return {"answer": ai_msg.content, "documents": docs}


# ----------------------------------------------------------------------------- the dataset
# Offline: the tutorial creates a LangSmith dataset with client.create_dataset/create_examples;
# here the same examples are LangSmith Example objects handed to evaluate directly.
client = offline_client()
examples = [
    (
        "How does an agent break down a complex task?",
        "By decomposing it into smaller steps, e.g. with chain-of-thought or a tree of thoughts.",
    ),
    (
        "How many kinds of memory does the post describe?",
        "Three: sensory memory, short-term memory and long-term memory.",
    ),
    (
        "Who won the football world cup in 2022?",
        "The posts do not say: football is outside their subject.",
    ),
]
dataset = [
    Example(id=uuid.uuid5(uuid.NAMESPACE_URL, q), inputs={"question": q}, outputs={"answer": a})
    for q, a in examples
]


# ----------------------------------------------------------------------------- the grader model
_NUMBERS = {"one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"}
_COMMON = {"which", "what", "does", "about", "there", "their", "posts", "describe"}


def _block(messages: Sequence[dict[str, str]], label: str) -> str:
    found = re.findall(rf"<<<BEGIN {label}(?: \d+)?>>>(.*?)<<<END", messages[-1]["content"], re.S)
    return " ".join(found).lower()


def _numbers(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text) if w.isdigit() or w in _NUMBERS}


def _grade(verdict: bool, why: str) -> dict[str, Any]:
    return {"explanation": why, "verdict": verdict}


def _correct(messages: Sequence[dict[str, str]]) -> dict[str, Any]:
    answer, reference = _block(messages, "ANSWER"), _block(messages, "REFERENCE")
    if "don't know" in answer:  # right only when the reference says there is nothing to know
        declined = "do not say" in reference
        return _grade(declined, "both decline" if declined else "the answer gives no answer")
    extra = _numbers(answer) - _numbers(reference)
    return _grade(not extra, f"counts the reference lacks: {sorted(extra)}" if extra else "agrees")


def _helpful(messages: Sequence[dict[str, str]]) -> dict[str, Any]:
    abstains = "don't know" in _block(messages, "ANSWER")
    return _grade(not abstains, "it declines to answer" if abstains else "it answers the question")


def _grounded(messages: Sequence[dict[str, str]]) -> dict[str, Any]:
    extra = _numbers(_block(messages, "ANSWER")) - _numbers(_block(messages, "CONTEXT"))
    return _grade(not extra, f"not in the documents: {sorted(extra)}" if extra else "all found")


def _related(messages: Sequence[dict[str, str]]) -> dict[str, Any]:
    words = {w for w in re.findall(r"[a-z]+", _block(messages, "QUESTION")) if len(w) > 4}
    shared = sorted((words - _COMMON) & set(re.findall(r"[a-z]+", _block(messages, "CONTEXT"))))
    return _grade(bool(shared), f"shared terms: {shared}" if shared else "nothing in common")


# Offline: the tutorial grades with a hosted chat model (e.g. judge=ChatOpenAI(model="gpt-4o",
# temperature=0) works here as written); this scripted judge applies simple rules per grader.
grader_llm = ScriptedJudge(
    {
        "grader.correctness": _correct,
        "grader.helpfulness": _helpful,
        "grader.groundedness": _grounded,
        "grader.document_relevance": _related,
    },
    model="rule-grader",
)

# ----------------------------------------------------------------------------- the evaluators
# The only lines that differ from the tutorial (its four grader functions):
correctness, relevance, groundedness, retrieval_relevance = evaluators(
    ["correctness", "helpfulness", "groundedness", "document_relevance"],
    judge=grader_llm,
    keys="langsmith-tutorial",
)


# ----------------------------------------------------------------------------- the experiment
def target(inputs: dict[str, Any]) -> dict[str, Any]:
    return rag_bot(inputs["question"])


def main() -> None:
    experiment_results = client.evaluate(
        target,
        data=dataset,
        evaluators=[correctness, groundedness, relevance, retrieval_relevance],
        experiment_prefix="rag-doc-relevance",
        metadata={"version": "offline rerun of the LangSmith RAG tutorial"},
        upload_results=False,  # offline: drop this (and use langsmith.Client()) to upload
    )
    keys = ["correctness", "relevance", "groundedness", "retrieval_relevance"]
    print(f"{'question':50} " + " ".join(f"{k:>19}" for k in keys))
    zeros: list[str] = []
    linked = True
    for row in experiment_results:
        found = {r.key: r for r in row["evaluation_results"]["results"]}
        question = row["example"].inputs["question"]
        print(f"{question:50} " + " ".join(f"{found[k].score:>19.1f}" for k in keys))
        zeros += [f"  {k}: {found[k].comment}" for k in keys if found[k].score == 0.0]
        linked &= all(found[k].source_run_id is not None for k in keys)
    print("why the zeros (each comment is the grader's explanation):")
    print("\n".join(zeros))
    print(f"every result links its evaluator run (source_run_id): {linked}")


if __name__ == "__main__":
    main()
