"""NegativeRejection: does the answer decline when no relevant document exists? (RGB)

RGB (Chen et al., 2023) calls it negative rejection: when nothing retrieved holds the answer, a
RAG system should say so rather than answer from memory or invent. This measure scores the
questions where that is known:

* a sample labelled as having no relevant document (`Sample.is_no_answer`: ``relevance`` is
  ``{}``, or every grade is 0), or marked ``metadata["no_answer"] is True``, or answered under
  the robustness harness's ``negative`` condition (``metadata["robustness_condition"] ==
  "negative"``: every passage came from other questions);
* 1.0 when the answer declines, 0.0 when it answers; a pipeline that set
  ``metadata["declined"] is True`` declined (as for the ranking measure ``no_answer``);
* any other sample is skipped with the reason (its correctness is what to measure:
  ``answer_correctness``, ``faithfulness``), and a missing answer is a ``missing_input`` failure.

The judge (``negative_rejection.judge``, one call) reads the question and the answer and says
whether it declines; a hedged or guessed answer does not. The ``offline`` provider is the
abstention detector (`ragbridge.core.text.words.abstention`,
`ragbridge.core.metrics.providers.offline.rejection`).
"""

from __future__ import annotations

from typing import ClassVar

from ..judging.engine import JudgeCall
from ..prompts.history import asked
from ..prompts.rejection import NEGATIVE_REJECTION, Rejection
from ..results.evaluation import Failure, Score
from ..sample import Sample
from ._shared import has_inputs, planned, versions
from .base import Metric, MetricContext, PlannedCall, declare, usage_of

__all__ = ["NOT_NEGATIVE", "NegativeRejection", "declined_score", "has_no_relevant_document"]

NOT_NEGATIVE = (
    "negative_rejection scores only questions with no relevant document (relevance {}, "
    "metadata no_answer true, or the robustness 'negative' condition); this question has one or "
    "is not labelled: score its answer with answer_correctness or faithfulness"
)
"""The reason a sample that may have a relevant document is skipped, and what to use instead."""


def has_no_relevant_document(sample: Sample) -> bool:
    """Whether it is known that no relevant document exists for ``sample`` (the module doc)."""
    metadata = sample.metadata
    return (
        sample.is_no_answer
        or metadata.get("no_answer") is True
        or metadata.get("robustness_condition") == "negative"
    )


def declined_score(sample: Sample) -> Score | None:
    """1.0 for a pipeline that reported declining (``metadata["declined"] is True``), shared by
    every provider; else None."""
    if sample.metadata.get("declined") is True:
        return Score(
            value=1.0,
            reason="the pipeline declined to answer (metadata 'declined')",
            details={"declines": True, "declined_flag": True},
        )
    return None


class NegativeRejection(Metric):
    """1.0 when the answer to a question with no relevant document declines, else 0.0."""

    requires = ("question", "answer")
    reads: ClassVar[tuple[str, ...] | None] = (
        "question",
        "answer",
        "relevance",
        "metadata.no_answer",
        "metadata.robustness_condition",
        "metadata.declined",
    )
    prompt_version = versions(NEGATIVE_REJECTION)

    def __init__(self, provider: str = "llm") -> None:
        """``provider="offline"``: the abstention detector
        (`ragbridge.core.metrics.providers.offline.rejection`), no model."""
        self._use_provider(provider)

    def __repr__(self) -> str:
        return f"NegativeRejection(provider={self.provider!r})"

    def missing_input(self, sample: Sample, ctx: MetricContext) -> Failure | None:
        if not has_no_relevant_document(sample) or sample.metadata.get("declined") is True:
            return None  # skipped, or declined: `_edge` answers whatever else the sample lacks
        return super().missing_input(sample, ctx)

    def _edge(self, sample: Sample) -> Score | None:
        if not has_no_relevant_document(sample):
            return Score.skip(NOT_NEGATIVE)
        return declined_score(sample)

    def _plan(self, sample: Sample, shared_tags: frozenset[str]) -> list[PlannedCall]:
        if not has_inputs(sample, self.requires):
            return []
        return [planned(NEGATIVE_REJECTION, question=asked(sample), answer=sample.answer or "")]

    async def _score(self, sample: Sample, ctx: MetricContext) -> Score:
        call: JudgeCall[Rejection] = await ctx.ask(
            NEGATIVE_REJECTION, question=asked(sample), answer=sample.answer or ""
        )
        usage = usage_of(call)
        if call.value is None:
            assert call.failure is not None
            return Score(failure=call.failure, usage=usage)
        verdict = call.value
        if verdict.declines:
            reason = f"no relevant document exists and the answer declines: {verdict.reason}"
        else:
            reason = f"no relevant document exists, yet the answer answers: {verdict.reason}"
        return Score(
            value=1.0 if verdict.declines else 0.0,
            reason=reason,
            details={"declines": verdict.declines, "explanation": verdict.reason},
            usage=usage,
        )


declare(
    NegativeRejection,
    meaning="whether the answer to a question no retrieved document can answer declines "
    "(1.0) or answers anyway (0.0)",
    how="one call reads the question and the answer and says whether it declines",
    needs=("judge",),
    judge_calls="1 (0 when skipped or declined)",
    edges={
        "question with a relevant document": "skipped (use answer_correctness, faithfulness)",
        "metadata declined": "1.0 without a call",
        "no answer": "missing_input",
    },
)
