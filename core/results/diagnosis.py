"""Where a RAG pipeline fails: retrieval × generation quadrants, per sample.

An average faithfulness of 0.8 does not say whether to fix the retriever or the prompt. Putting
each sample in one of four quadrants does: good or bad retrieval (from a ranking measure against
labels, or context recall against the reference) crossed with good or bad generation (from
faithfulness, correctness or hallucination). The dangerous quadrant is *bad retrieval, good-looking
answer*: the generation measures pass, so nobody looks, yet the retriever missed what the question
needed — the answer rests on the wrong passages or on the model's memory. Those rows come first.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from enum import Enum

from pydantic import BaseModel, ConfigDict

from .evaluation import Evaluation, Score

__all__ = ["Diagnosis", "Quadrant", "SampleDiagnosis", "diagnose"]


class Quadrant(str, Enum):
    BAD_RETRIEVAL_GOOD_ANSWER = "bad retrieval, good-looking answer"
    BAD_RETRIEVAL_BAD_ANSWER = "bad retrieval, bad answer"
    GOOD_RETRIEVAL_BAD_ANSWER = "good retrieval, bad answer"
    GOOD_RETRIEVAL_GOOD_ANSWER = "good retrieval, good answer"
    UNKNOWN = "not diagnosed"


_ORDER = list(Quadrant)

# Preference order when the caller names no measure: labelled ranking measures first (they do
# not depend on a judge), then judge/embedding-based ones.
_RETRIEVAL = (r"recall@\d+", r"hit_rate@\d+", r"ndcg@\d+", r"context_recall", r"mrr", r"map")
_GENERATION = (r"answer_correctness", r"correctness", r"faithfulness", r"hallucination")
_LOWER_IS_BETTER = {"hallucination"}


class SampleDiagnosis(BaseModel):
    model_config = ConfigDict(frozen=True)

    sample_id: str
    quadrant: Quadrant
    retrieval: float | None
    generation: float | None
    note: str | None = None


class Diagnosis(BaseModel):
    """Every sample's quadrant, the dangerous ones first, and the counts."""

    model_config = ConfigDict(frozen=True)

    retrieval_metric: str
    generation_metric: str
    retrieval_threshold: float
    generation_threshold: float
    rows: list[SampleDiagnosis]

    @property
    def counts(self) -> dict[str, int]:
        out = {q.value: 0 for q in Quadrant}
        for row in self.rows:
            out[row.quadrant.value] += 1
        return out

    def in_quadrant(self, quadrant: Quadrant) -> list[SampleDiagnosis]:
        return [r for r in self.rows if r.quadrant is quadrant]


def _pick(metrics: Sequence[str], patterns: Sequence[str], role: str) -> str:
    for pattern in patterns:
        for name in metrics:
            if re.fullmatch(pattern, name):
                return name
    raise ValueError(
        f"no {role} measure in the evaluation (has: {', '.join(metrics) or 'none'}); "
        f"score one of {', '.join(p.replace(chr(92) + 'd+', 'K') for p in patterns)} "
        f"or name it with {role}=..."
    )


def diagnose(
    evaluation: Evaluation,
    *,
    retrieval: str | None = None,
    generation: str | None = None,
    retrieval_threshold: float = 0.5,
    generation_threshold: float = 0.5,
) -> Diagnosis:
    """Put every sample of ``evaluation`` in a retrieval × generation quadrant.

    Retrieval is good when its measure is ≥ ``retrieval_threshold``; generation is good when its
    measure is ≥ ``generation_threshold`` (≤ for hallucination, where lower is better). A sample
    missing either value (a no-answer query, a judge failure) is ``not diagnosed``, with why.
    """
    for name, t in (("retrieval", retrieval_threshold), ("generation", generation_threshold)):
        if not 0.0 <= t <= 1.0:
            raise ValueError(f"{name}_threshold must lie within [0, 1], got {t}")
    metrics = evaluation.metrics
    r_metric = retrieval or _pick(metrics, _RETRIEVAL, "retrieval")
    g_metric = generation or _pick(metrics, _GENERATION, "generation")
    for name in (r_metric, g_metric):
        if name not in metrics:
            raise ValueError(
                f"measure {name!r} is not in the evaluation (has: {', '.join(metrics)})"
            )
    lower_better = g_metric.split(":")[0] in _LOWER_IS_BETTER
    rows = []
    for sid in evaluation.sample_ids:
        r_score = evaluation.get(sid, r_metric)
        g_score = evaluation.get(sid, g_metric)
        r = r_score.value if r_score is not None else None
        g = g_score.value if g_score is not None else None
        if r is None or g is None:
            missing = [
                f"{name}: {_why(score)}"
                for name, score, v in ((r_metric, r_score, r), (g_metric, g_score, g))
                if v is None
            ]
            rows.append(
                SampleDiagnosis(
                    sample_id=sid,
                    quadrant=Quadrant.UNKNOWN,
                    retrieval=r,
                    generation=g,
                    note="; ".join(missing),
                )
            )
            continue
        good_r = r >= retrieval_threshold
        good_g = g <= generation_threshold if lower_better else g >= generation_threshold
        quadrant = {
            (False, True): Quadrant.BAD_RETRIEVAL_GOOD_ANSWER,
            (False, False): Quadrant.BAD_RETRIEVAL_BAD_ANSWER,
            (True, False): Quadrant.GOOD_RETRIEVAL_BAD_ANSWER,
            (True, True): Quadrant.GOOD_RETRIEVAL_GOOD_ANSWER,
        }[(good_r, good_g)]
        rows.append(SampleDiagnosis(sample_id=sid, quadrant=quadrant, retrieval=r, generation=g))
    # Dangerous first; within a quadrant, the most confident-looking answers first.
    rows.sort(
        key=lambda d: (
            _ORDER.index(d.quadrant),
            -(d.generation or 0.0) if not lower_better else (d.generation or 0.0),
        )
    )
    return Diagnosis(
        retrieval_metric=r_metric,
        generation_metric=g_metric,
        retrieval_threshold=retrieval_threshold,
        generation_threshold=generation_threshold,
        rows=rows,
    )


def _why(score: Score | None) -> str:
    if score is None:
        return "not scored"
    if score.failure is not None:
        return f"failed ({score.failure.kind.value})"
    return f"skipped ({score.reason})"
