"""ContextPrecision: are the useful contexts ranked at the top?

The rank-aware average precision of the RAGAS documentation ("Context Precision",
docs.ragas.io; the RAGAS framework of Es et al. 2023): with v_k ∈ {0, 1} the judge's usefulness
verdict for the context at rank k and precision@k = (Σ_{i≤k} v_i) / k,

    context_precision = Σ_k (precision@k × v_k) / (number of useful contexts),

and 0.0 when no context is useful. Verdicts [1, 0, 1] give (1/1 + 2/3) / 2 = 0.833: the same
two useful contexts ranked first and second would give 1.0. The denominator is the useful
contexts *retrieved*, not all relevant documents in the corpus, so this is not trec_eval's AP —
for that, use the ranking measures with relevance labels.

Usefulness is judged against the reference when the sample has one (the RAGAS definition) and
otherwise against the pipeline's answer (RAGAS's "without reference" variant): two templates,
``context_precision.with_reference`` and ``context_precision.with_answer``. ``use_reference=True``
insists on the reference (a sample without one is ``missing_input``); ``False`` always uses the
answer. All contexts are judged in one call, so the cost is one call at any k; when the run
also has ContextRecall and usefulness is judged against the reference, both metrics answer from
one shared ``context.assess`` call. When the run also has a context-relevance measure, one
call judges each context's relevance to the question and its usefulness (and, with recall too,
attributes the reference's statements): `ragbridge.core.metrics._context_share`.

On a conversation's turn the judge reads the question with the conversation so far
(`ragbridge.core.prompts.history.asked`); a turn that retrieved nothing is skipped with that
reason, on every provider and without a call (`missed_retrieval` asks whether it should have).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..judging.engine import JudgeCall
from ..prompts.base import PromptTemplate
from ..prompts.context_precision import (
    CONTEXT_PRECISION_WITH_ANSWER,
    CONTEXT_PRECISION_WITH_REFERENCE,
    ContextUsefulness,
    ContextUsefulnessVerdicts,
)
from ..prompts.context_relevance import ContextJudgement
from ..prompts.history import asked
from ..results.evaluation import Failure, FailureKind, Score
from ..sample import Sample
from ._context_share import (
    JointCall,
    ask_joint,
    assess_template,
    joint_call,
    mode_of,
    plan_joint,
    precision_paired,
    precision_share_tags,
    precision_target,
)
from ._shared import (
    ASSESS_TAG,
    assess_contexts,
    average_precision,
    has_inputs,
    plan_assess,
    planned,
    versions,
)
from .base import Metric, MetricContext, PlannedCall, declare, usage_of
from .providers.offline.matching import DEFAULT_RELEVANCE, OfflineSettings
from .turn_sources import no_retrieval_skip, turn_without_retrieval

__all__ = ["ContextPrecision", "average_precision"]


class ContextPrecision(Metric):
    """Rank-aware precision of the retrieved contexts, usefulness judged by an LLM."""

    requires = ("question", "contexts")
    # judged against the reference or else the answer; the context ids go into details
    reads = ("question", "answer", "reference", "contexts.text", "contexts.id")
    prompt_version = versions(CONTEXT_PRECISION_WITH_REFERENCE, CONTEXT_PRECISION_WITH_ANSWER)

    def __init__(
        self,
        use_reference: bool | None = None,
        provider: str = "llm",
        *,
        relevance: float = DEFAULT_RELEVANCE,
    ) -> None:
        """``provider="offline"``: question-context cosine per context (useful when it reaches
        ``relevance``), then the same rank-aware AP; no reference or answer is needed."""
        self._use_provider(provider)
        self.settings = OfflineSettings(relevance=relevance)
        self.use_reference = use_reference

    def __repr__(self) -> str:
        return f"ContextPrecision(use_reference={self.use_reference!r}, provider={self.provider!r})"

    def _share_tags(self) -> frozenset[str]:
        # with context_recall (against the reference), and with a context-relevance measure
        mode = mode_of(self.use_reference)
        assess = frozenset() if self.use_reference is False else frozenset({ASSESS_TAG})
        return assess | precision_share_tags(mode)

    def _target(self, sample: Sample) -> tuple[PromptTemplate, str, str] | None:
        """(template, field name, text) of what usefulness is judged against, or None."""
        target = precision_target(sample, mode_of(self.use_reference))
        if target is None:
            return None
        name, text = target
        if name == "reference":
            return CONTEXT_PRECISION_WITH_REFERENCE, name, text
        return CONTEXT_PRECISION_WITH_ANSWER, name, text

    def _joint(self, sample: Sample, tags: frozenset[str]) -> JointCall | None:
        """The call shared with a context-relevance measure of this run, or None."""
        mode = mode_of(self.use_reference)
        return joint_call(sample, tags, mode) if precision_paired(tags, mode) else None

    def _edge(self, sample: Sample) -> Score | None:
        return no_retrieval_skip(sample)

    def missing_input(self, sample: Sample, ctx: MetricContext) -> Failure | None:
        if turn_without_retrieval(sample):
            return None  # skipped by `_edge`, whatever else it lacks
        failure = super().missing_input(sample, ctx)
        if failure is not None or not self.own_provider or self._target(sample) is not None:
            return failure
        wanted = {True: "'reference'", False: "'answer'", None: "'reference' or 'answer'"}
        return Failure(
            kind=FailureKind.MISSING_INPUT,
            message=f"{self.name} needs the sample's {wanted[self.use_reference]}, which is empty",
        )

    def _plan(self, sample: Sample, shared_tags: frozenset[str]) -> list[PlannedCall]:
        target = self._target(sample)
        if target is None or not has_inputs(sample, self.requires):
            return []
        template, name, text = target
        joint = self._joint(sample, shared_tags)
        if joint is not None:
            return [plan_joint(sample, joint)]
        if name == "reference" and ASSESS_TAG in shared_tags:
            return [plan_assess(sample, assess_template(shared_tags))]
        values = {"question": asked(sample), name: text}
        return [planned(template, contexts=[c.text for c in sample.contexts], **values)]

    async def _score(self, sample: Sample, ctx: MetricContext) -> Score:
        target = self._target(sample)
        assert target is not None  # missing_input ran first
        template, name, text = target
        tags = ctx.shared_tags
        joint = self._joint(sample, tags)
        verdicts: Sequence[ContextUsefulness | ContextJudgement]
        if joint is not None and not joint.assess:
            # one call judges relevance (for a context-relevance measure) and usefulness
            shared, owner = await ask_joint(joint, ctx)
            template = joint.template
            stamp: dict[str, Any] = {
                "usage": usage_of(shared, owned=(owner,)),
                "prompt_version": versions(template),
            }
            if shared.value is None:
                assert shared.failure is not None
                return Score(failure=shared.failure, **stamp)
            verdicts = shared.value.verdicts
        elif name == "reference" and ASSESS_TAG in tags:
            template = assess_template(tags)
            assessed, owner = await assess_contexts(sample, ctx, template)
            stamp = {
                "usage": usage_of(assessed, owned=(owner,)),
                "prompt_version": versions(template),
            }
            if assessed.value is None:
                assert assessed.failure is not None
                return Score(failure=assessed.failure, **stamp)
            verdicts = assessed.value.contexts
        else:
            values: dict[str, Any] = {"question": asked(sample), name: text}
            call: JudgeCall[ContextUsefulnessVerdicts] = await ctx.ask(
                template, contexts=[c.text for c in sample.contexts], **values
            )
            stamp = {"usage": usage_of(call), "prompt_version": versions(template)}
            if call.value is None:
                assert call.failure is not None
                return Score(failure=call.failure, **stamp)
            verdicts = call.value.verdicts
        n = len(sample.contexts)  # one verdict per context: the engine checked the reply
        useful = [v.useful for v in verdicts]
        value = average_precision(useful)
        hits = 0
        details: list[dict[str, Any]] = []
        for k, (context, v) in enumerate(zip(sample.contexts, verdicts, strict=True), start=1):
            hits += v.useful
            details.append(
                {
                    "rank": k,
                    "context_id": context.id,
                    "useful": v.useful,
                    "precision_at_k": hits / k,
                    "reason": v.reason,
                }
            )
        n_useful = sum(useful)
        if n_useful:
            reason = (
                f"{n_useful} of {n} contexts useful for the {name}; "
                f"rank-weighted precision {value:.2f}"
            )
        else:
            reason = f"none of the {n} contexts is useful for the {name}"
        return Score(
            value=value,
            reason=reason,
            details={"judged_against": name, "contexts": details},
            **stamp,
        )


declare(
    ContextPrecision,
    meaning="whether the useful contexts are ranked at the top (rank-weighted precision)",
    how="one call judges every context useful or not for the reference (else the answer)",
    needs=("judge",),
    judge_calls="1 (shared with context_recall)",
    edges={
        "no reference": "judged against the answer",
        "no useful context": "0.0",
        "turn without retrieval": "skipped with the reason",
    },
)
