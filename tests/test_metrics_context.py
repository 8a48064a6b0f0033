"""ContextPrecision and ContextRecall on scripted judges."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ragbridge.core.judging.engine import JudgeEngine
from ragbridge.core.metrics import ContextPrecision, ContextRecall, Metric, MetricContext
from ragbridge.core.metrics.context_precision import average_precision
from ragbridge.core.prompts import get
from ragbridge.core.results.evaluation import FailureKind, Score
from ragbridge.core.sample import Context, Sample
from ragbridge.core.testing import ScriptedJudge

SAMPLE = Sample(
    id="c1",
    question="Who wrote Pride and Prejudice, and when was it published?",
    answer="Jane Austen wrote it; it was published in 1813.",
    reference="Pride and Prejudice was written by Jane Austen. It was published in 1813.",
    contexts=[
        Context(text="Pride and Prejudice is an 1813 novel by Jane Austen.", id="p1"),
        Context(text="Bath is a city in Somerset, England.", id="p2"),
        Context(text="Austen's novel was first published in January 1813.", id="p3"),
    ],
)


def make(script: dict[str, Any]) -> tuple[ScriptedJudge, MetricContext]:
    judge = ScriptedJudge(script)
    return judge, MetricContext(judge=JudgeEngine(judge, max_retries=0, timeout=None))


def score(metric: Metric, sample: Sample, ctx: MetricContext) -> Score:
    return asyncio.run(metric.score(sample, ctx))


def usefulness(*flags: bool) -> dict[str, Any]:
    return {"verdicts": [{"reason": f"reason {i}", "useful": f} for i, f in enumerate(flags)]}


# -- ContextPrecision -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ([True, False, True], (1 / 1 + 2 / 3) / 2),
        ([False, True], 0.5),
        ([False, False, True, True, False], (1 / 3 + 2 / 4) / 2),
        ([True, True, False], 1.0),
        ([False, False], 0.0),
        ([], 0.0),
    ],
)
def test_average_precision(flags: list[bool], expected: float) -> None:
    assert average_precision(flags) == pytest.approx(expected)


def test_context_precision_with_reference() -> None:
    judge, ctx = make({"context_precision.with_reference": usefulness(True, False, True)})
    s = score(ContextPrecision(), SAMPLE, ctx)
    assert s.value == pytest.approx((1 / 1 + 2 / 3) / 2)
    assert judge.tasks() == ["context_precision.with_reference"]
    assert s.prompt_version == "context_precision.with_reference@2"
    assert s.usage.calls == 1
    assert s.reason == "2 of 3 contexts useful for the reference; rank-weighted precision 0.83"
    assert isinstance(s.details, dict)
    assert s.details["judged_against"] == "reference"
    assert s.details["contexts"] == [
        {
            "rank": 1,
            "context_id": "p1",
            "useful": True,
            "precision_at_k": 1.0,
            "reason": "reason 0",
        },
        {
            "rank": 2,
            "context_id": "p2",
            "useful": False,
            "precision_at_k": 0.5,
            "reason": "reason 1",
        },
        {
            "rank": 3,
            "context_id": "p3",
            "useful": True,
            "precision_at_k": pytest.approx(2 / 3),
            "reason": "reason 2",
        },
    ]
    user = judge.calls[0].messages[1]["content"]
    assert f"<<<BEGIN REFERENCE>>>\n{SAMPLE.reference}\n<<<END REFERENCE>>>" in user
    assert "<<<BEGIN ANSWER>>>" not in user
    for i, c in enumerate(SAMPLE.contexts, start=1):
        assert f"<<<BEGIN CONTEXT {i}>>>\n{c.text}\n<<<END CONTEXT {i}>>>" in user


def test_context_precision_falls_back_to_the_answer() -> None:
    judge, ctx = make({"context_precision.with_answer": usefulness(False, True, False)})
    s = score(ContextPrecision(), SAMPLE.model_copy(update={"reference": None}), ctx)
    assert s.value == 0.5
    assert judge.tasks() == ["context_precision.with_answer"]
    assert s.prompt_version == "context_precision.with_answer@2"
    assert isinstance(s.details, dict)
    assert s.details["judged_against"] == "answer"
    assert (
        f"<<<BEGIN ANSWER>>>\n{SAMPLE.answer}\n<<<END ANSWER>>>"
        in (judge.calls[0].messages[1]["content"])
    )


def test_use_reference_false_judges_against_the_answer_even_with_a_reference() -> None:
    judge, ctx = make({"context_precision.with_answer": usefulness(True, True, True)})
    s = score(ContextPrecision(use_reference=False), SAMPLE, ctx)
    assert s.value == 1.0
    assert judge.tasks() == ["context_precision.with_answer"]


def test_use_reference_true_without_reference_is_missing_input() -> None:
    judge, ctx = make({})
    s = score(
        ContextPrecision(use_reference=True), SAMPLE.model_copy(update={"reference": ""}), ctx
    )
    assert s.failure is not None
    assert s.failure.kind is FailureKind.MISSING_INPUT
    assert "'reference'" in s.failure.message
    assert judge.calls == []


def test_neither_reference_nor_answer_is_missing_input() -> None:
    judge, ctx = make({})
    bare = SAMPLE.model_copy(update={"reference": None, "answer": None})
    s = score(ContextPrecision(), bare, ctx)
    assert s.failure is not None
    assert s.failure.kind is FailureKind.MISSING_INPUT
    assert judge.calls == []


def test_context_precision_without_contexts_is_missing_input() -> None:
    judge, ctx = make({})
    s = score(ContextPrecision(), SAMPLE.model_copy(update={"contexts": []}), ctx)
    assert s.failure is not None
    assert s.failure.kind is FailureKind.MISSING_INPUT
    assert "'contexts'" in s.failure.message
    assert judge.calls == []


def test_no_useful_context_scores_zero() -> None:
    _, ctx = make({"context_precision.with_reference": usefulness(False, False, False)})
    s = score(ContextPrecision(), SAMPLE, ctx)
    assert s.value == 0.0
    assert s.reason == "none of the 3 contexts is useful for the reference"


def test_context_precision_misaligned_is_parse_error() -> None:
    _, ctx = make({"context_precision.with_reference": usefulness(True, False)})
    s = score(ContextPrecision(), SAMPLE, ctx)
    assert s.failure is not None
    assert s.failure.kind is FailureKind.PARSE_ERROR
    assert s.failure.message.startswith(
        "context_precision.with_reference: expected 3 verdicts (one per context), got 2; reply: "
    )
    assert s.usage.calls == 2  # the reply and its repair re-ask (the engine validates)


def test_context_precision_plan() -> None:
    (call,) = ContextPrecision().plan(SAMPLE)
    assert call.template_id == "context_precision.with_reference"
    rendered = get("context_precision.with_reference").render(
        question=SAMPLE.question,
        reference=SAMPLE.reference,
        contexts=[c.text for c in SAMPLE.contexts],
    )
    assert call.prompt_chars == sum(len(m["content"]) for m in rendered)
    assert call.share_key is None
    assert ContextPrecision().plan(SAMPLE.model_copy(update={"contexts": []})) == []


# -- ContextRecall ----------------------------------------------------------------------------


def statement(text: str, attributed: bool, context: int | None) -> dict[str, Any]:
    return {"statement": text, "reason": "r", "attributed": attributed, "context": context}


FOUR_STATEMENTS = {
    "statements": [
        statement("Pride and Prejudice was written by Jane Austen.", True, 1),
        statement("Pride and Prejudice was published in 1813.", True, 3),
        statement("Pride and Prejudice is a novel.", True, 1),
        statement("Pride and Prejudice was published anonymously.", False, None),
    ]
}


def test_context_recall_three_of_four() -> None:
    judge, ctx = make({"context_recall.attribute": FOUR_STATEMENTS})
    s = score(ContextRecall(), SAMPLE, ctx)
    assert s.value == 0.75
    assert s.reason == "3 of 4 reference statements found in the contexts"
    assert judge.tasks() == ["context_recall.attribute"]
    assert s.usage.calls == 1
    assert s.prompt_version == "context_recall.attribute@2"
    assert isinstance(s.details, dict)
    assert s.details["attributed"] == 3
    assert s.details["total"] == 4
    assert [d["context_id"] for d in s.details["statements"]] == ["p1", "p3", "p1", None]
    assert s.details["statements"][3] == {
        "statement": "Pride and Prejudice was published anonymously.",
        "attributed": False,
        "context": None,
        "context_id": None,
        "reason": "r",
    }


def test_context_recall_without_contexts_scores_zero_without_a_call() -> None:
    judge, ctx = make({})
    s = score(ContextRecall(), SAMPLE.model_copy(update={"contexts": []}), ctx)
    assert s.value == 0.0
    assert "no contexts" in (s.reason or "")
    assert judge.calls == []
    assert s.usage.calls == 0
    assert ContextRecall().plan(SAMPLE.model_copy(update={"contexts": []})) == []


def test_context_recall_zero_statements_is_no_claims() -> None:
    _, ctx = make({"context_recall.attribute": {"statements": []}})
    s = score(ContextRecall(), SAMPLE, ctx)
    assert s.failure is not None
    assert s.failure.kind is FailureKind.NO_CLAIMS
    assert s.usage.calls == 1


def test_context_recall_requires_a_reference() -> None:
    judge, ctx = make({})
    s = score(ContextRecall(), SAMPLE.model_copy(update={"reference": None}), ctx)
    assert s.failure is not None
    assert s.failure.kind is FailureKind.MISSING_INPUT
    assert "'reference'" in s.failure.message
    assert judge.calls == []


def test_context_recall_citing_an_unknown_context_is_parse_error() -> None:
    bad = {"statements": [statement("A fact.", True, 4)]}
    _, ctx = make({"context_recall.attribute": bad})
    s = score(ContextRecall(), SAMPLE, ctx)
    assert s.failure is not None
    assert s.failure.kind is FailureKind.PARSE_ERROR
    assert "cites context 4" in s.failure.message


def test_context_recall_plan() -> None:
    (call,) = ContextRecall().plan(SAMPLE)
    assert call.template_id == "context_recall.attribute"
    assert call.prompt_chars > len(SAMPLE.reference or "")
