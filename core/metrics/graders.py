"""Binary graders after the LangSmith RAG evaluation tutorial ("Evaluate a RAG application",
docs.smith.langchain.com), which grades a RAG app with four LLM judges:

* `Correctness` — answer vs reference answer (needs a reference);
* `Helpfulness` — answer vs question (the tutorial's "relevance");
* `Groundedness` — answer vs retrieved contexts (no reference needed);
* `DocumentRelevance` — retrieved contexts vs question (the tutorial's "retrieval relevance").

Each is one call returning a step-by-step explanation, then a verdict; the value is 1.0 or 0.0
and the explanation is the Score's reason. Binary grades are coarse but cheap and easy to agree
on, which makes them good regression gates next to the graded RAGAS-style measures.

Edge policy: Groundedness with no contexts is 0.0 without a call (nothing retrieved can ground an
answer); DocumentRelevance with no contexts is ``missing_input`` (there is nothing to grade).
"""

from __future__ import annotations

from typing import Any, ClassVar

from ..judging.engine import JudgeCall
from ..prompts.base import PromptTemplate
from ..prompts.graders import (
    GRADER_CORRECTNESS,
    GRADER_DOCUMENT_RELEVANCE,
    GRADER_GROUNDEDNESS,
    GRADER_HELPFULNESS,
    GraderVerdict,
)
from ..prompts.history import asked
from ..results.evaluation import Score
from ..sample import Sample
from ._shared import has_inputs, planned, versions
from .base import Metric, MetricContext, PlannedCall, declare, usage_of

__all__ = ["Correctness", "DocumentRelevance", "Groundedness", "Helpfulness"]


class _Grader(Metric):
    """One binary grading call over the template's variables, taken from the sample."""

    template: ClassVar[PromptTemplate]

    def _values(self, sample: Sample) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for name in self.template.variables:
            if name == "contexts":
                values[name] = [c.text for c in sample.contexts]
            elif name == "question":
                values[name] = asked(sample)  # a turn's question with the conversation so far
            else:
                values[name] = getattr(sample, name) or ""
        return values

    def _plan(self, sample: Sample, shared_tags: frozenset[str]) -> list[PlannedCall]:
        if not has_inputs(sample, self.requires):
            return []
        if "contexts" in self.template.variables and not sample.contexts:
            return []
        return [planned(self.template, **self._values(sample))]

    async def _score(self, sample: Sample, ctx: MetricContext) -> Score:
        call: JudgeCall[GraderVerdict] = await ctx.ask(self.template, **self._values(sample))
        usage = usage_of(call)
        if call.value is None:
            assert call.failure is not None
            return Score(failure=call.failure, usage=usage)
        verdict = call.value
        return Score(
            value=1.0 if verdict.verdict else 0.0,
            reason=verdict.explanation,
            details={"verdict": verdict.verdict, "explanation": verdict.explanation},
            usage=usage,
        )


class Correctness(_Grader):
    """1.0 when the answer agrees with the reference on every fact it states, else 0.0."""

    requires = ("question", "answer", "reference")
    reads = ("question", "answer", "reference")  # the template's variables
    template = GRADER_CORRECTNESS
    prompt_version = versions(GRADER_CORRECTNESS)


class Helpfulness(_Grader):
    """1.0 when the answer addresses the question and helps the asker, else 0.0."""

    requires = ("question", "answer")
    reads = ("question", "answer")
    template = GRADER_HELPFULNESS
    prompt_version = versions(GRADER_HELPFULNESS)


class Groundedness(_Grader):
    """1.0 when every fact of the answer is backed by the retrieved contexts, else 0.0."""

    requires = ("answer",)
    reads = ("answer", "contexts.text")
    template = GRADER_GROUNDEDNESS
    prompt_version = versions(GRADER_GROUNDEDNESS)

    async def _score(self, sample: Sample, ctx: MetricContext) -> Score:
        if not sample.contexts:
            return Score(
                value=0.0,
                reason="no contexts were retrieved, so the answer cannot be grounded in them",
                details={"verdict": False, "explanation": None},
            )
        return await super()._score(sample, ctx)


class DocumentRelevance(_Grader):
    """1.0 when the retrieved contexts relate to the question, else 0.0."""

    requires = ("question", "contexts")
    reads = ("question", "contexts.text")
    template = GRADER_DOCUMENT_RELEVANCE
    prompt_version = versions(GRADER_DOCUMENT_RELEVANCE)


for _grader, _meaning in (
    (Correctness, "whether the answer agrees with the reference on every fact it states (0 or 1)"),
    (Helpfulness, "whether the answer addresses the question and helps the asker (0 or 1)"),
    (Groundedness, "whether every fact of the answer is backed by the contexts (0 or 1)"),
    (DocumentRelevance, "whether the retrieved contexts relate to the question (0 or 1)"),
):
    declare(
        _grader,
        meaning=_meaning,
        how=f"one binary grading call ({_grader.template.id})",
        needs=("judge", "reference") if "reference" in _grader.requires else ("judge",),
        judge_calls="1",
        edges={"no contexts": "0.0"} if _grader is Groundedness else {},
    )
