"""The pieces of test-set generation: documents, chunks, styles, passages, dedup, the plan."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragbridge.core.testset import (
    DocumentsError,
    NearDuplicates,
    SourceDocument,
    TestsetSpec,
    load_documents,
    locate_passage,
    parse_styles,
    split_documents,
)
from ragbridge.core.testset.chunks import MIN_CHUNK_WORDS
from ragbridge.core.testset.passages import locate_passages
from ragbridge.core.testset.plan import Planner, waves
from ragbridge.core.testset.styles import allocate, no_answer_count

SOURCE = (
    "Leave is requested in the HR portal Lumen at least two weeks in advance and needs the "
    "approval of the line manager. During the first six months of employment, no more than "
    "10 days of annual leave may be taken."
)

# --------------------------------------------------------------------------- documents


def _jsonl(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "corpus.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_jsonl_corpus_reads_ids_texts_titles_and_metadata(tmp_path: Path) -> None:
    path = _jsonl(
        tmp_path,
        [
            json.dumps({"id": "a", "text": "Alpha text.", "title": "Alpha"}),
            "",
            json.dumps({"id": 7, "text": "Seven.", "metadata": {"lang": "en"}}),
        ],
    )
    docs = load_documents(path)
    assert [(d.id, d.text, d.title) for d in docs] == [
        ("a", "Alpha text.", "Alpha"),
        ("7", "Seven.", None),
    ]
    assert docs[1].metadata == {"lang": "en"}


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('{"id": "a"}', "corpus.jsonl:2: text: expected a non-empty string (missing)"),
        ('{"id": "a", "text": "  "}', "corpus.jsonl:2: text: expected a non-empty string"),
        ('{"text": "x"}', "corpus.jsonl:2: id: expected a non-empty string (missing)"),
        ('{"id": "a", "page_content": "x"}', "corpus.jsonl:2: page_content: unknown field "
         "(ragbridge calls it 'text')"),
        ('{"id": "a", "text": "x", "title": 3}', "corpus.jsonl:2: title: expected a string"),
        ('{"id": "a", "text": "x", "metadata": []}',
         "corpus.jsonl:2: metadata: expected an object"),
        ('["a", "x"]', "corpus.jsonl:2: expected a JSON object"),
        ('{"id": "a", "text": ', "corpus.jsonl:2: invalid JSON"),
        ('{"id": "ok", "text": "again"}', "corpus.jsonl:2: id: duplicate document id 'ok' "
         "(first on line 1)"),
    ],
)  # fmt: skip
def test_a_bad_corpus_line_names_file_line_and_field(
    tmp_path: Path, line: str, expected: str
) -> None:
    path = _jsonl(tmp_path, [json.dumps({"id": "ok", "text": "fine"}), line])
    with pytest.raises(DocumentsError) as caught:
        load_documents(path)
    message = str(caught.value)
    assert message.startswith(str(path.parent / expected.split(":", 1)[0])), message
    assert expected.split(":", 1)[1] in message


def test_a_folder_corpus_uses_relative_paths_as_ids_and_skips_empty_files(tmp_path: Path) -> None:
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "leave.md").write_text("# Leave\n\nTake 28 days.", encoding="utf-8")
    (tmp_path / "intro.txt").write_text("Welcome to the company.", encoding="utf-8")
    (tmp_path / "README.md").write_text("  \n", encoding="utf-8")
    (tmp_path / "image.png").write_bytes(b"\x89PNG")
    skipped: list[str] = []
    docs = load_documents(tmp_path, skipped=skipped)
    assert [(d.id, d.title) for d in docs] == [("intro.txt", None), ("policies/leave.md", "Leave")]
    assert skipped == ["README.md"]


def test_a_folder_file_that_is_not_utf8_is_named(tmp_path: Path) -> None:
    (tmp_path / "bad.txt").write_bytes(b"caf\xe9")
    with pytest.raises(DocumentsError, match=r"bad\.txt: not UTF-8"):
        load_documents(tmp_path)


def test_an_empty_corpus_is_refused(tmp_path: Path) -> None:
    with pytest.raises(DocumentsError, match="holds no documents"):
        load_documents(tmp_path)


# --------------------------------------------------------------------------- chunks


def test_a_short_document_is_one_chunk_with_the_document_id() -> None:
    [chunk] = split_documents([SourceDocument("leave", SOURCE, "Leave")])
    assert (chunk.id, chunk.document, chunk.group, chunk.text) == (
        "leave",
        "leave",
        "leave",
        SOURCE,
    )


def test_a_long_document_splits_into_numbered_exact_slices() -> None:
    paragraphs = [f"Paragraph {i}. " + "word " * 60 for i in range(6)]
    text = "\n\n".join(paragraphs)
    doc = SourceDocument("handbook", text)
    chunks = split_documents([doc], max_chars=800)
    assert [c.id for c in chunks] == [f"handbook#{n}" for n in range(1, len(chunks) + 1)]
    assert len(chunks) > 1
    for chunk in chunks:
        assert len(chunk.text) <= 800
        assert text[chunk.start : chunk.start + len(chunk.text)] == chunk.text
        assert chunk.document == chunk.group == "handbook"
    # nothing is lost: every paragraph is in some chunk
    assert all(any(p.strip() in c.text for c in chunks) for p in paragraphs)


def test_a_sentence_longer_than_the_limit_is_cut_at_a_space() -> None:
    text = " ".join(["longword"] * 100)  # one 899-character "sentence"
    chunks = split_documents([SourceDocument("d", text)], max_chars=300)
    assert all(len(c.text) <= 300 for c in chunks)
    assert " ".join(c.text for c in chunks) == text


def test_a_piece_of_a_larger_document_is_graded_by_its_parent() -> None:
    [chunk] = split_documents([SourceDocument("src#2", SOURCE, parent_id="src")])
    assert (chunk.id, chunk.group) == ("src#2", "src")


def test_repeated_document_ids_are_refused() -> None:
    with pytest.raises(ValueError, match=r"documents\[1\] repeats the id 'a'"):
        split_documents([SourceDocument("a", "x"), SourceDocument("a", "y")])


# --------------------------------------------------------------------------- styles


def test_styles_parse_and_normalise() -> None:
    assert parse_styles("single=2, multi=1,reasoning=1") == {
        "single": 0.5,
        "multi": 0.25,
        "reasoning": 0.25,
    }
    assert parse_styles("reasoning=1") == {"reasoning": 1.0}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("single=0.5,yesno=0.5", "unknown style 'yesno'"),
        ("single=0.9,no-answer=0.1", "own share"),
        ("single", "expected STYLE=SHARE"),
        ("single=lots", "expected a number"),
        ("single=-1", ">= 0"),
        ("single=0", "sum to 0"),
        ("single=1,single=2", "given twice"),
    ],
)
def test_bad_styles_are_named(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_styles(text)


def test_counts_follow_the_proportions_exactly() -> None:
    assert allocate(45, {"single": 0.5, "multi": 0.25, "reasoning": 0.25}) == {
        "single": 23,
        "multi": 11,
        "reasoning": 11,
    }
    assert sum(allocate(7, {"single": 1 / 3, "multi": 1 / 3, "reasoning": 1 / 3}).values()) == 7
    assert no_answer_count(25, 0.1) == 3  # rounded up: never below the share asked for
    assert no_answer_count(50, 0.1) == 5
    assert no_answer_count(10, 0.0) == 0
    spec = TestsetSpec(size=40, no_answer_share=0.1)
    assert spec.targets() == {"single": 18, "multi": 9, "reasoning": 9, "no-answer": 4}


# --------------------------------------------------------------------------- passages


@pytest.mark.parametrize(
    "quote",
    [
        "Leave is requested in the HR portal Lumen at least two weeks in advance",
        "leave is requested in the hr portal lumen at least two weeks in advance.",
        "\u201cLeave is requested in the HR portal Lumen\nat least two weeks in advance\u201d",
        "  During the first six months of employment, no more than 10 days  ",
        "Leave is requested in the HR portal ... needs the approval of the line manager.",
        "**Leave is requested** in the HR portal Lumen",
    ],
)
def test_a_quote_is_found_despite_case_whitespace_quotes_and_elision(quote: str) -> None:
    span = locate_passage(quote, SOURCE)
    assert span is not None
    assert span in SOURCE


@pytest.mark.parametrize(
    "quote",
    [
        "Leave is requested via the HR portal Lumen at least two weeks in advance",  # a word
        "Leave is requested in HR portal Lumen at least two weeks in advance",  # dropped "the"
        "Leave must be requested two weeks in advance in Lumen",  # paraphrase
        "no more than ten days of annual leave may be taken",  # number written differently
        "the HR portal",  # too short to tell a quote from a coincidence
        "Leave is requested ... the line manager",  # an elided fragment of three words
        "the line manager. Leave is requested in the HR portal",  # fragments out of order
    ],
)
def test_a_paraphrase_is_not_a_quote(quote: str) -> None:
    assert locate_passage(quote, SOURCE) is None


def test_the_span_is_the_sources_own_text() -> None:
    source = "The fee is \u201c30 euros\u201d per month \u2014 paid monthly."
    span = locate_passage('the fee is "30 euros" per month - paid monthly', source)
    assert span == "The fee is \u201c30 euros\u201d per month \u2014 paid monthly"


def test_multi_quotes_each_come_from_a_different_source_in_either_order() -> None:
    a = "Employees receive a subsidy of 30 euros per month for a fitness studio."
    b = "Salaries are paid on the last working day of each month."
    quotes = ["Salaries are paid on the last working day", "a subsidy of 30 euros per month"]
    assert locate_passages(quotes, [a, b]) == [
        "a subsidy of 30 euros per month",
        "Salaries are paid on the last working day",
    ]
    assert locate_passages([quotes[1], quotes[1]], [a, b]) is None  # both from one source
    assert locate_passages(quotes[:1], [a, b]) is None


# --------------------------------------------------------------------------- dedup


def test_near_duplicates_are_found_by_cosine_and_by_text() -> None:
    seen = NearDuplicates(threshold=0.9)
    seen.add("q1", "How many days of leave?", [1.0, 0.0, 0.0])
    assert seen.check("Something else?", [0.0, 1.0, 0.0]) == (0.0, None)
    score, dup = seen.check("Leave days, how many?", [0.99, 0.1, 0.0])
    assert dup == "q1"
    assert score > 0.9
    assert seen.check("  how many DAYS of leave ", [0.0, 0.0, 1.0])[1] == "q1"
    seen.remove("q1")
    assert seen.check("How many days of leave?", [1.0, 0.0, 0.0]) == (0.0, None)


# --------------------------------------------------------------------------- plan


def _chunks(n: int) -> list[SourceDocument]:
    words = " ".join(f"w{i}" for i in range(MIN_CHUNK_WORDS))
    return [SourceDocument(f"d{i}", f"Document {i}: {words}.") for i in range(n)]


def test_the_plan_is_a_function_of_the_seed() -> None:
    chunks = split_documents(_chunks(10))
    spec = TestsetSpec(size=12)

    def plan(seed: int) -> list[tuple[str, tuple[str, ...]]]:
        planner = Planner(chunks, TestsetSpec(size=12, seed=seed))
        return [r.key for r in planner.requests(spec.targets(), 1)]

    assert plan(1) == plan(1)
    assert plan(1) != plan(2)
    styles = [style for style, _ in plan(1)]
    assert {s: styles.count(s) for s in set(styles)} == spec.targets()


def test_every_chunk_is_used_once_before_any_twice_and_pairs_never_repeat() -> None:
    chunks = split_documents(_chunks(4))
    planner = Planner(chunks, TestsetSpec(size=8, styles={"multi": 1}, no_answer_share=0))
    requests = planner.requests({"multi": 6}, 1)
    anchors = [r.anchor.id for r in requests]
    assert len(set(anchors[:4])) == 4
    pairs = [frozenset(c.id for c in r.chunks) for r in requests]
    assert len(pairs) == len(set(pairs)) == 6  # 4 chunks have exactly 6 pairs
    assert planner.requests({"multi": 1}, 2) == []  # none left


def test_a_repeated_request_waits_for_the_next_wave() -> None:
    chunks = split_documents(_chunks(2))
    planner = Planner(chunks, TestsetSpec(size=5, styles={"single": 1}, no_answer_share=0))
    requests = planner.requests({"single": 5}, 1)
    assert [len(w) for w in waves(requests)] == [2, 2, 1]


def test_a_corpus_too_small_for_the_spec_is_refused_by_the_planner() -> None:
    tiny = split_documents([SourceDocument("a", "Too short.")])
    assert "nothing to write" in (Planner(tiny, TestsetSpec()).problem() or "")
    one = split_documents(_chunks(1))
    assert "at least two chunks" in (Planner(one, TestsetSpec()).problem() or "")
    assert Planner(one, TestsetSpec(styles={"single": 1})).problem() is None
