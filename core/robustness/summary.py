"""Per-condition figures of a robustness run: each measure's mean with its CI, the abstention
rate, how often answers follow (or flag) a counterfactual, pipeline errors and the questions a
condition could not be built for, each with its reason (never silently dropped)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..results.evaluation import Evaluation
from ..results.stats import MeanCI, mean_ci
from ..sample import Sample
from ..text.words import abstention
from .answers import failed
from .conditions import Condition

__all__ = ["ConditionSummary", "Skipped", "summarise"]

COUNTERFACTUAL_MEASURE = "counterfactual_robustness"
"""The measure whose details say whether an answer follows or flags the wrong fact."""


@dataclass(frozen=True)
class Skipped:
    """A question a condition was not run for, and why."""

    sample_id: str
    reason: str


@dataclass
class ConditionSummary:
    """One condition's figures.

    ``n`` is the questions answered under it (skipped ones are not among them); ``metrics`` maps
    each of its measures to the `MeanCI` of its values (None when no question got a value);
    ``failed`` counts each measure's failed cells; ``abstention`` is the share of answers that
    decline (`ragbridge.core.text.words.abstention`, no judge), over the answers the pipeline
    gave. ``follows_wrong`` and ``flags_conflict`` (counterfactual only) are the shares of scored
    answers that assert the planted wrong fact / say the passages conflict.
    """

    condition: Condition
    n: int = 0
    metrics: dict[str, MeanCI | None] = field(default_factory=dict)
    failed: dict[str, int] = field(default_factory=dict)
    abstention: MeanCI | None = None
    follows_wrong: MeanCI | None = None
    flags_conflict: MeanCI | None = None
    errors: int = 0
    skipped: list[Skipped] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.condition.name

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: each MeanCI as ``{"mean", "low", "high", "n"}`` or None."""
        return {
            "condition": self.condition.name,
            "kind": self.condition.kind,
            "ratio": self.condition.ratio,
            "n": self.n,
            "metrics": {k: _ci(v) for k, v in self.metrics.items()},
            "failed": dict(self.failed),
            "abstention": _ci(self.abstention),
            "follows_wrong": _ci(self.follows_wrong),
            "flags_conflict": _ci(self.flags_conflict),
            "errors": self.errors,
            "skipped": [{"sample_id": s.sample_id, "reason": s.reason} for s in self.skipped],
        }


def _ci(value: MeanCI | None) -> dict[str, float | int] | None:
    return None if value is None else value._asdict()


def _mean(values: Sequence[float], seed: int) -> MeanCI | None:
    return mean_ci(values, seed=seed) if values else None


def summarise(
    condition: Condition,
    samples: Sequence[Sample],
    evaluation: Evaluation,
    metrics: Sequence[str],
    skipped: Sequence[Skipped] = (),
    *,
    seed: int = 0,
) -> ConditionSummary:
    """The figures of ``condition`` from its scored ``samples`` (ids ``{id}@{condition}``)."""
    out = ConditionSummary(condition, n=len(samples), skipped=list(skipped))
    for metric in metrics:
        values: list[float] = []
        bad = 0
        for sample in samples:
            score = evaluation.get(sample.id, metric)
            if score is None:
                continue
            if score.value is not None:
                values.append(score.value)
            elif score.failure is not None:
                bad += 1
        out.metrics[metric] = _mean(values, seed)
        if bad:
            out.failed[metric] = bad
    answered = [s for s in samples if not failed(s)]
    out.errors = len(samples) - len(answered)
    out.abstention = _mean([1.0 if abstention(s.answer) else 0.0 for s in answered], seed)
    if condition.kind == "counterfactual":
        follows: list[float] = []
        flags: list[float] = []
        for sample in samples:
            score = evaluation.get(sample.id, COUNTERFACTUAL_MEASURE)
            details = score.details if score is not None and score.value is not None else None
            if isinstance(details, dict):
                if isinstance(details.get("follows_wrong_fact"), bool):
                    follows.append(1.0 if details["follows_wrong_fact"] else 0.0)
                if isinstance(details.get("flags_conflict"), bool):
                    flags.append(1.0 if details["flags_conflict"] else 0.0)
        out.follows_wrong = _mean(follows, seed)
        out.flags_conflict = _mean(flags, seed)
    return out
