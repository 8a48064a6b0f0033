"""The four binary graders (LangSmith RAG tutorial) on scripted judges."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ragbridge.core.judging.engine import JudgeEngine
from ragbridge.core.metrics import (
    Correctness,
    DocumentRelevance,
    Groundedness,
    Helpfulness,
    Metric,
    MetricContext,
)
from ragbridge.core.results.evaluation import FailureKind, Score
from ragbridge.core.sample import Sample
from ragbridge.core.testing import ScriptedJudge

SAMPLE = Sample(
    id="g1",
    question="What is the boiling point of water at sea level?",
    answer="Water boils at 100 °C at sea level.",
    reference="100 degrees Celsius.",
    contexts=["At standard pressure water boils at 100 °C.", "Ice melts at 0 °C."],
)

GRADERS: list[tuple[type[Metric], str, list[str]]] = [
    (Correctness, "grader.correctness", ["QUESTION", "ANSWER", "REFERENCE"]),
    (Helpfulness, "grader.helpfulness", ["QUESTION", "ANSWER"]),
    (Groundedness, "grader.groundedness", ["ANSWER", "CONTEXT 1", "CONTEXT 2"]),
    (DocumentRelevance, "grader.document_relevance", ["QUESTION", "CONTEXT 1", "CONTEXT 2"]),
]


def make(script: dict[str, Any]) -> tuple[ScriptedJudge, MetricContext]:
    judge = ScriptedJudge(script)
    return judge, MetricContext(judge=JudgeEngine(judge, max_retries=0, timeout=None))


def score(metric: Metric, sample: Sample, ctx: MetricContext) -> Score:
    return asyncio.run(metric.score(sample, ctx))


@pytest.mark.parametrize(("cls", "task", "blocks"), GRADERS, ids=lambda x: getattr(x, "name", ""))
@pytest.mark.parametrize("verdict", [True, False])
def test_grader_value_reason_and_details(
    cls: type[Metric], task: str, blocks: list[str], verdict: bool
) -> None:
    explanation = f"Step 1: compared. Step 2: verdict {verdict}."
    judge, ctx = make({task: {"explanation": explanation, "verdict": verdict}})
    s = score(cls(), SAMPLE, ctx)
    assert s.value == (1.0 if verdict else 0.0)
    assert s.reason == explanation
    assert s.details == {"verdict": verdict, "explanation": explanation}
    assert judge.tasks() == [task]
    assert s.usage.calls == 1
    assert s.prompt_version == f"{task}@2"
    user = judge.calls[0].messages[1]["content"]
    for block in blocks:
        assert f"<<<BEGIN {block}>>>" in user


def test_grader_names() -> None:
    assert [cls.name for cls, _, _ in GRADERS] == [
        "correctness",
        "helpfulness",
        "groundedness",
        "document_relevance",
    ]


def test_groundedness_without_contexts_is_zero_without_a_call() -> None:
    judge, ctx = make({})
    bare = SAMPLE.model_copy(update={"contexts": []})
    s = score(Groundedness(), bare, ctx)
    assert s.value == 0.0
    assert "no contexts" in (s.reason or "")
    assert judge.calls == []
    assert Groundedness().plan(bare) == []


def test_document_relevance_without_contexts_is_missing_input() -> None:
    judge, ctx = make({})
    s = score(DocumentRelevance(), SAMPLE.model_copy(update={"contexts": []}), ctx)
    assert s.failure is not None
    assert s.failure.kind is FailureKind.MISSING_INPUT
    assert judge.calls == []


def test_correctness_without_reference_is_missing_input() -> None:
    judge, ctx = make({})
    s = score(Correctness(), SAMPLE.model_copy(update={"reference": None}), ctx)
    assert s.failure is not None
    assert s.failure.kind is FailureKind.MISSING_INPUT
    assert "'reference'" in s.failure.message
    assert judge.calls == []


def test_unparseable_grade_is_a_parse_error_after_one_repair() -> None:
    judge, ctx = make({"grader.helpfulness": "I think it is fine."})
    s = score(Helpfulness(), SAMPLE, ctx)
    assert s.failure is not None
    assert s.failure.kind is FailureKind.PARSE_ERROR
    assert len(judge.calls) == 2  # the engine's repair re-ask
    assert s.usage.calls == 2


@pytest.mark.parametrize(("cls", "task", "blocks"), GRADERS, ids=lambda x: getattr(x, "name", ""))
def test_grader_plan_is_one_unshared_call(cls: type[Metric], task: str, blocks: list[str]) -> None:
    (call,) = cls().plan(SAMPLE)
    assert call.template_id == task
    assert call.share_key is None
    assert call.prompt_chars > len(SAMPLE.question)
