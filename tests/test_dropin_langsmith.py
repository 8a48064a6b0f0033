"""Issue 16, LangSmith: a LangSmith user changes the evaluator lines and nothing else.

* the public RAG tutorial's shape (`examples/langsmith_rag_tutorial.py`) runs offline with
  ragbridge's graders in place of its own, under the tutorial's feedback keys;
* ``id_key`` lets ranking measures read LangChain chunk ids from ``metadata["source"]``, and the
  "ids do not match" warning and failure still fire when they never match;
* evaluator runs are traced as langsmith 0.14 traces a function evaluator: ``source_run_id`` on
  the feedback, judge calls as child runs of the evaluator run;
* ``keys="langsmith-tutorial"`` names the columns after the tutorial's graders.

Everything runs langsmith's own runner offline (`offline_client`, ``upload_results=False``) or,
where runs must be posted to be seen, inside ``tracing_context(enabled=True)`` with the
recording `OfflineClient`; judges are scripted.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langsmith")
pytest.importorskip("langchain_core")

import langsmith
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.vectorstores import InMemoryVectorStore
from langsmith import run_helpers, traceable
from langsmith.evaluation.evaluator import EvaluationResult
from langsmith.run_trees import RunTree
from langsmith.schemas import Example
from pydantic import BaseModel

from ragbridge.adapters.langsmith import (
    LANGSMITH_TUTORIAL_KEYS,
    RagbridgeEvaluators,
    evaluators,
    offline_client,
    summary_evaluators,
)
from ragbridge.adapters.langsmith.tracing import TracedJudge
from ragbridge.core.judging.judge import JudgeReply, Message
from ragbridge.core.sample import Context, Sample
from ragbridge.core.scoring.scorer import Scorer
from ragbridge.core.testing import ScriptedJudge

ROOT = Path(__file__).resolve().parents[1]

CORPUS = {
    "paris": "Paris is the capital of France.",
    "berlin": "Berlin is the capital of Germany.",
    "borders": "France borders Spain and Italy.",
}
YES = {"explanation": "it holds", "verdict": True}
GRADERS = ["correctness", "helpfulness", "groundedness", "document_relevance"]


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


# ----------------------------------------------------------------------------- the example


def test_the_tutorial_example_runs_offline_with_the_tutorials_columns() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "langsmith_rag_tutorial.py")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    header = next(line for line in lines if line.startswith("question"))
    assert header.split()[1:] == ["correctness", "relevance", "groundedness", "retrieval_relevance"]
    # Rows start with their question; other lines (LangSmith's own log line naming a random
    # experiment, which can end in "0") are not rows.
    rows = {
        line[:50].strip(): line[50:].split() for line in lines if line[:50].strip().endswith("?")
    }
    assert rows == {
        "How does an agent break down a complex task?": ["1.0", "1.0", "1.0", "1.0"],
        "How many kinds of memory does the post describe?": ["0.0", "1.0", "0.0", "1.0"],
        "Who won the football world cup in 2022?": ["1.0", "0.0", "1.0", "0.0"],
    }
    assert "  groundedness: not in the documents: ['four']" in lines
    assert "  retrieval_relevance: nothing in common" in lines
    assert "every result links its evaluator run (source_run_id): True" in lines


def test_the_example_differs_from_the_tutorial_only_in_its_evaluator_lines() -> None:
    """The tutorial's evaluate call is kept word for word; the graders are one call."""
    text = (ROOT / "examples" / "langsmith_rag_tutorial.py").read_text(encoding="utf-8")
    assert "evaluators=[correctness, groundedness, relevance, retrieval_relevance]," in text
    assert 'keys="langsmith-tutorial"' in text
    assert "docs.smith.langchain.com" in text  # the source of the shape is credited
    assert "def correctness(" not in text  # no hand-written grader left


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
        _vector_store_bot(), _labelled(), evaluators=evaluators(RANKING, id_key="source")
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
            assert found[name].score == expected[name].value, (name, found[name].comment)
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


# ----------------------------------------------------------------------------- tracing


@dataclass
class SpyJudge:
    """A scripted judge that notes, per call, the LangSmith run it was called under."""

    inner: ScriptedJudge = field(default_factory=lambda: ScriptedJudge({"*": YES}))
    model: str = "spy-judge"
    parents: list[Any] = field(default_factory=list)

    async def generate(
        self, messages: Sequence[Message], *, schema: type[BaseModel] | None = None
    ) -> JudgeReply:
        self.parents.append(run_helpers.get_current_run_tree())
        return await self.inner.generate(messages, schema=schema)


def _plain_bot(inputs: dict[str, Any]) -> dict[str, Any]:
    return {"answer": "Paris.", "documents": [Document(page_content=CORPUS["paris"])]}


def _graded(n: int = 2) -> list[Example]:
    return [example("What is the capital of France?", i, answer="Paris") for i in range(1, n + 1)]


def test_judge_calls_are_children_of_the_evaluator_run_the_feedback_links() -> None:
    judge = SpyJudge()
    rows = run_evaluate(_plain_bot, _graded(), evaluators=evaluators(GRADERS, judge=judge))
    assert len(judge.parents) == 8  # four graders on two runs
    links = []
    for row in rows:
        found = by_key(row)
        (source,) = {r.source_run_id for r in found.values()}  # one run scored the four
        assert source is not None
        links.append(source)
        mine = [p for p in judge.parents if p is not None and p.parent_run_id == source]
        assert sorted(p.name for p in mine) == sorted(
            f"judge:grader.{g}"
            for g in ["correctness", "document_relevance", "groundedness", "helpfulness"]
        )
        assert {p.run_type for p in mine} == {"llm"}
    assert links[0] != links[1]
    assert None not in judge.parents


def test_posted_runs_match_what_langsmith_posts_for_a_function_evaluator() -> None:
    """The run tree an uploaded experiment gets, seen through the recording client: the
    evaluator run (id = the evaluator_run_id langsmith passes, name, metadata, inputs and
    outputs) and one llm child per judge call with its token usage."""
    judge = SpyJudge()
    evs = evaluators(["correctness", "groundedness"], judge=judge)
    target = RunTree(
        name="rag_bot",
        run_type="chain",
        inputs={"question": "What is the capital of France?"},
        outputs={"answer": "Paris.", "documents": [CORPUS["paris"]]},
        ls_client=offline_client(),
    )
    ex = example("What is the capital of France?", 1, answer="Paris")
    recorder = offline_client()
    first, second = uuid.uuid4(), uuid.uuid4()
    with run_helpers.tracing_context(project_name="evaluators", enabled=True, client=recorder):
        a = evs[0].evaluate_run(target, ex, evaluator_run_id=first)
        b = evs[1].evaluate_run(target, ex, evaluator_run_id=second)
    assert isinstance(a, EvaluationResult)
    assert isinstance(b, EvaluationResult)
    assert (a.key, a.source_run_id) == ("correctness", first)
    assert (b.key, b.source_run_id) == ("groundedness", first)  # scored in the first run
    runs = {str(r["id"]): r for r in recorder.recorded_runs()}
    assert str(second) not in runs  # the second evaluator opened no empty run
    evaluator = runs[str(first)]
    assert evaluator["name"] == "ragbridge_correctness"
    assert evaluator["run_type"] == "chain"
    assert evaluator.get("parent_run_id") is None
    assert evaluator["extra"]["metadata"]["target_run_id"] == target.id
    assert evaluator["inputs"]["reference_outputs"] == {"answer": "Paris"}
    assert evaluator["inputs"]["outputs"]["answer"] == "Paris."
    outputs = evaluator["outputs"]
    assert [(r["key"], r["score"]) for r in outputs["results"]] == [
        ("correctness", 1.0),
        ("groundedness", 1.0),
    ]
    assert outputs["sample"]["contexts"][0]["text"] == CORPUS["paris"]
    children = [r for r in runs.values() if r.get("parent_run_id") == first]
    assert sorted(c["name"] for c in children) == [
        "judge:grader.correctness",
        "judge:grader.groundedness",
    ]
    calls = {c.task: c for c in judge.inner.calls}
    for child in children:
        assert child["run_type"] == "llm"
        assert child["extra"]["metadata"]["ls_model_name"] == "spy-judge"
        assert child["inputs"]["messages"] == calls[child["name"][6:]].messages
        usage = child["outputs"]["usage_metadata"]
        assert usage["input_tokens"] > 0
        assert usage["output_tokens"] > 0
        assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
        assert '"verdict": true' in child["outputs"]["choices"][0]["message"]["content"]
    assert len(children) == len(judge.inner.calls) == 2


def test_a_running_event_loop_does_not_lose_the_parent_run() -> None:
    """Inside a running loop the sync evaluator scores on a worker thread; the judge calls
    must still find the evaluator run."""
    judge = SpyJudge()
    evs = evaluators(["groundedness"], judge=judge)

    async def main() -> list[dict[str, Any]]:
        asyncio.get_running_loop()
        return run_evaluate(_plain_bot, _graded(1), evaluators=evs)

    (row,) = asyncio.run(main())
    source = by_key(row)["groundedness"].source_run_id
    assert source is not None
    assert [p.parent_run_id for p in judge.parents] == [source]


def test_aevaluate_links_feedback_and_judge_calls_the_same_way() -> None:
    judge = SpyJudge()
    evs = evaluators(["groundedness", "helpfulness"], judge=judge)

    async def bot(inputs: dict[str, Any]) -> dict[str, Any]:
        return _plain_bot(inputs)

    async def main() -> list[dict[str, Any]]:
        results = await langsmith.aevaluate(
            bot, data=_graded(), evaluators=evs, upload_results=False, client=offline_client()
        )
        return [row async for row in results]

    rows = asyncio.run(main())
    for row in rows:
        (source,) = {r.source_run_id for r in by_key(row).values()}
        assert source is not None
        assert sum(p.parent_run_id == source for p in judge.parents) == 2
    assert len(judge.parents) == 4


def test_disabled_evaluator_tracing_leaves_no_link_and_no_parent() -> None:
    judge = SpyJudge()
    results = langsmith.evaluate(
        _plain_bot,
        data=_graded(1),
        evaluators=evaluators(["groundedness"], judge=judge),
        upload_results=False,
        disable_evaluator_tracing=True,
        client=offline_client(),
    )
    (row,) = list(results)
    assert by_key(row)["groundedness"].source_run_id is None
    assert judge.parents == [None]  # no evaluator run to hang the call under


def test_outside_any_trace_the_judge_is_called_as_it_is() -> None:
    judge = SpyJudge()
    suite = RagbridgeEvaluators(["groundedness"], judge=judge)
    assert isinstance(suite.scorer.settings.judge, TracedJudge)
    assert suite.scorer.settings.judge.model == "spy-judge"
    target = {"id": uuid.uuid4(), "inputs": {"question": "q?"}, "outputs": {"answer": "Paris."}}
    scores = suite.scores({**target, "outputs": {**target["outputs"], "documents": ["Paris."]}})
    assert scores["groundedness"].value == 1.0
    assert scores["groundedness"].judge_model == "spy-judge"
    assert judge.parents == [None]


# ----------------------------------------------------------------------------- a raw chat model


def _fake_grader(*explanations: str) -> Any:
    """LangChain's own fake chat model as the grader, replying in the graders' JSON."""
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    replies = [
        json.dumps({"explanation": e, "verdict": not e.startswith("no")}) for e in explanations
    ]
    return FakeListChatModel(responses=replies)


def test_a_raw_langchain_chat_model_is_the_judge() -> None:
    """``judge=FakeListChatModel(...)`` as a tutorial user writes it: handed to the core as
    given (the core wraps it), scoring the tutorial's graders in a real experiment."""
    said = ["the documents say Paris", "no, it dodges the question"]
    model = _fake_grader(*said)
    evs = evaluators(["groundedness", "helpfulness"], judge=model, max_retries=0)
    judge = evs[0].suite.scorer.settings.judge
    assert isinstance(judge, TracedJudge)
    assert judge.judge.chat_model is model  # the very object given, inside the core's wrapper
    (row,) = run_evaluate(_plain_bot, _graded(1), evaluators=evs)
    found = by_key(row)
    assert sorted(found) == ["groundedness", "helpfulness"]
    # the replies are taken in call order, which the engine does not fix: match them by content
    assert sorted(r.comment or "" for r in found.values()) == sorted(said)
    for result in found.values():
        assert result.score == (0.0 if (result.comment or "").startswith("no") else 1.0)
        assert result.extra is None


def test_a_raw_chat_model_traces_its_own_llm_run_under_the_judge_call() -> None:
    """LangChain posts the model's llm run itself; the judge call around it is a chain run
    without usage, so LangSmith counts the tokens once."""
    evs = evaluators(["groundedness"], judge=_fake_grader("all backed"), max_retries=0)
    target = RunTree(
        name="rag_bot",
        run_type="chain",
        inputs={"question": "What is the capital of France?"},
        outputs={"answer": "Paris.", "documents": [CORPUS["paris"]]},
        ls_client=offline_client(),
    )
    recorder = offline_client()
    evaluator_run_id = uuid.uuid4()
    with run_helpers.tracing_context(project_name="evaluators", enabled=True, client=recorder):
        result = evs[0].evaluate_run(target, None, evaluator_run_id=evaluator_run_id)
    assert isinstance(result, EvaluationResult)
    assert (result.score, result.source_run_id) == (1.0, evaluator_run_id)
    runs = recorder.recorded_runs()
    (call,) = [r for r in runs if r.get("parent_run_id") == evaluator_run_id]
    assert (call["name"], call["run_type"]) == ("judge:grader.groundedness", "chain")
    assert "usage_metadata" not in call["outputs"]
    (llm,) = [r for r in runs if r.get("parent_run_id") == call["id"]]
    assert (llm["name"], llm["run_type"]) == ("FakeListChatModel", "llm")


# ----------------------------------------------------------------------------- feedback keys


def test_tutorial_preset_names_the_graders_after_the_tutorial() -> None:
    evs = evaluators(
        [*GRADERS, "recall@2"], judge=ScriptedJudge({"*": YES}), keys="langsmith-tutorial"
    )
    assert [e.feedback_keys for e in evs] == [
        ["correctness"],
        ["relevance"],
        ["groundedness"],
        ["retrieval_relevance"],
        ["recall@2"],  # not a tutorial grader: keeps its name
    ]
    rows = run_evaluate(
        _plain_bot, _graded(1), evaluators=evs[:4], summary_evaluators=summary_evaluators(evs[:4])
    )
    found = by_key(rows[0])
    assert {k: r.score for k, r in found.items()} == {
        "correctness": 1.0,
        "relevance": 1.0,
        "groundedness": 1.0,
        "retrieval_relevance": 1.0,
    }
    assert found["relevance"].evaluator_info["ragbridge_metric"] == "helpfulness"


def test_tutorial_preset_maps_the_graded_measures_too() -> None:
    suite = RagbridgeEvaluators(
        ["faithfulness:offline", "answer_relevance:offline", "document_relevance"],
        judge=ScriptedJudge({"*": YES}),
        keys="langsmith-tutorial",
    )
    assert suite.keys == {  # a metric is named without its provider
        "faithfulness": "groundedness",
        "answer_relevance": "relevance",
        "document_relevance": "retrieval_relevance",
    }
    assert LANGSMITH_TUTORIAL_KEYS["answer_correctness"] == "correctness"


def test_bad_key_presets_and_clashes_fail_at_construction() -> None:
    with pytest.raises(
        ValueError, match=r"unknown keys preset 'tutorial' \(presets: langsmith-tutorial\)"
    ):
        evaluators(["mrr"], keys="tutorial")
    with pytest.raises(
        ValueError, match=r"'groundedness' from groundedness, faithfulness: keep one"
    ):
        evaluators(
            ["groundedness", "faithfulness:offline"],
            judge=ScriptedJudge({"*": YES}),
            keys="langsmith-tutorial",
        )
