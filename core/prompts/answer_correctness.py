"""Template of answer correctness: ``answer_correctness.classify``.

Answer correctness compares the answer's claims with the reference, as in the RAGAS
documentation ("Answer Correctness", docs.ragas.io): claims the reference supports are true
positives, claims it does not are false positives, and reference facts the answer misses are
false negatives; the metric is their F1. The answer's claims come from the shared
``answer.analyze`` call, so this task only classifies — one call per sample.
"""

from __future__ import annotations

from . import register
from .base import PromptTemplate, Reply
from .budget import restating, summed

__all__ = ["ANSWER_CORRECTNESS_CLASSIFY", "ClaimClassification"]


class ClaimClassification(Reply):
    """Reply of ``answer_correctness.classify``: ``tp`` claims the reference supports, ``fp``
    claims it does not support or contradicts, ``fn`` reference facts no claim covers."""

    tp: list[str]
    fp: list[str]
    fn: list[str]


ANSWER_CORRECTNESS_CLASSIFY = register(
    PromptTemplate(
        id="answer_correctness.classify",
        version="2",
        description="Answer claims vs reference: true positives, false positives, missed facts.",
        system=(
            "You grade an answer's claims against a reference answer, taken as the truth, by "
            "meaning, not wording."
        ),
        user="""\
$question

Claims from an answer to the question:
$claims

$reference

Sort the facts:
- "tp": claims the reference supports (copy each claim's text);
- "fp": claims the reference does not support or contradicts (copy each claim's text);
- "fn": reference facts no claim covers (one short standalone sentence each).
Every claim goes in exactly one of "tp" and "fp".""",
        schema=ClaimClassification,
        # tp and fp copy the claims; fn restates what the reference says and no claim covers
        budget=summed(restating("claims"), restating("reference")),
    )
)
