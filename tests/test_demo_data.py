"""The demo handbook and its questions (`ragbridge.adapters.demo.handbook`): the data is sound.

These tests are the data set's contract: ids are unique and readable, every relevance label
points at a real document, enough questions have no answer, each kind of question is present,
and the numbers in every reference answer occur in the documents labelled relevant for it (so a
reference cannot silently drift from the corpus when either file is edited). They need only the
core: no framework, no model.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from importlib import resources
from pathlib import Path

import pytest

from ragbridge.adapters.demo import handbook
from ragbridge.adapters.demo.handbook import (
    COMPANY,
    CORPUS_FILE,
    QUESTIONS_FILE,
    HandbookDocument,
    corpus,
    document,
    documents,
    questions,
)
from ragbridge.adapters.demo.pipelines import FALLBACK_ANSWER, ExtractiveAnswerer
from ragbridge.core.sample import Sample, load_samples

KINDS = {"single-hop", "paraphrase", "multi-hop", "no-answer"}
NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")


def _data_file(name: str) -> Path:
    path = Path(str(resources.files("ragbridge.adapters.demo").joinpath("data").joinpath(name)))
    assert path.is_file(), path
    return path


def _numbers(text: str) -> set[str]:
    return set(NUMBER.findall(text))


# -- the corpus -----------------------------------------------------------------------------------


def test_corpus_has_about_forty_documents_with_unique_readable_ids() -> None:
    docs = documents()
    assert 38 <= len(docs) <= 50
    ids = [d.id for d in docs]
    assert len(set(ids)) == len(ids)
    for doc_id in ids:
        assert re.fullmatch(r"[a-z]+(?:-[a-z]+)*", doc_id), doc_id
    assert all(isinstance(d, HandbookDocument) for d in docs)
    assert list(corpus()) == ids  # file order, same ids


def test_documents_are_short_and_titled() -> None:
    for doc in documents():
        words = len(doc.text.split())
        sentences = [s for s in re.split(r"(?<=[.!?])\s+(?=[A-Z0-9])", doc.text) if s]
        assert 60 <= words <= 120, (doc.id, words)
        assert 2 <= len(sentences) <= 5, (doc.id, len(sentences))
        assert doc.title.strip(), doc.id
        assert doc.title[0].isupper(), doc.id
        assert doc.text == doc.text.strip()


def test_texts_are_distinct_and_name_the_fictional_company() -> None:
    texts = [d.text for d in documents()]
    assert len(set(texts)) == len(texts)
    assert COMPANY == "Birchmoor Labs GmbH"
    assert sum("Birchmoor Labs" in t for t in texts) >= 10


def test_near_neighbour_topics_exist_so_retrieval_is_not_trivial() -> None:
    ids = set(corpus())
    for pair in [
        ("leave-annual", "leave-sick"),
        ("leave-sick", "leave-child-sick"),
        ("travel-domestic", "travel-international"),
        ("remote-work", "remote-abroad"),
        ("training-budget", "training-conferences"),
        ("security-passwords", "security-mfa"),
    ]:
        assert set(pair) <= ids, pair


def test_corpus_accessors() -> None:
    doc = document("leave-annual")
    assert doc.title == "Annual leave"
    assert doc.text.startswith("Full-time employees of Birchmoor Labs receive 28 days")
    assert doc.full_text == f"Annual leave. {doc.text}"
    assert corpus()["leave-annual"] == doc.text
    assert corpus(with_titles=True)["leave-annual"] == doc.full_text
    with pytest.raises(KeyError, match="no handbook document with id 'leave-unlimited'"):
        document("leave-unlimited")


def test_corpus_file_lines_have_exactly_id_title_text() -> None:
    lines = _data_file(CORPUS_FILE).read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(documents())
    for line, doc in zip(lines, documents(), strict=True):
        record = json.loads(line)
        assert record == {"id": doc.id, "title": doc.title, "text": doc.text}


# -- the questions --------------------------------------------------------------------------------


def test_questions_load_with_the_core_loader_without_error() -> None:
    reader = load_samples(_data_file(QUESTIONS_FILE))
    loaded = list(reader)
    assert reader.report.ok
    assert reader.report.loaded == len(loaded)
    assert loaded == questions()
    assert 38 <= len(loaded) <= 50


def test_question_ids_unique_and_no_pipeline_output_present() -> None:
    qs = questions()
    ids = [q.id for q in qs]
    assert len(set(ids)) == len(ids)
    for q in qs:
        assert isinstance(q, Sample)
        assert q.answer is None, q.id
        assert q.contexts == [], q.id
        assert q.relevance is not None, q.id
        assert q.question.strip().endswith("?"), q.id


def test_every_relevance_id_exists_and_grades_are_one_or_two() -> None:
    ids = set(corpus())
    for q in questions():
        assert q.relevance is not None
        for doc_id, grade in q.relevance.items():
            assert doc_id in ids, (q.id, doc_id)
            assert grade in (1, 2), (q.id, doc_id, grade)


def test_kinds_are_labelled_and_all_present() -> None:
    counts = Counter(q.metadata.get("kind") for q in questions())
    assert set(counts) == KINDS
    assert counts["paraphrase"] >= 4
    assert counts["multi-hop"] >= 3
    assert counts["single-hop"] >= 15
    assert [q.id for q in questions("multi-hop")] == [
        q.id for q in questions() if q.metadata["kind"] == "multi-hop"
    ]


def test_at_least_ten_percent_have_no_answer_and_say_so() -> None:
    qs = questions()
    no_answer = [q for q in qs if q.is_no_answer]
    assert len(no_answer) >= 4
    assert len(no_answer) / len(qs) >= 0.10
    for q in no_answer:
        assert q.relevance == {}, q.id
        assert q.reference == FALLBACK_ANSWER == "The handbook does not say."
        assert q.metadata["kind"] == "no-answer", q.id
    assert {q.id for q in no_answer} == {q.id for q in questions("no-answer")}


def test_answerable_questions_have_references_and_an_answering_document() -> None:
    for q in questions():
        if q.is_no_answer:
            continue
        assert q.relevance is not None
        assert q.reference is not None, q.id
        assert q.reference.strip(), q.id
        assert q.reference != FALLBACK_ANSWER, q.id
        assert 2 in q.relevance.values(), q.id  # at least one document answers it


def test_multi_hop_questions_need_two_documents() -> None:
    multi = questions("multi-hop")
    assert multi
    for q in multi:
        assert q.relevance is not None
        answering = [d for d, g in q.relevance.items() if g == 2]
        assert len(answering) >= 2, q.id


def test_numbers_in_each_reference_occur_in_its_relevant_documents() -> None:
    texts = corpus()
    checked = 0
    for q in questions():
        if q.is_no_answer or q.reference is None or q.relevance is None:
            continue
        in_docs: set[str] = set()
        for doc_id in q.relevance:
            in_docs |= _numbers(texts[doc_id])
        missing = _numbers(q.reference) - in_docs
        assert not missing, (
            f"{q.id}: reference numbers {sorted(missing)} not in {list(q.relevance)}"
        )
        checked += bool(_numbers(q.reference))
    assert checked >= 25  # most references do carry a number, so this test has teeth


def test_names_in_references_occur_in_the_corpus() -> None:
    texts = corpus()
    checked: set[str] = set()
    for q in questions():
        if q.reference is None or q.relevance is None:
            continue
        # Capitalised words after the first one (names, products), e.g. "Miriam Okafor".
        words = re.findall(r"(?<!^)(?<![.:] )\b[A-Z][a-z]+\b", q.reference)
        relevant = " ".join(texts[d] for d in q.relevance)
        for word in words:
            if word in {"Hamburg", "Lisbon", "No", "Yes"}:  # taken from the question
                continue
            assert word in relevant, (q.id, word)
            checked.add(word)
    assert {"Miriam", "Okafor", "Spendly", "Germany", "Clearwell", "December"} <= checked


def test_paraphrases_share_fewer_words_with_their_documents_than_single_hops() -> None:
    texts = corpus()
    answerer = ExtractiveAnswerer(texts.values())

    def best_coverage(q: Sample) -> float:
        assert q.relevance is not None
        gold = [texts[d] for d, g in q.relevance.items() if g == 2]
        return answerer.rank(q.question, gold)[0].coverage

    single = [best_coverage(q) for q in questions("single-hop")]
    para = [best_coverage(q) for q in questions("paraphrase")]
    assert sum(para) / len(para) < 0.5 * (sum(single) / len(single))


def test_results_are_cached_but_callers_get_fresh_lists() -> None:
    first = questions()
    first.clear()
    assert len(questions()) >= 38
    docs = documents()
    docs.pop()
    assert len(documents()) == len(docs) + 1
    assert handbook._questions() is handbook._questions()  # parsed once per process
