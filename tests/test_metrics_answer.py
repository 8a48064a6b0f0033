"""AnswerRelevance and AnswerCorrectness on scripted judges and fixed embedding vectors."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from ragbridge.core.judging.embedding import EmbeddingEngine
from ragbridge.core.judging.engine import JudgeEngine
from ragbridge.core.metrics import (
    AnswerCorrectness,
    AnswerRelevance,
    Faithfulness,
    Metric,
    MetricContext,
)
from ragbridge.core.results.evaluation import FailureKind, Score
from ragbridge.core.sample import Sample
from ragbridge.core.testing import ScriptedJudge


@dataclass
class FixedEmbedder:
    """Returns the vector given for each text; unknown texts are an error."""

    vectors: dict[str, list[float]]
    model: str = "fixed"
    batches: list[list[str]] = field(default_factory=list)

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.batches.append(list(texts))
        return [self.vectors[t] for t in texts]


QUESTION = "When did Apollo 11 land on the Moon?"
ANSWER = "Apollo 11 landed on the Moon on 20 July 1969, with Armstrong and Aldrin aboard."
REFERENCE = "Apollo 11 landed on 20 July 1969. Neil Armstrong was the first to walk on the Moon."
SAMPLE = Sample(
    id="a1",
    question=QUESTION,
    answer=ANSWER,
    reference=REFERENCE,
    contexts=["Apollo 11 landed on the Moon on 20 July 1969."],
)
GENERATED = [
    "On what date did Apollo 11 land on the Moon?",
    "Who flew on Apollo 11?",
    "What is the capital of France?",
]
ANALYSIS = {
    "claims": [
        "Apollo 11 landed on the Moon on 20 July 1969.",
        "Armstrong was aboard Apollo 11.",
        "Aldrin was aboard Apollo 11.",
    ],
    "questions": GENERATED,
    "noncommittal": False,
}
# cos = 1.0, 0.6 and -1.0 (clipped to 0) against the question's vector [1, 0].
VECTORS = {
    QUESTION: [1.0, 0.0],
    GENERATED[0]: [2.0, 0.0],
    GENERATED[1]: [0.6, 0.8],
    GENERATED[2]: [-1.0, 0.0],
    ANSWER: [1.0, 0.0],
    REFERENCE: [0.6, 0.8],
}


def make(
    script: dict[str, Any], embedder: FixedEmbedder | None = None
) -> tuple[ScriptedJudge, MetricContext]:
    judge = ScriptedJudge(script)
    engine = JudgeEngine(judge, max_retries=0, timeout=None)
    embed = EmbeddingEngine(embedder) if embedder is not None else None
    return judge, MetricContext(judge=engine, embedder=embed)


def score(metric: Metric, sample: Sample, ctx: MetricContext) -> Score:
    return asyncio.run(metric.score(sample, ctx))


# -- AnswerRelevance --------------------------------------------------------------------------


def test_answer_relevance_is_the_mean_clipped_cosine() -> None:
    embedder = FixedEmbedder(VECTORS)
    judge, ctx = make({"answer.analyze": ANALYSIS}, embedder)
    s = score(AnswerRelevance(), SAMPLE, ctx)
    assert s.value == pytest.approx((1.0 + 0.6 + 0.0) / 3)
    assert judge.tasks() == ["answer.analyze"]
    # one batch (the embedding engine sorts and de-duplicates texts)
    assert [sorted(b) for b in embedder.batches] == [sorted([QUESTION, *GENERATED])]
    assert isinstance(s.details, dict)
    sims = [q["similarity"] for q in s.details["generated_questions"]]
    assert sims == pytest.approx([1.0, 0.6, 0.0])
    assert [q["question"] for q in s.details["generated_questions"]] == GENERATED
    assert (
        s.reason == "mean similarity of 3 questions generated from the answer to the question: 0.53"
    )
    assert s.prompt_version == "answer.analyze@2"
    assert s.usage.calls == 1


def test_noncommittal_answer_scores_zero_without_embedding() -> None:
    embedder = FixedEmbedder(VECTORS)
    _, ctx = make({"answer.analyze": {**ANALYSIS, "noncommittal": True}}, embedder)
    s = score(AnswerRelevance(), SAMPLE, ctx)
    assert s.value == 0.0
    assert "noncommittal" in (s.reason or "")
    assert embedder.batches == []


def test_no_generated_questions_is_a_parse_error() -> None:
    _, ctx = make({"answer.analyze": {**ANALYSIS, "questions": []}}, FixedEmbedder(VECTORS))
    s = score(AnswerRelevance(), SAMPLE, ctx)
    assert s.failure is not None
    assert s.failure.kind is FailureKind.PARSE_ERROR
    assert "expected 3 generated questions, got 0" in s.failure.message
    assert s.usage.calls == 2  # the reply and its repair re-ask (the engine validates)


def test_answer_relevance_needs_an_embedder_and_an_answer() -> None:
    judge, ctx = make({"answer.analyze": ANALYSIS})
    s = score(AnswerRelevance(), SAMPLE, ctx)
    assert s.failure is not None
    assert s.failure.kind is FailureKind.MISSING_INPUT
    assert "embedder" in s.failure.message
    _, ctx = make({"answer.analyze": ANALYSIS}, FixedEmbedder(VECTORS))
    s = score(AnswerRelevance(), SAMPLE.model_copy(update={"answer": ""}), ctx)
    assert s.failure is not None
    assert s.failure.kind is FailureKind.MISSING_INPUT
    assert judge.calls == []


def test_embedding_failure_is_typed_and_keeps_the_judge_usage() -> None:
    _, ctx = make({"answer.analyze": ANALYSIS}, FixedEmbedder({}))
    s = score(AnswerRelevance(), SAMPLE, ctx)
    assert s.failure is not None
    assert s.failure.kind is FailureKind.JUDGE_ERROR
    assert "embedding failed" in s.failure.message
    assert s.usage.calls == 1


def test_answer_relevance_shares_the_analysis_with_faithfulness() -> None:
    verdicts = {"verdicts": [{"reason": "r", "verdict": "supported", "context": 1}] * 3}
    judge, ctx = make(
        {"answer.analyze": ANALYSIS, "faithfulness.verify": verdicts}, FixedEmbedder(VECTORS)
    )

    async def run() -> list[Score]:
        return list(
            await asyncio.gather(
                Faithfulness().score(SAMPLE, ctx), AnswerRelevance().score(SAMPLE, ctx)
            )
        )

    f, r = asyncio.run(run())
    assert judge.tasks() == ["answer.analyze", "faithfulness.verify"]
    assert f.value == 1.0
    assert r.value == pytest.approx(1.6 / 3)
    assert f.usage.calls == 2
    assert r.usage.calls == 0


# -- AnswerCorrectness ------------------------------------------------------------------------

CLASSIFIED = {
    "tp": ["Apollo 11 landed on the Moon on 20 July 1969.", "Armstrong was aboard Apollo 11."],
    "fp": ["Aldrin was aboard Apollo 11."],
    "fn": ["Neil Armstrong was the first to walk on the Moon."],
}


def test_answer_correctness_is_the_claim_f1() -> None:
    judge, ctx = make({"answer.analyze": ANALYSIS, "answer_correctness.classify": CLASSIFIED})
    s = score(AnswerCorrectness(), SAMPLE, ctx)
    # TP=2, FP=1, FN=1: 2 / (2 + 0.5 * (1 + 1)) = 2/3
    assert s.value == pytest.approx(2 / 3)
    assert judge.tasks() == ["answer.analyze", "answer_correctness.classify"]
    assert s.usage.calls == 2
    assert s.prompt_version == "answer.analyze@2+answer_correctness.classify@2"
    assert isinstance(s.details, dict)
    assert s.details["tp"] == CLASSIFIED["tp"]
    assert s.details["fp"] == CLASSIFIED["fp"]
    assert s.details["fn"] == CLASSIFIED["fn"]
    assert s.details["f1"] == pytest.approx(2 / 3)
    assert s.details["similarity"] is None
    assert s.reason == "F1 0.67: 2 claims supported by the reference, 1 not, 1 missed"
    classify_prompt = judge.calls[1].messages[1]["content"]
    for i, claim in enumerate(ANALYSIS["claims"], start=1):
        assert f"<<<BEGIN CLAIM {i}>>> {claim} <<<END CLAIM {i}>>>" in classify_prompt
    assert f"<<<BEGIN REFERENCE>>>\n{REFERENCE}\n<<<END REFERENCE>>>" in classify_prompt


def test_answer_correctness_blends_similarity_when_asked() -> None:
    embedder = FixedEmbedder(VECTORS)
    _, ctx = make({"answer.analyze": ANALYSIS, "answer_correctness.classify": CLASSIFIED}, embedder)
    s = score(AnswerCorrectness(similarity_weight=0.25), SAMPLE, ctx)
    # cos([1, 0], [0.6, 0.8]) = 0.6; 0.75 * 2/3 + 0.25 * 0.6 = 0.65
    assert s.value == pytest.approx(0.65)
    assert [sorted(b) for b in embedder.batches] == [sorted([ANSWER, REFERENCE])]
    assert isinstance(s.details, dict)
    assert s.details["similarity"] == pytest.approx(0.6)
    assert s.details["similarity_weight"] == 0.25


def test_answer_correctness_without_embedder_falls_back_to_f1() -> None:
    _, ctx = make({"answer.analyze": ANALYSIS, "answer_correctness.classify": CLASSIFIED})
    s = score(AnswerCorrectness(similarity_weight=0.25), SAMPLE, ctx)
    assert s.value == pytest.approx(2 / 3)
    assert "no embedder" in (s.reason or "")
    assert isinstance(s.details, dict)
    assert s.details["similarity_weight"] == 0.0


def test_answer_correctness_all_empty_is_no_claims() -> None:
    empty = {"tp": [], "fp": [], "fn": []}
    _, ctx = make({"answer.analyze": ANALYSIS, "answer_correctness.classify": empty})
    s = score(AnswerCorrectness(), SAMPLE, ctx)
    assert s.failure is not None
    assert s.failure.kind is FailureKind.NO_CLAIMS
    assert s.usage.calls == 2


def test_answer_without_claims_scores_zero_without_classifying() -> None:
    judge, ctx = make({"answer.analyze": {**ANALYSIS, "claims": []}})
    s = score(AnswerCorrectness(), SAMPLE, ctx)
    assert s.value == 0.0
    assert judge.tasks() == ["answer.analyze"]
    assert "no factual claims" in (s.reason or "")


@pytest.mark.parametrize("missing", ["answer", "reference"])
def test_answer_correctness_requires_answer_and_reference(missing: str) -> None:
    judge, ctx = make({})
    s = score(AnswerCorrectness(), SAMPLE.model_copy(update={missing: None}), ctx)
    assert s.failure is not None
    assert s.failure.kind is FailureKind.MISSING_INPUT
    assert repr(missing) in s.failure.message
    assert judge.calls == []


@pytest.mark.parametrize("weight", [-0.1, 1.5, math.nan])
def test_similarity_weight_must_be_in_the_unit_interval(weight: float) -> None:
    with pytest.raises(ValueError, match="similarity_weight"):
        AnswerCorrectness(similarity_weight=weight)


def test_answer_correctness_shares_the_analysis_with_faithfulness() -> None:
    verdicts = {"verdicts": [{"reason": "r", "verdict": "supported", "context": 1}] * 3}
    judge, ctx = make(
        {
            "answer.analyze": ANALYSIS,
            "faithfulness.verify": verdicts,
            "answer_correctness.classify": CLASSIFIED,
        }
    )

    async def run() -> list[Score]:
        return list(
            await asyncio.gather(
                Faithfulness().score(SAMPLE, ctx), AnswerCorrectness().score(SAMPLE, ctx)
            )
        )

    f, c = asyncio.run(run())
    assert sorted(t or "" for t in judge.tasks()) == [
        "answer.analyze",
        "answer_correctness.classify",
        "faithfulness.verify",
    ]
    assert f.usage.calls == 2
    assert c.usage.calls == 1


def test_plans() -> None:
    relevance = AnswerRelevance().plan(SAMPLE)
    assert [c.template_id for c in relevance] == ["answer.analyze"]
    correctness = AnswerCorrectness().plan(SAMPLE)
    assert [c.template_id for c in correctness] == ["answer.analyze", "answer_correctness.classify"]
    assert correctness[0].share_key == relevance[0].share_key is not None
    assert correctness[1].share_key is None
    assert AnswerCorrectness().plan(SAMPLE.model_copy(update={"reference": None})) == []
