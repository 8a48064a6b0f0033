"""Passage verification: the supporting quote a judge wrote must occur in its source chunk.

The rule, chosen to forgive what copying text changes and nothing that rewording changes:

* both sides are compared after Unicode NFKC and case folding, with curly quotes made straight,
  every dash made ``-``, runs of whitespace (line breaks included) made one space, and the
  Markdown emphasis marks ``*``, ``_`` and backticks removed (a judge quoting ``**28 days**``
  writes ``28 days``);
* punctuation and quotation marks at the two ends of the quote are ignored (a dropped final full
  stop, quote marks around the passage);
* an ellipsis (``...``, ``…`` or ``[...]``) may join fragments; each fragment must occur, in
  order, after the previous one;
* every fragment must hold at least `MIN_QUOTE_WORDS` words: three words match almost anywhere
  by chance, and a quote that short does not support an answer.

Anything else — a changed word, a dropped comma inside the quote, a reordered clause, a number
written differently — is a paraphrase, not a quote, and the question is dropped and counted. The
span found is returned in the source's own characters, so the sample's ``reference_contexts``
hold the document's text, not the judge's copy of it.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from collections.abc import Sequence

__all__ = ["MIN_QUOTE_WORDS", "locate_passage", "locate_passages", "normalised"]

MIN_QUOTE_WORDS = 4
"""Fewest words a quote (each fragment of an elided quote) may have."""

_CHARS = {
    "\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'", "\u2032": "'", "`": "",
    "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u201f": '"', "\u2033": '"',
    "\u00ab": '"', "\u00bb": '"',
    "\u2010": "-", "\u2011": "-", "\u2012": "-", "\u2013": "-", "\u2014": "-", "\u2015": "-",
    "\u2212": "-", "*": "", "_": "",
}  # fmt: skip
_CLOSING = ".!?;:'\")]\u2019\u201d\u00bb"
_ELLIPSIS = re.compile(r"\s*(?:\[\s*(?:\.\s*){3}\]|\.{3,}|\u2026)\s*")


def _fold(char: str) -> str:
    out = []
    for c in unicodedata.normalize("NFKC", char):
        if c.isspace():
            out.append(" ")
            continue
        out.append(_CHARS.get(c, c).casefold())
    return "".join(out)


def normalised(text: str) -> tuple[str, list[int]]:
    """``text`` folded as the module says, and for each folded character its index in ``text``."""
    chars: list[str] = []
    where: list[int] = []
    for i, char in enumerate(text):
        # An ellipsis is kept as one mark (NFKC would make it three dots): the split needs it.
        folded = char if char == "\u2026" else _fold(char)
        for c in folded:
            if c == " " and (not chars or chars[-1] == " "):
                continue
            chars.append(c)
            where.append(i)
    if chars and chars[-1] == " ":
        chars.pop()
        where.pop()
    return "".join(chars), where


def _edges_stripped(text: str) -> str:
    start, end = 0, len(text)
    while start < end and not text[start].isalnum():
        start += 1
    while end > start and not text[end - 1].isalnum():
        end -= 1
    return text[start:end]


def locate_passage(passage: str, source: str) -> str | None:
    """The span of ``source`` that ``passage`` quotes (in the source's characters), or None."""
    folded_source, where = normalised(source)
    folded_passage, _ = normalised(passage)
    fragments = [_edges_stripped(f) for f in _ELLIPSIS.split(folded_passage)]
    fragments = [f for f in fragments if f]
    if not fragments or any(len(f.split()) < MIN_QUOTE_WORDS for f in fragments):
        return None
    position = 0
    first: int | None = None
    last = 0
    for fragment in fragments:
        found = folded_source.find(fragment, position)
        if found < 0:
            return None
        if first is None:
            first = found
        last = found + len(fragment)
        position = last
    assert first is not None
    end = where[last - 1] + 1
    # Give the span the closing punctuation the quote had ("... in advance." keeps its stop).
    tail = len(passage.rstrip()) - len(passage.rstrip().rstrip(_CLOSING))
    while tail and end < len(source) and source[end] in _CLOSING:
        end += 1
        tail -= 1
    return source[where[first] : end]


def locate_passages(passages: Sequence[str], sources: Sequence[str]) -> list[str] | None:
    """One quote per source, each found in a *different* source; the spans in source order.

    The judge is asked for the quotes in context order; one that swapped them still quoted
    both texts, so every assignment is tried (two or three sources: a handful).
    """
    if len(passages) != len(sources) or not sources:
        return None
    for order in itertools.permutations(range(len(sources))):
        spans = [locate_passage(passages[i], sources[j]) for i, j in enumerate(order)]
        if all(span is not None for span in spans):
            by_source: list[str] = [""] * len(sources)
            for i, j in enumerate(order):
                span = spans[i]
                assert span is not None
                by_source[j] = span
            return by_source
    return None
