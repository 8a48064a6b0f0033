"""``noise_sensitivity:offline``: the three relations of noise sensitivity, decided lexically.

No model: the answer's claims are its sentences (`.matching.claims_of`: preambles and opening
discourse markers left out; a sentence of markers only is no claim), the reference's statements
its sentences. A text supports a statement (`lexical_support`) when it holds enough of the
statement's IDF-weighted vocabulary (`.matching.DEFAULT_COVERAGE`, as faithfulness's offline
coverage rule), every name and number of it, and the statement is not in the first person unless
the text is too (`.support.speaks_for_itself`); its graded support is then lowered by the words
the text lacks (`.support.claim_support`), which never crosses the 0.5 boundary. So:

* a context is relevant when it supports at least one sentence of the reference;
* a claim is incorrect when the reference does not support it;
* a claim is supported by each context that supports it;

and `ragbridge.core.metrics.noise_sensitivity.noise_value` makes the value from them, as for the
judge. What it cannot see: a paraphrase that shares few words with its source, and a claim that
reverses a context's words ("not" aside, the same terms): both read as the context's.
"""

from __future__ import annotations

from typing import Any

from ....registry import register_provider
from ....results.evaluation import Score
from ....sample import Sample
from ....text.quantities import canonical, lone_counts
from ....text.words import numbers, plain, salient, terms, words
from ...base import Metric, MetricContext
from ...noise_sensitivity import (
    ClaimFacts,
    NoiseSensitivity,
    no_claims,
    noise_reason,
    noise_value,
    with_ids,
)
from .matching import DEFAULT_COVERAGE, TermIndex, claims_of
from .support import (
    ANSWER_WORDS,
    claim_support,
    says_nothing,
    source_words,
    speaks_for_itself,
    unexplained,
)

__all__ = ["lexical_support", "score_noise_sensitivity", "statements_of"]


def statements_of(text: str) -> list[str]:
    """The sentences of ``text`` that state something (`claims_of`, bare markers dropped)."""
    found, _ = claims_of(text)
    return [s for s in found if s.strip() and not says_nothing(s)]


def lexical_support(statement: str, text: str) -> float:
    """How far ``text`` supports ``statement``, in [0, 1]; above 0.5 means it does (module doc)."""
    wanted = terms(statement) - ANSWER_WORDS
    if not wanted:
        return 0.0
    index = TermIndex([text])
    covered = index.coverage(wanted)
    held_words = {plain(w) for w in words(canonical(text))}
    held_numbers = numbers(text) | lone_counts(text)
    missing = any(t not in held_words and t not in held_numbers for t in salient(statement))
    known = source_words([text])
    supported = covered >= DEFAULT_COVERAGE and not missing
    supported = supported and not speaks_for_itself(statement, known)
    base = 1.0 if supported else 0.5 * covered
    _, weight = unexplained(statement, index, known, known)
    return claim_support(base, weight)


_HOW = (
    "lexical: answer and reference sentences; a text supports a sentence when it holds its "
    "weighted vocabulary and every name and number of it"
)


@register_provider(
    "noise_sensitivity",
    "offline",
    how=_HOW,
    reads=["question", "answer", "reference", "contexts.text", "contexts.id"],
)
async def score_noise_sensitivity(metric: Metric, sample: Sample, ctx: MetricContext) -> Score:
    """Noise sensitivity from lexical support (module doc); the mode is the metric's."""
    assert isinstance(metric, NoiseSensitivity)
    claims = statements_of(sample.answer or "")
    if not claims:
        return no_claims()
    reference = sample.reference or ""
    truths = statements_of(reference) or [reference]
    texts = [c.text for c in sample.contexts]
    relevant = [any(lexical_support(s, t) > 0.5 for s in truths) for t in texts]
    facts: list[ClaimFacts] = []
    grades: list[dict[str, Any]] = []
    for claim in claims:
        own = lexical_support(claim, reference)
        by = [lexical_support(claim, t) for t in texts]
        facts.append(
            ClaimFacts(claim, own > 0.5, tuple(j for j, s in enumerate(by, start=1) if s > 0.5))
        )
        grades.append({"reference": round(own, 4), "contexts": [round(s, 4) for s in by]})
    value, details = noise_value(metric.mode, facts, relevant)
    for row, grade in zip(details["claims"], grades, strict=True):
        row["support"] = grade
    return Score(
        value=value, reason=noise_reason(metric.mode, details), details=with_ids(sample, details)
    )
