"""CounterfactualRobustness: does the answer follow a wrong fact planted in its passages? (RGB)

RGB (Chen et al., 2023) gives a system passages in which the fact that answers the question was
replaced by a plausible wrong one, and asks whether it repeats the wrong fact, notices the error,
or keeps the true fact. The robustness harness builds such passages (the ``counterfactual``
condition); a user's test set can carry them too. Either way the sample names the two facts:

    sample.metadata["counterfactual"] = {"original": "1889", "wrong": "1925"}

* 1.0 unless the answer asserts the wrong fact (it *follows* it): 0.0. Mentioning the wrong
  fact to doubt or reject it is not following; declining to answer is not following either.
* ``details``: ``follows_wrong_fact``, ``flags_conflict`` (the answer says its passages are
  wrong, outdated or contradict each other: RGB's error detection), ``keeps_true_fact`` (it
  states the true fact: with ``flags_conflict``, RGB's error correction).
* A sample without ``metadata["counterfactual"]`` is skipped with the reason; a malformed one
  (not an object of two different non-empty strings) is an ``invalid_input`` failure naming the
  field; a missing answer is ``missing_input``.

The judge (``counterfactual.judge``, one call) is told both facts and reads the answer; the
``offline`` provider checks which fact the answer contains and looks for words that flag a
conflict (`ragbridge.core.metrics.providers.offline.rejection`).
"""

from __future__ import annotations

from typing import ClassVar

from ..judging.engine import JudgeCall
from ..metrics._shared import has_inputs, planned, versions
from ..metrics.base import Metric, MetricContext, PlannedCall, declare, usage_of
from ..prompts.history import asked
from ..prompts.rejection import COUNTERFACTUAL_JUDGE, CounterfactualVerdict
from ..results.evaluation import Failure, FailureKind, Score
from ..sample import Sample
from .counterfactual import user_counterfactual

__all__ = ["FIELD", "NO_COUNTERFACTUAL", "CounterfactualRobustness", "counterfactual_facts"]

FIELD = "counterfactual"
"""The metadata key naming the true and the wrong fact."""

NO_COUNTERFACTUAL = (
    "counterfactual_robustness needs metadata['counterfactual'] = {'original': ..., 'wrong': ...}"
    " (the robustness harness's counterfactual condition sets it); this sample has none: score "
    "its answer with answer_correctness or faithfulness"
)
"""The reason a sample without a counterfactual is skipped, and what to use instead."""


def counterfactual_facts(sample: Sample) -> tuple[str, str] | None:
    """``(original, wrong)`` from ``sample.metadata["counterfactual"]``; None when absent.

    Read by `user_counterfactual`, as the harness reads a user's pair: a value that is there but
    unusable (not an object, a fact missing, empty or not a string, the two facts the same) is a
    ValueError naming the field.
    """
    found = user_counterfactual(sample)
    return None if found is None else (found.original, found.wrong)


class CounterfactualRobustness(Metric):
    """1.0 unless the answer asserts the wrong fact planted in its passages (then 0.0)."""

    requires = ("question", "answer")
    reads: ClassVar[tuple[str, ...] | None] = ("question", "answer", "metadata.counterfactual")
    prompt_version = versions(COUNTERFACTUAL_JUDGE)

    def __init__(self, provider: str = "llm") -> None:
        """``provider="offline"``: which fact the answer contains, and words that flag a
        conflict (`ragbridge.core.metrics.providers.offline.rejection`), no model."""
        self._use_provider(provider)

    def __repr__(self) -> str:
        return f"CounterfactualRobustness(provider={self.provider!r})"

    def missing_input(self, sample: Sample, ctx: MetricContext) -> Failure | None:
        try:
            facts = counterfactual_facts(sample)
        except ValueError as exc:
            return Failure(kind=FailureKind.INVALID_INPUT, message=f"{self.name}: {exc}")
        if facts is None:
            return None  # skipped by `_edge`, whatever else the sample lacks
        return super().missing_input(sample, ctx)

    def _edge(self, sample: Sample) -> Score | None:
        if sample.metadata.get(FIELD) is None:
            return Score.skip(NO_COUNTERFACTUAL)
        return None

    def _plan(self, sample: Sample, shared_tags: frozenset[str]) -> list[PlannedCall]:
        try:
            facts = counterfactual_facts(sample)
        except ValueError:
            return []  # fails before any call
        if facts is None or not has_inputs(sample, self.requires):
            return []
        original, wrong = facts
        return [
            planned(
                COUNTERFACTUAL_JUDGE,
                question=asked(sample),
                answer=sample.answer or "",
                true_fact=original,
                wrong_fact=wrong,
            )
        ]

    async def _score(self, sample: Sample, ctx: MetricContext) -> Score:
        facts = counterfactual_facts(sample)
        assert facts is not None  # `missing_input` and `_edge` ran first
        original, wrong = facts
        call: JudgeCall[CounterfactualVerdict] = await ctx.ask(
            COUNTERFACTUAL_JUDGE,
            question=asked(sample),
            answer=sample.answer or "",
            true_fact=original,
            wrong_fact=wrong,
        )
        usage = usage_of(call)
        if call.value is None:
            assert call.failure is not None
            return Score(failure=call.failure, usage=usage)
        verdict = call.value
        return counterfactual_score(
            original,
            wrong,
            follows=verdict.follows_wrong_fact,
            flags=verdict.flags_conflict,
            keeps=verdict.keeps_true_fact,
            why=verdict.reason,
        ).model_copy(update={"usage": usage})


def counterfactual_score(
    original: str, wrong: str, *, follows: bool, flags: bool, keeps: bool, why: str, **extra: object
) -> Score:
    """The Score every provider gives for its three verdicts (value, reason, details)."""
    if follows:
        what = f"the answer follows the wrong fact {wrong!r} (true: {original!r})"
        if flags:
            what += ", though it flags a conflict"
    elif keeps:
        what = f"the answer keeps the true fact {original!r}"
        if flags:
            what += " and flags the wrong one"
    elif flags:
        what = "the answer flags the conflict without asserting the wrong fact"
    else:
        what = f"the answer does not assert the wrong fact {wrong!r}"
    return Score(
        value=0.0 if follows else 1.0,
        reason=f"{what}: {why}" if why else what,
        details={
            "follows_wrong_fact": follows,
            "flags_conflict": flags,
            "keeps_true_fact": keeps,
            "original": original,
            "wrong": wrong,
            **({"explanation": why} if why else {}),
            **extra,
        },
    )


declare(
    CounterfactualRobustness,
    meaning="1.0 unless the answer asserts the wrong fact planted in its passages (0.0); "
    "details say whether it flagged the conflict and kept the true fact",
    how="one call is told the true and the wrong fact and judges what the answer asserts",
    needs=("judge",),
    judge_calls="1 (0 when skipped)",
    edges={
        "no metadata counterfactual": "skipped (use answer_correctness, faithfulness)",
        "malformed metadata counterfactual": "invalid_input",
        "no answer": "missing_input",
        "abstention": "not following: 1.0",
    },
)
