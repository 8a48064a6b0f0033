"""What kind of answer a question asks for, read from its words alone.

`answer_relevance:offline` needs more than a question-answer cosine: short answers ("American",
"1987", "Lawrence County") share almost no words or meaning with their question, so the cosine of
the right answer and of another question's answer overlap. What an answer to a question must be
is often written in the question: "how many" wants a number, "Are A and B ...?" a yes or a no,
"in what county" something that is a county, "A or B?" one of the two. This module reads that
expectation; the provider scores how well the answer meets it.

Multi-hop questions are often statements with the interrogative at the end ("... born in which
year?") and relative clauses with a "who" in the middle, so an interrogative that opens the
question wins, else the last one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["ANSWER_TYPES", "Expectation", "expectation", "is_bare_yes_no", "is_numeric_answer"]

# Broad kinds of answer, each embedded once: an answer's similarity to the question's head
# noun is compared with its mean similarity to these, so an answer that is "like anything"
# (a generic phrase) does not pass as a county or a nationality. Our own list.
ANSWER_TYPES = (
    "person", "place", "country", "city", "year", "date", "number", "organization", "company",
    "film", "song", "album", "band", "book", "sport", "team", "nationality", "language",
    "profession", "event", "animal", "plant", "food", "drink", "building", "river", "mountain",
    "award", "genre", "television series", "game", "vehicle", "disease", "chemical", "colour",
    "measurement", "money", "law", "product", "software",
)  # fmt: skip

NUMERIC = frozenset({"number", "age in years", "measurement", "year", "date"})

_AUX = re.compile(
    r"^(?:is|are|was|were|do|does|did|can|could|has|have|had|will|would|should|shall|may|might)\b"
)
_STOP = (
    r"(?=\s+(?:is|was|are|were|did|does|do|has|had|have|of|in|on|at|for|that|whose|by|from|to"
    r"|with)\b|\s*[?,.]|$)"
)
_NOT_HEAD = r"(?!(?:is|was|are|were|did|does|do|has|had|have|if|can|could|will|would)\b)"
_HEADS: tuple[tuple[re.Pattern[str], str | None], ...] = (
    (re.compile(r"\bhow (?:many|much)\b"), "number"),
    (re.compile(r"\bhow old\b"), "age in years"),
    (re.compile(r"\bhow (?:far|long|tall|high|big|large|fast|deep|heavy)\b"), "measurement"),
    (re.compile(r"\b(?:what|which) year\b"), "year"),
    (re.compile(r"\bwhen\b"), "date"),
    (re.compile(r"\bwhere\b"), "place"),
    (re.compile(r"\bwhom?\b"), "person"),
    (
        re.compile(
            r"\b(?:what|which)(?:\s+[\w-]+'s)?\s+(?:(?:kind|type|sort) of\s+)?"
            + _NOT_HEAD
            + r"((?:[\w-]+\s+){0,2}?[\w-]+)"
            + _STOP
        ),
        None,
    ),
    (re.compile(r"\b(?:what|which)\s+([\w-]+)'s\b"), None),
    (re.compile(r"\bthis\s+((?:[\w-]+\s+){0,3}?[\w-]+)" + _STOP), None),
)
_OPENING = re.compile(r"^(?:(?:in|on|at|from|to|for|by|of|with|during)\s+)?$")
_YES_NO = re.compile(r"^(?:yes|no)\b", re.IGNORECASE)
_BARE_YES_NO = re.compile(r"^\s*(?:yes|no)\s*[.!]?\s*$", re.IGNORECASE)
_DIGIT = re.compile(r"\d")
_WORD = re.compile(r"[^\W\d_]{3,}")


@dataclass(frozen=True)
class Expectation:
    """What the question asks for: a yes/no, a kind named by `head` ("county", "number"), or
    nothing readable (`head is None`); `choice` when it offers alternatives ("A or B?")."""

    yes_no: bool
    head: str | None
    choice: bool

    @property
    def numeric(self) -> bool:
        return self.head in NUMERIC


def expectation(question: str) -> Expectation:
    lowered = " ".join(question.lower().split())
    choice = " or " in lowered
    if _AUX.match(lowered):
        return Expectation(yes_no=True, head=None, choice=choice)
    found: list[tuple[int, str]] = []
    for pattern, head in _HEADS:
        for match in pattern.finditer(lowered):
            found.append((match.start(), head or match.group(1)))
    if not found:
        return Expectation(yes_no=False, head=None, choice=choice)
    found.sort()
    opening = [f for f in found if _OPENING.match(lowered[: f[0]].strip())]
    return Expectation(yes_no=False, head=(opening or found[-1:])[0][1], choice=choice)


def answers_yes_no(answer: str) -> bool:
    return bool(_YES_NO.match(answer.strip()))


def is_bare_yes_no(answer: str) -> bool:
    """A bare "yes"/"no" carries no topic: its cosine to any question is noise."""
    return bool(_BARE_YES_NO.match(answer))


def is_numeric_answer(answer: str) -> bool:
    """Digits and no word of three letters or more: "294,000", "1948", "0.9 s."."""
    return bool(_DIGIT.search(answer)) and not _WORD.search(answer)
