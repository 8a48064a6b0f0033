"""How far each claim of an answer is supported, graded, and how the claims make the answer's value.

`faithfulness:offline` (`.faithfulness`) first decides each claim: supported or not (the
short-answer model, or the long answers' three checks). This module grades that decision, so
that two unsupported answers are not tied at 0 and two supported ones not at 1, without ever
moving a claim across the verdict's boundary of 0.5:

* **Words no context holds** (`unexplained`): a content word the contexts lack, a first-person
  word ("I", "my") they lack, and, at a quarter of the weight (`FUNCTION_WORD_WEIGHT`), any
  other function word they lack ("would", "not", "you", "we"). Each one multiplies the claim's
  distance from its side's far end by `UNEXPLAINED_FACTOR`: a supported claim moves toward
  0.5, an unsupported one toward 0 (`shrink`). A claim is a paraphrase when one word differs
  and a different statement when many do; counting them, not their share, is what tells the
  two apart, because copying more of a context around an invented detail does not make the
  detail any better supported. Function words count because they carry who speaks, negation
  and modality, which the content words do not; a quarter, because most of them only rephrase.
* **The speaker** (`speaks_for_itself`): a sentence in the first person singular ("I love
  dogs", "I have never been skiing") states something about whoever answers. Unless the
  contexts themselves speak in the first person, nothing in them supports it: the claim is
  unsupported, whatever words it shares with them. "We" is not counted here: an assistant says
  "we offer a 30-day refund" for the organisation whose documents are its contexts.
* **Discourse markers** (`unopened`): "Well, ...", "Oh yes, ...", "Yeah, ..." open a reply
  without stating anything; they are dropped before a sentence is checked, so they neither
  count as words the contexts lack nor dilute the sentence's coverage, and a sentence made of
  nothing else ("Sure!", `says_nothing`) is no claim, as a bare "yes" is not.

The answer's value (`answer_support`): a short answer (one or two sentences) is as supported as
its weakest sentence; a long answer's verdict is its mean claim support (above 0.5: faithful),
and within that verdict it is graded by its weakest claim, as a claim is by its unexplained
words.

All of it was chosen on public dev data only, by cross-validation where there was a choice
(``python benchmarks/offline_begin.py``, BEGIN's dialogue turns, grouped by knowledge snippet),
and checked not to lower the short-answer (``benchmarks/offline_quality.py``) and FaithBench
(``benchmarks/offline_calibration.py``) figures; the numbers are in those scripts' output.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING

from ....text.words import STOPWORDS, terms, words

if TYPE_CHECKING:  # matching reads `unopened` from here
    from .matching import TermIndex

__all__ = [
    "DISCOURSE_MARKERS",
    "FUNCTION_WORD_WEIGHT",
    "SPEAKER_WORDS",
    "UNEXPLAINED_FACTOR",
    "answer_support",
    "claim_support",
    "says_nothing",
    "shrink",
    "source_words",
    "speaks_for_itself",
    "unexplained",
    "unopened",
]

UNEXPLAINED_FACTOR = 0.5
"""What one word no context holds leaves of a claim's distance from its side's far end: one
unexplained word halves it. Cross-validated on BEGIN dev with 0.4-0.7 alike (within 0.001 of
AUROC); 0.5 also kept the FaithBench default verdict's balanced accuracy highest."""

FUNCTION_WORD_WEIGHT = 0.25
"""How much a function word (`STOPWORDS`) the contexts lack counts, against 1 for a content
word. 0 lost 0.02 of BEGIN dev AUROC and 0.013 of short-answer AUROC; 0.25, 0.5 and 1 were
alike there, and the smallest moves a faithful paraphrase least ("each year" for "per year":
0.92, not 1)."""

SPEAKER_WORDS = frozenset({"i", "me", "my", "mine", "myself", "i'm", "i've", "i'd", "i'll"})
"""The first person singular: a claim holding one speaks about whoever answers."""

ANSWER_WORDS = frozenset({"yes", "no"})
"""Words that answer a question without stating a checkable fact (never counted)."""

_MARKERS = (
    "yes", "yeah", "yea", "yep", "nope", "ok", "okay", "well", "oh", "ah", "ahh", "wow", "hmm",
    "um", "uh", "hey", "haha", "lol",
)  # fmt: skip
_PUNCTUATED = ("no", "sure")  # "No one knows", "Sure enough": markers only before a comma
DISCOURSE_MARKERS = frozenset(_MARKERS + _PUNCTUATED)
"""Words that open a reply without stating anything ("Well, ...", "Oh yes, ...")."""

_OPENING = re.compile(
    r"^(?:(?:(?:" + "|".join(_MARKERS) + r")(?:\s*[,.!?;:]+\s*|\s+)"
    r"|(?:" + "|".join(_PUNCTUATED) + r")\s*[,.!?;:]+\s*))+",
    re.IGNORECASE,
)


def unopened(sentence: str) -> str:
    """``sentence`` without the discourse markers that open it ("Well, it opened in 1889." ->
    "It opened in 1889."); unchanged when nothing else would be left ("Yes.")."""
    stripped = _OPENING.sub("", sentence.strip(), count=1).strip()
    if not any(ch.isalnum() for ch in stripped):
        return sentence
    return stripped[:1].upper() + stripped[1:]


def says_nothing(sentence: str) -> bool:
    """Whether ``sentence`` is only discourse markers ("Yes.", "Sure!", "Oh wow."): no claim."""
    return all(w in DISCOURSE_MARKERS for w in words(sentence))


@functools.lru_cache(maxsize=1 << 14)
def _words_of(text: str) -> frozenset[str]:
    return frozenset(words(text))


def source_words(contexts: Sequence[str]) -> frozenset[str]:
    """Every word of the contexts (function words included), lower-cased. Memoised per text,
    as `terms` is: faithfulness and hallucination read the same contexts."""
    return frozenset().union(*(_words_of(text) for text in contexts))


def unexplained(
    claim: str, index: TermIndex, known: AbstractSet[str], speakers: AbstractSet[str]
) -> tuple[tuple[str, ...], float]:
    """(the claim's words no context holds, their weight): its content `terms` missing from
    ``index`` weigh 1, its first-person words (`SPEAKER_WORDS`) missing from ``speakers`` (the
    words of the documents: a user's "I" is not the answerer's) 1, and its other function
    words missing from ``known`` `FUNCTION_WORD_WEIGHT` each."""
    content = {t for t in terms(claim) - ANSWER_WORDS - SPEAKER_WORDS if t not in index.pool}
    function = {
        w
        for w in words(claim)
        if (w not in speakers if w in SPEAKER_WORDS else w in STOPWORDS and w not in known)
        and w not in ANSWER_WORDS
    }
    weight = len(content) + math.fsum(
        1.0 if w in SPEAKER_WORDS else FUNCTION_WORD_WEIGHT for w in function
    )
    return tuple(sorted(content | function)), weight


def speaks_for_itself(claim: str, known: AbstractSet[str]) -> bool:
    """Whether ``claim`` is in the first person singular and the contexts are not."""
    return any(w in SPEAKER_WORDS and w not in known for w in words(claim))


def shrink(support: float, factor: float) -> float:
    """``support`` moved toward the far end of its side of 0.5 by ``factor`` (1 leaves it):
    a supported value (above 0.5) toward 0.5, any other toward 0. Never crosses 0.5."""
    if support > 0.5:
        return 0.5 + (support - 0.5) * factor
    return support * factor


def claim_support(base: float, weight: float) -> float:
    """A claim's support: its decision's ``base`` (above 0.5 when supported) shrunk by
    `UNEXPLAINED_FACTOR` once per unit of unexplained ``weight``."""
    return shrink(base, UNEXPLAINED_FACTOR**weight)


def answer_support(supports: Sequence[float], *, short: bool) -> float:
    """The answer's value from its claims' supports (see the module doc)."""
    weakest = min(supports)
    if short:
        return weakest
    mean = math.fsum(supports) / len(supports)
    return shrink(mean, min(1.0, 2.0 * weakest))
