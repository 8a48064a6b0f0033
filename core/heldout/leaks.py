"""Leaks of held-out test questions into the dev split or a prompt's few-shot examples.

A test question that also sits in the dev split, or in the examples of the prompt under test,
has been seen while the system was tuned: its score measures memory, not generalisation. The
check is lexical, offline and deterministic (no model, same verdict on every machine), and each
leak is one of two kinds:

* **exact** — the two questions are the same after `question_key` (Unicode NFKC, lower case,
  punctuation and spacing dropped: ``"What is the  refund period?"`` = ``"what is the refund
  period"``). In a prompt file a test question also counts as exact when its key occurs as a run
  of whole words anywhere in the prompt's text (``Q: What is the refund period? A: 30 days``),
  provided it has at least `MIN_CONTAINED_WORDS` words (``"Why?"`` is in every prompt).
* **near duplicate** — the Jaccard similarity of the two questions' content terms is at least
  the threshold (`NEAR_DUPLICATE`, 0.8), both have at least `MIN_TERMS` terms, and their numbers
  are the same. Content terms are `ragbridge.core.text.words.terms` without stop words: lower-cased
  words with possessives, accents and common suffixes folded (``"damaged items"`` and ``"item
  damaged"`` share ``{damag, item}``), numbers kept (``"8,849"`` = ``"8849"``).

Why these numbers: with 0.8 a short question (2–3 terms) must have the same content terms as
the other (a rewording: ``"What's the refund period for items that are damaged?"`` ≈ ``"What
is the refund period for damaged items?"``, 1.0); from 4 terms on, one added word is tolerated
(4/5); one *substituted* word is not until 9 terms (``"...for digital items?"`` vs ``"...for
damaged items?"``: 3/5 = 0.6, a different question). A differing number always makes a different
question (``"after 2 years"`` / ``"after 5 years"``). Word *n*-gram shingles, the usual rule for
documents, are too coarse for questions of ten words: one changed word removes two of nine
bigrams. Each leak carries its similarity so a reader can judge the borderline ones; the
threshold is a parameter (``--near-duplicate`` on the command line).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..text.words import STOPWORDS, normalise, numbers, sentences, terms, words

__all__ = [
    "MIN_CONTAINED_WORDS",
    "MIN_TERMS",
    "NEAR_DUPLICATE",
    "Leak",
    "PromptText",
    "duplicate_groups",
    "find_leaks",
    "prompt_text",
    "question_key",
    "question_terms",
    "read_prompt_file",
    "similarity",
]

NEAR_DUPLICATE = 0.8
"""Default Jaccard similarity of content terms from which two questions are near duplicates."""
MIN_TERMS = 2
"""Fewer content terms than this ("Who is he?", "What is RAG?") say too little to call two
questions the same: such a question leaks only as an exact match."""
MIN_CONTAINED_WORDS = 3
"""A test question must have this many words to count as contained in a prompt's text."""

LeakKind = Literal["exact", "near"]


def question_key(text: str) -> str:
    """The form exact matches compare: NFKC, lower case, words only, single spaces."""
    return " ".join(words(normalise(text)))


def question_terms(text: str) -> frozenset[str]:
    """The content terms near duplicates compare (see the module's docstring): `text.terms`
    without stop words, and two more foldings `text.term` leaves to longer words, because
    questions are short and every term counts: a plural ``s`` (``"days"`` = ``"day"``) and a
    final ``y`` (``"carry"`` = ``"carried"``, both ``"carri"``)."""
    return frozenset(_fold(t) for t in terms(text) - STOPWORDS)


def _fold(term: str) -> str:
    if not term.isalpha():
        return term
    if len(term) >= 4 and term.endswith("s") and not term.endswith("ss"):
        term = term[:-1]
    return term[:-1] + "i" if len(term) >= 3 and term.endswith("y") else term


def similarity(a: frozenset[str], b: frozenset[str]) -> float:
    """Jaccard similarity |a ∩ b| / |a ∪ b| of two term sets (0 when both are empty)."""
    union = len(a | b)
    return len(a & b) / union if union else 0.0


@dataclass(frozen=True)
class Leak:
    """A test question found elsewhere: in the dev split (``source == "dev"``, ``where`` the dev
    sample's id) or in a prompt file (``source`` its name, ``where`` a line or JSON path)."""

    test_id: str
    source: str
    where: str
    kind: LeakKind
    similarity: float
    text: str
    """The matching dev question or prompt line, clipped to 120 characters."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "test_id": self.test_id,
            "source": self.source,
            "where": self.where,
            "kind": self.kind,
            "similarity": round(self.similarity, 3),
            "text": self.text,
        }


@dataclass(frozen=True)
class PromptText:
    """A prompt file as the leak check reads it: its whole text (for containment) and its
    candidate questions, each with where it stands (``line 12``, ``examples[2].question``)."""

    name: str
    text: str
    candidates: tuple[tuple[str, str], ...]


# --------------------------------------------------------------------------- prompt files

_MARKUP = re.compile(r"^\s*(?:[#>*+\-]+\s*|\d{1,3}[.)]\s+)*")
_LABEL = re.compile(r"^[A-Za-z][\w ]{0,24}?\s*:\s+(?=\S)")
_QUOTES = "\"'`“”‘’"


def _clean_line(line: str) -> str:
    """A line without list/quote markup, a short leading label (``Q:``, ``User:``, ``question:``)
    and the quotes and trailing comma of a YAML or JSON value."""
    text = _MARKUP.sub("", line)
    text = _LABEL.sub("", text, count=1)
    return text.strip().rstrip(",").strip().strip(_QUOTES).strip()


def _line_candidates(line: str) -> list[str]:
    """The line itself and, when it holds several, each of its sentences."""
    text = _clean_line(line)
    if not any(ch.isalnum() for ch in text):
        return []
    found = [text]
    parts = sentences(text)
    if len(parts) > 1:
        found += [_clean_line(p) for p in parts]
    return found


def _json_strings(value: Any, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield path or "$", value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _json_strings(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _json_strings(item, f"{path}[{i}]")


def _candidates(where: str | None, text: str) -> Iterator[tuple[str, str]]:
    """Candidates of ``text`` with their place: ``line 3`` in a file, ``examples[2].q`` for a
    one-line JSON string, ``examples[2].q, line 3`` inside a longer one."""
    lines = text.splitlines() or [text]
    if where is not None and len(lines) > 1:  # a JSON string: also whole, on one line
        for candidate in _line_candidates(" ".join(lines)):
            yield where, candidate
    for number, line in enumerate(lines, start=1):
        if where is None:
            place = f"line {number}"
        else:
            place = where if len(lines) == 1 else f"{where}, line {number}"
        for candidate in _line_candidates(line):
            yield place, candidate


def prompt_text(name: str, text: str) -> PromptText:
    """Read a prompt's text. JSON (a document, or one per line) is read as its string values,
    each named by its JSON path, so escaped quotes and ``\\n`` inside a few-shot example do not
    hide it; anything else (plain text, Markdown, YAML, a Python template) line by line."""
    strings: list[tuple[str, str]] | None = None
    try:
        strings = list(_json_strings(json.loads(text), ""))
    except ValueError:
        try:
            docs = [json.loads(line) for line in text.splitlines() if line.strip()]
            strings = [
                (f"line {i}, {p}", s)
                for i, doc in enumerate(docs, start=1)
                for p, s in _json_strings(doc, "")
            ]
        except ValueError:
            strings = None
    if strings is not None and strings:
        candidates = [c for where, s in strings for c in _candidates(where, s)]
        whole = "\n".join(s for _, s in strings)
    else:
        candidates = list(_candidates(None, text))
        whole = text
    return PromptText(name=name, text=whole, candidates=tuple(dict.fromkeys(candidates)))


def read_prompt_file(path: str | os.PathLike[str], *, name: str | None = None) -> PromptText:
    """`prompt_text` of a UTF-8 file; ``name`` (default: the path as given) names it in leaks."""
    source = Path(path)
    return prompt_text(name or str(path), source.read_text(encoding="utf-8-sig"))


# --------------------------------------------------------------------------- matching


@dataclass(frozen=True)
class _Entry:
    where: str
    text: str
    key: str
    terms: frozenset[str]
    numbers: frozenset[str]


def _entry(where: str, text: str) -> _Entry:
    return _Entry(where, text, question_key(text), question_terms(text), frozenset(numbers(text)))


class _Index:
    """Candidates by exact key, and by the rarest of their terms for near duplicates.

    Prefix filtering (Bayardo et al., "Scaling up all pairs similarity search", WWW 2007): order
    all terms by how many candidates hold them, rarest first. Two sets with Jaccard >= t share at
    least ceil(t·|A|) terms, so their first |A| - ceil(t·|A|) + 1 terms (their *prefixes*) share
    one. Only a candidate met in the probe's prefix is compared, and rare terms have short lists:
    thousands of test questions against thousands of dev questions stay well under a second.
    """

    def __init__(self, entries: Iterable[_Entry], threshold: float) -> None:
        self.entries = list(entries)
        self.threshold = threshold
        self.freq: dict[str, int] = {}
        for entry in self.entries:
            for term in entry.terms:
                self.freq[term] = self.freq.get(term, 0) + 1
        self.by_key: dict[str, int] = {}
        self.by_prefix: dict[str, list[int]] = {}
        for i, entry in enumerate(self.entries):
            if entry.key:
                self.by_key.setdefault(entry.key, i)
            if len(entry.terms) >= MIN_TERMS:
                for term in self._prefix(entry.terms):
                    self.by_prefix.setdefault(term, []).append(i)

    def _prefix(self, terms_: frozenset[str]) -> list[str]:
        ordered = sorted(terms_, key=lambda t: (self.freq.get(t, 0), t))
        needed = math.ceil(self.threshold * len(ordered) - 1e-9)
        return ordered[: len(ordered) - needed + 1]

    def near(self, probe: _Entry) -> Iterator[tuple[int, float]]:
        """Candidates that are near duplicates of ``probe``, with their similarity."""
        if len(probe.terms) < MIN_TERMS:
            return
        seen: set[int] = set()
        for term in self._prefix(probe.terms):
            for i in self.by_prefix.get(term, ()):
                if i in seen:
                    continue
                seen.add(i)
                entry = self.entries[i]
                if entry.numbers != probe.numbers:
                    continue
                score = similarity(probe.terms, entry.terms)
                if score >= self.threshold:
                    yield i, score

    def exact(self, probe: _Entry) -> _Entry | None:
        i = self.by_key.get(probe.key) if probe.key else None
        return None if i is None else self.entries[i]

    def nearest(self, probe: _Entry) -> tuple[_Entry, float] | None:
        """The most similar near duplicate of ``probe`` (ties: the earliest candidate)."""
        found = min(self.near(probe), key=lambda m: (-m[1], m[0]), default=None)
        return None if found is None else (self.entries[found[0]], found[1])


def _clip(text: str, limit: int = 120) -> str:
    flat = normalise(text)
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _check_threshold(threshold: float) -> None:
    if not (math.isfinite(threshold) and 0.0 < threshold <= 1.0):
        raise ValueError(f"the near-duplicate threshold must lie within (0, 1], got {threshold}")


def find_leaks(
    test: Mapping[str, str],
    dev: Mapping[str, str] | None = None,
    prompts: Sequence[PromptText] = (),
    *,
    threshold: float = NEAR_DUPLICATE,
) -> list[Leak]:
    """Test questions (by sample id) that occur in ``dev`` (questions by id) or in a prompt.

    At most one leak per test question and source, the strongest (exact before near, then the
    highest similarity); grouped by source (dev first, then the prompts in the order given),
    in test order within each.
    """
    _check_threshold(threshold)
    probes = [(sid, _entry(sid, text)) for sid, text in test.items()]
    sources: list[tuple[str, _Index, str | None]] = []
    if dev:
        sources.append(("dev", _Index((_entry(i, q) for i, q in dev.items()), threshold), None))
    for prompt in prompts:
        index = _Index((_entry(w, c) for w, c in prompt.candidates), threshold)
        sources.append((prompt.name, index, f" {question_key(prompt.text)} "))
    leaks: list[Leak] = []
    for name, index, whole in sources:
        for sid, probe in probes:
            exact = index.exact(probe)
            if exact is not None:
                leaks.append(Leak(sid, name, exact.where, "exact", 1.0, _clip(exact.text)))
            elif whole is not None and _contained(probe.key, whole):
                where = _containing(index, probe.key)
                leaks.append(Leak(sid, name, where, "exact", 1.0, _clip(test[sid])))
            elif (near := index.nearest(probe)) is not None:
                entry, score = near
                leaks.append(Leak(sid, name, entry.where, "near", score, _clip(entry.text)))
    return leaks


def _contained(key: str, whole: str) -> bool:
    return len(key.split()) >= MIN_CONTAINED_WORDS and f" {key} " in whole


def _containing(index: _Index, key: str) -> str:
    """Where in the prompt a contained question stands: the first candidate line holding it
    (a question broken over two lines is found in the whole text but in no one line)."""
    for entry in index.entries:
        if f" {key} " in f" {entry.key} ":
            return entry.where
    return "across lines"


def duplicate_groups(
    questions: Mapping[str, str], *, threshold: float = NEAR_DUPLICATE
) -> list[list[str]]:
    """Ids whose questions are exact or near duplicates of each other, transitively (the
    connected components of the "is a duplicate of" relation), each group of two or more in
    the order of ``questions``. Which ids end up together does not depend on that order."""
    _check_threshold(threshold)
    ids = list(questions)
    index = _Index((_entry(sid, questions[sid]) for sid in ids), threshold)
    parent = list(range(len(ids)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, entry in enumerate(index.entries):
        matches = [j for j, _ in index.near(entry)]
        if entry.key:
            matches.append(index.by_key[entry.key])
        for j in matches:
            a, b = root(i), root(j)
            if a != b:
                parent[max(a, b)] = min(a, b)
    groups: dict[int, list[str]] = {}
    for i, sid in enumerate(ids):
        groups.setdefault(root(i), []).append(sid)
    return [members for members in groups.values() if len(members) > 1]
