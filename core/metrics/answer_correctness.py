"""AnswerCorrectness: how much of the answer agrees with the reference, and how much is missing?

The factual part of RAGAS answer correctness (RAGAS documentation, "Answer Correctness",
docs.ragas.io): the answer's claims are classified against the reference into true positives
(claims the reference supports), false positives (claims it does not) and false negatives
(reference facts the answer misses), and

    F1 = |TP| / (|TP| + 0.5 · (|FP| + |FN|)).

RAGAS blends F1 with the embedding similarity of answer and reference using weights 0.75 / 0.25.
Here the blend is opt-in — ``similarity_weight`` w defaults to 0 — because surface similarity
rewards fluent wrong answers:

    value = (1 − w) · F1 + w · max(0, cos(E(answer), E(reference))),

applied when w > 0 and an embedder is available (otherwise F1 alone, said in ``details``).

The claims come from the shared ``answer.analyze`` call, so this metric adds one
``answer_correctness.classify`` call. Edge policy: an answer without factual claims scores
F1 = 0 without a classify call (TP = FP = 0 and the reference is non-empty, so FN ≥ 1); a
classification with TP = FP = FN = 0 is ``Failure(no_claims)``.
"""

from __future__ import annotations

from typing import Any

from ..judging.embedding import EmbeddingFailed
from ..judging.engine import JudgeCall
from ..prompts.answer_analyze import ANSWER_ANALYZE
from ..prompts.answer_correctness import ANSWER_CORRECTNESS_CLASSIFY, ClaimClassification
from ..prompts.history import asked
from ..results.evaluation import FailureKind, Score, Usage
from ..sample import Sample
from ._shared import (
    analyze_answer,
    cosine,
    estimated_claims,
    has_inputs,
    plan_analyze,
    planned,
    versions,
)
from .base import Metric, MetricContext, PlannedCall, declare, usage_of

__all__ = ["AnswerCorrectness", "f1_of"]


def f1_of(tp: int, fp: int, fn: int) -> float:
    """|TP| / (|TP| + 0.5 (|FP| + |FN|)); callers handle TP = FP = FN = 0."""
    return tp / (tp + 0.5 * (fp + fn))


class AnswerCorrectness(Metric):
    """Claim-level F1 of the answer against the reference, optionally blended with similarity."""

    requires = ("question", "answer", "reference")
    reads = ("question", "answer", "reference")
    prompt_version = versions(ANSWER_ANALYZE, ANSWER_CORRECTNESS_CLASSIFY)

    def __init__(self, similarity_weight: float = 0.0) -> None:
        if not 0.0 <= similarity_weight <= 1.0:
            raise ValueError(f"similarity_weight must lie in [0, 1], got {similarity_weight!r}")
        self.similarity_weight = similarity_weight

    def __repr__(self) -> str:
        return f"AnswerCorrectness(similarity_weight={self.similarity_weight!r})"

    def _plan(self, sample: Sample, shared_tags: frozenset[str]) -> list[PlannedCall]:
        if not has_inputs(sample, self.requires):
            return []
        classify = planned(
            ANSWER_CORRECTNESS_CLASSIFY,
            question=asked(sample),
            claims=estimated_claims(sample.answer or ""),
            reference=sample.reference,
        )
        return [plan_analyze(sample), classify]

    async def _score(self, sample: Sample, ctx: MetricContext) -> Score:
        analysis, owns_analysis = await analyze_answer(sample, ctx)
        if analysis.value is None:
            assert analysis.failure is not None
            return Score(failure=analysis.failure, usage=usage_of(analysis, owned=(owns_analysis,)))
        claims = [c for c in analysis.value.claims if c.strip()]
        if not claims:
            usage = usage_of(analysis, owned=(owns_analysis,))
            return await self._blend(
                sample,
                ctx,
                0.0,
                {"tp": [], "fp": [], "fn": [], "f1": 0.0},
                "the answer makes no factual claims, so it covers nothing of the reference",
                usage,
            )
        call: JudgeCall[ClaimClassification] = await ctx.ask(
            ANSWER_CORRECTNESS_CLASSIFY,
            question=asked(sample),
            claims=claims,
            reference=sample.reference or "",
        )
        usage = usage_of(analysis, call, owned=(owns_analysis, True))
        if call.value is None:
            assert call.failure is not None
            return Score(failure=call.failure, usage=usage)
        c = call.value
        tp, fp, fn = len(c.tp), len(c.fp), len(c.fn)
        if tp + fp + fn == 0:
            return Score.fail(
                FailureKind.NO_CLAIMS,
                f"{ANSWER_CORRECTNESS_CLASSIFY.id}: no claim was classified "
                "(TP, FP and FN are all empty)",
                usage=usage,
            )
        f1 = f1_of(tp, fp, fn)
        details: dict[str, Any] = {"tp": c.tp, "fp": c.fp, "fn": c.fn, "f1": f1}
        reason = f"F1 {f1:.2f}: {tp} claims supported by the reference, {fp} not, {fn} missed"
        return await self._blend(sample, ctx, f1, details, reason, usage)

    async def _blend(
        self,
        sample: Sample,
        ctx: MetricContext,
        f1: float,
        details: dict[str, Any],
        reason: str,
        usage: Usage,
    ) -> Score:
        w = self.similarity_weight
        details = {**details, "similarity_weight": w, "similarity": None}
        if w == 0.0:
            return Score(value=f1, reason=reason, details=details, usage=usage)
        if ctx.embedder is None:
            details["similarity_weight"] = 0.0
            return Score(
                value=f1,
                reason=f"{reason} (no embedder: similarity not blended in)",
                details=details,
                usage=usage,
            )
        try:
            a, r = await ctx.embedder.embed([sample.answer or "", sample.reference or ""])
        except EmbeddingFailed as exc:  # typed (timeout, rate_limited, ...); keep the usage
            return Score(failure=exc.failure, usage=usage)
        except Exception as exc:  # keep the judge usage on the Score
            return Score.fail(
                FailureKind.JUDGE_ERROR,
                f"embedding failed: {type(exc).__name__}: {exc}",
                usage=usage,
            )
        sim = max(0.0, cosine(a, r))
        details["similarity"] = sim
        value = min(1.0, max(0.0, (1.0 - w) * f1 + w * sim))
        return Score(
            value=value,
            reason=f"{reason}; blended with similarity {sim:.2f} at weight {w:g}",
            details=details,
            usage=usage,
        )


declare(
    AnswerCorrectness,
    meaning="claim-level F1 of the answer against the reference (optionally with similarity)",
    how="the answer's claims classified against the reference (TP / FP / FN)",
    needs=("judge", "reference"),
    judge_calls="2 (1 shared)",
    edges={"no claims on either side": "failure no_claims"},
)
