"""Small, dependency-free text handling for the offline metrics.

Why not spaCy or NLTK: the core stays pydantic + numpy, and the offline metrics need only three
things, each deliberately simple and predictable:

* `sentences` — split prose into sentences (the offline "claims"), sparing abbreviations,
  initials and decimals;
* `salient` — the tokens an embedding similarity is blind to but a faithful answer must get
  right: numbers (with units and percentages), years and dates, and capitalised names;
* `content_words` — lower-cased words minus stop words, for token-overlap measures;
* `abstention` — whether a whole answer declines to answer ("I don't know.", "The context does
  not say."), so claim measures skip it instead of scoring a refusal as an unsupported claim.
"""

from __future__ import annotations

import functools
import re
import unicodedata

from .quantities import canonical

__all__ = [
    "STOPWORDS",
    "abstention",
    "content_words",
    "is_preamble",
    "normalise",
    "numbers",
    "plain",
    "salient",
    "sentences",
    "terms",
    "unframed",
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


@functools.lru_cache(maxsize=1 << 14)
def normalise(text: str) -> str:
    """NFKC, unified quotes and dashes, collapsed whitespace. Memoised (see `sentences`)."""
    text = unicodedata.normalize("NFKC", text)
    text = text.replace("’", "'").replace("‘", "'").replace("“", '"').replace("”", '"')
    text = text.replace("–", "-").replace("—", "-")
    return re.sub(r"\s+", " ", text).strip()


def sentences(text: str) -> list[str]:
    """Split prose into sentences. Line breaks always end a sentence (lists, bullet points).

    Memoised (a new list each call, so callers may change theirs): during a cold offline run
    every measure splits the same contexts, answer and reference again, one to four times per
    sample, and splitting, `words` and `term` were together ~60% of the time spent outside the
    embedding model (``benchmarks/offline_speed.py`` under cProfile). The caches are bounded
    (`functools.lru_cache`), keyed by the text alone, and the functions are pure."""
    return list(_sentences(text))


@functools.lru_cache(maxsize=1 << 12)
def _sentences(text: str) -> tuple[str, ...]:
    """`sentences`, as a tuple that can be shared."""
    out: list[str] = []
    for block in re.split(r"\n\s*", text):
        block = normalise(block)
        if not block:
            continue
        start = 0
        for match in _SENTENCE_END.finditer(block):
            end = match.end(1)
            candidate = block[start:end]
            *before, last_word = candidate.rstrip(".!?\"')]").rsplit(" ", 2)
            last_word = last_word.lower()
            after_number = bool(before) and before[-1][-1:].isdigit()
            follower = block[match.end() : match.end() + 1]
            if (
                last_word in _ABBREVIATIONS
                # an initial ("J. Smith"), but not a unit symbol after a number ("8849 m.")
                or (len(last_word) == 1 and last_word.isalpha() and not after_number)
                or (follower and follower.islower())  # "e.g. this" mid-sentence
            ):
                continue
            out.append(candidate.strip())
            start = match.end()
        tail = block[start:].strip()
        if tail:
            out.append(tail)
    return tuple(s for s in out if any(ch.isalnum() for ch in s))


def words(text: str) -> list[str]:
    """Lower-cased word tokens (letters and digits; inner apostrophes kept). Memoised, as
    `sentences` (a new list each call)."""
    return list(_words(text))


_ASCII_AT_ONCE = True
"""Whether `_words` lower-cases an ASCII text whole before splitting it (False: word by word)."""


@functools.lru_cache(maxsize=1 << 14)
def _words(text: str) -> tuple[str, ...]:
    """`words`, as a tuple that can be shared.

    An ASCII text is lower-cased whole, then split: the same words (ASCII lower-casing maps
    each character to one, and ``_WORD`` does not depend on case; an ASCII text holds no
    "’"), without a ``lower`` and a ``replace`` per word. Other text goes word by word:
    lower-casing "İ" makes two characters, the second of which ``_WORD`` would split at."""
    if _ASCII_AT_ONCE and text.isascii():
        return tuple(_WORD.findall(text.lower()))
    return tuple(w.lower().replace("’", "'") for w in _WORD.findall(text))


def plain(word: str) -> str:
    """A word without its possessive: "forney's" = "forney", so a name check finds "Mike
    Forney" in "Mike Forney's goal"."""
    return word[:-2] if word.endswith("'s") else word


_SUFFIXES = (
    "ations", "ation", "ings", "ing", "ies", "als", "al", "ers", "er", "es", "ed", "e", "s",
)  # fmt: skip


@functools.lru_cache(maxsize=1 << 16)
def term(word: str) -> str:
    """A word as facts are compared: a possessive dropped ("everest's" = "everest"), accents
    folded ("Säuwäntzt" = "sauwantzt") and a common suffix cut ("approves" = "approval" =
    "approv", "metres" = "metre"), the same on both sides of a comparison. Crude on purpose:
    it must only make two forms of one word meet, never be read. Memoised: a vocabulary
    repeats."""
    word = plain(word)
    folded = "".join(c for c in unicodedata.normalize("NFKD", word) if not unicodedata.combining(c))
    if folded.isdigit():
        return folded
    for suffix in _SUFFIXES:
        if folded.endswith(suffix) and len(folded) - len(suffix) >= 4:
            return folded[: -len(suffix)]
    return folded


@functools.lru_cache(maxsize=1 << 16)
def terms(text: str) -> frozenset[str]:
    """The facts' vocabulary of ``text``: its content words as `term`s and its numbers, with
    numbers, number words, dates, percentages and units in one written form first
    (`ragbridge.core.text.quantities.canonical`: ``8,849 m`` = ``8849 metres``, ``three`` = ``3``).

    Memoised: the offline providers ask for the same context sentences' terms once per claim
    and per measure, and this was 16% of a cold offline run's time
    (`benchmarks/offline_speed.py` under cProfile)."""
    text = canonical(normalise(text))
    return frozenset({term(w) for w in content_words(text) if not w.isdigit()} | numbers(text))


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
    clean = canonical(normalise(text))
    for match in _NUMBER.finditer(clean):
        found.add(_number_key(match.group(0)))
    found.update(w for w in words(clean) if w in _MONTHS)
    for sentence in sentences(clean):
        for match in _NAME.finditer(sentence):
            parts = [
                plain(p) for p in words(match.group(0)) if p not in STOPWORDS and not p.isdigit()
            ]
            if match.start() == 0 and len(parts) < 2:
                continue
            found.update(parts)
    return found


_PREAMBLE = re.compile(
    r"^(?:here(?:'s| is| are)|below is|the following is)\b[^.]*"
    r"\b(?:summary|summaries|overview|points|information|takeaways)\b[^.]*[:.]?$",
    re.IGNORECASE,
)
_SOURCE = r"(?:the|this) (?:passage|article|text|document|source|story|report|context)"
_FRAMING = re.compile(
    rf"^(?:(?:in )?{_SOURCE}(?: also)? (?:mentions|states|says|notes|reports|describes"
    r"|explains|discusses|highlights|indicates|suggests|adds)(?: that)?,?\s+"
    rf"|according to {_SOURCE},\s+|in {_SOURCE},\s+)",
    re.IGNORECASE,
)


def is_preamble(sentence: str) -> bool:
    """A sentence that only announces what follows ("Here is a concise summary of the
    passage:"): it states nothing about the contexts, so it is neither supported nor not.
    Summaries by LLMs open with one often (FaithBench dev: 11 of 100), and scoring it as an
    unsupported claim marks a faithful summary as hallucinated."""
    return bool(_PREAMBLE.match(sentence.strip()))


def unframed(sentence: str) -> str:
    """The claim without its attribution to the source: "The passage also mentions that Locke
    shook hands with ..." -> "Locke shook hands with ...". The frame's words ("passage",
    "mentions") are in no context and would count against the claim."""
    stripped = _FRAMING.sub("", sentence.strip(), count=1)
    return stripped[:1].upper() + stripped[1:] if stripped else sentence


@functools.lru_cache(maxsize=1 << 16)
def numbers(text: str) -> frozenset[str]:
    """Just the numbers of `salient` (to check a claim's numbers against a context's), read
    from the `canonical` form: "8 849", "8,849" and "8849.0" are all ``8849``. Memoised, as
    `terms` is: the offline matcher asks for every context sentence's numbers per measure."""
    return frozenset(_number_key(m.group(0)) for m in _NUMBER.finditer(canonical(normalise(text))))


# --------------------------------------------------------------------------- abstentions
#
# An abstention is an answer that declines to answer. Faithfulness and hallucination would
# otherwise read "The context does not say." as a claim that nothing supports and score it
# 0 (hallucination 1), punishing exactly the behaviour a RAG system should show when retrieval
# found nothing. The rule is deliberately narrow, because skipping a real claim is worse than
# scoring a refusal: EVERY sentence of the answer must be an abstention (or a bare apology),
# and an abstaining sentence may not go on to assert something ("..., but it is usually 30
# days"). Anything else is an ordinary answer and is scored as before.

_SOURCE = (
    r"(?:the |this |that |these |those |my |our |your |any )?"
    r"(?:provided |given |retrieved |available |supplied |above |attached |relevant |following )?"
    r"(?:context|contexts|documents?|documentation|docs|sources?|passages?|texts?|excerpts?|"
    r"materials?|information|handbook|manual|articles?|knowledge base|search results?)"
    r"(?: (?:provided|given|retrieved|available|supplied|above|i have|i was given))?"
)
_NOT = r"(?:does not|doesn't|do not|don't|did not|didn't|cannot|can't|can not)"
_SAY = (
    r"(?:say|says|mention|specify|state|contain|include|provide|cover|tell|answer|address|"
    r"discuss|give|list|indicate|describe|explain|have|offer)"
)
_I_NOT = (
    r"i (?:do not|don't|did not|didn't|cannot|can't|can not|could not|couldn't|am unable to|"
    r"'m unable to|was unable to|am not able to|'m not able to|was not able to)"
)
_PARTICIPLE = (
    r"(?:mentioned|specified|stated|provided|given|covered|found|answered|addressed|included|"
    r"discussed|described|listed)"
)
_END = r"(?=[.!]*$)"
_ABSTAIN_CORE = (
    # I don't know / I could not find that in the context / I cannot answer that ...
    rf"{_I_NOT} (?:know|find|answer|tell|say|determine|locate|identify|confirm|provide)\b"
    # I don't have (enough) information ...
    rf"|i (?:do not|don't|did not|didn't) have (?:enough |sufficient |any |the )?"
    r"(?:information|context|details|knowledge|answer)\b"
    # I have no information / idea ...
    r"|i have no (?:information|idea|knowledge|details|answer)\b"
    # I'm not sure / I am not certain
    r"|i(?:'m| am) not (?:sure|certain)\b"
    # The context does not say / The documents don't mention ...
    rf"|{_SOURCE} {_NOT} {_SAY}\b"
    # There is no information about X (in the provided documents)
    r"|there (?:is|are|was|were) no (?:information|mention|details?|answer|relevant information)\b"
    # No information (is available / about X) / Not enough information to answer
    r"|(?:no|not enough|insufficient) (?:relevant )?(?:information|context|details)"
    r"(?:(?: (?:is|was|are|were))? (?:available|provided|found|given|about|on|regarding|"
    rf"in|to answer)\b|{_END})"
    # The answer / this is not mentioned (in the context); the answer is not in the documents
    r"|(?:the answer|this|that|it|this information|that information) "
    r"(?:is not|isn't|was not|wasn't|cannot be|can't be|could not be|couldn't be) "
    rf"(?:{_PARTICIPLE}(?: (?:in|by|within|from|anywhere in) {_SOURCE})?{_END}"
    rf"|in {_SOURCE}{_END})"
    # Unknown. / Not mentioned (in the context).
    rf"|(?:unknown|not {_PARTICIPLE}(?: in {_SOURCE})?){_END}"
)
_APOLOGY = r"(?:(?:i'm |i am |i'm very |i am very )?sorry|unfortunately|apologies|my apologies)"
_LEAD = rf"(?:{_APOLOGY}[,!]? (?:but )?|(?:but |however,? |regrettably,? ))?"
_ABSTAIN = re.compile(rf"^{_LEAD}(?:{_ABSTAIN_CORE})(?P<tail>.*)$", re.IGNORECASE)
_APOLOGY_ONLY = re.compile(rf"^{_APOLOGY}[.!]*$", re.IGNORECASE)
_ASSERTS_MORE = re.compile(
    r"[;:]| - |, (?:it|they|he|she|we|this|that|these|those|there|the)\b"
    r"|\b(?:but|however|although|though|yet|so|therefore|thus|instead|whereas|while|"
    r"except|otherwise|likely|probably|presumably|possibly|usually|typically|generally|normally|"
    r"assum\w*|guess|believe|think|suspect|expect|estimate\w*|suggests?|implies|imply|"
    r"because|since|and it|and they)\b",
    re.IGNORECASE,
)


def _abstaining_clause(text: str) -> bool:
    match = _ABSTAIN.match(text.strip())
    return match is not None and _ASSERTS_MORE.search(match.group("tail")) is None


def _abstaining_sentence(sentence: str) -> bool:
    """One sentence declines to answer, or each of its clauses does ("I don't know, the
    documents do not say.")."""
    text = sentence.strip().replace("’", "'").replace("`", "'")
    text = re.sub(r"\s+n't\b", "n't", text)
    if _abstaining_clause(text):
        return True
    clauses = [c for c in re.split(r"\s*[,;]\s*", text.rstrip(".!")) if c]
    return len(clauses) > 1 and all(
        _abstaining_clause(c) or _APOLOGY_ONLY.match(c) for c in clauses
    )


def abstention(answer: str | None) -> str | None:
    """The answer, clipped to 80 characters, when the WHOLE answer declines to answer; else None.

    Abstentions: "I don't know.", "The context does not say.", "I could not find that in the
    context.", "There is no information about X in the provided documents.", "Sorry, I cannot
    answer that from the documents.", "Not mentioned.". Each sentence must abstain (a bare
    "Sorry." may stand beside them); an answer that abstains on one point and states facts
    elsewhere ("I don't know the date. The fee is 20 euros."), or goes on to assert something
    ("The context does not say, but it is probably 30 days."), is not an abstention.
    """
    if not answer or not answer.strip():
        return None
    parts = sentences(answer)
    if not parts:
        return None
    if not all(_abstaining_sentence(p) or _APOLOGY_ONLY.match(p.strip()) for p in parts):
        return None
    if all(_APOLOGY_ONLY.match(p.strip()) for p in parts):
        return None  # "Sorry." alone declines nothing in particular; leave it to the measures
    flat = normalise(answer)
    return flat if len(flat) <= 80 else flat[:79] + "…"
