"""Small, dependency-free text handling for the offline metrics.

Why not spaCy or NLTK: the core stays pydantic + numpy, and the offline metrics need only three
things, each deliberately simple and predictable:

* `sentences` — split prose into sentences (the offline "claims"), sparing abbreviations,
  initials and decimals;
* `salient` — the tokens an embedding similarity is blind to but a faithful answer must get
  right: numbers (with units and percentages), years and dates, and capitalised names;
* `content_words` — lower-cased words minus stop words, for token-overlap measures.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = [
    "STOPWORDS",
    "content_words",
    "normalise",
    "numbers",
    "salient",
    "sentences",
    "words",
]

_ABBREVIATIONS = {
    "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "vs", "etc", "e.g", "i.e", "inc", "ltd",
    "co", "corp", "no", "fig", "al", "approx", "dept", "est", "gen", "gov", "jan", "feb", "mar",
    "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec", "u.s", "u.k", "mt", "ft",
}  # fmt: skip

STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further had
    has have having he her here hers herself him himself his how i if in into is it its itself just
    me more most my myself no nor not now of off on once only or other our ours ourselves out over
    own same she should so some such than that the their theirs them themselves then there these
    they this those through to too under until up very was we were what when where which while who
    whom why will with would you your yours yourself yourselves also may might must shall one two
    s t""".split()  # noqa: SIM905 - a word list reads better as prose
)

_SENTENCE_END = re.compile(r"([.!?]+[\"')\]]*)\s+")
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)?", re.UNICODE)
_NUMBER = re.compile(r"(?<![\w.])[-+]?\d[\d,]*(?:\.\d+)?\s*(?:%|percent\b)?", re.IGNORECASE)
_MONTHS = {
    "january", "february", "march", "april", "may", "june", "july", "august", "september",
    "october", "november", "december",
}  # fmt: skip
_NAME = re.compile(r"\b[A-Z][\w'’-]*(?:\s+(?:of|de|van|von|la|le|da|del)?\s*[A-Z][\w'’-]*)*")


def normalise(text: str) -> str:
    """NFKC, unified quotes and dashes, collapsed whitespace."""
    text = unicodedata.normalize("NFKC", text)
    text = text.replace("’", "'").replace("‘", "'").replace("“", '"').replace("”", '"')
    text = text.replace("–", "-").replace("—", "-")
    return re.sub(r"\s+", " ", text).strip()


def sentences(text: str) -> list[str]:
    """Split prose into sentences. Line breaks always end a sentence (lists, bullet points)."""
    out: list[str] = []
    for block in re.split(r"\n\s*", text):
        block = normalise(block)
        if not block:
            continue
        start = 0
        for match in _SENTENCE_END.finditer(block):
            end = match.end(1)
            candidate = block[start:end]
            last_word = candidate.rstrip(".!?\"')]").rsplit(" ", 1)[-1].lower()
            follower = block[match.end() : match.end() + 1]
            if (
                last_word in _ABBREVIATIONS
                or (len(last_word) == 1 and last_word.isalpha())  # an initial: "J. Smith"
                or (follower and follower.islower())  # "e.g. this" mid-sentence
            ):
                continue
            out.append(candidate.strip())
            start = match.end()
        tail = block[start:].strip()
        if tail:
            out.append(tail)
    return [s for s in out if any(ch.isalnum() for ch in s)]


def words(text: str) -> list[str]:
    """Lower-cased word tokens (letters and digits; inner apostrophes kept)."""
    return [w.lower().replace("’", "'") for w in _WORD.findall(text)]


def content_words(text: str) -> list[str]:
    """`words` minus stop words: what token-overlap measures count."""
    return [w for w in words(text) if w not in STOPWORDS]


def _number_key(raw: str) -> str:
    value = raw.strip().lower().replace(",", "").replace(" ", "")
    value = value.replace("percent", "%")
    if value.endswith(".0"):
        value = value[:-2]
    return value.lstrip("+")


def salient(text: str) -> set[str]:
    """Numbers, month names and capitalised names in ``text``, normalised for comparison.

    A capitalised word opening a sentence counts as a name only when a second capitalised word
    follows it ("New York is ...", not "Solar panels ..."): sentence case is not a name.
    """
    found: set[str] = set()
    clean = normalise(text)
    for match in _NUMBER.finditer(clean):
        found.add(_number_key(match.group(0)))
    found.update(w for w in words(clean) if w in _MONTHS)
    for sentence in sentences(clean):
        for match in _NAME.finditer(sentence):
            parts = [p for p in words(match.group(0)) if p not in STOPWORDS and not p.isdigit()]
            if match.start() == 0 and len(parts) < 2:
                continue
            found.update(parts)
    return found


def numbers(text: str) -> set[str]:
    """Just the numbers of `salient` (to check a claim's numbers against a context's)."""
    return {_number_key(m.group(0)) for m in _NUMBER.finditer(normalise(text))}
