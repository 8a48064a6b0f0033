"""From a judge's verdict to a criterion's Score: one place for the value, reason and details,
whether the verdict came from a call of its own or from a batch.

The value is always on [0, 1]: ``(raw - low) / (high - low)`` for a scored criterion (``raw``
the integer, or G-Eval's probability-weighted mean when the reply carried log-probabilities)
and a rubric (``raw`` the level), 1.0 or 0.0 for an aspect's majority verdict.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from ..judging.judge import TokenLogprob
from ..results.evaluation import Score, Usage
from .spec import Aspect, Criterion, CriterionSpec, Rubric
from .steps import Steps
from .weighting import weighted_score

__all__ = [
    "aspect_score",
    "criterion_score",
    "majority",
    "normalised",
    "rubric_score",
    "spec_version",
]


def normalised(raw: float, scale: tuple[int, int]) -> float:
    """``raw`` on ``scale`` mapped onto [0, 1] (clamped: a weighted mean stays in the scale)."""
    low, high = scale
    return min(1.0, max(0.0, (raw - low) / (high - low)))


def spec_version(spec: CriterionSpec) -> str:
    """12 hex digits naming what an aspect or rubric asks (its definition or its levels)."""
    payload: dict[str, Any] = {"kind": spec.kind, "reads": list(spec.reads)}
    if isinstance(spec, Aspect):
        payload.update(definition=spec.definition, samples=spec.samples)
    elif isinstance(spec, Rubric):
        payload.update(rubrics=[[k, v] for k, v in spec.rubrics.items()])
    else:
        payload.update(criteria=spec.criteria, scale=list(spec.scale))
    text = json.dumps(payload, ensure_ascii=False, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def criterion_score(
    spec: Criterion,
    *,
    score: int,
    reason: str,
    steps: Steps,
    text: str | None,
    logprobs: Sequence[TokenLogprob] | None,
    field: str,
    usage: Usage,
    prompt_version: str,
    extra: dict[str, Any] | None = None,
) -> Score:
    """The Score of a scored criterion: weighted by log-probabilities where the reply has them
    at the score's position (`weighted_score`), else the integer; ``details["weighting"]``
    says which."""
    weighted = weighted_score(text or "", logprobs, field=field, scale=spec.scale)
    raw: float | int = score if weighted is None else round(weighted[0], 6)
    details: dict[str, Any] = {
        "kind": spec.kind,
        "raw": raw,
        "score": score,
        "scale": list(spec.scale),
        "weighting": "integer" if weighted is None else weighted[1],
        "steps": list(steps.steps),
        "steps_source": steps.source,
        "steps_version": steps.version,
        **(extra or {}),
    }
    return Score(
        value=normalised(raw, spec.scale),
        reason=reason,
        details=details,
        usage=usage,
        prompt_version=prompt_version,
    )


def majority(votes: Sequence[bool], *, higher_is_better: bool) -> bool:
    """The majority verdict; a tie is the failing verdict (no when yes is good, else yes)."""
    yes = sum(1 for v in votes if v)
    if 2 * yes != len(votes):
        return 2 * yes > len(votes)
    return not higher_is_better


def aspect_score(
    spec: Aspect,
    votes: Sequence[tuple[bool, str]],
    *,
    usage: Usage,
    prompt_version: str,
    extra: dict[str, Any] | None = None,
) -> Score:
    """The Score of an aspect from its verdicts (one, or ``samples`` for self-consistency)."""
    verdicts = [v for v, _ in votes]
    verdict = majority(verdicts, higher_is_better=spec.higher_is_better)
    agreeing = [reason for v, reason in votes if v == verdict]
    details: dict[str, Any] = {
        "kind": spec.kind,
        "raw": int(verdict),
        "scale": [0, 1],
        "weighting": "integer",
        "verdict": verdict,
        "votes": verdicts,
        "vote_share": len(agreeing) / len(verdicts),
        "tie": 2 * sum(verdicts) == len(verdicts),
        **(extra or {}),
    }
    return Score(
        value=1.0 if verdict else 0.0,
        reason=agreeing[0] if agreeing else None,
        details=details,
        usage=usage,
        prompt_version=prompt_version,
    )


def rubric_score(
    spec: Rubric,
    *,
    level: int,
    reason: str,
    usage: Usage,
    prompt_version: str,
    extra: dict[str, Any] | None = None,
) -> Score:
    """The Score of a rubric from the level the judge chose."""
    details: dict[str, Any] = {
        "kind": spec.kind,
        "raw": level,
        "level": level,
        "scale": list(spec.scale),
        "weighting": "integer",
        "description": spec.rubrics[level],
        **(extra or {}),
    }
    return Score(
        value=normalised(level, spec.scale),
        reason=reason,
        details=details,
        usage=usage,
        prompt_version=prompt_version,
    )
