"""Helpers the LLM metrics share: the two memoised judge calls, alignment checks, cosine.

The memo keys are what makes the judge budget hold. ``answer.analyze`` is keyed on (question as
asked, answer), so Faithfulness, Hallucination, AnswerRelevance and AnswerCorrectness of one
sample make one call between them; ``faithfulness.verify`` is keyed on (claims, context texts), so
Faithfulness and Hallucination make one. The first metric to ask owns the call: its Score
records the usage, the others record none, so summed usage is the true cost.

Every prompt here shows the question as `asked` renders it: the question alone for a sample
without history, the conversation so far and then the question for a conversation's turn.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..judging.engine import JudgeCall
from ..judging.judge import Message
from ..prompts.answer_analyze import ANSWER_ANALYZE, AnswerAnalysis
from ..prompts.base import PromptTemplate
from ..prompts.context_assess import CONTEXT_ASSESS, ContextAssessment
from ..prompts.context_relevance import ContextAssessmentWithRelevance
from ..prompts.faithfulness import FAITHFULNESS_VERIFY, ClaimVerdicts
from ..prompts.history import asked
from ..results.evaluation import Failure, FailureKind, Score, Usage
from ..sample import Sample
from .base import MetricContext, PlannedCall, usage_of
from .turn_sources import Source, StepSource, name_sources

__all__ = [
    "ASSESS_TAG",
    "ClaimCheck",
    "analyze_answer",
    "assess_contexts",
    "check_claims",
    "cosine",
    "estimated_claims",
    "has_inputs",
    "plan_assess",
    "planned",
    "prompt_chars",
    "versions",
]


def versions(*templates: PromptTemplate) -> str:
    """``"answer.analyze@1+faithfulness.verify@1"``: the template versions behind a Score."""
    return "+".join(f"{t.id}@{t.version}" for t in templates)


def prompt_chars(messages: Sequence[Message]) -> int:
    return sum(len(m.get("content", "")) for m in messages)


def average_precision(useful: list[bool]) -> float:
    """Rank-weighted precision of context precision (judged and offline alike):
    Σ_k precision@k · v_k / Σ_k v_k over ranks k = 1..K; 0.0 when nothing is useful."""
    hits = 0
    total = 0.0
    for k, v in enumerate(useful, start=1):
        if v:
            hits += 1
            total += hits / k
    return total / hits if hits else 0.0


def planned(template: PromptTemplate, share_key: Any = None, **values: Any) -> PlannedCall:
    """The PlannedCall of rendering ``template`` with ``values``."""
    return PlannedCall(template.id, prompt_chars(template.render(**values)), share_key)


_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def estimated_claims(answer: str) -> list[str]:
    """Stand-in claims for a dry-run estimate: the answer's sentences (real claims need a call)."""
    return [s for s in _SENTENCE.split(answer.strip()) if s] or [answer]


def has_inputs(sample: Sample, fields: Sequence[str]) -> bool:
    """Whether every field is present and non-blank (the rule `Metric.missing_input` applies)."""
    for name in fields:
        value = getattr(sample, name)
        if value is None:
            return False
        if isinstance(value, str) and not value.strip():
            return False
        if isinstance(value, list) and not value:
            return False
    return True


def analyze_key(sample: Sample) -> tuple[str, str, str]:
    return ("answer.analyze", asked(sample), sample.answer or "")


def verify_texts(sample: Sample, sources: Sequence[Source] = ()) -> list[str]:
    """What ``faithfulness.verify`` shows as numbered contexts: the sample's contexts, then the
    conversation's ``sources`` (`ragbridge.core.metrics.turn_sources`), each with its label."""
    return [*(c.text for c in sample.contexts), *(s.shown() for s in sources)]


def verify_key(claims: Sequence[str], texts: Sequence[str]) -> tuple[str, tuple[str, ...], Any]:
    return ("faithfulness.verify", tuple(claims), tuple(texts))


def plan_verify_key(sample: Sample, texts: Sequence[str]) -> tuple[str, str, tuple[str, ...]]:
    """Dry-run key of the verify call (claims are unknown before the analyze call is made)."""
    return ("faithfulness.verify", sample.answer or "", tuple(texts))


def plan_analyze(sample: Sample) -> PlannedCall:
    return planned(
        ANSWER_ANALYZE, analyze_key(sample), question=asked(sample), answer=sample.answer or ""
    )


def plan_verify(sample: Sample, sources: Sequence[Source] = ()) -> PlannedCall:
    texts = verify_texts(sample, sources)
    return planned(
        FAITHFULNESS_VERIFY,
        plan_verify_key(sample, texts),
        claims=estimated_claims(sample.answer or ""),
        contexts=texts,
    )


async def analyze_answer(
    sample: Sample, ctx: MetricContext
) -> tuple[JudgeCall[AnswerAnalysis], bool]:
    """The shared ``answer.analyze`` call of this sample, and whether this caller owns it."""
    return await ctx.shared(
        analyze_key(sample),
        lambda: ctx.ask(ANSWER_ANALYZE, question=asked(sample), answer=sample.answer or ""),
    )


ASSESS_TAG = "context.assess"


def assess_key(sample: Sample) -> tuple[str, str, str, tuple[str, ...]]:
    return (
        ASSESS_TAG,
        asked(sample),
        sample.reference or "",
        tuple(c.text for c in sample.contexts),
    )


def plan_assess(sample: Sample, template: PromptTemplate = CONTEXT_ASSESS) -> PlannedCall:
    """The dry-run estimate of the shared ``context.assess`` call (``template``: see
    `assess_contexts`)."""
    return planned(
        template,
        assess_key(sample),
        question=asked(sample),
        reference=sample.reference or "",
        contexts=[c.text for c in sample.contexts],
    )


async def assess_contexts(
    sample: Sample, ctx: MetricContext, template: PromptTemplate = CONTEXT_ASSESS
) -> tuple[JudgeCall[ContextAssessment | ContextAssessmentWithRelevance], bool]:
    """The shared ``context.assess`` call (precision + recall in one), and whether we own it.

    ``template``: ``context.assess``, or ``context.assess_relevance`` when a context-relevance
    measure shares the call too (`ragbridge.core.metrics._context_share.assess_template`, which
    every caller of a run asks with the same tags, so all pass the same template).
    """
    return await ctx.shared(
        assess_key(sample),
        lambda: ctx.ask(
            template,
            question=asked(sample),
            reference=sample.reference or "",
            contexts=[c.text for c in sample.contexts],
        ),
    )


def context_id(sample: Sample, number: int | None) -> str | None:
    if number is None or not 1 <= number <= len(sample.contexts):
        return None
    return sample.contexts[number - 1].id


@dataclass
class ClaimCheck:
    """Claims of an answer and their verdicts, or the failure that stopped the check.

    ``verdicts`` are ``supported`` / ``contradicted`` / ``unsupported``, aligned with ``claims``;
    ``usage`` counts the calls the asking metric owns.
    """

    claims: list[str] = field(default_factory=list)
    details: list[dict[str, Any]] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    failure: Failure | None = None
    verified: bool = False
    sources: int = 0
    """How many of the conversation's sources the claims were checked against as well."""
    retrieved: bool = True
    """Whether the sample had contexts of its own (a turn may be checked against sources only)."""
    steps: bool = False
    """Whether some of the sources are passages an agent's retrieval steps returned."""

    @property
    def against(self) -> str:
        """What the claims were checked against, for a Score's reason."""
        if not self.sources:
            return "the contexts"
        if self.steps:
            return "everything the agent's steps retrieved"
        if not self.retrieved:
            return "the conversation (this turn retrieved nothing)"
        return "the contexts and the conversation"

    def count(self, *verdicts: str) -> int:
        return sum(1 for d in self.details if d["verdict"] in verdicts)

    def failed(self, **kw: Any) -> Score:
        assert self.failure is not None
        return Score(failure=self.failure, usage=self.usage, **kw)


async def check_claims(
    sample: Sample, ctx: MetricContext, sources: Sequence[Source] = ()
) -> ClaimCheck:
    """Extract the answer's claims (shared) and verify them all in one shared call, against the
    contexts and then the conversation's ``sources`` (`ragbridge.core.metrics.turn_sources`; a
    claim a source decides names it in its details).

    With nothing to check against every claim is unsupported and no verify call is made:
    spending a call to learn that would be waste.
    """
    analysis, owns_analysis = await analyze_answer(sample, ctx)
    if analysis.value is None:
        assert analysis.failure is not None
        return ClaimCheck(
            failure=analysis.failure, usage=usage_of(analysis, owned=(owns_analysis,))
        )
    claims = [c for c in analysis.value.claims if c.strip()]
    if not claims:
        return ClaimCheck(
            usage=usage_of(analysis, owned=(owns_analysis,)),
            failure=Failure(
                kind=FailureKind.NO_CLAIMS,
                message="no factual claims could be extracted from the answer",
            ),
        )
    texts = verify_texts(sample, sources)
    if not texts:
        unsupported: list[dict[str, Any]] = [
            {
                "claim": claim,
                "verdict": "unsupported",
                "context": None,
                "context_id": None,
                "reason": "no contexts were retrieved",
            }
            for claim in claims
        ]
        return ClaimCheck(claims, unsupported, usage_of(analysis, owned=(owns_analysis,)))
    verify: JudgeCall[ClaimVerdicts]
    verify, owns_verify = await ctx.shared(
        verify_key(claims, texts),
        lambda: ctx.ask(FAITHFULNESS_VERIFY, claims=claims, contexts=texts),
    )
    usage = usage_of(analysis, verify, owned=(owns_analysis, owns_verify))
    if verify.value is None:
        assert verify.failure is not None
        return ClaimCheck(claims, usage=usage, failure=verify.failure)
    # One verdict per claim, citing contexts that exist: checked by the engine on the reply
    # (the template's check), so a reply that does not fit never gets here.
    details: list[dict[str, Any]] = []
    own = len(sample.contexts)
    for claim, v in zip(claims, verify.value.verdicts, strict=True):
        row: dict[str, Any] = {
            "claim": claim,
            "verdict": v.verdict,
            "context": v.context,
            "context_id": context_id(sample, v.context),
            "reason": v.reason,
        }
        details.append(row)
    name_sources(details, own, sources)  # a conversation's turn, an agent's step
    return ClaimCheck(
        claims,
        details,
        usage,
        verified=True,
        sources=len(sources),
        steps=any(isinstance(s, StepSource) for s in sources),
        retrieved=bool(sample.contexts),
    )


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity; 0.0 when either vector is all zeros (nothing to compare)."""
    if len(a) != len(b):
        raise ValueError(f"vectors of different lengths: {len(a)} and {len(b)}")
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    if na == 0.0 or nb == 0.0:
        return 0.0
    return max(-1.0, min(1.0, dot / (na * nb)))
