"""The documents a test set is written from: `SourceDocument`, and reading them from files.

Two file forms, both checked line by line before a single judge call is paid:

* **JSONL**, one ``{"id", "text"}`` object per line with optional ``"title"`` (a string) and
  ``"metadata"`` (an object) — the form of the shipped handbook corpus
  (``ragbridge/adapters/demo/data/handbook_corpus.jsonl``). Ids may be integers (they are
  names, as in samples files) and must be unique. Anything else is refused as
  ``corpus.jsonl:7: text: expected a non-empty string``, naming file, line and field, and a
  field another tool calls differently (``page_content``, ``content``, ``doc_id``) is named
  with ours.
* **A folder** of ``.txt`` and ``.md`` files, searched recursively; a file's id is its path
  relative to the folder (``policies/leave.md``, with ``/`` on every platform), so ids are
  stable across machines. A Markdown file opening with a ``# heading`` gets it as its title.
  Empty files are skipped and reported, not fatal: a stray empty ``README.md`` is no reason to
  refuse a corpus.

Framework documents come in through their adapters (`ragbridge.adapters.langchain.
source_documents`, `ragbridge.adapters.llamaindex.source_documents`); the core reads none of them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "DOCUMENT_SUFFIXES",
    "DocumentsError",
    "SourceDocument",
    "check_unique",
    "load_documents",
    "read_folder",
    "read_jsonl",
]

DOCUMENT_SUFFIXES = (".txt", ".md")
"""File types a folder corpus is read from."""

_ALIASES = {
    "page_content": "text",
    "content": "text",
    "body": "text",
    "doc_id": "id",
    "document_id": "id",
    "_id": "id",
    "name": "title",
}
_FIELDS = ("id", "text", "title", "metadata")


@dataclass(frozen=True)
class SourceDocument:
    """One document of the corpus.

    ``id`` is what relevance labels name (see `ragbridge.core.testset.chunks` for ids of the
    chunks a long document is split into). ``parent_id`` is set for a document that is itself a
    piece of a larger one (a LangChain chunk sharing its ``source``, a LlamaIndex node with a
    ``ref_doc_id``): then ``relevance="document"`` grades the parent's id, the one such a
    pipeline reports.
    """

    id: str
    text: str
    title: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    parent_id: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id.strip():
            raise ValueError(f"a document id must be a non-empty string, got {self.id!r}")
        if not isinstance(self.text, str):
            raise ValueError(f"document {self.id!r}: text must be a string")
        if self.title is not None and not isinstance(self.title, str):
            raise ValueError(f"document {self.id!r}: title must be a string or None")

    @property
    def group(self) -> str:
        """The id ``relevance="document"`` grades: the parent's, else this document's."""
        return self.parent_id or self.id


class DocumentsError(ValueError):
    """A corpus file has a bad line; the message starts ``file:line:`` and names the field."""

    def __init__(self, source: str, line: int | None, problem: str) -> None:
        self.source = source
        self.line = line
        self.problem = problem
        where = f"{source}:{line}" if line is not None else source
        super().__init__(f"{where}: {problem}")


def load_documents(
    path: str | os.PathLike[str], *, skipped: list[str] | None = None
) -> list[SourceDocument]:
    """Documents from a JSONL file or a folder of ``.txt``/``.md`` files (see the module).

    Empty files of a folder are left out and their ids appended to ``skipped`` when given.
    Raises `DocumentsError` for bad input, naming file, line and field.
    """
    source = Path(path)
    if source.is_dir():
        documents = read_folder(source, skipped=skipped)
    elif source.is_file():
        documents = read_jsonl(source)
    else:
        raise DocumentsError(str(path), None, "no such file or folder")
    if not documents:
        what = f"no non-empty {' or '.join(DOCUMENT_SUFFIXES)} files" if source.is_dir() else ""
        raise DocumentsError(
            str(path), None, f"holds no documents{' (' + what + ')' if what else ''}"
        )
    return documents


def read_jsonl(path: str | os.PathLike[str]) -> list[SourceDocument]:
    """Documents of a JSONL corpus file, one object per line; blank lines are ignored."""
    name = str(path)
    out: list[SourceDocument] = []
    first_line: dict[str, int] = {}
    with Path(path).open("rb") as handle:
        for number, data in enumerate(handle, start=1):
            if number == 1:
                data = data.removeprefix(b"\xef\xbb\xbf")
            try:
                raw = data.decode("utf-8")
            except UnicodeDecodeError:
                raise DocumentsError(
                    name, number, "not UTF-8 text; save the file as UTF-8"
                ) from None
            if not raw.strip():
                continue
            document = _document(name, number, raw)
            seen = first_line.get(document.id)
            if seen is not None:
                raise DocumentsError(
                    name,
                    number,
                    f"id: duplicate document id {document.id!r} (first on line {seen})",
                )
            first_line[document.id] = number
            out.append(document)
    return out


def _document(source: str, number: int, raw: str) -> SourceDocument:
    try:
        record = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise DocumentsError(source, number, f"invalid JSON: {exc.msg}") from None
    if not isinstance(record, dict):
        raise DocumentsError(source, number, 'expected a JSON object {"id": ..., "text": ...}')
    for key in record:
        if key not in _FIELDS:
            hint = f" (ragbridge calls it {_ALIASES[key]!r})" if key in _ALIASES else ""
            raise DocumentsError(source, number, f"{key}: unknown field{hint}")
    doc_id = record.get("id")
    if isinstance(doc_id, int) and not isinstance(doc_id, bool):
        doc_id = str(doc_id)
    if not isinstance(doc_id, str) or not doc_id.strip():
        got = "missing" if "id" not in record else f"got {json.dumps(record['id'])}"
        raise DocumentsError(source, number, f"id: expected a non-empty string ({got})")
    text = record.get("text")
    if not isinstance(text, str) or not text.strip():
        got = "missing" if "text" not in record else f"got {_short(record['text'])}"
        raise DocumentsError(source, number, f"text: expected a non-empty string ({got})")
    title = record.get("title")
    if title is not None and not isinstance(title, str):
        raise DocumentsError(source, number, f"title: expected a string, got {_short(title)}")
    metadata = record.get("metadata", {})
    if not isinstance(metadata, dict):
        raise DocumentsError(
            source, number, f"metadata: expected an object, got {_short(metadata)}"
        )
    return SourceDocument(id=doc_id, text=text, title=title or None, metadata=metadata)


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 40 else text[:39] + "…"


def read_folder(
    folder: str | os.PathLike[str], *, skipped: list[str] | None = None
) -> list[SourceDocument]:
    """Every ``.txt``/``.md`` file under ``folder`` (recursively, sorted by path)."""
    root = Path(folder)
    out: list[SourceDocument] = []
    paths = sorted(
        p for p in root.rglob("*") if p.is_file() and p.suffix.lower() in DOCUMENT_SUFFIXES
    )
    for path in paths:
        doc_id = path.relative_to(root).as_posix()
        try:
            text = path.read_bytes().removeprefix(b"\xef\xbb\xbf").decode("utf-8")
        except UnicodeDecodeError:
            raise DocumentsError(
                str(path), None, "not UTF-8 text; save the file as UTF-8"
            ) from None
        if not text.strip():
            if skipped is not None:
                skipped.append(doc_id)
            continue
        title = _markdown_title(text) if path.suffix.lower() == ".md" else None
        out.append(SourceDocument(id=doc_id, text=text, title=title, metadata={"path": doc_id}))
    return out


def _markdown_title(text: str) -> str | None:
    first = text.lstrip().split("\n", 1)[0].strip()
    if first.startswith("# "):
        return first[2:].strip() or None
    return None


def check_unique(documents: Iterable[SourceDocument]) -> list[SourceDocument]:
    """The documents as a list; a repeated id is refused naming both positions."""
    out: list[SourceDocument] = []
    first: dict[str, int] = {}
    for i, document in enumerate(documents):
        if not isinstance(document, SourceDocument):
            raise TypeError(
                f"documents[{i}] is a {type(document).__name__}, not a SourceDocument (the "
                "LangChain and LlamaIndex adapters convert theirs: source_documents(...))"
            )
        if document.id in first:
            raise ValueError(
                f"documents[{i}] repeats the id {document.id!r} of "
                f"documents[{first[document.id]}]; document ids must be unique "
                "(they are what relevance labels name)"
            )
        first[document.id] = i
        out.append(document)
    return out
