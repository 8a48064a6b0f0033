"""ContextRelevance and ContextRelevanceRanked: is each retrieved context relevant to the question?

The retrieval leg of the TruLens "RAG triad" (context relevance, groundedness, answer relevance)
and DeepEval's ``ContextualRelevancyMetric``: judged against the question alone, so it needs no
reference and no answer, and says whether the retriever brought back material that bears on
what was asked. With r_k ∈ {0, 1} the judge's verdict for the context at rank k of K,

    context_relevance        = Σ_k r_k / K                   (the share relevant: precision@K)
    context_relevance_ranked = Σ_k (precision@k × r_k) / Σ_k r_k,  precision@k = Σ_{i≤k} r_i / k

and 0.0 when no context is relevant. The ranked form is the rank weighting of context precision
(the RAGAS documentation's "Context Precision", after Es et al. 2023; `average_precision`):
verdicts [1, 0, 1] give a share of 0.667 and a ranked value of (1/1 + 2/3) / 2 = 0.833, and the
same two relevant contexts at ranks 1 and 2 give 1.0. Its denominator is the relevant contexts
*retrieved*, not every relevant document of a corpus, so it is not trec_eval's AP (use the
ranking measures with relevance labels for that).

How it differs from its neighbours:

* `DocumentRelevance` grades the retrieved set as a whole, one yes/no; this judges each context,
  with a reason per context in ``details``.
* `ContextPrecision` judges *usefulness* for the reference (else the answer): a context on the
  question's subject that the answer did not use is relevant here and not useful there.
* DeepEval's ``ContextualRelevancyMetric`` splits every context into statements (one call per
  context, and one more for the reason) and scores relevant statements / all statements pooled
  over the contexts, so a long context weighs more than a short one and a context is never
  judged as a whole; with one statement per context the two agree (tests/test_context_relevance.py
  runs it). RAGAS's ``ContextRelevance`` (the NVIDIA metric) rates the contexts joined into one
  text, 0/1/2, by two judge prompts, averaged: no per-context verdict and no rank.

One call per sample judges every context (``context_relevance.judge``), shared by both measures
when both run; with ContextPrecision in the run the same call also judges usefulness, and with
ContextRecall too it also attributes the reference (`ragbridge.core.metrics._context_share`).
Edge policy: no contexts is ``missing_input`` (nothing was retrieved to judge; whether that is
a retrieval failure is the ranking measures' question), and so is an empty question. On a
conversation's turn the judge reads the question with the conversation so far
(`ragbridge.core.prompts.history.asked`), and a turn that retrieved nothing is skipped with that
reason (`missed_retrieval` asks whether it needed documents).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from ..judging.engine import JudgeCall
from ..prompts.base import PromptTemplate
from ..prompts.context_relevance import (
    CONTEXT_ASSESS_RELEVANCE,
    CONTEXT_RELEVANCE,
    CONTEXT_RELEVANT_USEFUL_WITH_ANSWER,
    CONTEXT_RELEVANT_USEFUL_WITH_REFERENCE,
    ContextAssessmentWithRelevance,
    ContextJudgement,
    ContextJudgements,
    ContextRelevanceVerdict,
    ContextRelevanceVerdicts,
)
from ..prompts.history import asked
from ..results.evaluation import Failure, Score
from ..sample import Sample
from ._context_share import (
    ask_joint,
    joint_call,
    paired_mode,
    plan_joint,
    relevance_key,
    relevance_share_tags,
)
from ._relevance import relevance_score
from ._shared import assess_contexts, has_inputs, planned, versions
from .base import Metric, MetricContext, PlannedCall, declare, usage_of
from .providers.offline.matching import OfflineSettings
from .providers.offline.relevance import DEFAULT_CONTEXT_RELEVANCE
from .turn_sources import no_retrieval_skip, turn_without_retrieval

__all__ = ["ContextRelevance", "ContextRelevanceRanked"]


class ContextRelevance(Metric):
    """Share of the retrieved contexts relevant to the question, each judged by an LLM."""

    requires = ("question", "contexts")
    # The judge reads the question and the contexts; when the call is shared with context
    # precision it also sees the answer or the reference, which may sway a verdict, so a kept
    # Score is keyed on them too (a changed answer re-reads the reply cache, not the judge).
    reads = ("question", "answer", "reference", "contexts.text", "contexts.id")
    prompt_version = versions(
        CONTEXT_RELEVANCE,
        CONTEXT_RELEVANT_USEFUL_WITH_REFERENCE,
        CONTEXT_RELEVANT_USEFUL_WITH_ANSWER,
        CONTEXT_ASSESS_RELEVANCE,
    )
    ranked: ClassVar[bool] = False

    def __init__(
        self, provider: str = "llm", *, relevance: float = DEFAULT_CONTEXT_RELEVANCE
    ) -> None:
        """``provider="offline"``: a context is relevant when its offline relevance score (the
        mean of its embedding similarity to the question and its coverage of the question's
        words, `ragbridge.core.metrics.providers.offline.relevance`) reaches ``relevance``."""
        self._use_provider(provider)
        self.settings = OfflineSettings(relevance=relevance)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(provider={self.provider!r})"

    def _share_tags(self) -> frozenset[str]:
        return relevance_share_tags(self.name)

    def _edge(self, sample: Sample) -> Score | None:
        return no_retrieval_skip(sample)

    def missing_input(self, sample: Sample, ctx: MetricContext) -> Failure | None:
        if turn_without_retrieval(sample):
            return None  # skipped by `_edge`, whatever else it lacks
        return super().missing_input(sample, ctx)

    def _plan(self, sample: Sample, shared_tags: frozenset[str]) -> list[PlannedCall]:
        if not has_inputs(sample, self.requires):
            return []
        mode = paired_mode(shared_tags, self.name)
        joint = None if mode is None else joint_call(sample, shared_tags, mode)
        if joint is not None:
            return [plan_joint(sample, joint)]
        contexts = [c.text for c in sample.contexts]
        key = relevance_key(sample)
        return [planned(CONTEXT_RELEVANCE, key, question=asked(sample), contexts=contexts)]

    async def _score(self, sample: Sample, ctx: MetricContext) -> Score:
        tags = ctx.shared_tags
        mode = paired_mode(tags, self.name)
        joint = None if mode is None else joint_call(sample, tags, mode)
        template: PromptTemplate
        verdicts: Sequence[ContextRelevanceVerdict | ContextJudgement]
        call: JudgeCall[Any]
        if joint is None:
            template = CONTEXT_RELEVANCE
            contexts = [c.text for c in sample.contexts]
            call, owner = await ctx.shared(
                relevance_key(sample),
                lambda: ctx.ask(template, question=asked(sample), contexts=contexts),
            )
        elif joint.assess:
            template = joint.template
            call, owner = await assess_contexts(sample, ctx, template)
        else:
            template = joint.template
            call, owner = await ask_joint(joint, ctx)
        stamp: dict[str, Any] = {
            "usage": usage_of(call, owned=(owner,)),
            "prompt_version": versions(template),
        }
        if call.value is None:
            assert call.failure is not None
            return Score(failure=call.failure, **stamp)
        reply = call.value
        if isinstance(reply, ContextAssessmentWithRelevance):
            verdicts = reply.contexts
        elif isinstance(reply, (ContextRelevanceVerdicts, ContextJudgements)):
            verdicts = reply.verdicts
        else:  # a routing bug: every template above has relevance per context
            raise TypeError(f"{template.id} gave no relevance verdicts ({type(reply).__name__})")
        # one verdict per context, each with `relevant`: the engine checked the reply
        per_context = [{"reason": v.reason} for v in verdicts]
        relevant = [v.relevant for v in verdicts]
        return relevance_score(sample, relevant, per_context, ranked=self.ranked, **stamp)


class ContextRelevanceRanked(ContextRelevance):
    """Rank-weighted precision of the relevant contexts (the same verdicts, the same call)."""

    reads = ("question", "answer", "reference", "contexts.text", "contexts.id")
    ranked = True


_EDGES = {
    "no contexts": "missing_input",
    "turn without retrieval": "skipped with the reason",
    "empty question": "missing_input",
    "no relevant context": "0.0",
}

declare(
    ContextRelevance,
    meaning="share of the retrieved contexts relevant to the question (each judged on its own)",
    how="one call judges every context relevant to the question or not, with a reason each",
    needs=("judge",),
    judge_calls="1 (shared with context_relevance_ranked and context_precision)",
    edges=_EDGES,
)

declare(
    ContextRelevanceRanked,
    meaning="whether the contexts relevant to the question are ranked at the top "
    "(rank-weighted precision)",
    how="the verdicts of context_relevance (the same call), weighted by precision@k",
    needs=("judge",),
    judge_calls="1 (shared with context_relevance and context_precision)",
    edges=_EDGES,
)
