"""Template of answer correctness: ``answer_correctness.classify``.

Answer correctness compares the answer's claims with the reference, as in the RAGAS
documentation ("Answer Correctness", docs.ragas.io): claims the reference supports are true
positives, claims it does not are false positives, and reference facts the answer misses are
false negatives; the metric is their F1. The answer's claims come from the shared
``answer.analyze`` call, so this task only classifies — one call per sample.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from . import register
from .base import PromptTemplate

__all__ = ["ANSWER_CORRECTNESS_CLASSIFY", "ClaimClassification"]


class ClaimClassification(BaseModel):
    """Reply of ``answer_correctness.classify``."""

    tp: list[str] = Field(description="Claims of the answer that the reference supports.")
    fp: list[str] = Field(
        description="Claims of the answer that the reference does not support or contradicts."
    )
    fn: list[str] = Field(
        description="Facts of the reference that none of the answer's claims covers."
    )


ANSWER_CORRECTNESS_CLASSIFY = register(
    PromptTemplate(
        id="answer_correctness.classify",
        version="1",
        description="Answer claims vs reference: true positives, false positives, missed facts.",
        system=(
            "You grade an answer against a reference answer, fact by fact. You judge by "
            "meaning, not wording, and you treat the reference as the ground truth."
        ),
        user="""\
Compare the numbered claims, taken from an answer to the question, with the reference answer.

$question

Claims from the answer:
$claims

$reference

Sort the facts into three lists:
- "tp": claims from the answer that the reference supports (copy each claim's text);
- "fp": claims from the answer that the reference does not support, or contradicts (copy each \
claim's text);
- "fn": facts stated in the reference that none of the claims covers (one short standalone \
sentence each).
Every claim belongs to exactly one of "tp" and "fp".""",
        schema=ClaimClassification,
    )
)
