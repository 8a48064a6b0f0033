"""NoiseSensitivity: how often the answer states wrong things the retrieved contexts gave it.

RAGAS 0.4.3's ``NoiseSensitivity`` definition (lower is better). Three relations are read:

* a context is **relevant** when it supports at least one statement of the reference, else
  **irrelevant** (noise);
* a claim of the answer is **incorrect** when the reference does not support it;
* which contexts support each claim.

``mode="relevant"`` (RAGAS's default): the share of the answer's claims that are incorrect and
supported by a relevant context — the system picked a wrong detail out of a useful passage.
``mode="irrelevant"``: the share that are incorrect and supported by an irrelevant context and
by no relevant one — the system was led astray by noise. A claim both kinds of context support
counts for ``relevant`` only, as in RAGAS. An incorrect claim no context supports (the model's
own invention) counts in neither mode: that is hallucination's business.

The judge provider (``llm``) reads the answer's claims from the shared ``answer.analyze`` call
(one call with faithfulness, hallucination and answer correctness on the same sample) and the
three relations from ONE ``noise_sensitivity.judge`` call, whatever the number of contexts
(RAGAS makes 2k + 3 calls for k contexts). The ``offline`` provider decides the same relations
lexically (`ragbridge.core.metrics.providers.offline.noise_sensitivity`).

Edge policy:

* a missing question, answer, reference or contexts → ``Failure(missing_input)`` (RAGAS raises);
* no claims → ``Failure(no_claims)`` (RAGAS returns NaN: the mean of nothing);
* an abstaining answer (`ragbridge.core.text.words.abstention`) → skipped with the reason: it
  states nothing, so a 0.0 would read as "robust to noise" when it only declined (negative
  rejection scores declining). ``compat="ragas"`` scores it as RAGAS does instead (its sentences
  are claims like any other's; they are seldom supported, so usually 0.0).

Both providers compute the value with `noise_value`, so they differ only in the relations.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..judging.engine import JudgeCall
from ..prompts.answer_analyze import ANSWER_ANALYZE
from ..prompts.history import asked
from ..prompts.noise_sensitivity import NOISE_SENSITIVITY, NoiseJudgement
from ..results.evaluation import Failure, FailureKind, Score
from ..sample import Sample
from ..text.words import abstention
from ._shared import analyze_answer, estimated_claims, has_inputs, plan_analyze, planned, versions
from .base import Metric, MetricContext, PlannedCall, declare, usage_of

__all__ = ["MODES", "ClaimFacts", "Mode", "NoiseSensitivity", "no_claims", "noise_value"]

Mode = Literal["relevant", "irrelevant"]
MODES: tuple[Mode, ...] = ("relevant", "irrelevant")
Compat = Literal["ragas"] | None


@dataclass(frozen=True)
class ClaimFacts:
    """What a provider decided about one claim: its text, whether the reference supports it,
    the 1-based numbers of the contexts that support it, and the provider's reason (or None)."""

    text: str
    in_reference: bool
    contexts: tuple[int, ...]
    reason: str | None = None


def noise_value(
    mode: Mode, claims: Sequence[ClaimFacts], relevant: Sequence[bool]
) -> tuple[float, dict[str, Any]]:
    """The noise sensitivity of ``claims`` given each context's relevance (``relevant[j]`` for
    context j + 1), and the details: per claim and per context. ``claims`` must not be empty."""
    if not claims:
        raise ValueError("noise sensitivity needs at least one claim")
    rows: list[dict[str, Any]] = []
    counted = 0
    for claim in claims:
        numbers = sorted(set(claim.contexts))
        by_relevant = any(relevant[n - 1] for n in numbers)
        by_irrelevant = any(not relevant[n - 1] for n in numbers)
        incorrect = not claim.in_reference
        if mode == "relevant":
            hit = incorrect and by_relevant
        else:
            hit = incorrect and by_irrelevant and not by_relevant
        counted += hit
        row: dict[str, Any] = {
            "claim": claim.text,
            "incorrect": incorrect,
            "contexts": numbers,
            "relevant": by_relevant,
            "irrelevant": by_irrelevant and not by_relevant,
            "counted": hit,
        }
        if claim.reason is not None:
            row["reason"] = claim.reason
        rows.append(row)
    details: dict[str, Any] = {
        "mode": mode,
        "claims": rows,
        "contexts": [{"context": j, "relevant": r} for j, r in enumerate(relevant, start=1)],
        "counted": counted,
        "incorrect": sum(1 for r in rows if r["incorrect"]),
        "total": len(rows),
    }
    return counted / len(rows), details


def noise_reason(mode: Mode, details: dict[str, Any]) -> str:
    """The Score's reason, shared by every provider."""
    n, total = details["counted"], details["total"]
    relevant = sum(1 for c in details["contexts"] if c["relevant"])
    k = len(details["contexts"])
    source = "a relevant context" if mode == "relevant" else "only irrelevant contexts"
    return (
        f"{n} of {total} claims are not backed by the reference yet supported by {source} "
        f"({details['incorrect']} incorrect; {relevant} of {k} contexts relevant)"
    )


def no_claims(**kw: Any) -> Score:
    """The typed failure of an answer with no claims (RAGAS: NaN)."""
    failure = Failure(
        kind=FailureKind.NO_CLAIMS, message="no factual claims could be extracted from the answer"
    )
    return Score(failure=failure, **kw)


def with_ids(sample: Sample, details: dict[str, Any]) -> dict[str, Any]:
    """``details`` with each context's id, where the sample's contexts have ids."""
    for row in details["contexts"]:
        row["id"] = sample.contexts[row["context"] - 1].id
    for row in details["claims"]:
        row["context_ids"] = [sample.contexts[n - 1].id for n in row["contexts"]]
    return details


class NoiseSensitivity(Metric):
    """Share of the answer's incorrect claims that retrieved contexts support (see the module
    doc); lower is better."""

    requires = ("question", "answer", "reference", "contexts")
    reads = ("question", "answer", "reference", "contexts.text", "contexts.id")  # ids: details
    higher_is_better = False
    prompt_version = versions(ANSWER_ANALYZE, NOISE_SENSITIVITY)

    def __init__(
        self, provider: str = "llm", *, mode: Mode = "relevant", compat: Compat = None
    ) -> None:
        """``mode``: ``"relevant"`` (RAGAS's default) or ``"irrelevant"``; ``compat="ragas"``
        scores an abstaining answer as RAGAS does instead of skipping it; ``provider="offline"``:
        lexical support, no model."""
        if mode not in MODES:
            raise ValueError(f"mode must be 'relevant' or 'irrelevant', got {mode!r}")
        if compat not in (None, "ragas"):
            raise ValueError(f"compat must be None or 'ragas', got {compat!r}")
        self._use_provider(provider)
        self.mode: Mode = mode
        self.compat: Compat = compat

    def __repr__(self) -> str:
        compat = "" if self.compat is None else f", compat={self.compat!r}"
        return f"NoiseSensitivity(provider={self.provider!r}, mode={self.mode!r}{compat})"

    def _edge(self, sample: Sample) -> Score | None:
        if self.compat == "ragas":
            return None
        declined = abstention(sample.answer) if sample.answer else None
        if declined is None:
            return None
        return Score.skip(
            f"the answer abstains ('{declined}'): it states nothing noise could have led astray "
            "(negative_rejection scores declining; compat='ragas' scores it as RAGAS does)"
        )

    def _plan(self, sample: Sample, shared_tags: frozenset[str]) -> list[PlannedCall]:
        if not has_inputs(sample, self.requires):
            return []
        return [
            plan_analyze(sample),
            planned(
                NOISE_SENSITIVITY,
                question=asked(sample),
                reference=sample.reference or "",
                claims=estimated_claims(sample.answer or ""),
                contexts=[c.text for c in sample.contexts],
            ),
        ]

    async def _score(self, sample: Sample, ctx: MetricContext) -> Score:
        analysis, owns = await analyze_answer(sample, ctx)
        if analysis.value is None:
            assert analysis.failure is not None
            return Score(failure=analysis.failure, usage=usage_of(analysis, owned=(owns,)))
        claims = [c for c in analysis.value.claims if c.strip()]
        if not claims:
            return no_claims(usage=usage_of(analysis, owned=(owns,)))
        call: JudgeCall[NoiseJudgement] = await ctx.ask(
            NOISE_SENSITIVITY,
            question=asked(sample),
            reference=sample.reference or "",
            claims=claims,
            contexts=[c.text for c in sample.contexts],
        )
        usage = usage_of(analysis, call, owned=(owns, True))
        if call.value is None:
            assert call.failure is not None
            return Score(failure=call.failure, usage=usage)
        # One verdict per claim, numbers of contexts that were shown: checked by the engine.
        judged = call.value
        shown = set(judged.reference_contexts)
        relevant = [j in shown for j in range(1, len(sample.contexts) + 1)]
        facts = [
            ClaimFacts(claim, v.in_reference, tuple(v.contexts), v.reason)
            for claim, v in zip(claims, judged.claims, strict=True)
        ]
        value, details = noise_value(self.mode, facts, relevant)
        return Score(
            value=value,
            reason=noise_reason(self.mode, details),
            details=with_ids(sample, details),
            usage=usage,
        )


declare(
    NoiseSensitivity,
    meaning="share of the answer's claims the reference does not support yet a retrieved "
    "context does (mode relevant: a relevant context; irrelevant: only noise)",
    how="claims from the shared answer analysis; one call says which contexts support the "
    "reference and, per claim, whether the reference and which contexts support it",
    needs=("judge",),
    judge_calls="2 (answer.analyze shared)",
    edges={
        "no claims": "failure no_claims (RAGAS: NaN)",
        "abstention": "skipped with the reason (compat='ragas': scored as RAGAS does)",
        "missing reference or contexts": "failure missing_input (RAGAS raises)",
    },
)
