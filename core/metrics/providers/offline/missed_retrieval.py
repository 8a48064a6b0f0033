"""``missed_retrieval:offline``: did a turn that retrieved nothing state facts nobody gave it?

A lexical rule, with no model: what the conversation holds is every word of the turns before
the answer (the question, earlier user and assistant turns, tool results) and of every context
an earlier turn retrieved. The answer needed documents (1.0) when it states

* a name or a number (`ragbridge.core.text.words.salient`) the conversation does not hold, or
* at least `MIN_NEW_TERMS` content terms (`ragbridge.core.text.words.terms`) the conversation
  does not hold, making at least `NEW_SHARE` of the answer's terms;

else 0.0. Courtesy words ("thanks", "glad", "help") are no facts and never count (`CHAT_WORDS`),
and questions the answer asks back are left out. What it cannot see: an answer that declines
("I don't know") to a question that needed a search states nothing new and scores 0.0; the judge
(``missed_retrieval``'s default provider) asks whether the question needed documents as well.
"""

from __future__ import annotations

from typing import Any

from ....registry import register_provider
from ....results.evaluation import Score
from ....sample import Sample
from ....text.quantities import canonical
from ....text.words import numbers, plain, salient, sentences, terms, words
from ...base import Metric, MetricContext

__all__ = ["CHAT_WORDS", "MIN_NEW_TERMS", "NEW_SHARE", "new_material", "score_missed_retrieval"]

MIN_NEW_TERMS = 4
"""New content terms an answer must state, besides names and numbers, to count as facts: a
short courteous reply ("Sure, happy to explain more") adds a word or two of its own."""

NEW_SHARE = 0.5
"""Share of the answer's terms that must be new: a reply that mostly restates the conversation
("So part-timers get the same 16 weeks") holds no new material however long it is."""

CHAT_WORDS = frozenset(
    """thank thanks welcome glad happy help helped helps pleasure sure great good nice hello hi
    hey bye goodbye sorry please okay ok anything else let know question questions hope i'm
    i'd i'll i've you're that's it's here's""".split()  # noqa: SIM905 - a word list reads better as prose
)
"""Words of courtesy: no fact, whatever the conversation held before."""

_CHAT_TERMS = frozenset(t for w in CHAT_WORDS for t in terms(w))


def _held(sample: Sample) -> str:
    """Every text of the conversation before the answer, the question last."""
    parts: list[str] = []
    for turn in sample.history or []:
        parts.append(turn.content or "")
        parts.extend(c.text for c in turn.contexts)
    parts.append(sample.question)
    return "\n".join(parts)


def new_material(sample: Sample) -> dict[str, Any]:
    """The answer's names/numbers and content terms the conversation does not hold, and the
    share of its terms that are new (questions asked back and courtesy words left out)."""
    stated = " ".join(s for s in sentences(sample.answer or "") if not s.rstrip().endswith("?"))
    held = _held(sample)
    held_words = {plain(w) for w in words(canonical(held))}
    held_numbers = numbers(held)
    names = sorted(
        t for t in salient(stated) - CHAT_WORDS if t not in held_words and t not in held_numbers
    )
    own = terms(stated) - _CHAT_TERMS
    new = sorted(own - terms(held))
    share = len(new) / len(own) if own else 0.0
    return {"new_names_numbers": names, "new_terms": new, "new_share": round(share, 4)}


_HOW = (
    "lexical: names, numbers and content words of the answer that no earlier turn, retrieved "
    "context or the question holds"
)


@register_provider(
    "missed_retrieval",
    "offline",
    how=_HOW,
    reads=["question", "answer", "contexts.text"],
)
async def score_missed_retrieval(metric: Metric, sample: Sample, ctx: MetricContext) -> Score:
    """1.0 when the answer of a turn that retrieved nothing states new material (module doc)."""
    found = new_material(sample)
    names, new = found["new_names_numbers"], found["new_terms"]
    missed = bool(names) or (len(new) >= MIN_NEW_TERMS and found["new_share"] >= NEW_SHARE)
    details = {"retrieved": 0, **found, "min_new_terms": MIN_NEW_TERMS, "new_share_min": NEW_SHARE}
    if not missed:
        reason = "this turn retrieved nothing and its answer states nothing the conversation lacks"
    elif names:
        shown = ", ".join(names[:5])
        reason = (
            f"this turn retrieved nothing, yet the answer names {shown}, which the "
            "conversation does not hold"
        )
    else:
        reason = (
            f"this turn retrieved nothing, yet {len(new)} of the answer's terms are new to the "
            "conversation"
        )
    return Score(value=1.0 if missed else 0.0, reason=reason, details=details)
