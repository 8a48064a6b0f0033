"""The neutral record every adapter produces and every metric consumes.

A `Sample` is one question put to a RAG pipeline, with what the pipeline retrieved (`contexts`, in
rank order) and answered, and whatever ground truth exists. Keeping one small, strict record is what
lets a LangChain trace, a LlamaIndex response and a JSONL file be scored by the same code.

Two conventions carry meaning and are easy to get wrong:

* ``relevance`` is ``None`` when nobody labelled the sample, and ``{}`` when it was labelled and no
  relevant document exists (a no-answer query). Ranking measures are undefined for the latter; the
  ``no_answer`` measure scores it instead.
* ``contexts`` order *is* the ranking. Scores are kept for thresholds and reports, never re-sorted.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from typing_extensions import Self

from .files import atomic_write
from .record_fields import (
    Context,
    Grade,
    _id_to_str,
    _texts_as_contexts,
)
from .trajectory import Step
from .turn import ToolCall, Turn

if TYPE_CHECKING:
    from .id_spill import Duplicate, IdLedger

__all__ = [
    "Context",
    "InvalidLine",
    "RecordReader",
    "Sample",
    "SampleLoadReport",
    "SampleReader",
    "SampleValidationError",
    "iter_samples",
    "load_samples",
    "parse_sample_lines",
    "sample_json_schema",
    "save_samples",
    "validation_problems",
]

SCHEMA_ID = "https://ragbridge.dev/schema/sample-1.json"

# Field names other tools use for our fields: named in errors so a user converting a RAGAS or
# DeepEval file learns the right key instead of silently losing a column.
_ALIASES: dict[str, str] = {
    "user_input": "question",
    "query": "question",
    "input": "question",
    "response": "answer",
    "actual_output": "answer",
    "output": "answer",
    "retrieved_contexts": "contexts",
    "retrieval_context": "contexts",
    "context": "contexts",
    "ground_truth": "reference",
    "expected_output": "reference",
    "ground_truths": "reference",
    "qrels": "relevance",
}


class Sample(BaseModel):
    """One evaluated question: what was asked, retrieved and answered, and the ground truth."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    id: str = Field(min_length=1)
    question: str = Field(strict=True)
    answer: str | None = None
    contexts: list[Context] = Field(default_factory=list)
    reference: str | None = None
    reference_contexts: list[str] | None = None
    relevance: dict[str, Grade] | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    history: list[Turn] | None = None
    """The conversation before ``question`` when the sample is a turn of one
    (`Conversation.turn_sample`): ``[]`` for its first question, None for a sample that is no
    conversation's turn. Judges read it to resolve a follow-up's "it"; faithfulness may count a
    claim the conversation itself supports (a fact the user stated, an earlier turn's context)."""
    trajectory: list[Step] | None = None
    """The tool calls an agent made on the way to ``answer``, in order, each with its output and
    the contexts a retrieval step returned (`ragbridge.core.trajectory`); None for a sample that
    is no agent's."""
    reference_tool_calls: list[ToolCall] | None = None
    """The tool calls expected (RAGAS's ``reference_tool_calls``, DeepEval's ``expected_tools``),
    compared with the trajectory's calls by the tool-call measures."""

    @field_validator("id", mode="before")
    @classmethod
    def _coerce_id(cls, value: Any) -> Any:
        return _id_to_str(value)

    @field_validator("contexts", mode="before")
    @classmethod
    def _bare_strings_are_contexts(cls, value: Any) -> Any:
        return _texts_as_contexts(value)

    @property
    def context_ids(self) -> list[str | None]:
        return [c.id for c in self.contexts]

    @property
    def is_no_answer(self) -> bool:
        """Labelled, and no relevant document exists (``relevance == {}`` or every grade <= 0)."""
        return self.relevance is not None and not any(g > 0 for g in self.relevance.values())


def sample_json_schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of one line of a ragbridge samples file."""
    schema = Sample.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = SCHEMA_ID
    # The validator also accepts bare strings as contexts; say so in the published schema.
    contexts = schema["properties"]["contexts"]
    contexts["items"] = {"anyOf": [contexts["items"], {"type": "string"}]}
    for key in ("id",):
        schema["properties"][key] = {
            "anyOf": [{"type": "string", "minLength": 1}, {"type": "integer"}]
        }
    return schema


# --------------------------------------------------------------------------- errors


_MESSAGES = {
    "string_type": "expected a string",
    "missing": "required field is missing",
    "float_type": "expected a number",
    "float_parsing": "expected a number",
    "finite_number": "expected a finite number",
    "int_type": "expected an integer",
    "int_parsing": "expected an integer",
    "int_from_float": "expected an integer",
    "dict_type": "expected an object",
    "model_type": "expected an object",
    "model_attributes_type": "expected an object",
    "list_type": "expected a list",
    "string_too_short": "must not be empty",
}


def _loc_to_path(loc: tuple[str | int, ...]) -> str:
    path = ""
    for i, part in enumerate(loc):
        if isinstance(part, int):
            path += f"[{part}]"
        elif part in {"function-before", "function-after"} or part.startswith("function-"):
            continue
        elif i > 0 and loc[i - 1] == "relevance":  # a context id: any string, shown quoted
            path += f"[{json.dumps(part, ensure_ascii=False)}]"
        else:
            path += f".{part}" if path else str(part)
    return path or "<line>"


def _describe(err: dict[str, Any]) -> str:
    kind = err["type"]
    loc = tuple(err["loc"])
    if kind == "extra_forbidden":
        name = str(loc[-1]) if loc else "?"
        hint = _ALIASES.get(name) if len(loc) == 1 else None
        extra = f" (ragbridge calls it {hint!r})" if hint else ""
        return f"{_loc_to_path(loc)}: unknown field{extra}"
    if kind == "json_invalid":
        return f"invalid JSON: {err.get('ctx', {}).get('error', err['msg'])}"
    if kind == "value_error":
        msg = str(err["msg"]).removeprefix("Value error, ")
        # A check over a whole record names the part at fault (conversation.FieldProblem).
        inner = getattr(err.get("ctx", {}).get("error"), "field_path", ())
        return f"{_loc_to_path((*loc, *inner))}: {msg}"
    text = _MESSAGES.get(kind, str(err["msg"]).lower())
    got = err.get("input")
    if kind.endswith("_type") and not isinstance(got, (dict, list)):
        text += f", got {json.dumps(got) if _jsonable(got) else repr(got)}"
    return f"{_loc_to_path(loc)}: {text}"


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


class SampleValidationError(ValueError):
    """A samples file has a bad line. The message starts ``file:line:`` and names the field."""

    def __init__(self, source: str, line: int, problems: list[str]) -> None:
        self.source = source
        self.line = line
        self.problems = problems
        first = f"{source}:{line}: {problems[0]}"
        more = "".join(f"\n{source}:{line}: {p}" for p in problems[1:])
        super().__init__(first + more)


def validation_problems(exc: ValidationError) -> list[str]:
    """Each problem of a failed validation as one line (``field: problem``), worded as for JSONL."""
    return [_describe(dict(e)) for e in exc.errors(include_url=False)]


@dataclass(frozen=True)
class InvalidLine:
    """A line left out of a lenient load, with why."""

    line: int
    problems: list[str]

    def __str__(self) -> str:
        return "; ".join(self.problems)


@dataclass
class SampleLoadReport:
    """What a lenient (``skip_invalid=True``) load left out, so nothing is dropped unnoticed."""

    source: str
    loaded: int = 0
    invalid: list[InvalidLine] = field(default_factory=list)
    noun: str = "samples"

    @property
    def ok(self) -> bool:
        return not self.invalid

    def __str__(self) -> str:
        skipped = len(self.invalid)
        head = f"{self.source}: {self.loaded} {self.noun} loaded, {skipped} invalid lines skipped"
        return "\n".join([head, *(f"{self.source}:{bad.line}: {bad}" for bad in self.invalid)])


_UTF8_BOM = b"\xef\xbb\xbf"
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def _refuse_utf16(source: str, first: bytes) -> None:
    """UTF-16 (what PowerShell's ``>`` and some Windows tools write) is refused by name.

    Decoding it as UTF-8 would fail on byte 2 with a message that explains nothing.
    """
    if first.startswith(_UTF16_BOMS) or (len(first) >= 2 and b"\x00" in first[:2]):
        raise SampleValidationError(
            source, 1, ["the file is UTF-16; save it as UTF-8 (one JSON object per line)"]
        )


def _not_utf8(data: bytes, exc: UnicodeDecodeError) -> str:
    return (
        f"not UTF-8 text (byte 0x{data[exc.start]:02x} at column {exc.start + 1}); "
        "save the file as UTF-8"
    )


class _Identified(Protocol):
    @property
    def id(self) -> str: ...


R = TypeVar("R", bound=_Identified)


class RecordReader(Iterator[R]):
    """Streams records from a JSONL file one line at a time; memory does not grow with file size.

    Blank lines are ignored. Ids must be unique within a file (a duplicate is an error naming
    both lines), because every result downstream is keyed by id. The file must be UTF-8; a
    leading UTF-8 byte-order mark is accepted, UTF-16 and other encodings are refused with a
    ``file:line:`` error saying so. A subclass says how a line becomes its kind of record
    (`_validate`) and what one is called (``noun``): samples, conversations, one loop.
    """

    noun = "record"

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        skip_invalid: bool = False,
        lines: Iterable[tuple[int, bytes]] | None = None,
        spill_ids: bool = False,
    ) -> None:
        """Read ``path``; or, with ``lines``, parse those ``(number, raw line)`` pairs of it.

        ``spill_ids`` bounds the memory of the id check for a validating pass that scores
        nothing (`ragbridge.core.id_spill.IdLedger`: ids past its threshold go to
        sorted runs on disk): a repeat past the threshold is then raised when the file ends,
        with the error an in-memory check raises first. Not with ``skip_invalid``, which must
        know at each line whether to skip it.
        """
        self.path = Path(path)
        self.skip_invalid = skip_invalid
        self.report = SampleLoadReport(source=str(path), noun=f"{self.noun}s")
        self._seen: dict[str, int] = {}
        self._lines = self._read() if lines is None else self._parse(str(path), lines)
        self._ledger: IdLedger | None = None
        if spill_ids and not skip_invalid:
            from .id_spill import IdLedger

            self._ledger = IdLedger()
            self._lines = self._spilled(str(path), self._lines, self._ledger)

    def _read(self) -> Iterator[R]:
        with self.path.open("rb") as handle:
            yield from self._parse(str(self.path), enumerate(handle, start=1))

    def _parse(self, source: str, lines: Iterable[tuple[int, bytes]]) -> Iterator[R]:
        """Records from ``(line number, raw line)`` pairs of ``source``, checked one by one."""
        for number, data in lines:
            if number == 1:
                _refuse_utf16(source, data)
                data = data.removeprefix(_UTF8_BOM)  # Windows editors add one: harmless
            try:
                raw = data.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise SampleValidationError(source, number, [_not_utf8(data, exc)]) from None
            if not raw.strip():
                continue
            try:
                record = self._validate(raw, number)
            except ValidationError as exc:
                problems = validation_problems(exc)
                if not self.skip_invalid:
                    raise SampleValidationError(source, number, problems) from None
                self.report.invalid.append(InvalidLine(number, problems))
                continue
            first = self._first_read(record.id, number)
            if first is not None:
                problem = f"id: duplicate {self.noun} id {record.id!r} (first on line {first})"
                if not self.skip_invalid:
                    raise SampleValidationError(source, number, [problem])
                self.report.invalid.append(InvalidLine(number, [problem]))
                continue
            if self._ledger is None:
                self._seen[record.id] = number
            self.report.loaded += 1
            yield record

    def _first_read(self, record_id: str, number: int) -> int | None:
        """The line ``record_id`` was first read on, when that is known now (else None)."""
        if self._ledger is None:
            return self._seen.get(record_id)
        found = self._ledger.add(record_id, (0, number))
        return None if found is None else found.first[1]

    def _spilled(self, source: str, records: Iterator[R], ledger: IdLedger) -> Iterator[R]:
        """``records``, then the repeats a spilled id check finds once they are all read (or
        before another line's error, when a repeat came first)."""
        with ledger:
            try:
                yield from records
            except SampleValidationError:
                self._refuse(source, ledger.finish())
                raise
            self._refuse(source, ledger.finish())

    def _refuse(self, source: str, found: Duplicate | None) -> None:
        if found is not None:
            problem = (
                f"id: duplicate {self.noun} id {found.sample_id!r} (first on line {found.first[1]})"
            )
            raise SampleValidationError(source, found.again[1], [problem])

    def _validate(self, raw: str, number: int) -> R:
        """The record on line ``number``; a bad one raises pydantic's ValidationError (worded by
        `validation_problems`)."""
        raise NotImplementedError

    def __next__(self) -> R:
        return next(self._lines)

    def __iter__(self) -> Self:
        return self


class SampleReader(RecordReader[Sample]):
    """Streams samples from a JSONL file, with `RecordReader`'s checks."""

    noun = "sample"

    def _validate(self, raw: str, number: int) -> Sample:
        return Sample.model_validate_json(raw)


def parse_sample_lines(source: str, lines: Iterable[tuple[int, bytes]]) -> SampleReader:
    """Samples from numbered raw lines of ``source`` (a part of a file read elsewhere, e.g. a
    partition a cluster worker scores), with the same checks and ``file:line:`` errors as
    `load_samples`; duplicate ids are caught within these lines only."""
    return SampleReader(source, lines=lines)


def load_samples(path: str | os.PathLike[str], *, skip_invalid: bool = False) -> SampleReader:
    """Stream `Sample`s from a JSONL file.

    With ``skip_invalid=True`` bad lines are collected in ``reader.report`` instead of raising; read
    the report after iterating. Otherwise the first bad line raises `SampleValidationError`
    (``eval.jsonl:17: contexts[2].text: expected a string``).
    """
    return SampleReader(path, skip_invalid=skip_invalid)


iter_samples = load_samples


def save_samples(samples: Iterable[Sample], path: str | os.PathLike[str]) -> int:
    """Write samples as JSONL atomically (a crash never leaves half a file); returns the count.

    Fields at their defaults are omitted to keep files small; ``relevance: {}`` is kept because it
    differs from "not labelled".
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with atomic_write(target) as handle:
        for sample in samples:
            handle.write(sample.model_dump_json(exclude_defaults=True))
            handle.write("\n")
            count += 1
    return count
