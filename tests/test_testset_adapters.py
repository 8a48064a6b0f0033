"""LangChain `Document`s and LlamaIndex nodes as test-set documents (real frameworks, offline).

The point of the adapters is that a generated question's relevance names the id the same
framework's retriever reports for its source, so each test checks against the context id
ragbridge's own capture gives the same object.
"""

from __future__ import annotations

import pytest
from testset_judge import clean_judge

from ragbridge.adapters.demo.handbook import documents
from ragbridge.core.testing import HashEmbedder
from ragbridge.core.testset import generate_testset

pytest.importorskip("langchain_core")
pytest.importorskip("llama_index.core")

from langchain_core.documents import Document
from llama_index.core import Document as LlamaDocument
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.schema import NodeWithScore, TextNode

from ragbridge.adapters import langchain as lc
from ragbridge.adapters import llamaindex as li

HANDBOOK = documents()[:12]


def test_langchain_documents_keep_their_ids_titles_and_metadata() -> None:
    docs = [Document(id=d.id, page_content=d.text, metadata={"title": d.title}) for d in HANDBOOK]
    found = lc.source_documents(docs)
    assert [(s.id, s.text, s.title, s.parent_id) for s in found] == [
        (d.id, d.text, d.title, None) for d in HANDBOOK
    ]
    assert all(s.id == lc.document_to_context(d).id for s, d in zip(found, docs, strict=True))


def test_langchain_id_key_names_the_metadata_that_holds_the_id() -> None:
    docs = [Document(page_content="Some text here.", metadata={"doc": "policy-7", "n": object()})]
    [found] = lc.source_documents(docs, id_key="doc")
    assert found.id == "policy-7"
    assert isinstance(found.metadata["n"], str)  # not JSON: kept as its repr


def test_langchain_chunks_sharing_a_source_become_numbered_pieces() -> None:
    docs = [
        Document(page_content="First part of the leave policy.", metadata={"source": "leave.md"}),
        Document(page_content="Other policy.", metadata={"source": "other.md"}),
        Document(page_content="Second part of the leave policy.", metadata={"source": "leave.md"}),
    ]
    found = lc.source_documents(docs)
    assert [(s.id, s.group) for s in found] == [
        ("leave.md#1", "leave.md"),
        ("other.md", "other.md"),
        ("leave.md#2", "leave.md"),
    ]


def test_a_langchain_document_without_an_id_is_refused_with_the_fix() -> None:
    with pytest.raises(ValueError, match=r"docs\[0\] has no id: .*id_key="):
        lc.source_documents([Document(page_content="x")])
    with pytest.raises(TypeError, match="not a LangChain Document"):
        lc.source_documents(["just text"])  # type: ignore[list-item]


def test_a_test_set_from_langchain_documents_names_their_ids() -> None:
    docs = [Document(id=d.id, page_content=d.text, metadata={"title": d.title}) for d in HANDBOOK]
    samples, report = generate_testset(
        lc.source_documents(docs), 10, judge=clean_judge(), embedder=HashEmbedder()
    )
    assert report.total == 10
    ids = {d.id for d in docs}
    for sample in samples:
        assert set(sample.relevance or {}) <= ids


def test_llamaindex_documents_and_nodes_keep_node_ids_and_parents() -> None:
    whole = [LlamaDocument(text=d.text, id_=d.id, metadata={"title": d.title}) for d in HANDBOOK]
    found = li.source_documents(whole)
    assert [(s.id, s.title, s.parent_id) for s in found] == [
        (d.id, d.title, None) for d in HANDBOOK
    ]
    nodes = SentenceSplitter(chunk_size=48, chunk_overlap=0).get_nodes_from_documents(whole)
    assert len(nodes) > len(whole)
    pieces = li.source_documents(nodes)
    for piece, node in zip(pieces, nodes, strict=True):
        assert piece.id == node.node_id
        assert piece.group == node.ref_doc_id
        # the id relevance="document" grades is the one node_to_context reports by default
        assert piece.group == li.node_to_context(NodeWithScore(node=node, score=0.5)).id
        assert "title" not in piece.text  # content without metadata


def test_llamaindex_scored_nodes_are_accepted_and_other_objects_refused() -> None:
    node = TextNode(text="A standalone node with some text.", id_="n1")
    [found] = li.source_documents([NodeWithScore(node=node, score=0.3)])
    assert (found.id, found.parent_id) == ("n1", None)
    with pytest.raises(TypeError, match="not a LlamaIndex node"):
        li.source_documents(["text"])  # type: ignore[list-item]


def test_a_test_set_from_llamaindex_nodes_grades_nodes_or_their_documents() -> None:
    whole = [LlamaDocument(text=d.text, id_=d.id) for d in HANDBOOK]
    nodes = SentenceSplitter(chunk_size=64, chunk_overlap=0).get_nodes_from_documents(whole)
    pieces = li.source_documents(nodes)
    node_ids = {n.node_id for n in nodes}
    samples, _ = generate_testset(
        pieces, 8, judge=clean_judge(), embedder=HashEmbedder(), styles={"single": 1}
    )
    assert all(set(s.relevance or {}) <= node_ids for s in samples)
    by_document, _ = generate_testset(
        pieces,
        8,
        judge=clean_judge(),
        embedder=HashEmbedder(),
        styles={"single": 1},
        relevance="document",
    )
    doc_ids = {d.id for d in HANDBOOK}
    assert all(set(s.relevance or {}) <= doc_ids for s in by_document)
    assert any(s.relevance for s in by_document)
