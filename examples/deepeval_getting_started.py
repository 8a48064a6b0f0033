"""DeepEval's getting-started tests and a RAG evaluation, scored by ragbridge's metrics — offline.

The shape is DeepEval's own public material, rewritten here in our words:

* the getting-started pytest file (``examples/getting_started/test_example.py`` in
  github.com/confident-ai/deepeval): an ``LLMTestCase``, a metric, ``assert_test``;
* the HallucinationMetric usage of DeepEval's docs (deepeval.com/docs/metrics-hallucination),
  where the passages are in ``context``;
* the RAG quickstart (deepeval.com/docs/getting-started-rag): test cases with
  ``retrieval_context``, several RAG metrics, ``evaluate(test_cases, metrics)``.

Coming from DeepEval, what changes is the metric import (``ragbridge.adapters.deepeval``
instead of ``deepeval.metrics``) and ``model=`` in the metric constructors. Here ``model=`` is
`WordOverlapJudge`, an offline stand-in so the file runs with no network and no API key; in your
code it is what you pass DeepEval today (``model="gpt-4.1"``, a ``DeepEvalBaseLLM``, ...) or any
ragbridge judge. Everything else — test cases, ``assert_test``, ``evaluate``, the results
table and its column names — is DeepEval's.

Run: ``python examples/deepeval_getting_started.py`` (the RAG evaluation, then the tests), or
``pytest examples/deepeval_getting_started.py`` / ``deepeval test run ...`` for the tests alone.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any

# Offline scaffolding: DeepEval's telemetry and .env loading off before it is imported.
os.environ.setdefault("DEEPEVAL_TELEMETRY_OPT_OUT", "YES")
os.environ.setdefault("DEEPEVAL_DISABLE_DOTENV", "1")

from deepeval import assert_test, evaluate
from deepeval.test_case import LLMTestCase
from pydantic import BaseModel

# The changed line: DeepEval's metric names, ragbridge's measures behind them.
# DeepEval: from deepeval.metrics import AnswerRelevancyMetric, FaithfulnessMetric, ...
from ragbridge.adapters.deepeval import (
    AnswerRelevancyMetric,
    ContextualPrecisionMetric,
    ContextualRecallMetric,
    FaithfulnessMetric,
    HallucinationMetric,
)
from ragbridge.core.judging.judge import JudgeReply, Message
from ragbridge.core.testing import HashEmbedder

# --------------------------------------------------------------------------- offline stand-ins

_STOP = frozenset({
    "a", "an", "the", "is", "are", "was", "were", "be", "of", "to", "in", "on", "at", "for", "and",
    "or", "it", "its", "this", "that", "with", "by", "as", "we", "you", "our", "your", "all", "if",
    "do", "does", "don't", "what", "who", "when", "where", "how",
})  # fmt: skip


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9']+", text.lower()) if w not in _STOP}


def _numbers(text: str) -> set[str]:
    return set(re.findall(r"\d+", text))


def _coverage(part: str, whole: str) -> float:
    words = _words(part)
    return len(words & _words(whole)) / len(words) if words else 0.0


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if s.strip()]


def _block(text: str, label: str) -> str:
    found = re.search(rf"<<<BEGIN {label}>>>\n?(.*?)\n?<<<END {label}>>>", text, re.DOTALL)
    return found.group(1).strip() if found else ""


def _blocks(text: str, label: str) -> list[str]:
    pattern = rf"<<<BEGIN {label} \d+>>>\s*(.*?)\s*<<<END {label} \d+>>>"
    return [b.strip() for b in re.findall(pattern, text, re.DOTALL)]


class WordOverlapJudge:
    """An offline stand-in for a judge model, answering ragbridge's judge prompts by word overlap.

    A claim is supported when a passage holds at least 3/4 of its content words and every number
    in it (contradicted when the passage has the words but other numbers); a passage is useful
    when it holds half of the reference's content words; an answer replies to the question asked
    unless it says it does not know. Crude on purpose — a real judge goes here.
    """

    model = "word-overlap"

    async def generate(
        self, messages: Sequence[Message], *, schema: type[BaseModel] | None = None
    ) -> JudgeReply:
        import json

        system = next((m["content"] for m in messages if m["role"] == "system"), "")
        text = "\n".join(m["content"] for m in messages if m["role"] == "user")
        task = re.search(r"\[ragbridge task: ([\w.]+)", system)
        reply = self._answer(task.group(1) if task else "", text)
        return JudgeReply(text=json.dumps(reply))

    def _answer(self, task: str, text: str) -> dict[str, Any]:
        contexts = _blocks(text, "CONTEXT")
        if task == "answer.analyze":
            answer = _block(text, "ANSWER")
            dodges = bool(re.search(r"\b(don't|do not) know\b", answer.lower()))
            return {
                "claims": [] if dodges else _sentences(answer),
                "questions": [_block(text, "QUESTION")] * 3,
                "noncommittal": dodges,
            }
        if task == "faithfulness.verify":
            return {"verdicts": [self._verdict(c, contexts) for c in _blocks(text, "CLAIM")]}
        reference = _block(text, "REFERENCE")
        useful = [
            {"reason": "shares the reference's words", "useful": _coverage(reference, c) >= 0.5}
            for c in contexts
        ]
        statements = [self._attribution(s, contexts) for s in _sentences(reference)]
        if task.startswith("context_precision"):
            return {"verdicts": useful}
        if task.startswith("context_recall"):
            return {"statements": statements}
        return {"contexts": useful, "statements": statements}  # context.assess: both at once

    def _verdict(self, claim: str, contexts: list[str]) -> dict[str, Any]:
        best = max(range(len(contexts)), key=lambda i: _coverage(claim, contexts[i]), default=None)
        if best is None or _coverage(claim, contexts[best]) < 0.5:
            return {"reason": "no passage says this", "verdict": "unsupported", "context": None}
        passage = contexts[best]
        if not _numbers(claim) <= _numbers(passage):
            return {"reason": "the passage gives another number", "verdict": "contradicted",
                    "context": best + 1}  # fmt: skip
        if _coverage(claim, passage) < 0.75:
            return {
                "reason": "only partly in the passage",
                "verdict": "unsupported",
                "context": None,
            }
        return {"reason": "the passage says so", "verdict": "supported", "context": best + 1}

    def _attribution(self, statement: str, contexts: list[str]) -> dict[str, Any]:
        hits = [i for i, c in enumerate(contexts) if _coverage(statement, c) >= 0.75]
        return {
            "statement": statement,
            "reason": "found in a passage" if hits else "in no passage",
            "attributed": bool(hits),
            "context": hits[0] + 1 if hits else None,
        }


JUDGE = WordOverlapJudge()  # in your code: model="gpt-4.1", or any judge model object
EMBEDDER = HashEmbedder()  # answer relevancy compares questions by embedding; leave it out to
# use ragbridge's offline default (pip install ".[local]")


# --------------------------------------------------------------------------- getting started


def test_answer_relevancy() -> None:
    answer_relevancy_metric = AnswerRelevancyMetric(threshold=0.7, model=JUDGE, embedder=EMBEDDER)
    test_case = LLMTestCase(
        input="What if these shoes don't fit?",
        # the output of your LLM application goes here
        actual_output="We offer a 30-day full refund at no extra cost.",
        retrieval_context=["All customers are eligible for a 30 day full refund at no extra cost."],
    )
    assert_test(test_case, [answer_relevancy_metric])


def test_faithfulness() -> None:
    faithfulness_metric = FaithfulnessMetric(threshold=0.7, model=JUDGE)
    test_case = LLMTestCase(
        input="What if these shoes don't fit?",
        actual_output="We offer a 30-day full refund at no extra cost.",
        retrieval_context=["All customers are eligible for a 30 day full refund at no extra cost."],
    )
    assert_test(test_case, [faithfulness_metric])


def test_hallucination() -> None:
    # DeepEval's HallucinationMetric reads `context`, the passages the output should agree with.
    hallucination_metric = HallucinationMetric(threshold=0.5, model=JUDGE)
    test_case = LLMTestCase(
        input="What was the blond doing?",
        actual_output="A blond man was drinking water from a public fountain.",
        context=["A man with blond hair and a brown shirt drinking water from a public fountain."],
    )
    assert_test(test_case, [hallucination_metric])


# --------------------------------------------------------------------------- a RAG evaluation

REFUND = "All customers are eligible for a 30 day full refund at no extra cost."
SHIPPING = "Standard shipping takes 3 to 5 business days; express shipping takes 1 day."
RETURNS = "Shoes can be returned in their original box within 30 days of delivery."

TEST_CASES = [
    LLMTestCase(
        input="What if these shoes don't fit?",
        actual_output="We offer a 30-day full refund at no extra cost.",
        expected_output="You are eligible for a 30 day full refund at no extra cost.",
        retrieval_context=[REFUND, SHIPPING],
        name="refund",
    ),
    LLMTestCase(
        input="How long does express shipping take?",
        actual_output="Express shipping takes 2 days.",  # the passage says 1 day
        expected_output="Express shipping takes 1 day.",
        retrieval_context=[SHIPPING, REFUND],
        name="shipping",
    ),
    LLMTestCase(
        input="Can I return shoes without the box?",
        actual_output="Shoes can be returned within 30 days of delivery.",
        expected_output="Shoes can be returned in their original box within 30 days of delivery.",
        retrieval_context=[SHIPPING, REFUND],  # the returns passage was not retrieved
        name="returns",
    ),
]


def rag_metrics() -> list[Any]:
    return [
        AnswerRelevancyMetric(threshold=0.7, model=JUDGE, embedder=EMBEDDER),
        FaithfulnessMetric(threshold=0.7, model=JUDGE),
        ContextualPrecisionMetric(threshold=0.7, model=JUDGE),
        ContextualRecallMetric(threshold=0.7, model=JUDGE),
    ]


def main() -> None:
    import tempfile

    os.chdir(tempfile.mkdtemp(prefix="ragbridge-deepeval-"))  # DeepEval writes ./.deepeval/
    result = evaluate(test_cases=TEST_CASES, metrics=rag_metrics())
    print("per test case (DeepEval's EvaluationResult):")
    for case in result.test_results:
        for data in case.metrics_data or []:
            verdict = "pass" if data.success else "fail"
            print(f"  {case.name:<9} {data.name:<21} {data.score:.2f} {verdict}")
    for test in (test_answer_relevancy, test_faithfulness, test_hallucination):
        test()
        print(f"{test.__name__}: passed")


if __name__ == "__main__":
    main()
