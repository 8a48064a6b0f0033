"""The demo data set: the employee handbook of a fictional company and questions about it.

Why it exists: a RAG evaluation is only convincing on a corpus where retrieval can go wrong. The
42 short policy documents of "Birchmoor Labs GmbH" (an invented company; every text was written
for ragbridge) cover distinct topics, and several sit deliberately close to each other (annual
vs. sick vs. special leave, domestic vs. international travel, learning budget vs. conferences),
so a retriever has to tell near neighbours apart. The 42 questions come in four kinds, named in
``metadata["kind"]``: ``single-hop`` (one document answers), ``paraphrase`` (worded unlike its
document), ``multi-hop`` (two documents are needed, both graded 2) and ``no-answer`` (the
handbook is silent: ``relevance == {}``, the reference says so).

Questions carry graded relevance by *document id* (2 answers it, 1 is related or partial) and a
short reference answer whose numbers and names match the corpus; they carry no answer and no
contexts: a pipeline fills those in (see `ragbridge.adapters.demo.pipelines`).

The files are package data read with `importlib.resources`, so they load from an installed wheel
as well as from a source checkout, and are parsed once per process (results are cached; the
lists returned are fresh copies, the `Sample`s themselves are immutable).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources

from ragbridge.core.sample import Sample, SampleValidationError

__all__ = [
    "COMPANY",
    "CORPUS_FILE",
    "QUESTIONS_FILE",
    "HandbookDocument",
    "corpus",
    "document",
    "documents",
    "questions",
]

COMPANY = "Birchmoor Labs GmbH"
"""The fictional company the handbook belongs to."""

CORPUS_FILE = "handbook_corpus.jsonl"
"""One ``{"id", "title", "text"}`` object per line (in the package's ``data`` folder)."""

QUESTIONS_FILE = "handbook_questions.jsonl"
"""One ragbridge `Sample` per line: id, question, reference, relevance, metadata."""

_PACKAGE = "ragbridge.adapters.demo"


@dataclass(frozen=True)
class HandbookDocument:
    """One handbook document: a short stable id (``"leave-annual"``), a title and the text."""

    id: str
    title: str
    text: str

    @property
    def full_text(self) -> str:
        """Title and text as one passage (what the demo pipelines index)."""
        return f"{self.title}. {self.text}"


def _read(name: str) -> str:
    return resources.files(_PACKAGE).joinpath("data").joinpath(name).read_text(encoding="utf-8")


def _lines(name: str) -> Iterator[tuple[int, str]]:
    """The file's non-blank lines with their numbers (from 1), for errors naming ``file:line``."""
    for number, line in enumerate(_read(name).splitlines(), start=1):
        if line.strip():
            yield number, line


@functools.lru_cache(maxsize=1)
def _documents() -> tuple[HandbookDocument, ...]:
    by_id: dict[str, HandbookDocument] = {}
    for number, line in _lines(CORPUS_FILE):
        where = f"{CORPUS_FILE}:{number}"
        record = json.loads(line)
        if not isinstance(record, dict):
            raise ValueError(f"{where}: expected an object")
        for key in ("id", "title", "text"):
            if not isinstance(record.get(key), str) or not record[key].strip():
                raise ValueError(f"{where}: field {key!r} must be a non-empty string")
        if record["id"] in by_id:
            raise ValueError(f"{where}: duplicate document id {record['id']!r}")
        by_id[record["id"]] = HandbookDocument(record["id"], record["title"], record["text"])
    return tuple(by_id.values())


@functools.lru_cache(maxsize=1)
def _questions() -> tuple[Sample, ...]:
    by_id: dict[str, Sample] = {}
    for number, line in _lines(QUESTIONS_FILE):
        try:
            sample = Sample.model_validate_json(line)
        except ValueError as exc:
            raise SampleValidationError(QUESTIONS_FILE, number, [str(exc)]) from None
        if sample.id in by_id:
            raise SampleValidationError(
                QUESTIONS_FILE, number, [f"id: duplicate sample id {sample.id!r}"]
            )
        by_id[sample.id] = sample
    return tuple(by_id.values())


def documents() -> list[HandbookDocument]:
    """All handbook documents, in file order."""
    return list(_documents())


def document(doc_id: str) -> HandbookDocument:
    """One document by id; KeyError naming the id when there is none."""
    for doc in _documents():
        if doc.id == doc_id:
            return doc
    raise KeyError(f"no handbook document with id {doc_id!r}")


def corpus(*, with_titles: bool = False) -> dict[str, str]:
    """``{document id: text}``; with ``with_titles=True`` the text starts with the title."""
    return {d.id: d.full_text if with_titles else d.text for d in _documents()}


def questions(kind: str | None = None) -> list[Sample]:
    """The labelled questions as `Sample`s (no answer, no contexts), in file order.

    ``kind`` keeps only one kind: ``"single-hop"``, ``"paraphrase"``, ``"multi-hop"`` or
    ``"no-answer"``.
    """
    items = _questions()
    if kind is None:
        return list(items)
    return [s for s in items if s.metadata.get("kind") == kind]
