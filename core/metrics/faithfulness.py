"""Faithfulness and Hallucination: are the answer's claims backed by the retrieved contexts?

Both follow Es et al. 2023, "RAGAS: Automated Evaluation of Retrieval Augmented Generation",
§3: split the answer into statements S, have a judge decide which are supported by the context
(V), and score

    faithfulness = |V| / |S|.

Hallucination is the complement on the same verdicts — the share of claims contradicted by the
contexts or unsupported by them, 1 − faithfulness — and exists as its own column because
"lower is better" measures are what many teams gate on. Both read the same two shared judge
calls (``answer.analyze``, ``faithfulness.verify``): running both costs 2 calls per sample, not 4,
whatever the number of contexts.

Edge policy, chosen so no case is silently scored:

* empty answer → ``Failure(missing_input)`` before any call;
* no claims extracted (the answer asserts nothing) → ``Failure(no_claims)``. RAGAS returns NaN
  here and DeepEval's FaithfulnessMetric returns 1.0; a NaN poisons a mean and a 1.0 rewards an
  answer that says nothing, so ragbridge reports a typed failure instead;
* no contexts → faithfulness 0.0 (hallucination 1.0) with every claim unsupported, without a
  verify call: nothing retrieved can back anything;
* the whole answer abstains ("I don't know.", "The context does not say.";
  `ragbridge.core.text.words.abstention`) → skipped with that reason, on every provider and without
  a call: a refusal asserts nothing, so scoring it as an unsupported claim (0, hallucination 1)
  would punish the right behaviour. The ``no_answer`` measure counts such answers as declined.

On a conversation's turn (``sample.history`` not None) the judge reads the question with the
conversation so far (`ragbridge.core.prompts.history.asked`), and with ``support="conversation"``
(the default) a claim the conversation itself supports — what the user said in an earlier turn,
a context an earlier turn retrieved — counts as supported, its details naming the turn
(`ragbridge.core.metrics.turn_sources`); a turn that retrieved nothing is checked against those
sources instead of scoring 0. ``support="turn"`` counts the turn's own contexts only. Still the
same two calls.

On an agent's sample (``sample.trajectory`` not None) the claims are checked against the union
of the sample's contexts and everything the agent's retrieval steps returned, each passage once,
and a claim a step's passage decides names that step in its details
(``{"source": "step", "step": k, "tool": name}``; `ragbridge.core.metrics.turn_sources`), under
either ``support``: the steps are the turn's own retrieval. Still the same two calls.
"""

from __future__ import annotations

from ..prompts.answer_analyze import ANSWER_ANALYZE
from ..prompts.faithfulness import FAITHFULNESS_VERIFY
from ..results.evaluation import Score
from ..sample import Sample
from ..text.words import abstention
from ._shared import (
    ClaimCheck,
    check_claims,
    has_inputs,
    plan_analyze,
    plan_verify,
    versions,
)
from .base import Metric, MetricContext, PlannedCall, declare
from .providers.nli import DEFAULT_ENTAILMENT
from .providers.offline.matching import DEFAULT_COVERAGE, DEFAULT_SIMILARITY, OfflineSettings
from .turn_sources import checked_support, sources_for

__all__ = ["Faithfulness", "Hallucination"]


class _ClaimMetric(Metric):
    """Shared by Faithfulness and Hallucination: one claim analysis, any registered provider.

    ``provider="llm"`` (default) uses the judge; ``"offline"`` the sentence-embedding matcher of
    `ragbridge.core.metrics.providers.offline` (``similarity`` threshold); ``"nli"`` an
    entailment model (``entailment`` threshold; see `ragbridge.core.metrics.providers.nli`); any
    other provider registered for the measure (`ragbridge metrics` lists them).

    ``support``: ``"conversation"`` (default) also counts the conversation's own sources on a
    conversation's turn; ``"turn"`` only the turn's contexts (see the module doc). The judge
    and the offline provider honour it; the nli provider reads the turn's contexts only.
    """

    requires = ("answer",)
    prompt_version = versions(ANSWER_ANALYZE, FAITHFULNESS_VERIFY)

    def __init__(
        self,
        provider: str = "llm",
        *,
        similarity: float = DEFAULT_SIMILARITY,
        entailment: float = DEFAULT_ENTAILMENT,
        coverage: float = DEFAULT_COVERAGE,
        support: str = "conversation",
    ) -> None:
        self._use_provider(provider)
        self.support = checked_support(support)
        for arg, value in (
            ("similarity", similarity),
            ("entailment", entailment),
            ("coverage", coverage),
        ):
            if isinstance(value, bool) or not 0.0 <= float(value) <= 1.0:
                raise ValueError(f"{arg} threshold must lie in [0, 1], got {value!r}")
        self.settings = OfflineSettings(similarity=similarity, coverage=coverage)
        self.entailment = float(entailment)

    def __repr__(self) -> str:
        support = "" if self.support == "conversation" else f", support={self.support!r}"
        return f"{type(self).__name__}(provider={self.provider!r}{support})"

    def _plan(self, sample: Sample, shared_tags: frozenset[str]) -> list[PlannedCall]:
        if not has_inputs(sample, self.requires):
            return []
        calls = [plan_analyze(sample)]
        sources = sources_for(sample, self.support)
        if sample.contexts or sources:
            calls.append(plan_verify(sample, sources))
        return calls

    def _edge(self, sample: Sample) -> Score | None:
        declined = abstention(sample.answer) if sample.answer else None
        return None if declined is None else Score.skip(abstention_reason(declined))

    async def _score(self, sample: Sample, ctx: MetricContext) -> Score:
        check = await check_claims(sample, ctx, sources_for(sample, self.support))
        if check.failure is not None:
            return check.failed()
        return self._from_verdicts(check)

    def _from_verdicts(self, check: ClaimCheck) -> Score:
        raise NotImplementedError


def abstention_reason(declined: str) -> str:
    """Why a claim measure skipped an abstaining answer (shared by every provider)."""
    return (
        f"the answer abstains ('{declined}'); abstentions are not claims — "
        "the no_answer measure scores them"
    )


def _details(check: ClaimCheck) -> dict[str, object]:
    return {
        "claims": check.details,
        "supported": check.count("supported"),
        "contradicted": check.count("contradicted"),
        "unsupported": check.count("unsupported"),
        "total": len(check.details),
    }


class Faithfulness(_ClaimMetric):
    """Share of the answer's claims supported by the retrieved contexts (RAGAS faithfulness).

    ``value = supported / total claims``. ``details["claims"]`` lists each claim with its
    verdict, the 1-based number (and id) of the context cited, and the judge's reason.
    """

    reads = ("question", "answer", "contexts.text", "contexts.id", "trajectory")  # ids: in details

    def _from_verdicts(self, check: ClaimCheck) -> Score:
        total = len(check.details)
        supported = check.count("supported")
        if not check.verified:
            reason = f"no contexts were retrieved, so none of the {total} claims is supported"
        else:
            reason = (
                f"{supported} of {total} claims supported by {check.against} "
                f"({check.count('contradicted')} contradicted, "
                f"{check.count('unsupported')} unsupported)"
            )
        return Score(
            value=supported / total, reason=reason, details=_details(check), usage=check.usage
        )


class Hallucination(_ClaimMetric):
    """Share of the answer's claims the contexts contradict or do not support (lower is better).

    ``value = (contradicted + unsupported) / total claims = 1 − faithfulness`` on the same
    verdicts; free (0 extra calls) when Faithfulness runs on the same sample.
    """

    reads = ("question", "answer", "contexts.text", "contexts.id", "trajectory")  # ids: in details

    higher_is_better = False

    def _from_verdicts(self, check: ClaimCheck) -> Score:
        total = len(check.details)
        bad = check.count("contradicted", "unsupported")
        if not check.verified:
            reason = f"no contexts were retrieved, so all {total} claims are unsupported"
        else:
            reason = (
                f"{bad} of {total} claims not backed by {check.against} "
                f"({check.count('contradicted')} contradicted, "
                f"{check.count('unsupported')} unsupported)"
            )
        return Score(value=bad / total, reason=reason, details=_details(check), usage=check.usage)


_CLAIM_EDGES = {
    "no claims": "failure no_claims (RAGAS: NaN; DeepEval: 1.0)",
    "no contexts": "every claim unsupported",
    "abstention": "skipped with the reason",
    "agent's sample": "checked against everything its steps retrieved; a claim names its step",
}
declare(
    Faithfulness,
    meaning="share of the answer's claims that the retrieved contexts support",
    how="the judge splits the answer into claims, then verifies them against the contexts",
    needs=("judge",),
    judge_calls="2, shared",
    edges={
        **_CLAIM_EDGES,
        "no contexts": "0.0 (every claim unsupported)",
        "turn without retrieval": "claims checked against the conversation (support=turn: 0.0)",
    },
)
declare(
    Hallucination,
    meaning="share of the answer's claims the contexts contradict or leave unsupported",
    how="the same claims and verdicts as faithfulness, counted the other way",
    needs=("judge",),
    judge_calls="2, shared",
    edges={
        **_CLAIM_EDGES,
        "no contexts": "1.0 (every claim unsupported)",
        "turn without retrieval": "claims checked against the conversation (support=turn: 1.0)",
    },
)
