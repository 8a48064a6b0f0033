"""Sample/Context model, JSONL streaming, error messages and the published JSON Schema."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest
from pydantic import ValidationError

from ragbridge.core import (
    Context,
    Sample,
    SampleValidationError,
    load_samples,
    sample_json_schema,
    save_samples,
)


def _write(path: Path, *rows: object) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_round_trip_keeps_every_field_and_the_no_answer_distinction(tmp_path: Path) -> None:
    samples = [
        Sample(
            id="q1",
            question="Who?",
            answer="Ada.",
            contexts=[Context(text="Ada wrote it.", id="d1", score=0.9, metadata={"src": "a"})],
            reference="Ada Lovelace",
            reference_contexts=["Ada wrote the first program."],
            relevance={"d1": 2, "d9": 0},
            metadata={"split": "dev"},
        ),
        Sample(id="q2", question="Unanswerable?", relevance={}),
        Sample(id="q3", question="Unlabelled?"),
    ]
    path = tmp_path / "out" / "eval.jsonl"
    assert save_samples(samples, path) == 3
    loaded = list(load_samples(path))
    assert loaded == samples
    assert loaded[1].relevance == {}
    assert loaded[1].is_no_answer
    assert loaded[2].relevance is None
    assert not loaded[2].is_no_answer
    # defaults are omitted from the file, but {} is not a default
    lines = path.read_text().splitlines()
    assert json.loads(lines[1]) == {"id": "q2", "question": "Unanswerable?", "relevance": {}}


def test_loading_is_lazy_and_streams(tmp_path: Path) -> None:
    path = _write(tmp_path / "s.jsonl", {"id": "a", "question": "q"}, "{not json")
    reader = load_samples(path)
    assert not isinstance(reader, list)
    assert next(reader).id == "a"  # the bad second line has not been read yet
    with pytest.raises(SampleValidationError):
        next(reader)


def test_memory_does_not_grow_with_file_size(tmp_path: Path) -> None:
    row = {"id": "", "question": "x" * 200, "contexts": ["c" * 500] * 3}
    path = tmp_path / "big.jsonl"
    with path.open("w") as handle:
        for i in range(20_000):
            row["id"] = f"s{i}"
            handle.write(json.dumps(row) + "\n")
    tracemalloc.start()
    count = sum(1 for _ in load_samples(path))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert count == 20_000
    # ~36 MB of JSON; a streaming reader holds one line plus the id set (~2 MB here)
    assert peak < 8_000_000, peak


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (
            {"id": "a", "question": "q", "contexts": ["ok", "ok", {"text": 5}]},
            "eval.jsonl:2: contexts[2].text: expected a string, got 5",
        ),
        ({"id": "a"}, "eval.jsonl:2: question: required field is missing"),
        (
            {"id": "a", "question": "q", "user_input": "q"},
            "eval.jsonl:2: user_input: unknown field (ragbridge calls it 'question')",
        ),
        (
            {"id": "a", "question": "q", "relevance": {"d1": "high"}},
            "eval.jsonl:2: relevance[\"d1\"]: a grade must be an integer, got 'high'",
        ),
        (
            {"id": "a", "question": "q", "contexts": [{"text": "t", "score": "NaN"}]},
            "eval.jsonl:2: contexts[0].score",
        ),
        ({"id": "", "question": "q"}, "eval.jsonl:2: id: must not be empty"),
        ("[1, 2", "eval.jsonl:2: invalid JSON"),
    ],
)
def test_bad_line_names_file_line_and_field(tmp_path: Path, row: object, message: str) -> None:
    path = _write(tmp_path / "eval.jsonl", {"id": "first", "question": "fine"}, row)
    with pytest.raises(SampleValidationError) as info:
        list(load_samples(path))
    text = str(info.value)
    assert text.startswith(str(tmp_path / message.split(":")[0]) + ":2: ")
    assert message.split(":", 1)[1] in text
    assert "pydantic" not in text
    assert "errors.pydantic.dev" not in text
    assert info.value.line == 2


def test_skip_invalid_collects_a_report_instead_of_failing(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "eval.jsonl",
        {"id": "a", "question": "q"},
        {"id": "b"},
        "",
        {"id": "a", "question": "again"},
        {"id": "c", "question": "q", "contexts": [1]},
        {"id": "d", "question": "q"},
    )
    reader = load_samples(path, skip_invalid=True)
    assert [s.id for s in reader] == ["a", "d"]
    report = reader.report
    assert report.loaded == 2
    assert [bad.line for bad in report.invalid] == [2, 4, 5]
    assert "duplicate sample id 'a' (first on line 1)" in str(report.invalid[1])
    assert "contexts[0]: expected an object" in str(report.invalid[2])
    assert str(report).startswith(f"{path}: 2 samples loaded, 3 invalid lines skipped")


def test_duplicate_ids_fail_by_default(tmp_path: Path) -> None:
    path = _write(tmp_path / "e.jsonl", {"id": 1, "question": "q"}, {"id": "1", "question": "q"})
    with pytest.raises(SampleValidationError, match=r"e.jsonl:2: id: duplicate sample id '1'"):
        list(load_samples(path))


def test_conveniences_bare_string_contexts_and_integer_ids() -> None:
    sample = Sample.model_validate(
        {"id": 7, "question": "q", "contexts": ["a", {"text": "b", "id": 3}]}
    )
    assert sample.id == "7"
    assert sample.contexts == [Context(text="a"), Context(text="b", id="3")]
    assert sample.context_ids == [None, "3"]


def test_values_are_validated_in_python_too() -> None:
    with pytest.raises(ValidationError):
        Sample(id="a", question="q", relevance={"d": True})  # type: ignore[dict-item]
    with pytest.raises(ValidationError):
        Context(text="t", score=float("inf"))


def test_json_schema_describes_the_accepted_lines() -> None:
    schema = sample_json_schema()
    assert schema["$schema"].endswith("2020-12/schema")
    assert set(schema["required"]) == {"id", "question"}
    assert schema["additionalProperties"] is False
    props = schema["properties"]
    assert set(props) == {
        "id", "question", "answer", "contexts", "reference", "reference_contexts",
        "relevance", "metadata", "history", "trajectory", "reference_tool_calls",
    }  # fmt: skip
    item_kinds = props["contexts"]["items"]["anyOf"]
    assert {"type": "string"} in item_kinds
    context = schema["$defs"]["Context"]
    assert context["required"] == ["text"]
    json.dumps(schema)  # serialisable as published


@pytest.mark.parametrize(
    ("grade", "problem"),
    [
        (10**30, "grade 100000…(31 digits) is out of range: grades must lie within [-10, 1000]"),
        (1001, "grade 1001 is out of range"),
        (-11, "grade -11 is out of range"),
        (True, "a grade must be an integer, got True"),
        (1.5, "a grade must be an integer, got 1.5"),
    ],
)
def test_relevance_grades_are_small_integers(tmp_path: Path, grade: object, problem: str) -> None:
    # 10**30 used to reach nDCG and come back as an OverflowError "judge_error".
    path = _write(tmp_path / "e.jsonl", {"id": "a", "question": "q", "relevance": {"d 1": grade}})
    with pytest.raises(SampleValidationError) as info:
        list(load_samples(path))
    assert str(info.value).startswith(f'{path}:1: relevance["d 1"]: {problem}')
    with pytest.raises(ValidationError):
        Sample(id="a", question="q", relevance={"d": grade})  # type: ignore[dict-item]


def test_the_extreme_accepted_grades_load() -> None:
    sample = Sample(id="a", question="q", relevance={"junk": -10, "best": 1000})
    assert sample.relevance == {"junk": -10, "best": 1000}
    grade = sample_json_schema()["properties"]["relevance"]["anyOf"][0]["additionalProperties"]
    assert (grade["minimum"], grade["maximum"]) == (-10, 1000)


def test_a_utf8_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + b'{"id": "a", "question": "caf\xc3\xa9?"}\n')
    assert [s.question for s in load_samples(path)] == ["café?"]


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be"])
def test_utf16_is_refused_by_name(tmp_path: Path, encoding: str) -> None:
    path = tmp_path / "wide.jsonl"
    path.write_bytes('{"id": "a", "question": "q"}\n'.encode(encoding))
    with pytest.raises(SampleValidationError) as info:
        list(load_samples(path))
    assert (
        str(info.value)
        == f"{path}:1: the file is UTF-16; save it as UTF-8 (one JSON object per line)"
    )


def test_other_encodings_are_refused_naming_the_line_and_byte(tmp_path: Path) -> None:
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(
        b'{"id": "a", "question": "q"}\n\n' + '{"id": "b", "question": "café"}\n'.encode("latin-1")
    )
    with pytest.raises(SampleValidationError) as info:
        list(load_samples(path))
    assert info.value.line == 3
    assert str(info.value) == (
        f"{path}:3: not UTF-8 text (byte 0xe9 at column 29); save the file as UTF-8"
    )


def test_save_samples_is_atomic_when_a_write_fails_midway(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    save_samples([Sample(id="old", question="q")], path)
    before = path.read_bytes()

    def broken() -> object:
        yield Sample(id="new", question="q")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        save_samples(broken(), path)  # type: ignore[arg-type]
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl"]
