"""The citation parser: every form it reads, mixtures, citations naming no context, and the
brackets that are not citations (`ragbridge.core.citations.parse`)."""

from __future__ import annotations

import pytest

from ragbridge.core.citations import CitedAnswer, parse_citations
from ragbridge.core.citations.parse import unresolved_message
from ragbridge.core.sample import Context

FOUR = [
    Context(text="The Eiffel Tower is in Paris.", id="doc-1", metadata={"source": "/kb/paris.md"}),
    Context(
        text="It was completed in 1889.", id="kb:faq_2.v1-3", metadata={"file_name": "faq.pdf"}
    ),
    Context(text="Bananas are rich in potassium.", metadata={"title": "Fruit facts"}),
    Context(text="Lyon is in France.", metadata={"url": "https://example.org/wiki/Lyon/"}),
]


def cites(parsed: CitedAnswer) -> list[tuple[str, list[int | None]]]:
    """(statement text, cited context indices) per statement."""
    return [(s.text, [c.context for c in s.citations]) for s in parsed.statements]


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("It is in Paris [1].", [1 - 1]),
        ("It is in Paris [1, 3].", [0, 2]),
        ("It is in Paris [1][3].", [0, 2]),
        ("It is in Paris [1-3].", [0, 1, 2]),
        ("It is in Paris [1–3].", [0, 1, 2]),  # an en dash
        ("It is in Paris [Source 2].", [1]),
        ("It is in Paris [doc-1].", [0]),
        ("It is in Paris [kb:faq_2.v1-3].", [1]),  # ids may hold - _ . :
        ("It is in Paris [doc-1, kb:faq_2.v1-3].", [0, 1]),
        ("It is in Paris (source: paris.md).", [0]),  # a path's last segment
        ("It is in Paris (Source: /kb/paris.md).", [0]),
        ("It is in Paris (sources: faq.pdf, Fruit facts).", [1, 2]),  # file_name, title
        ("It is in Paris (Sources: https://example.org/wiki/Lyon).", [3]),  # a url
        ("It is in Paris (Source 4).", [3]),
        ("It is in Paris [1, 2, and 3].", [0, 1, 2]),
        ("It is in Paris [2](https://example.org/wiki/Lyon).", [3]),  # the URL names it
        ("It is in Paris [2](https://example.org/other).", [1]),  # else the number
    ],
)
def test_each_inline_form(answer: str, expected: list[int]) -> None:
    parsed = parse_citations(answer, FOUR)
    assert cites(parsed) == [("It is in Paris.", expected)]
    assert parsed.unresolved == ()


def test_markers_keep_what_was_written_and_the_key_they_name() -> None:
    parsed = parse_citations("Paris [1, 3]. Lyon (source: faq.pdf).", FOUR)
    first, second = parsed.statements
    assert [(c.marker, c.key, c.context) for c in first.citations] == [
        ("[1, 3]", "1", 0),
        ("[1, 3]", "3", 2),
    ]
    assert [(c.marker, c.key) for c in second.citations] == [("(source: faq.pdf)", "faq.pdf")]


def test_footnotes_with_definitions_resolved_by_their_text() -> None:
    answer = (
        "The tower is in Paris[^1]. It was finished in 1889[^2].\n\n"
        "[^1]: Fruit facts, page 2\n"  # names the third context, whatever its number
        "[^2]: see the FAQ\n"  # names nothing: the number
    )
    parsed = parse_citations(answer, FOUR)
    assert cites(parsed) == [
        ("The tower is in Paris.", [2]),
        ("It was finished in 1889.", [1]),
    ]


def test_superscripts_with_numbered_definition_lines() -> None:
    answer = (
        "The tower is in Paris¹. It was finished in 1889²³.\n\n"
        "1. paris.md\n2. faq.pdf\n3. Fruit facts"
    )
    parsed = parse_citations(answer, FOUR)
    # "²³" names no 23rd context: its digits one by one; definition lines are no statements
    assert cites(parsed) == [
        ("The tower is in Paris.", [0]),
        ("It was finished in 1889.", [1, 2]),
    ]


def test_a_definition_quoting_a_context_names_it() -> None:
    answer = 'Bananas are good[^a].\n\n[^a]: "Bananas are rich in potassium."'
    assert cites(parse_citations(answer, FOUR)) == [("Bananas are good.", [2])]


def test_a_reference_list_under_a_sources_heading() -> None:
    answer = "The tower is in Paris [1].\n\nSources:\n[1] faq.pdf\n- https://example.org"
    assert cites(parse_citations(answer, FOUR)) == [("The tower is in Paris.", [1])]


def test_llamaindex_citation_query_engine_source_labels() -> None:
    # CitationQueryEngine's chunks start "Source N:"; the label, not the position, is the number
    contexts = [
        Context(text="Source 2:\nThe tower was finished in 1889."),
        Context(text="Source 1:\nThe tower is in Paris."),
    ]
    parsed = parse_citations("The tower is in Paris [1]. It opened in 1889 [2].", contexts)
    assert cites(parsed) == [("The tower is in Paris.", [1]), ("It opened in 1889.", [0])]
    bad = parse_citations("It is in Paris [3].", contexts)
    assert [c.key for c in bad.unresolved] == ["3"]


def test_a_numeric_id_names_its_context() -> None:
    contexts = [Context(text="a", id="2"), Context(text="b", id="1")]
    assert cites(parse_citations("A [2].", contexts)) == [("A.", [0])]


def test_a_name_shared_by_chunks_cites_them_all() -> None:
    contexts = [Context(text=f"part {i}", metadata={"source": "handbook.pdf"}) for i in range(3)]
    assert cites(parse_citations("Leave is 16 weeks (source: handbook.pdf).", contexts)) == [
        ("Leave is 16 weeks.", [0, 1, 2])
    ]


def test_a_plain_answer_without_citations() -> None:
    parsed = parse_citations("The tower is in Paris. It was finished in 1889.", FOUR)
    assert cites(parsed) == [("The tower is in Paris.", []), ("It was finished in 1889.", [])]
    assert parsed.unresolved == ()


def test_a_mixture_of_forms_in_one_answer() -> None:
    answer = (
        "The tower is in Paris [1] (source: faq.pdf). Bananas [doc-1] hold potassium[^3].\n"
        "- Lyon is in France (Source 4)\n\n[^3]: Fruit facts"
    )
    assert cites(parse_citations(answer, FOUR)) == [
        ("The tower is in Paris.", [0, 1]),
        ("Bananas hold potassium.", [0, 2]),
        ("Lyon is in France", [3]),
    ]


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        # after the closing punctuation, even with a space or a line between
        ("A is 1.[1] B is 2.[2]", [("A is 1.", [0]), ("B is 2.", [1])]),
        ("A is 1. [1] B is 2. [2]", [("A is 1.", [0]), ("B is 2.", [1])]),
        ("A is 1.\n[1]", [("A is 1.", [0])]),
        # inside the sentence
        ("A [1] and B [2] are numbers.", [("A and B are numbers.", [0, 1])]),
        # a trailing group after the last sentence belongs to it
        ("A is 1. B is 2.\n\n[1][2]", [("A is 1.", []), ("B is 2.", [0, 1])]),
        # before the first sentence, or opening a line: to the sentence they open
        ("A is 1 [1].\n[2] B is 2.", [("A is 1.", [0]), ("B is 2.", [1])]),
        ("[3] A is 1. B is 2.", [("A is 1.", [2]), ("B is 2.", [])]),
        # list bullets and numbers are not part of a statement's text
        ("- A is 1 [1]\n2. B is 2 [2]", [("A is 1", [0]), ("B is 2", [1])]),
    ],
)
def test_which_statement_a_marker_belongs_to(
    answer: str, expected: list[tuple[str, list[int]]]
) -> None:
    assert cites(parse_citations(answer, FOUR)) == expected


@pytest.mark.parametrize(
    ("answer", "keys", "message"),
    [
        ("It is in Paris [7].", ["7"], "citation [7] names no context (the sample has 4 contexts)"),
        ("It is in Paris [0].", ["0"], "citation [0] names no context"),
        ("It is in Paris [2, 7].", ["7"], "citation '7' of [2, 7] names no context"),
        ("It is in Paris [doc-9].", ["doc-9"], "citation [doc-9] names no context"),
        (
            "It is in Paris (source: atlas.pdf).",
            ["atlas.pdf"],
            "'atlas.pdf' of (source: atlas.pdf)",
        ),
        ("It is in Paris[^9].\n\n[^9]: the atlas", ["9"], "citation [^9] names no context"),
    ],
)
def test_a_citation_naming_no_context_is_unresolved(
    answer: str, keys: list[str], message: str
) -> None:
    parsed = parse_citations(answer, FOUR)
    assert [c.key for c in parsed.unresolved] == keys
    assert all(c.context is None for c in parsed.unresolved)
    # kept in its statement too, where it was written
    assert parsed.unresolved[0] in parsed.statements[0].citations
    assert message in unresolved_message(parsed, len(FOUR))


@pytest.mark.parametrize(
    "answer",
    [
        "He wrote [sic] that it is in Paris.",
        "It is in Paris [citation needed].",
        "See [the guide](https://example.org/1) for Paris.",
        "![map 1](map.png) Paris.",
        "In [2019] Paris grew.",  # a year: names no context, four digits
        "In [1990-2000] Paris grew.",
        "The plaza is 5 m² wide and 10³ people came.",  # powers, in an answer without footnotes
        "- [ ] visit Paris\n- [x] visit Lyon",  # task boxes
        "1. Paris is a city.\n2. Lyon is a city.",  # list numbers
        "It is in Paris (see the guide).",
        "Index it as `arr[7]` in Paris.",  # code
        "```\nparis[7] = 1\n```",
    ],
)
def test_brackets_that_are_no_citations_stay_text(answer: str) -> None:
    parsed = parse_citations(answer, FOUR)
    assert parsed.unresolved == ()
    assert all(not s.citations for s in parsed.statements)
    assert parsed.statements  # the text is still there, as statements


def test_non_citation_brackets_keep_their_text() -> None:
    parsed = parse_citations("He wrote [sic] that it is in Paris [1].", FOUR)
    assert cites(parsed) == [("He wrote [sic] that it is in Paris.", [0])]


def test_no_contexts_makes_every_number_unresolved() -> None:
    parsed = parse_citations("It is in Paris [1].", [])
    assert [c.key for c in parsed.unresolved] == ["1"]
    assert unresolved_message(parsed, 0).endswith("(the sample has 0 contexts)")
