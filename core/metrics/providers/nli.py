"""The ``nli`` provider of faithfulness and hallucination: an MNLI cross-encoder as the judge.

An entailment model reads (premise, hypothesis) pairs and says whether the premise entails,
contradicts or is neutral to the hypothesis — the question faithfulness asks, answered by a
model small enough for a CPU. The model itself is an adapter (`ragbridge.adapters.nli.NLIModel`
over transformers); the measure only needs the `EntailmentModel` protocol, so it lives here.

* faithfulness: each answer sentence is a claim; its support is the highest entailment
  probability over the contexts (each context a premise); supported when ≥ ``threshold``;
  value = supported / claims.
* hallucination: each answer sentence's contradiction probability, maximised over contexts;
  value = the mean over sentences (details also give the maximum, the usual alarm threshold).

Two-label models (``entailment`` / ``not_entailment``) serve faithfulness only: "not entailed"
lumps neutral and contradicted together, so such a model reports contradiction 0 for every pair
and hallucination would read a flat, plausible 0.0. A model says it is one by exposing
``detects_contradiction = False`` (`ragbridge.adapters.nli.NLIModel` sets it once loaded);
hallucination then fails with ``invalid_input`` naming the model, whichever way the measure was
built (``Hallucination(provider="nli")``, ``by_name("hallucination:nli")``, a CLI name).
"""

from __future__ import annotations

from ...judging.judge import EntailmentModel
from ...registry import register_provider
from ...results.evaluation import FailureKind, Score
from ...sample import Sample
from ...text.words import sentences
from ..base import Metric, MetricContext

__all__ = ["DEFAULT_ENTAILMENT", "detects_contradiction", "nli_faithfulness", "nli_hallucination"]

DEFAULT_ENTAILMENT = 0.5


def detects_contradiction(model: object) -> bool | None:
    """Whether an `EntailmentModel` has a contradiction class: False for a two-label model,
    None when the model does not say (or has not loaded yet)."""
    found = getattr(model, "detects_contradiction", None)
    return found if isinstance(found, bool) else None


def _two_label_failure(model: EntailmentModel) -> Score:
    return Score.fail(
        FailureKind.INVALID_INPUT,
        f"NLI model {model.model!r} has only entailment / not_entailment labels, so it cannot "
        "detect contradiction: hallucination:nli needs a three-label MNLI model "
        "(entailment / neutral / contradiction); a two-label model serves faithfulness:nli only",
    )


async def _matrix(
    sample: Sample, ctx: MetricContext
) -> tuple[list[str], list[list[tuple[float, float]]]] | Score:
    claims = sentences(sample.answer or "")
    if not claims:
        return Score.fail(FailureKind.NO_CLAIMS, "the answer has no sentence to check")
    contexts = [c.text for c in sample.contexts]
    if not contexts:
        return claims, [[] for _ in claims]
    nli = ctx.nli
    assert nli is not None
    pairs = [(premise, claim) for claim in claims for premise in contexts]
    # Faithfulness and Hallucination of one sample read the same pairs: predict them once.
    key = ("nli.predict", nli.model, tuple(pairs))
    scores, _ = await ctx.shared(key, lambda: nli.predict(pairs))
    if len(scores) != len(pairs):
        raise ValueError(f"NLI model returned {len(scores)} results for {len(pairs)} pairs")
    n = len(contexts)
    rows = [
        [(s.entailment, s.contradiction) for s in scores[i * n : (i + 1) * n]]
        for i in range(len(claims))
    ]
    return claims, rows


@register_provider(
    "faithfulness",
    "nli",
    how="each answer sentence's best entailment probability over the contexts (MNLI model)",
    needs=["nli"],
    extra="nli",
    reads=["answer", "contexts.text"],
)
async def nli_faithfulness(metric: Metric, sample: Sample, ctx: MetricContext) -> Score:
    threshold = float(getattr(metric, "entailment", DEFAULT_ENTAILMENT))
    found = await _matrix(sample, ctx)
    if isinstance(found, Score):
        return found
    claims, rows = found
    details = []
    for claim, row in zip(claims, rows, strict=True):
        best = max(range(len(row)), key=lambda j: row[j][0]) if row else None
        entail = row[best][0] if best is not None else 0.0
        details.append(
            {
                "claim": claim,
                "entailment": round(entail, 4),
                "context": None if best is None else best + 1,
                "supported": entail >= threshold,
            }
        )
    supported = sum(1 for d in details if d["supported"])
    total = len(details)
    reason = (
        "no contexts were retrieved, so no sentence of the answer is supported"
        if not sample.contexts
        else f"{supported} of {total} answer sentences entailed by a context (p ≥ {threshold})"
    )
    return Score(
        value=supported / total,
        reason=reason,
        details={"claims": details, "supported": supported, "total": total},
    )


@register_provider(
    "hallucination",
    "nli",
    how="mean over answer sentences of the highest contradiction probability (3-label MNLI)",
    needs=["nli"],
    extra="nli",
    reads=["answer", "contexts.text"],
    definition="mean over the answer's sentences of the highest probability that a context "
    "contradicts it (a sentence the contexts leave unsupported is not counted)",
)
async def nli_hallucination(metric: Metric, sample: Sample, ctx: MetricContext) -> Score:
    if ctx.nli is not None and detects_contradiction(ctx.nli) is False:
        return _two_label_failure(ctx.nli)
    found = await _matrix(sample, ctx)
    if isinstance(found, Score):
        return found
    if ctx.nli is not None and detects_contradiction(ctx.nli) is False:  # known once it loaded
        return _two_label_failure(ctx.nli)
    claims, rows = found
    if not sample.contexts:
        return Score(
            value=1.0,
            reason="no contexts were retrieved: nothing backs the answer",
            details={"sentences": [{"sentence": c, "contradiction": None} for c in claims]},
        )
    per_sentence = [max(c for _, c in row) for row in rows]
    mean = sum(per_sentence) / len(per_sentence)
    worst = max(per_sentence)
    return Score(
        value=min(1.0, max(0.0, mean)),
        reason=f"mean contradiction probability {mean:.2f} (worst sentence {worst:.2f})",
        details={
            "sentences": [
                {"sentence": c, "contradiction": round(p, 4)}
                for c, p in zip(claims, per_sentence, strict=True)
            ],
            "max": round(worst, 4),
            "mean": round(mean, 4),
        },
    )
