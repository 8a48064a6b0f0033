"""MissedRetrieval: a turn that needed documents and retrieved none (lower is better).

A chat assistant decides turn by turn whether to search. The retrieval measures skip a turn
that retrieved nothing (`ragbridge.core.metrics.turn_sources.no_retrieval_skip`): nothing was
retrieved, so there is no ranking to judge. Whether that was right is this measure's question:

* a turn with contexts: 0.0 without a call (it retrieved; the retrieval measures judge how well);
* otherwise the judge (``missed_retrieval.judge``, one call) reads the question with the
  conversation so far (`ragbridge.core.prompts.history.asked`) and the answer, lists the facts
  the answer states that the conversation does not hold, and says whether a good answer needed
  such facts: 1.0 when it needed them or states them (an answer of facts nobody retrieved rests
  on the model's memory, or on nothing), 0.0 for a greeting, a thank-you, or a follow-up the
  conversation already answers;
* the ``offline`` provider applies a lexical rule instead
  (`ragbridge.core.metrics.providers.offline.missed_retrieval`).

It reads a plain sample too (no history is a conversation of one question): a pipeline that
answered without retrieving is flagged the same way. The per-turn flag of DeepEval's and RAGAS's
conversational metrics has no counterpart; this is ragbridge's own definition.
"""

from __future__ import annotations

from ..judging.engine import JudgeCall
from ..prompts.history import asked
from ..prompts.missed_retrieval import MISSED_RETRIEVAL, RetrievalNeed
from ..results.evaluation import Failure, Score
from ..sample import Sample
from ._shared import has_inputs, planned, versions
from .base import Metric, MetricContext, PlannedCall, declare, usage_of

__all__ = ["MissedRetrieval", "retrieved_score"]


def retrieved_score(sample: Sample) -> Score | None:
    """0.0 for a sample with contexts (it retrieved), shared by every provider; else None."""
    if not sample.contexts:
        return None
    n = len(sample.contexts)
    return Score(
        value=0.0,
        reason=f"this turn retrieved {n} context{'s' if n != 1 else ''}",
        details={"retrieved": n},
    )


class MissedRetrieval(Metric):
    """1.0 when a turn that retrieved nothing needed documents, else 0.0 (see the module doc)."""

    requires = ("question", "answer")
    reads = ("question", "answer", "contexts.text")  # contexts: whether there are any
    higher_is_better = False
    prompt_version = versions(MISSED_RETRIEVAL)

    def __init__(self, provider: str = "llm") -> None:
        """``provider="offline"``: the lexical rule of
        `ragbridge.core.metrics.providers.offline.missed_retrieval` (no model)."""
        self._use_provider(provider)

    def __repr__(self) -> str:
        return f"MissedRetrieval(provider={self.provider!r})"

    def missing_input(self, sample: Sample, ctx: MetricContext) -> Failure | None:
        if sample.contexts:
            return None  # it retrieved: 0.0 (`_edge`), whatever else it lacks
        return super().missing_input(sample, ctx)

    def _edge(self, sample: Sample) -> Score | None:
        return retrieved_score(sample)

    def _plan(self, sample: Sample, shared_tags: frozenset[str]) -> list[PlannedCall]:
        if not has_inputs(sample, self.requires):
            return []
        return [planned(MISSED_RETRIEVAL, question=asked(sample), answer=sample.answer or "")]

    async def _score(self, sample: Sample, ctx: MetricContext) -> Score:
        call: JudgeCall[RetrievalNeed] = await ctx.ask(
            MISSED_RETRIEVAL, question=asked(sample), answer=sample.answer or ""
        )
        usage = usage_of(call)
        if call.value is None:
            assert call.failure is not None
            return Score(failure=call.failure, usage=usage)
        verdict = call.value
        facts = [f for f in verdict.new_facts if f.strip()]
        missed = verdict.needed or bool(facts)
        if not missed:
            reason = f"this turn retrieved nothing and needed nothing: {verdict.reason}"
        elif facts:
            reason = (
                f"this turn retrieved nothing, yet the answer states {len(facts)} fact"
                f"{'s' if len(facts) != 1 else ''} the conversation does not hold: "
                f"{verdict.reason}"
            )
        else:
            reason = f"this turn retrieved nothing and needed documents: {verdict.reason}"
        return Score(
            value=1.0 if missed else 0.0,
            reason=reason,
            details={
                "retrieved": 0,
                "needed": verdict.needed,
                "new_facts": facts,
                "explanation": verdict.reason,
            },
            usage=usage,
        )


declare(
    MissedRetrieval,
    meaning="whether a turn that retrieved nothing needed documents (1.0) or not (0.0)",
    how="one call lists the answer's facts the conversation does not hold and says whether "
    "answering needed documents",
    needs=("judge",),
    judge_calls="1 (0 when the turn retrieved)",
    edges={
        "turn with contexts": "0.0 without a call",
        "plain sample": "read as a conversation of one question",
    },
)
