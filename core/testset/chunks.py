"""Chunks: the pieces of text the judge writes one question from, and what relevance names.

**Ids.** A document no longer than ``max_chars`` is one chunk *with the document's own id*; a
longer one is split into chunks ``docid#1``, ``docid#2``, ... (1-based, in text order). The rule
follows from what a relevance label must be: the id a retriever over the same corpus returns.

* Most corpora (the shipped handbook among them: every document is under 500 characters) are
  indexed one document per entry, and a retriever returns the document id — which is what an
  unsplit chunk carries, so the test set's labels match with no configuration.
* A split document has no single id a retriever could return for "the part that answers".
  Index the chunks this module makes (``ragbridge testset --chunks-out chunks.jsonl`` writes
  them) and the ``docid#n`` labels match; or grade the document instead
  (``relevance="document"``, ``--relevance document``), which matches pipelines that report
  the source document of whatever chunk they retrieved (LlamaIndex's ``ref_doc_id``, a
  LangChain ``metadata["source"]`` read with ``id_key``). The ranking measures count several
  chunks of one relevant document once.

**Splitting** packs whole paragraphs, then whole sentences, up to ``max_chars``; only a
sentence longer than that is cut, at a space. Every chunk's text is an exact slice of its
document (leading and trailing whitespace trimmed), so a passage quoted from a chunk is a quote
from the document.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .documents import SourceDocument, check_unique

__all__ = ["DEFAULT_CHUNK_CHARS", "MIN_CHUNK_WORDS", "Chunk", "split_document", "split_documents"]

DEFAULT_CHUNK_CHARS = 2000
"""Documents longer than this many characters are split (about 500 tokens: the size of a
typical retrieval chunk, and small enough that the judge reads all of it)."""

MIN_CHUNK_WORDS = 12
"""Chunks with fewer words (a heading, a signature) are not written from: there is no fact to
ask about. They still count as corpus for the no-answer check's retrieval."""

_PARAGRAPH = re.compile(r"\n[ \t]*\n\s*")
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+")


@dataclass(frozen=True)
class Chunk:
    """A piece of one document: ``id`` (the document's, or ``docid#n``), ``document`` (the
    document's id), ``group`` (the id ``relevance="document"`` grades), its ``text`` (an exact
    slice of the document, starting at ``start``) and the document's ``title``."""

    id: str
    document: str
    group: str
    text: str
    title: str | None = None
    start: int = 0

    @property
    def shown(self) -> str:
        """What an embedder sees of the chunk: title and text."""
        return f"{self.title}\n{self.text}" if self.title else self.text

    @property
    def words(self) -> int:
        return len(self.text.split())


def split_documents(
    documents: Iterable[SourceDocument], max_chars: int = DEFAULT_CHUNK_CHARS
) -> list[Chunk]:
    """Every document's chunks, in document order (see the module for ids and splitting)."""
    if max_chars < 200:
        raise ValueError(f"max_chars must be at least 200, got {max_chars}")
    out: list[Chunk] = []
    for document in check_unique(documents):
        out.extend(split_document(document, max_chars))
    return out


def split_document(document: SourceDocument, max_chars: int = DEFAULT_CHUNK_CHARS) -> list[Chunk]:
    """One document's chunks; a document that fits is one chunk with the document's id."""
    spans = _pack(_pieces(document.text, max_chars), max_chars)
    if not spans:
        return []
    if len(spans) == 1:
        start, end = spans[0]
        return [_chunk(document, document.id, start, end)]
    return [
        _chunk(document, f"{document.id}#{n}", start, end)
        for n, (start, end) in enumerate(spans, start=1)
    ]


def _chunk(document: SourceDocument, chunk_id: str, start: int, end: int) -> Chunk:
    return Chunk(
        id=chunk_id,
        document=document.id,
        group=document.group,
        text=document.text[start:end],
        title=document.title,
        start=start,
    )


def _trimmed(text: str, start: int, end: int) -> tuple[int, int] | None:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return (start, end) if start < end else None


def _split(text: str, start: int, end: int, pattern: re.Pattern[str]) -> list[tuple[int, int]]:
    """Spans of ``text[start:end]`` between matches of ``pattern`` (separators dropped)."""
    out: list[tuple[int, int]] = []
    position = start
    for match in pattern.finditer(text, start, end):
        span = _trimmed(text, position, match.start())
        if span:
            out.append(span)
        position = match.end()
    span = _trimmed(text, position, end)
    if span:
        out.append(span)
    return out


def _hard_cut(text: str, start: int, end: int, max_chars: int) -> list[tuple[int, int]]:
    """A sentence longer than ``max_chars`` cut at the last space before the limit."""
    out: list[tuple[int, int]] = []
    while end - start > max_chars:
        cut = text.rfind(" ", start + 1, start + max_chars)
        cut = cut if cut > start else start + max_chars
        span = _trimmed(text, start, cut)
        if span:
            out.append(span)
        start = cut
    span = _trimmed(text, start, end)
    if span:
        out.append(span)
    return out


def _pieces(text: str, max_chars: int) -> list[tuple[int, int]]:
    """Paragraph spans; a paragraph too long becomes sentence spans, a sentence too long cuts."""
    out: list[tuple[int, int]] = []
    for p_start, p_end in _split(text, 0, len(text), _PARAGRAPH):
        if p_end - p_start <= max_chars:
            out.append((p_start, p_end))
            continue
        for s_start, s_end in _split(text, p_start, p_end, _SENTENCE_END):
            if s_end - s_start <= max_chars:
                out.append((s_start, s_end))
            else:
                out.extend(_hard_cut(text, s_start, s_end, max_chars))
    return out


def _pack(pieces: Sequence[tuple[int, int]], max_chars: int) -> list[tuple[int, int]]:
    """Consecutive pieces merged while the merged span (separators included) fits."""
    out: list[tuple[int, int]] = []
    for start, end in pieces:
        if out and end - out[-1][0] <= max_chars:
            out[-1] = (out[-1][0], end)
        else:
            out.append((start, end))
    return out
