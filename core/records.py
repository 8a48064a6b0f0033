"""One reader for the family of records: samples and conversations (agent trajectories next).

A records file holds one kind of record, told apart line by line: a line with ``"turns"`` is a
`Conversation`, any other a `Sample`. Mixing kinds in one file is refused, naming the first
line of the other kind: the kind decides how a file is scored and reported (per sample, or per
turn and per conversation), and a file that mixes them is far more often two files joined by
mistake than a plan. A sample becomes a one-exchange conversation with
`Conversation.from_sample` when both kinds must go together.

Each line is checked as `load_samples` checks one (UTF-8, unique ids, ``file:line: field:
problem`` errors as `SampleValidationError`), by the same reader.
"""

from __future__ import annotations

import os
from typing import Literal, Union

from pydantic import ValidationError
from pydantic_core import InitErrorDetails, from_json

from .conversation import Conversation, FieldProblem
from .sample import RecordReader, Sample

__all__ = ["Record", "RecordKind", "RecordsReader", "load_records", "record_kind"]

Record = Union[Sample, Conversation]  # noqa: UP007 - a runtime alias, Python 3.10 included
"""One line of a records file."""

RecordKind = Literal["sample", "conversation"]

_MARK = "turns"
"""The key that makes a line a conversation."""


def record_kind(line: str) -> RecordKind:
    """The kind of record one JSONL line holds: ``"conversation"`` when it is an object with
    ``"turns"``, else ``"sample"`` (an unparsable line too: the sample check then says why)."""
    if f'"{_MARK}"' not in line and "\\u" not in line:
        return "sample"  # the key cannot be there (not even \u-escaped): no need to parse
    try:
        value = from_json(line)
    except ValueError:
        return "sample"
    return "conversation" if isinstance(value, dict) and _MARK in value else "sample"


class RecordsReader(RecordReader[Record]):
    """Streams the records of a JSONL file of samples or of conversations. ``kind`` is the
    file's kind once its first record line is read (None before, and for an empty file)."""

    noun = "record"
    kind: RecordKind | None = None
    _first_line = 0

    def _validate(self, raw: str, number: int) -> Record:
        kind = record_kind(raw)
        if self.kind is None:
            self.kind, self._first_line = kind, number
        elif kind != self.kind:
            raise _mixed(kind, self.kind, self._first_line)
        if kind == "conversation":
            return Conversation.model_validate_json(raw)
        return Sample.model_validate_json(raw)


def _mixed(kind: RecordKind, first: RecordKind, first_line: int) -> ValidationError:
    """The error for a line whose kind differs from the file's, worded at ``turns`` (the key
    that tells the kinds apart)."""
    if kind == "conversation":
        problem = f"this line is a conversation, but line {first_line} is a sample"
    else:
        problem = (
            f"required field is missing: line {first_line} is a conversation and this line is "
            "a sample"
        )
    problem += (
        "; a file holds one kind of record (Conversation.from_sample makes a sample a "
        "one-exchange conversation)"
    )
    detail = InitErrorDetails(
        type="value_error", loc=(), input=None, ctx={"error": FieldProblem((_MARK,), problem)}
    )
    return ValidationError.from_exception_data(kind.capitalize(), [detail])


def load_records(
    path: str | os.PathLike[str], *, skip_invalid: bool = False, spill_ids: bool = False
) -> RecordsReader:
    """Stream the `Sample`s or `Conversation`s of a JSONL file (one kind per file).

    The errors and ``skip_invalid`` are those of `load_samples`; a line of the other kind is an
    error too (``data.jsonl:4: turns: this line is a conversation, but line 1 is a sample; ...``).
    ``spill_ids`` bounds the id check's memory for a validating pass (`RecordReader`).
    """
    return RecordsReader(path, skip_invalid=skip_invalid, spill_ids=spill_ids)
