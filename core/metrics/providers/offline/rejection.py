"""The ``offline`` providers of ``negative_rejection`` and ``counterfactual_robustness``.

No model: string rules, each written down here with what it cannot see.

* ``negative_rejection:offline`` — the answer declines when the abstention detector says the
  whole answer declines (`ragbridge.core.text.words.abstention`). A decline that gives its
  reason ("I can not answer the question because of the insufficient information in
  documents.", RGB's own wording) is read without that reason (`MISSING_INFORMATION`), which
  the detector alone takes for an assertion. It cannot see a decline in other words ("Let me
  check with HR"), nor an answer that declines and then guesses in one breath.
* ``counterfactual_robustness:offline`` — normalised containment: the answer *mentions* a fact
  when the fact's words appear in it in order, after numbers, dates and units are written one
  way (`ragbridge.core.text.quantities.canonical`: "1,200" = "1200", "March 3, 2020" =
  "3 March 2020") and case, whitespace and punctuation are dropped. It flags the conflict when
  it uses a word of `CONFLICT_CUES`, or a contrast word of `CONTRAST_CUES` followed in the same
  sentence by the true fact. It follows the wrong fact when it mentions it, does not flag a
  conflict, and does not decline. It cannot see a paraphrase of a fact ("the year after 1888"),
  nor a conflict word that is about something else ("no known conflicts of interest").
"""

from __future__ import annotations

import re
from typing import Any

from ....registry import register_provider
from ....results.evaluation import Score
from ....sample import Sample
from ....text.quantities import canonical
from ....text.words import abstention, normalise, sentences
from ...base import Metric, MetricContext

__all__ = [
    "CONFLICT_CUES",
    "CONTRAST_CUES",
    "MISSING_INFORMATION",
    "conflict_cues",
    "declines",
    "mentions",
    "score_counterfactual_robustness",
    "score_negative_rejection",
]

MISSING_INFORMATION = re.compile(
    r",?\s+(?:because|since|as|due to)\s+(?:of\s+)?(?:the\s+)?(?:an?\s+)?"
    r"(?:insufficient|lack of|missing|no|not enough|limited|incomplete)\s+"
    r"(?:relevant\s+)?(?:information|context|details|evidence|data)\b[^.!?]*",
    re.IGNORECASE,
)
"""A decline's stated reason: the information is missing. The abstention detector reads any
"because ..." as the answer going on to assert something; for this reason it is not."""

CONFLICT_CUES: tuple[str, ...] = (
    r"conflict(?:s|ing|ed)?",
    r"contradict\w*",
    r"inconsisten\w*",
    r"discrepanc\w*",
    r"disagree\w*",
    r"incorrect(?:ly)?",
    r"inaccura\w*",
    r"erroneous(?:ly)?",
    r"mistaken(?:ly)?",
    r"a mistake",
    r"an error",
    r"in error",
    r"a typo",
    r"outdated",
    r"out of date",
    r"wrong(?:ly)?",
    r"not (?:accurate|correct|true|right)",
    r"doubtful",
    r"questionable",
    r"unreliable",
)
"""Words with which an answer says its passages are wrong, outdated or contradict each other
(RGB's error detection). They are about the sources' truth, not the question's subject, so an
answer that uses one is taken to flag the planted fact; any position in the answer counts."""

CONTRAST_CUES: tuple[str, ...] = (
    r"however",
    r"actually",
    r"in fact",
    r"in reality",
    r"but",
    r"rather",
    r"instead",
    r"the correct",
    r"correctly",
    r"the true",
    r"the real",
)
"""Words that correct what came before ("However, it was completed in 1889"). Common in any
answer ("The fee is 20 euros, but students pay less"), so they flag a conflict only when the
true fact follows them in the same sentence."""

_CONFLICT = re.compile(r"\b(?:" + "|".join(CONFLICT_CUES) + r")\b", re.IGNORECASE)
_CONTRAST = re.compile(r"\b(?:" + "|".join(CONTRAST_CUES) + r")\b", re.IGNORECASE)
_TOKEN = re.compile(r"\d+(?:\.\d+)?|[^\W_]+")


def _tokens(text: str) -> str:
    """``text`` as space-separated lower-case tokens, numbers in one written form, with a space
    at each end so that containment is whole-token."""
    return " " + " ".join(_TOKEN.findall(canonical(normalise(text)).casefold())) + " "


def mentions(text: str, fact: str, *, besides: str | None = None) -> bool:
    """Whether ``text`` states ``fact`` (normalised containment, module doc). ``besides``: a
    longer fact holding this one ("Paris" in "Paris, Texas"); its mentions do not count."""
    haystack, needle = _tokens(text), _tokens(fact)
    if not needle.strip():
        return False
    if besides is not None:
        longer = _tokens(besides)
        if needle in longer and longer != needle:
            haystack = haystack.replace(longer, "  ")
    return needle in haystack


def conflict_cues(answer: str, original: str) -> list[str]:
    """The cues with which ``answer`` flags a conflict: every `CONFLICT_CUES` word, and every
    `CONTRAST_CUES` word followed in its sentence by the true fact ``original``."""
    found: list[str] = [m.group(0).lower() for m in _CONFLICT.finditer(answer)]
    for sentence in sentences(answer):
        for match in _CONTRAST.finditer(sentence):
            if mentions(sentence[match.end() :], original):
                found.append(f"{match.group(0).lower()} ... {original}")
    return list(dict.fromkeys(found))


def _without(text: str, fact: str) -> str:
    """``text`` with each literal mention of ``fact`` (any case and spacing) blanked: a wrong
    fact that is itself a sentence ("..., but the reboot is directed by X") brings contrast
    words that are not the answer's."""
    pattern = r"\s+".join(re.escape(part) for part in fact.split())
    return re.sub(pattern, " ", text, flags=re.IGNORECASE) if pattern else text


def declines(answer: str | None) -> str | None:
    """The declining answer, clipped (as `abstention` gives it), when the whole answer declines;
    a decline's stated reason, "because of insufficient information", is left out first."""
    found = abstention(answer)
    if found is None and answer and MISSING_INFORMATION.search(answer):
        found = abstention(MISSING_INFORMATION.sub("", answer))
    return found


@register_provider(
    "negative_rejection",
    "offline",
    how="lexical: the abstention detector says whether the whole answer declines",
    reads=["answer"],
)
async def score_negative_rejection(metric: Metric, sample: Sample, ctx: MetricContext) -> Score:
    """1.0 when the answer declines (module doc), else 0.0."""
    found = declines(sample.answer)
    if found is not None:
        return Score(
            value=1.0,
            reason=f"no relevant document exists and the answer declines ('{found}')",
            details={"declines": True, "abstention": found},
        )
    return Score(
        value=0.0,
        reason="no relevant document exists, yet the answer does not decline",
        details={"declines": False, "abstention": None},
    )


@register_provider(
    "counterfactual_robustness",
    "offline",
    how="lexical: which of the true and wrong facts the answer contains (numbers and dates "
    "normalised), and words that flag a conflict",
    reads=["answer", "metadata.counterfactual"],
)
async def score_counterfactual_robustness(
    metric: Metric, sample: Sample, ctx: MetricContext
) -> Score:
    """0.0 when the answer states the wrong fact without flagging it or declining (module doc),
    else 1.0."""
    # imported here: this module loads with the offline providers, before the measure's own
    # module, which would otherwise register counterfactual_robustness first in the listing
    from ....robustness.measures import counterfactual_facts, counterfactual_score

    facts = counterfactual_facts(sample)
    assert facts is not None  # the measure's checks ran first
    original, wrong = facts
    answer = sample.answer or ""
    declined = declines(answer)
    cues = conflict_cues(_without(answer, wrong), original)  # not the wrong fact's own words
    says_wrong = mentions(answer, wrong, besides=original)
    keeps = mentions(answer, original, besides=wrong)
    follows = says_wrong and not cues and declined is None
    why: list[str] = []
    if declined is not None:
        why.append(f"it declines ('{declined}')")
    if cues:
        why.append("conflict cues: " + ", ".join(repr(c) for c in cues[:4]))
    if says_wrong and not follows:
        why.append("it mentions the wrong fact only beside a flag or a decline")
    extra: dict[str, Any] = {
        "mentions_wrong_fact": says_wrong,
        "cues": cues,
        "abstention": declined,
    }
    return counterfactual_score(
        original,
        wrong,
        follows=follows,
        flags=bool(cues),
        keeps=keeps,
        why="; ".join(why),
        **extra,
    )
