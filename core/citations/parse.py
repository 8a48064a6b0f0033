"""Read an answer's citation markers into statements and the contexts each cites.

`parse_citations(answer, contexts)` returns a `CitedAnswer`: the answer's sentences (the
statements, markers removed) in order, each with the `Citation` records of its markers, and the
citations that name no context. The forms read, and the rules that decide what is a citation:

* **Numbers in brackets**: ``[1]``, ``[1, 3]``, ``[1][3]``, ``[1-3]`` (a range), ``[Source 2]``.
  A number names a context by, in order: the "Source N:" label its text starts with (LlamaIndex's
  ``CitationQueryEngine`` numbers its chunks so; when any context carries such a label, numbers
  are read through the labels only), a context whose ``id`` is that number, else its 1-based
  position. A number that names nothing is an unresolved citation (``[7]`` with four contexts),
  except a bracket whose numbers all name nothing and hold a four-digit number: that is a year
  (``[2019]``), left as text.
* **Names in brackets**: ``[doc-7]``, ``[handbook.pdf]``, ``[doc-1, doc-3]``: a context's ``id``
  or its metadata ``source`` / ``file_name`` / ``file_path`` / ``title`` / ``url`` (case-free; a
  path or URL also matches by its last segment). Several contexts sharing the name (chunks of
  one file) are all cited. An id-like word holding a digit (letters, digits and ``- _ . : / #``)
  that names no context is an unresolved citation; any other bracket is text: ``[sic]``,
  ``[citation needed]``, ``[ ]``, a markdown link ``[text](url)``, anything inside ``code``.
  A link whose text is a number, ``[2](https://...)``, is a citation: of the context the URL
  names, else of number 2.
* **Source notes**: ``(source: X)``, ``(Sources: X, Y)``, ``(Source 2)``: each item a name or a
  number as above; an item that names nothing is unresolved (the form leaves no doubt).
* **Footnotes**: ``[^1]`` and superscripts ``¹²`` (a run is one number when that number names a
  context, else its digits one by one). Definition lines at the end (``[^1]: ...``, ``[1]: ...``;
  ``[1] ...`` when the body cites key 1, ``1. ...`` or ``¹ ...`` when it does so with a footnote
  or superscript; or any lines under a closing "Sources:" / "References:" / "Notes:" heading)
  are not statements: a key whose
  definition names a context (by a name above, "Source N", or a quote of its text) cites that
  context, else the key is read as a number or a name. In an answer that defines no footnotes,
  a superscript after a number, a unit or a lone letter is an exponent (``5 m²``, ``10³``,
  ``x²``) and one that names no context is text.

Statements are sentences (`ragbridge.core.text.words.sentences`: line breaks end one too); list
bullets and list numbers opening a line are dropped from their text. A marker inside a sentence
or at its end belongs to it; markers right after its closing punctuation on the same line
("... capital.[1] It ...", "... capital. [1] It ...") or on a line of their own belong to the
sentence before; markers opening a line ("[2] Lyon is big.") or the answer belong to the
sentence they open. A statement citing one context twice keeps both records; the measures count a
context once per statement.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..record_fields import Context
from ..text.words import sentences
from .types import Citation, CitedAnswer, Statement

__all__ = ["NAME_FIELDS", "parse_citations", "unresolved_message"]

NAME_FIELDS = ("source", "file_name", "filename", "file_path", "title", "url", "doc_id")
"""Metadata fields whose value names a context, besides its ``id``."""

_SUPER = "⁰¹²³⁴⁵⁶⁷⁸⁹"
_FROM_SUPER = str.maketrans(_SUPER, "0123456789")
_SOURCE_LABEL = re.compile(r"\s*Source\s+(\d+)\s*:", re.IGNORECASE)
_NUMBER_ITEM = re.compile(
    r"(?:(?:sources?|src|doc|document|context|passage|ref|reference)\s*#?\s*)?"
    r"(\d{1,6})(?:\s*[-–]\s*(\d{1,6}))?",
    re.IGNORECASE,
)
_ID_LIKE = re.compile(r"[A-Za-z0-9][\w.:/#-]{0,63}")
_MAX_RANGE = 100
"""A range wider than this is not expanded (``[1-5000]`` is no citation of 5000 contexts)."""

_MARKER = re.compile(
    r"\[\^(?P<foot>[^\[\]\s]{1,64})\]"
    r"|\[(?P<link>\d{1,4}(?:\s*,\s*\d{1,4})*)\]\((?P<url>[^()\s]{1,500})\)"
    r"|(?<!!)\[(?P<bracket>[^\[\]\n]{1,200})\](?!\()"
    r"|\((?P<note>sources?|src)\s*:\s*(?P<notes>[^()\n]{1,300})\)"
    r"|\((?P<bare>sources?\s*\d[\d\s,;&and-]*)\)"
    rf"|(?P<sup>[{_SUPER}]+(?:[,˒][{_SUPER}]+)*)",
    re.IGNORECASE,
)
_DEFINITION = re.compile(
    r"\s*(?:\[\^(?P<foot>[^\]\s]{1,64})\]:?"
    r"|\[(?P<colon>[^\]\s]{1,64})\]:"
    r"|\[(?P<bracket>[^\]\s]{1,64})\]"
    r"|(?P<number>\d{1,3})[.):]"
    rf"|(?P<sup>[{_SUPER}]+):?)"
    r"\s+(?P<text>\S.*)"
)
_BULLET = re.compile(r"\s*(?:[-*•]|\d{1,3}[.)])\s+\S")
_HEADING = re.compile(
    r"\W*(?:sources?|references?|citations?|footnotes?|notes?|bibliography)\W*",
    re.IGNORECASE,
)
_PLACEHOLDER = re.compile("\ue000(\\d+)\ue001")
_CODE = re.compile(r"```.*?```|`[^`\n]*`", re.DOTALL)
_OPEN = re.compile(r"^\s*(?:[-*•]|\d{1,3}[.)])\s+")


def _norm(name: str) -> str:
    return name.strip().strip("\"'`“”‘’").strip().casefold()


def _variants(name: str) -> set[str]:
    """A name as compared: case-free, and for a path or URL also its last segment and the URL
    without its scheme."""
    plain = _norm(name)
    out = {plain} if plain else set()
    if "/" in plain or "\\" in plain:
        stripped = re.sub(r"^[a-z][a-z0-9+.-]*://(?:www\.)?", "", plain).rstrip("/")
        out.add(stripped)
        last = re.split(r"[/\\]", stripped)[-1]
        if last:
            out.add(last)
    return out


def _names_of(context: Context) -> list[str]:
    names = [context.id] if context.id else []
    for key in NAME_FIELDS:
        value = context.metadata.get(key)
        if isinstance(value, str) and value.strip():
            names.append(value)
    return names


@dataclass
class _Resolver:
    """What the answer's keys can name: positions, "Source N" labels, ids and metadata names,
    and the footnote definitions found at its end."""

    contexts: Sequence[Context]
    definitions: Mapping[str, str] = field(default_factory=dict)
    footnotes_defined: bool = False

    def __post_init__(self) -> None:
        self.labels: dict[int, list[int]] = {}
        self.names: dict[str, list[int]] = {}
        self.name_list: list[tuple[str, int]] = []
        for i, context in enumerate(self.contexts):
            label = _SOURCE_LABEL.match(context.text)
            if label:
                self.labels.setdefault(int(label.group(1)), []).append(i)
            for name in _names_of(context):
                for variant in _variants(name):
                    self.names.setdefault(variant, [])
                    if i not in self.names[variant]:
                        self.names[variant].append(i)
                    self.name_list.append((variant, i))

    def number(self, n: int) -> list[int]:
        if self.labels:
            return list(self.labels.get(n, []))
        by_id = self.names.get(str(n), [])
        by_id = [i for i in by_id if self.contexts[i].id == str(n)]
        if by_id:
            return by_id
        return [n - 1] if 1 <= n <= len(self.contexts) else []

    def name(self, text: str) -> list[int]:
        for variant in sorted(_variants(text), key=len, reverse=True):
            if variant in self.names:
                return list(self.names[variant])
        return []

    def definition(self, text: str) -> list[int]:
        """The contexts a footnote definition names: by a name it holds, a "Source N" in it,
        or a quote of a context's text."""
        found = self.name(text)
        if found:
            return found
        folded = _norm(text)
        hits = sorted({i for name, i in self.name_list if len(name) >= 3 and _holds(folded, name)})
        if hits:
            return hits
        label = re.search(r"\bsource\s+(\d+)\b", folded)
        if label:
            return self.number(int(label.group(1)))
        quote = re.sub(r"\s+", " ", folded.strip(" .\"'“”")).strip()
        if len(quote) >= 20:
            return [
                i
                for i, c in enumerate(self.contexts)
                if quote in re.sub(r"\s+", " ", c.text.casefold())
            ]
        return []

    def key(self, key: str) -> list[int]:
        """A footnote key: its definition first, then a number, then a name."""
        if key in self.definitions:
            found = self.definition(self.definitions[key])
            if found:
                return found
        if key.isdigit():
            return self.number(int(key))
        return self.name(key)


def _holds(text: str, name: str) -> bool:
    at = text.find(name)
    while at >= 0:
        before = text[at - 1] if at else " "
        after = text[at + len(name)] if at + len(name) < len(text) else " "
        if not before.isalnum() and not after.isalnum():
            return True
        at = text.find(name, at + 1)
    return False


Found = list[tuple[str, list[int]]]
"""The keys one marker names, each with the contexts it resolves to ([] when none)."""


def _numbers(text: str, resolver: _Resolver) -> Found | None:
    """The keys of a list of numbers and ranges ("1, 3", "1-3", "Source 2"), or None when
    ``text`` is not such a list."""
    found: Found = []
    items = [i for i in re.split(r"\s*(?:[,;&]|\band\b)\s*", text.strip()) if i]
    if not items:
        return None
    for item in items:
        match = _NUMBER_ITEM.fullmatch(item)
        if match is None:
            return None
        first = int(match.group(1))
        last = int(match.group(2)) if match.group(2) else first
        low, high = min(first, last), max(first, last)
        if high - low > _MAX_RANGE:
            return None
        found.extend((str(n), resolver.key(str(n))) for n in range(low, high + 1))
    return found


def _year_like(found: Found) -> bool:
    """Numbers naming no context, one of them four digits: a year in brackets, not a citation."""
    return all(not ids for _, ids in found) and any(len(key) == 4 for key, _ in found)


def _bracket(content: str, resolver: _Resolver) -> Found | None:
    text = content.strip()
    if not text:
        return None
    named = resolver.name(text)
    if named:
        return [(text, named)]
    numbers = _numbers(text, resolver)
    if numbers is not None:
        return None if _year_like(numbers) else numbers
    found: Found = []
    for item in (part.strip() for part in re.split(r"[,;]", text)):
        named = resolver.name(item)
        if named:
            found.append((item, named))
            continue
        numbers = _numbers(item, resolver)
        if numbers is not None:
            found.extend(numbers)
        elif _ID_LIKE.fullmatch(item) and any(ch.isdigit() for ch in item):
            found.append((item, []))
        else:
            return None  # not a list of citations: text
    return found


def _note(content: str, resolver: _Resolver) -> Found:
    text = content.strip().rstrip(".")
    named = resolver.name(text)
    if named:
        return [(text, named)]
    found: Found = []
    for item in (p.strip() for p in re.split(r"\s*(?:[,;]|\band\b)\s*", text)):
        if not item:
            continue
        named = resolver.name(item)
        numbers = None if named else _numbers(item, resolver)
        if named:
            found.append((item, named))
        elif numbers is not None:
            found.extend(numbers)
        else:
            found.append((item, []))
    return found


def _superscript(run: str, resolver: _Resolver) -> Found | None:
    found: Found = []
    for part in re.split(r"[,˒]", run.translate(_FROM_SUPER)):
        whole = resolver.key(part)
        if whole or len(part) == 1:
            found.append((part, whole))
            continue
        digits = [(d, resolver.key(d)) for d in part]
        found.extend(digits if all(ids for _, ids in digits) else [(part, [])])
    if all(not ids for _, ids in found) and not resolver.footnotes_defined:
        return None  # "m²": a superscript naming nothing, in an answer without footnotes
    return found


_AFTER_QUANTITY = re.compile(r"(?:\d\s*[^\W\d_]{0,3}|(?<![^\W\d_])[^\W\d_])$")
"""Text a superscript follows as an exponent: a number or unit ("5 m²", "10³") or a lone letter
("x²")."""


def _read(match: re.Match[str], resolver: _Resolver) -> Found | None:
    """The keys a marker names, or None when it is text."""
    if match.group("foot") is not None:
        key = match.group("foot")
        return [(key, resolver.key(key))]
    if match.group("link") is not None:  # "[1](https://...)": the URL names it, else the number
        named = resolver.name(match.group("url"))
        return [(match.group("link"), named)] if named else _numbers(match.group("link"), resolver)
    if match.group("bracket") is not None:
        return _bracket(match.group("bracket"), resolver)
    if match.group("notes") is not None:
        return _note(match.group("notes"), resolver)
    if match.group("bare") is not None:
        return _numbers(match.group("bare"), resolver)
    before = match.string[max(0, match.start() - 8) : match.start()]
    if not resolver.footnotes_defined and _AFTER_QUANTITY.search(before):
        return None  # an exponent or a unit's power, in an answer without footnotes
    return _superscript(match.group("sup"), resolver)


def _cited_keys(body: str) -> set[str]:
    """Every key the body's brackets, footnotes and superscripts could name (ranges expanded),
    so a closing "[2] ..." line is read as a definition only when the body cites 2."""
    keys: set[str] = set()
    for content in re.findall(r"\[\^?([^\[\]\n]{1,200})\]", body):
        for item in re.split(r"\s*(?:[,;&]|\band\b)\s*", content):
            keys.add(item.strip())
            keys.update(re.findall(r"\d+", item))
            for low, high in re.findall(r"(\d+)\s*[-–]\s*(\d+)", item):
                a, b = sorted((int(low), int(high)))
                keys.update(str(n) for n in range(a, min(b, a + _MAX_RANGE) + 1))
    for run in re.findall(rf"[{_SUPER}]+", body):
        digits = run.translate(_FROM_SUPER)
        keys.add(digits)
        keys.update(digits)
    return keys


def _split_definitions(answer: str) -> tuple[str, dict[str, str], bool]:
    """(the answer without its closing definition lines, the definitions by key, whether any
    footnote-style definition was found)."""
    lines = answer.split("\n")
    end = len(lines)
    j = end - 1
    trailing: list[int] = []
    while j >= 0:
        line = lines[j]
        if not line.strip():
            j -= 1
            continue
        if _DEFINITION.fullmatch(line) or _BULLET.match(line):
            trailing.append(j)
            j -= 1
            continue
        break
    if j >= 0 and trailing and _HEADING.fullmatch(lines[j]):
        body_end = j  # everything under a closing "Sources:" heading
        kept = trailing
    else:
        body = "\n".join(lines[: (min(trailing) if trailing else end)])
        footnotes = bool(re.search(rf"\[\^|[{_SUPER}]", body))
        brackets = bool(re.search(r"\[[^\]\n]+\]", body))
        used = _cited_keys(body)
        kept = []
        for k in trailing:  # from the end up: stop at the first line that is no definition
            match = _DEFINITION.fullmatch(lines[k])
            if match is None:
                break
            loose = match.group("number") or match.group("sup") or match.group("bracket")
            if loose and (not (brackets or footnotes) or loose.translate(_FROM_SUPER) not in used):
                break  # "[2] Lyon is big too.": a statement, unless the body cites 2
            if (match.group("number") or match.group("sup")) and not footnotes:
                break
            kept.append(k)
        body_end = min(kept) if kept else end
    definitions: dict[str, str] = {}
    footnote_style = False
    for k in kept:
        match = _DEFINITION.fullmatch(lines[k])
        if match is None:
            continue
        key = next(
            match.group(g) for g in ("foot", "colon", "bracket", "number", "sup") if match.group(g)
        )
        footnote_style = footnote_style or bool(match.group("foot") or match.group("sup"))
        definitions.setdefault(key.translate(_FROM_SUPER), match.group("text").strip())
    footnote_style = footnote_style or bool(definitions)
    return "\n".join(lines[:body_end]), definitions, footnote_style


def _clean(sentence: str) -> str:
    text = _PLACEHOLDER.sub(" ", sentence)
    text = _OPEN.sub("", text)
    text = re.sub(r"\s+([.,;:!?])", r"\1", text)
    text = re.sub(r"\(\s*\)|\[\s*\]", "", text)
    return re.sub(r"\s+", " ", text).strip()


def _or_none(ids: list[int]) -> list[int | None]:
    """The contexts a key names, or [None]: an unresolved citation is kept, not dropped."""
    return list(ids) if ids else [None]


def parse_citations(answer: str, contexts: Sequence[Context]) -> CitedAnswer:
    """The answer's statements and the contexts each cites (see the module doc for the forms
    and rules). Never raises on any text: what is not a citation stays text, and a citation
    that names no context is kept with ``context=None`` in its statement and in
    ``CitedAnswer.unresolved``."""
    body, definitions, footnotes = _split_definitions(answer)
    resolver = _Resolver(contexts, definitions, footnotes)
    markers: list[list[Citation]] = []

    code = [m.span() for m in _CODE.finditer(body)]

    def replace(match: re.Match[str]) -> str:
        if any(start <= match.start() < end for start, end in code):
            return match.group(0)  # "arr[0]" in code is no citation
        found = _read(match, resolver)
        if found is None:
            return match.group(0)
        marker = match.group(0)
        records = [
            Citation(marker=marker, key=key, context=i) for key, ids in found for i in _or_none(ids)
        ]
        markers.append(records)
        return f"\ue000{len(markers) - 1}\ue001"

    marked = _MARKER.sub(replace, body)
    # a list's bullets and numbers open lines, not statements ("2." would end one)
    marked = "\n".join(_OPEN.sub("", line) for line in marked.split("\n"))
    # markers right after a sentence's closing punctuation belong to that sentence
    marked = re.sub(
        r"([.!?]+)((?:[ \t]*\ue000\d+\ue001)+)",
        lambda m: re.sub(r"\s+", "", m.group(2)) + m.group(1),
        marked,
    )
    statements: list[tuple[str, list[Citation]]] = []
    pending: list[Citation] = []  # markers before the first statement
    for sentence in sentences(marked):
        cited = [c for m in _PLACEHOLDER.finditer(sentence) for c in markers[int(m.group(1))]]
        text = _clean(sentence)
        if not any(ch.isalnum() for ch in text):
            if statements:
                statements[-1][1].extend(cited)
            else:
                pending.extend(cited)
            continue
        if not statements and pending:
            cited, pending = pending + cited, []
        statements.append((text, cited))
    out = tuple(Statement(text=t, citations=tuple(c)) for t, c in statements)
    unresolved = tuple(c for s in out for c in s.citations if c.context is None)
    return CitedAnswer(statements=out, unresolved=unresolved)


def unresolved_message(cited: CitedAnswer, n_contexts: int) -> str:
    """Why the citations of ``cited`` cannot be scored, naming the markers that name nothing:
    "citation [7] names no context (the sample has 4 contexts)"."""
    seen: list[str] = []
    for c in cited.unresolved:
        inner = c.marker.strip("[]()^").translate(_FROM_SUPER).strip()
        shown = c.marker if inner == c.key else f"{c.key!r} of {c.marker}"
        if shown not in seen:
            seen.append(shown)
    head = ", ".join(seen[:3]) + (f" and {len(seen) - 3} more" if len(seen) > 3 else "")
    noun = "citation" if len(seen) == 1 else "citations"
    verb = "names" if len(seen) == 1 else "name"
    have = f"{n_contexts} context{'s' if n_contexts != 1 else ''}"
    return f"{noun} {head} {verb} no context (the sample has {have})"
