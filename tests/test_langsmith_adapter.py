"""LangSmith traces become Samples: live RunTrees, schemas.Run, flat exports; all offline.

``tests/data/langsmith_runs.jsonl`` is a recorded export: a small pipeline (a LangChain
``BaseRetriever`` inside a ``retrieve`` sub-chain, an ``llm`` step; and a second pipeline with a
``@traceable(run_type="retriever")`` function) was traced with `offline_client`, and each real
``RunTree`` was dumped recursively, one flat run per line with ``parent_run_id``, through
langsmith's own JSON serialiser.
"""

from __future__ import annotations

import json
import random
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langsmith")
pytest.importorskip("langchain_core")

import langsmith
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langsmith import traceable
from langsmith.run_trees import RunTree
from langsmith.schemas import Example, Run

from ragbridge.adapters._extras import install_hint
from ragbridge.adapters.langsmith import (
    OfflineClient,
    build_run_trees,
    load_runs,
    offline_client,
    sample_from_run,
    samples_from_project,
    samples_from_runs,
)

ROOT = Path(__file__).resolve().parents[1]
RUNS = Path(__file__).parent / "data" / "langsmith_runs.jsonl"

CORPUS = {
    "d1": "Paris is the capital of France.",
    "d2": "Berlin is the capital of Germany.",
    "d3": "France borders Spain and Italy.",
}


@pytest.fixture(autouse=True)
def _no_tracing_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # A traced call that tries to reach the API offline can delay exit by minutes.
    for name in ("LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2", "LANGSMITH_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LANGSMITH_TEST_TRACKING", "false")


@pytest.fixture(autouse=True)
def connects(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """Every attempted socket connection, each refused; no test may attempt any."""
    attempts: list[Any] = []

    def refuse(self: socket.socket, address: Any) -> None:
        attempts.append(address)
        raise OSError(f"network disabled in tests: {address!r}")

    def refuse_ex(self: socket.socket, address: Any) -> int:
        attempts.append(address)
        return 111

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse_ex)
    yield attempts
    assert attempts == [], f"a test tried to connect to {attempts}"


class KeywordRetriever(BaseRetriever):
    """A real LangChain retriever: traced as a ``run_type="retriever"`` child run."""

    k: int = 2

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        words = {w.strip("?.,").lower() for w in query.split()}
        hits = [(sum(w in t.lower() for w in words), i, t) for i, t in CORPUS.items()]
        ranked = sorted((h for h in hits if h[0] > 0), key=lambda h: (-h[0], h[1]))
        return [Document(id=i, page_content=t, metadata={"src": "c"}) for _, i, t in ranked][
            : self.k
        ]


# --------------------------------------------------------------------------- helpers


def _tree(*children: tuple[str, Any, dict[str, Any] | None]) -> RunTree:
    """A root chain with the given (name, run_type, outputs) children, started in order."""
    root = RunTree(
        name="pipeline",
        run_type="chain",
        inputs={"question": "What is the capital of France?"},
        ls_client=offline_client(),
    )
    for name, run_type, outputs in children:
        child = root.create_child(name=name, run_type=run_type, inputs={"query": "q"})
        child.end(outputs=outputs)
    root.end(outputs={"answer": "Paris."})
    return root


def _docs(*ids: str) -> dict[str, Any]:
    return {"documents": [Document(id=i, page_content=CORPUS[i]) for i in ids]}


# --------------------------------------------------------------------------- the import fence


def test_import_without_langsmith_names_the_extra() -> None:
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'langsmith' or name.startswith('langsmith.'):\n"
        "            raise ImportError('blocked: ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "try:\n"
        "    import ragbridge.adapters.langsmith\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert install_hint("langsmith") in out.stdout
    assert "ragbridge.adapters.langsmith needs langsmith" in out.stdout


# --------------------------------------------------------------------------- live, inside evaluate


def test_evaluate_offline_reads_both_kinds_of_retriever(connects: list[Any]) -> None:
    retriever = KeywordRetriever()

    @traceable(run_type="retriever", name="recent_news")
    def recent_news(query: str) -> list[dict[str, Any]]:
        return [{"page_content": "News: " + query, "metadata": {"id": "n1"}}]

    @traceable(name="rag")
    def rag(inputs: dict[str, Any]) -> dict[str, Any]:
        docs = retriever.invoke(inputs["question"])
        recent_news(inputs["question"])
        return {"answer": docs[0].page_content if docs else "unknown"}

    samples: list[Any] = []

    def contexts_found(run: Any, example: Any) -> dict[str, Any]:
        by_name = sample_from_run(run, example, retriever="KeywordRetriever")
        default = sample_from_run(run, example)
        samples.append((by_name, default))
        return {"key": "n_contexts", "score": len(by_name.contexts)}

    client = offline_client()
    example = Example(
        id=uuid.UUID(int=1),
        inputs={"question": "What is the capital of France?"},
        outputs={"answer": "Paris", "relevant_ids": ["d1"]},
    )
    results = langsmith.evaluate(
        rag,
        data=[example],
        evaluators=[contexts_found],
        upload_results=False,
        client=client,
    )
    scores = [r["evaluation_results"]["results"][0].score for r in results]
    assert scores == [2]
    by_name, default = samples[0]
    assert by_name.id == str(example.id)
    assert by_name.question == "What is the capital of France?"
    assert by_name.answer == "Paris is the capital of France."
    assert by_name.context_ids == ["d1", "d2"]
    assert by_name.contexts[0].metadata == {"src": "c"}
    assert by_name.reference == "Paris"
    assert by_name.relevance == {"d1": 1}
    # Default: run_type == "retriever"; the last one started wins, the other is listed.
    assert default.context_ids == ["n1"]
    assert default.contexts[0].text == "News: What is the capital of France?"
    others = default.metadata["langsmith"]["other_retriever_runs"]
    assert [o["name"] for o in others] == ["KeywordRetriever"]
    assert connects == []
    # The LangChain retriever's run was recorded instead of POSTed.
    assert any(p.get("name") == "KeywordRetriever" for _, p in client.payloads)


def test_tracing_context_records_runs_that_become_samples(connects: list[Any]) -> None:
    retriever = KeywordRetriever()

    @traceable(name="retrieve")
    def retrieve(question: str) -> list[Document]:
        return retriever.invoke(question)

    @traceable(name="rag")
    def rag(question: str) -> str:
        docs = retrieve(question)
        return docs[0].page_content if docs else "unknown"

    client = offline_client()
    with langsmith.tracing_context(enabled=True, client=client, project_name="t"):
        rag("Which country borders Spain?")
        rag("xyzzy")
    samples = samples_from_runs(client.recorded_trees())
    assert [s.question for s in samples] == ["Which country borders Spain?", "xyzzy"]
    assert samples[0].context_ids == ["d3"]
    assert samples[0].answer == CORPUS["d3"]
    assert samples[1].contexts == []
    assert connects == []
    assert isinstance(client, OfflineClient)


# --------------------------------------------------------------------------- tree shapes


def test_retriever_nested_in_a_sub_chain() -> None:
    root = RunTree(
        name="pipeline",
        run_type="chain",
        inputs={"input": "capital of France?"},
        ls_client=offline_client(),
    )
    sub = root.create_child(name="retrieve_and_rerank", run_type="chain", inputs={})
    inner = sub.create_child(name="vector_store", run_type="retriever", inputs={"query": "q"})
    inner.end(outputs=_docs("d1", "d3"))
    sub.end(outputs={"output": []})
    llm = root.create_child(name="llm", run_type="llm", inputs={})
    llm.end(outputs={"generations": []})
    root.end(outputs={"output": "Paris"})
    sample = sample_from_run(root)
    assert sample.question == "capital of France?"
    assert sample.answer == "Paris"
    assert sample.context_ids == ["d1", "d3"]
    assert sample.id == str(root.id)
    assert sample.metadata["langsmith"]["retriever_run_name"] == "vector_store"


def test_several_retrievers_select_by_name_or_callable() -> None:
    root = _tree(
        ("first_pass", "retriever", _docs("d1", "d2")),
        ("llm", "llm", {"output": "x"}),
        ("second_pass", "retriever", _docs("d3")),
    )
    assert sample_from_run(root).context_ids == ["d3"]
    assert sample_from_run(root, retriever="first_pass").context_ids == ["d1", "d2"]
    picked = sample_from_run(root, retriever=lambda r: r.name.startswith("first"))
    assert picked.context_ids == ["d1", "d2"]
    assert "other_retriever_runs" not in picked.metadata["langsmith"]


def test_root_itself_may_be_the_retriever() -> None:
    root = RunTree(name="retriever", run_type="retriever", inputs={"query": "Paris?"})
    root.end(outputs=_docs("d1"))
    sample = sample_from_run(root)
    assert (sample.question, sample.context_ids, sample.answer) == ("Paris?", ["d1"], None)


def test_empty_retrieval_gives_no_contexts() -> None:
    assert sample_from_run(_tree(("r", "retriever", {"documents": []}))).contexts == []
    assert sample_from_run(_tree(("r", "retriever", {"output": []}))).contexts == []


@pytest.mark.parametrize(
    ("outputs", "texts", "ids"),
    [
        ({"output": ["a", "b"]}, ["a", "b"], [None, None]),
        ({"output": [{"text": "a", "id": 7}, {"content": "b"}]}, ["a", "b"], ["7", None]),
        (
            {"documents": [{"page_content": "a", "metadata": {"doc_id": "x"}, "id": None}]},
            ["a"],
            ["x"],
        ),
        (
            {
                "documents": [
                    {
                        "lc": 1,
                        "type": "constructor",
                        "id": ["langchain", "schema", "document", "Document"],
                        "kwargs": {"page_content": "a", "id": "L1", "metadata": {}},
                    }
                ]
            },
            ["a"],
            ["L1"],
        ),
        ({"docs": [Document(page_content="a", id="q")]}, ["a"], ["q"]),
    ],
)
def test_every_stored_document_shape(
    outputs: dict[str, Any], texts: list[str], ids: list[str | None]
) -> None:
    sample = sample_from_run(_tree(("r", "retriever", outputs)))
    assert [c.text for c in sample.contexts] == texts
    assert sample.context_ids == ids


def test_retriever_score_is_kept_from_metadata() -> None:
    docs = {"output": [{"page_content": "a", "metadata": {"score": 0.8}}, {"page_content": "b"}]}
    sample = sample_from_run(_tree(("r", "retriever", docs)))
    assert [c.score for c in sample.contexts] == [0.8, None]


def test_question_answer_keys_and_answer_run() -> None:
    root = RunTree(
        name="p", run_type="chain", inputs={"user": "u1", "q": "Where?", "question_id": "7"}
    )
    ret = root.create_child(name="r", run_type="retriever", inputs={})
    ret.end(outputs=_docs("d1"))
    llm = root.create_child(name="writer", run_type="llm", inputs={})
    llm.end(outputs={"output": "In Paris."})
    root.end(outputs={"final": "In Paris.", "debug": "2 docs"})
    with pytest.raises(ValueError, match=r"cannot find the question.*question_key"):
        sample_from_run(root)
    sample = sample_from_run(root, question_key="q", answer_key="final", sample_id="s1")
    assert (sample.id, sample.question, sample.answer) == ("s1", "Where?", "In Paris.")
    assert sample_from_run(root, question_key="q", answer_run="writer").answer == "In Paris."
    assert sample_from_run(root, question_key="q").answer is None


def test_example_dict_gives_reference_and_graded_relevance() -> None:
    example = {
        "id": "ex-1",
        "outputs": {"ground_truth": "Paris", "relevance": {"d1": 2, "d3": 0}},
    }
    sample = sample_from_run(_tree(("r", "retriever", _docs("d1"))), example)
    assert (sample.id, sample.reference, sample.relevance) == ("ex-1", "Paris", {"d1": 2, "d3": 0})


# --------------------------------------------------------------------------- malformed traces


def test_no_retriever_names_the_run_and_what_it_holds() -> None:
    root = _tree(("llm", "llm", {"output": "x"}))
    with pytest.raises(ValueError, match=r"no retriever child run \(run_types seen: chain, llm\)"):
        sample_from_run(root)
    with pytest.raises(ValueError, match=str(root.id)):
        sample_from_run(root)
    with pytest.raises(ValueError, match=r"no child run named 'nope' \(run names seen: llm"):
        sample_from_run(root, retriever="nope")
    with pytest.raises(ValueError, match="no run matched the retriever selector"):
        sample_from_run(root, retriever=lambda r: False)


def test_bad_documents_name_the_item() -> None:
    root = _tree(("r", "retriever", {"documents": [{"page_content": "a"}, {"title": "b"}]}))
    retriever_id = root.child_runs[0].id
    with pytest.raises(
        ValueError, match=rf"run {retriever_id} .*no page_content in item 1 \(keys: title\)"
    ):
        sample_from_run(root)
    with pytest.raises(ValueError, match="item 0 is int"):
        sample_from_run(_tree(("r", "retriever", {"documents": [3]})))
    with pytest.raises(ValueError, match=r"no documents list \(keys: a, b\)"):
        sample_from_run(_tree(("r", "retriever", {"a": 1, "b": 2})))


def test_failed_retriever_run_says_so() -> None:
    root = RunTree(name="p", run_type="chain", inputs={"question": "q"})
    child = root.create_child(name="r", run_type="retriever", inputs={})
    child.end(error="TimeoutError: index unavailable")
    with pytest.raises(ValueError, match=r"retriever run has no outputs .*TimeoutError"):
        sample_from_run(root)


def test_missing_answer_key_is_an_error() -> None:
    with pytest.raises(ValueError, match=r"outputs have no 'result' \(keys: answer\)"):
        sample_from_run(_tree(("r", "retriever", _docs("d1"))), answer_key="result")


# --------------------------------------------------------------------------- exports


def test_load_runs_rebuilds_the_recorded_export() -> None:
    roots = load_runs(RUNS)
    assert all(isinstance(r, Run) for r in roots)
    assert [r.name for r in roots] == ["rag_pipeline"] * 3 + ["news_pipeline"]
    assert [c.name for c in roots[0].child_runs or []] == ["retrieve", "generate"]
    samples = samples_from_runs(roots)
    assert [s.context_ids for s in samples] == [["d1", "d2"], ["d4", "d2"], [], ["n1"]]
    assert samples[0].question == "What is the capital of France?"
    assert samples[0].answer == "Paris is the capital of France."
    assert samples[2].answer == "I don't know."
    assert samples[3].contexts[0].score == 0.5
    assert samples[0].metadata["langsmith"]["retriever_run_name"] == "KeywordRetriever"


def test_export_formats_and_line_order_do_not_matter(tmp_path: Path) -> None:
    lines = [line for line in RUNS.read_text().splitlines() if line.strip()]
    expected = samples_from_runs(load_runs(RUNS))
    shuffled = list(lines)
    random.Random(3).shuffle(shuffled)
    (tmp_path / "shuffled.jsonl").write_text("\n".join(shuffled) + "\n")
    (tmp_path / "list.json").write_text(json.dumps([json.loads(x) for x in shuffled], indent=1))
    (tmp_path / "wrapped.json").write_text(json.dumps({"runs": [json.loads(x) for x in lines]}))
    for name in ("shuffled.jsonl", "list.json", "wrapped.json"):
        assert samples_from_runs(load_runs(tmp_path / name)) == expected, name
    # A flat list of dicts (as list_runs yields them) is rebuilt by samples_from_runs itself.
    assert samples_from_runs([json.loads(x) for x in shuffled]) == expected


def test_nested_child_runs_export_loads_too(tmp_path: Path) -> None:
    flat = [json.loads(x) for x in RUNS.read_text().splitlines() if x.strip()]
    by_parent: dict[Any, list[dict[str, Any]]] = {}
    for run in flat:
        by_parent.setdefault(run["parent_run_id"], []).append(run)

    def nest(run: dict[str, Any]) -> dict[str, Any]:
        return {**run, "child_runs": [nest(c) for c in by_parent.get(run["id"], [])]}

    (tmp_path / "nested.json").write_text(json.dumps([nest(r) for r in by_parent[None]]))
    assert samples_from_runs(load_runs(tmp_path / "nested.json")) == samples_from_runs(
        load_runs(RUNS)
    )


def test_live_run_tree_converts_to_a_schemas_run_tree() -> None:
    root = RunTree(name="p", run_type="chain", inputs={"question": "q"})
    sub = root.create_child(name="s", run_type="chain", inputs={})
    ret = sub.create_child(name="r", run_type="retriever", inputs={})
    ret.end(outputs=_docs("d2"))
    sub.end(outputs={})
    root.end(outputs={"answer": "A"})
    (tree,) = build_run_trees([root])
    assert isinstance(tree, Run)
    leaf = (tree.child_runs or [])[0].child_runs or []
    assert [r.name for r in leaf] == ["r"]
    assert leaf[0].trace_id == tree.id
    assert samples_from_runs([tree]) == samples_from_runs([root])


def test_load_runs_reports_bad_lines(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(RUNS.read_text().splitlines()[0] + "\n{oops\n")
    with pytest.raises(ValueError, match=r"bad.jsonl:2: invalid JSON"):
        load_runs(bad)
    no_type = tmp_path / "no_type.jsonl"
    no_type.write_text(json.dumps({"id": str(uuid.uuid4()), "name": "x"}) + "\n")
    with pytest.raises(ValueError, match="no run_type"):
        load_runs(no_type)


def test_orphans_become_roots_and_examples_match_by_reference_id() -> None:
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    root_id, child_id, example_id = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    records = [
        {
            "id": str(child_id),
            "name": "r",
            "run_type": "retriever",
            "parent_run_id": str(root_id),
            "start_time": (start + timedelta(seconds=1)).isoformat(),
            "inputs": {"query": "q"},
            "outputs": {"documents": [{"page_content": "a", "id": "d1"}]},
        },
        {
            "id": str(root_id),
            "name": "p",
            "run_type": "chain",
            "start_time": start.isoformat(),
            "reference_example_id": str(example_id),
            "inputs": {"question": "q"},
            "outputs": {"output": "A"},
        },
    ]
    example = Example(id=example_id, inputs={"question": "q"}, outputs={"expected_output": "A"})
    (sample,) = samples_from_runs(records, [example])
    assert (sample.id, sample.reference, sample.context_ids) == (str(example_id), "A", ["d1"])
    (orphan,) = build_run_trees(records[:1])
    assert orphan.id == child_id


class FakeClient:
    """Serves the recorded export through ``list_runs`` like the API would (flat, no children)."""

    project = "ragbridge-demo"

    def __init__(self) -> None:
        self.runs = [Run.model_validate_json(x) for x in RUNS.read_text().splitlines() if x]
        self.calls: list[dict[str, Any]] = []

    def list_runs(self, **kwargs: Any) -> Iterator[Run]:
        self.calls.append(kwargs)
        found = self.runs if kwargs["project_name"] == self.project else []
        if kwargs.get("is_root"):
            found = [r for r in found if r.parent_run_id is None]
        if kwargs.get("filter") == 'eq(name, "news_pipeline")':
            found = [r for r in found if r.name == "news_pipeline"]
        if kwargs.get("trace_id") is not None:
            found = [r for r in found if r.trace_id == kwargs["trace_id"]]
        limit = kwargs.get("limit")
        yield from found[:limit] if limit is not None else found


def test_samples_from_project_with_an_injected_client() -> None:
    client = FakeClient()
    samples = samples_from_project(client, "ragbridge-demo", limit=2)
    assert [s.context_ids for s in samples] == [["d1", "d2"], ["d4", "d2"]]
    assert client.calls[0] == {
        "project_name": "ragbridge-demo",
        "is_root": True,
        "filter": None,
        "limit": 2,
    }
    assert all("trace_id" in c for c in client.calls[1:])
    news = samples_from_project(client, "ragbridge-demo", filter='eq(name, "news_pipeline")')
    assert [s.context_ids for s in news] == [["n1"]]
    assert samples_from_project(client, "other-project") == []


# --------------------------------------------------------------------------- the example


def test_example_script_runs_offline() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "langsmith_traces.py")],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        env={
            **{k: v for k, v in __import__("os").environ.items() if "TRACING" not in k},
            "LANGSMITH_TEST_TRACKING": "false",
        },
    )
    rows = {line.split()[0]: line.split()[1:] for line in done.stdout.splitlines() if line}
    # the shared corpus (examples/corpus.py): the keyword retriever ranks every labelled
    # document first, so both measures are 1 over the five questions
    assert rows["recall@2"] == ["1.000", "5"]
    assert rows["mrr"] == ["1.000", "5"]
    assert "retrieved ['parking']  relevant {'parking': 1}" in done.stdout


def test_the_generating_model_is_read_from_llm_runs() -> None:
    root = RunTree(
        name="pipeline",
        run_type="chain",
        inputs={"question": "capital of France?"},
        ls_client=offline_client(),
    )
    retrieval = root.create_child(name="retriever", run_type="retriever", inputs={"query": "q"})
    retrieval.end(outputs=_docs("d1"))
    rewrite = root.create_child(
        name="rewrite",
        run_type="llm",
        inputs={},
        extra={"invocation_params": {"model": "small-rewriter"}},
    )
    rewrite.end(outputs={"generations": []})
    answer = root.create_child(
        name="answer",
        run_type="llm",
        inputs={},
        extra={"metadata": {"ls_model_name": "gpt-4o-mini"}},
    )
    answer.end(outputs={"generations": []})
    anonymous = root.create_child(name="mystery", run_type="llm", inputs={})
    anonymous.end(outputs={"generations": []})
    root.end(outputs={"answer": "Paris"})
    sample = sample_from_run(root)
    assert sample.metadata["generator_model"] == "gpt-4o-mini"  # the last model that ran
    assert sample.metadata["generator_models"] == ["small-rewriter", "gpt-4o-mini"]
    assert "generator_model" not in sample_from_run(_tree(("r", "retriever", _docs("d1")))).metadata
