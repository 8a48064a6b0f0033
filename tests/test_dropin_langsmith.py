"""Issue 16, LangSmith: a LangSmith user changes the evaluator lines and nothing else.

* ``id_key`` lets ranking measures read LangChain chunk ids from ``metadata["source"]``, and the
  "ids do not match" warning and failure still fire when they never match.

Everything runs langsmith's own runner offline (`offline_client`, ``upload_results=False``) or,
where runs must be posted to be seen, inside ``tracing_context(enabled=True)`` with the
recording `OfflineClient`; judges are scripted.
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("langsmith")
pytest.importorskip("langchain_core")

import langsmith
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.vectorstores import InMemoryVectorStore
from langsmith import traceable
from langsmith.evaluation.evaluator import EvaluationResult
from langsmith.schemas import Example

from ragbridge.adapters.langsmith import (
    RagbridgeEvaluators,
    evaluators,
    offline_client,
)
from ragbridge.core.sample import Context, Sample
from ragbridge.core.scoring import Scorer

CORPUS = {
    "paris": "Paris is the capital of France.",
    "berlin": "Berlin is the capital of Germany.",
    "borders": "France borders Spain and Italy.",
}


@pytest.fixture(autouse=True)
def _no_tracing_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2", "LANGSMITH_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LANGSMITH_TEST_TRACKING", "false")


@pytest.fixture(autouse=True)
def connects(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """Every attempted socket connection, loopback included, refused and recorded."""
    attempts: list[Any] = []

    def refuse(self: socket.socket, address: Any) -> None:
        attempts.append(address)
        raise OSError(f"network disabled in tests: {address!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    yield attempts
    assert attempts == [], f"a test tried to connect to {attempts}"


def example(question: str, n: int, **outputs: Any) -> Example:
    return Example(id=uuid.UUID(int=n), inputs={"question": question}, outputs=outputs)


def run_evaluate(target: Any, data: list[Example], **kwargs: Any) -> list[dict[str, Any]]:
    results = langsmith.evaluate(
        target, data=data, upload_results=False, client=offline_client(), **kwargs
    )
    results.wait()
    return list(results)


def by_key(row: dict[str, Any]) -> dict[str, EvaluationResult]:
    return {r.key: r for r in row["evaluation_results"]["results"]}


# ----------------------------------------------------------------------------- id_key


def _vector_store_bot(metadata_key: str = "source") -> Any:
    """A LangChain vector store: every chunk gets a fresh UUID as ``Document.id``; the labelled
    document name sits in ``metadata[metadata_key]``."""
    store = InMemoryVectorStore.from_texts(
        list(CORPUS.values()),
        DeterministicFakeEmbedding(size=16),
        metadatas=[{metadata_key: doc_id, "page": 1} for doc_id in CORPUS],
    )
    retriever = store.as_retriever(search_kwargs={"k": 3})

    @traceable(name="rag_bot")
    def rag_bot(inputs: dict[str, Any]) -> dict[str, Any]:
        docs = retriever.invoke(inputs["question"])
        return {"answer": "Paris.", "documents": docs}

    return rag_bot


def _labelled(n: int = 3) -> list[Example]:
    wanted = list(CORPUS)
    return [
        example(f"question {i}", i, relevant_ids=[wanted[i % len(wanted)]]) for i in range(1, n + 1)
    ]


RANKING = ["recall@2", "mrr", "ndcg@3"]


def test_id_key_source_scores_langchain_chunks_against_source_labels() -> None:
    rows = run_evaluate(
        _vector_store_bot(),
        _labelled(),
        evaluators=evaluators(RANKING, id_key="source"),
    )
    assert len(rows) == 3
    direct = Scorer(RANKING)
    scored = 0
    for row in rows:
        found = by_key(row)
        docs = row["run"].outputs["documents"]
        assert all(uuid.UUID(d.id) for d in docs)  # the chunk ids are random UUIDs
        sample = Sample(
            id="x",
            question=row["example"].inputs["question"],
            contexts=[Context(text=d.page_content, id=d.metadata["source"]) for d in docs],
            relevance={i: 1 for i in row["example"].outputs["relevant_ids"]},
        )
        expected = direct.score(sample)
        for name in RANKING:
            assert found[name].score == expected[name].value, (
                name,
                found[name].comment,
            )
            assert found[name].extra is None
            assert "warning" not in (found[name].comment or "")
        scored += found["mrr"].score is not None and found["mrr"].score > 0  # type: ignore[operator]
    assert scored == 3  # every labelled source was retrieved in the top 3


def test_without_id_key_the_same_runs_fail_with_the_fix_named_for_these_evaluators() -> None:
    rows = run_evaluate(_vector_store_bot(), _labelled(), evaluators=evaluators(RANKING))
    for row in rows:
        recall = by_key(row)["recall@2"]
        assert recall.score is None
        assert recall.comment is not None
        assert recall.comment.startswith("failed (invalid_input): none of the 3 retrieved")
        assert recall.comment.endswith(
            "hint: with these evaluators, pass id_key='source' to evaluators(...)"
        )


@pytest.mark.parametrize(
    "id_key",
    [["doc_id", "source"], lambda context: context.metadata.get("source")],
    ids=["keys-in-order", "callable"],
)
def test_id_key_as_keys_in_order_or_a_callable(id_key: Any) -> None:
    rows = run_evaluate(
        _vector_store_bot(), _labelled(), evaluators=evaluators(["mrr"], id_key=id_key)
    )
    assert [by_key(r)["mrr"].extra for r in rows] == [None] * 3
    suite = RagbridgeEvaluators(["mrr"], id_key=id_key)
    ids = suite.sample(rows[0]["run"], rows[0]["example"]).context_ids
    assert sorted(ids) == sorted(CORPUS)


def test_id_key_that_finds_nothing_still_gives_the_run_level_warning() -> None:
    """The documents name their source under "origin"; id_key="source" finds nothing, the
    chunks keep their UUIDs, and the run is told so instead of scoring 0.0 quietly."""
    suite = RagbridgeEvaluators(RANKING, id_key="source")
    rows = run_evaluate(
        _vector_store_bot("origin"),
        _labelled(),
        evaluators=suite.evaluators(),
        summary_evaluators=suite.summary_evaluators(),
    )
    (warning,) = suite.scorer.warnings
    assert warning.startswith("ranking measures: 3 of 3 labelled samples retrieved no labelled")
    again = suite.result("recall@2", suite.outcome(rows[0]["run"], rows[0]["example"]))
    assert again.score is None  # metadata["origin"] holds the labels: conclusive, a failure
    assert again.comment is not None
    assert f"warning: {warning}" in again.comment
    hint = again.evaluator_info["hint"]
    assert hint == (
        "hint: id_key='source' found no id in 9 of 9 retrieved contexts, which kept their own "
        "ids; check the metadata key"
    )
    assert again.comment.endswith(hint)


def test_id_key_found_but_naming_other_things_still_warns() -> None:
    """id_key reads ids that are not the labelled ones (pages, not documents): still said."""
    suite = RagbridgeEvaluators(["recall@2"], id_key="page")
    rows = run_evaluate(_vector_store_bot(), _labelled(), evaluators=suite.evaluators())
    again = suite.result("recall@2", suite.outcome(rows[0]["run"], rows[0]["example"]))
    assert suite.scorer.warnings, "no run-level warning"
    assert again.comment is not None
    assert "hint: id_key='page' gave every context its id" in again.comment


def test_bad_id_key_fails_at_construction_and_a_raising_callable_fails_the_run() -> None:
    with pytest.raises(TypeError, match="id_key must be a metadata key"):
        evaluators(["mrr"], id_key=3)  # type: ignore[arg-type]

    def broken(context: Context) -> str:
        raise KeyError("source")

    rows = run_evaluate(
        _vector_store_bot(), _labelled(1), evaluators=evaluators(["mrr"], id_key=broken)
    )
    result = by_key(rows[0])["mrr"]
    assert result.score is None
    assert result.comment is not None
    assert result.comment.startswith("failed (invalid_input): run ")
    assert "the id_key callable raised KeyError on context 0" in result.comment
