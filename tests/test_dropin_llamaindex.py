"""Drop-in for LlamaIndex users (issue 16): code as LlamaIndex users write it, offline.

* LlamaIndex's ``RetrieverEvaluator`` and ragbridge's counterpart on the same retriever and
  node-id labels, compared metric by metric and query by query; ids that never match the
  labels said out loud.
* ``passing="llamaindex"``: LlamaIndex's all-or-nothing ``FaithfulnessEvaluator`` verdict and
  ragbridge's graded faithfulness, with one rule-following judge LLM behind both.
* Chat engines (``chat_mode="context"``, ``"condense_plus_context"`` on ``MockLLM``) through
  ``run_query_engine`` and live scoring.
* One ``contexts`` shape for the LlamaIndex and LangChain captures.
* ``llm=`` / ``embed_model=``.
* The two notebook-shaped examples, run end to end.

Real LlamaIndex objects throughout: a ``VectorStoreIndex`` over nodes embedded by a small
word-hashing embedding (``MockEmbedding`` gives every node the same score, so ranking could
not be compared), ``MockLLM``, LlamaIndex's own evaluators. Judges are ragbridge's
``ScriptedJudge`` or a ``CustomLLM`` that follows fixed rules.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import re
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("llama_index.core")

from llama_index.core import Document, VectorStoreIndex
from llama_index.core.evaluation import FaithfulnessEvaluator, RetrieverEvaluator
from llama_index.core.llms import (
    CompletionResponse,
    CompletionResponseGen,
    CustomLLM,
    LLMMetadata,
    MockLLM,
)
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.schema import TextNode
from llamaindex_fakes import HashEmbedding

from ragbridge.adapters.llamaindex import (
    LLAMAINDEX_METRICS,
    LLAMAINDEX_PASSING,
    IdMismatchError,
    IdMismatchWarning,
    LlamaIndexJudge,
    RagbridgeEvaluator,
    RagbridgeRetrievalEvalResult,
    RagbridgeRetrievalMetric,
    RagbridgeRetrieverEvaluator,
    capture_retrievals,
    evaluation_of,
    evaluators_for,
    qa_samples,
    run_query_engine,
    run_retriever,
    score_queries,
)
from ragbridge.core import evaluate
from ragbridge.core.results.evaluation import FailureKind
from ragbridge.core.sample import Sample
from ragbridge.core.testing import HashEmbedder, ScriptedJudge

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
LI_NAMES = ["hit_rate", "mrr", "precision", "recall", "ap", "ndcg"]

# --------------------------------------------------------------------------- fixtures


TOPICS = {
    "france": "Paris is the capital of France. The Eiffel tower stands in Paris.",
    "germany": "Berlin is the capital of Germany. The Brandenburg gate is in Berlin.",
    "italy": "Rome is the capital of Italy. The Colosseum stands in Rome.",
    "spain": "Madrid is the capital of Spain. The Prado museum is in Madrid.",
}


@pytest.fixture(scope="module")
def index() -> VectorStoreIndex:
    documents = [
        Document(text=" ".join([body] * 4) + f" Remember {doc_id} well.", id_=doc_id)
        for doc_id, body in TOPICS.items()
    ]
    return VectorStoreIndex.from_documents(
        documents,
        embed_model=HashEmbedding(model_name="hash-64"),
        transformations=[SentenceSplitter(chunk_size=32, chunk_overlap=0)],
    )


@pytest.fixture(scope="module")
def example() -> Any:
    """examples/llamaindex_retriever_eval.py as a module (it imports examples/corpus.py)."""
    sys.path.insert(0, str(EXAMPLES))
    try:
        return importlib.import_module("llamaindex_retriever_eval")
    finally:
        sys.path.remove(str(EXAMPLES))


@pytest.fixture(scope="module")
def notebook(example: Any) -> tuple[list[Any], Any]:
    """The retriever notebook's nodes (``node_0``, ...) and its question/node-id dataset."""
    nodes = example.build_nodes()
    return nodes, example.build_dataset(nodes)


def _li_results(retriever: Any, dataset: Any) -> dict[str, dict[str, float]]:
    """LlamaIndex's own RetrieverEvaluator, query by query (0.14.21 dropped
    ``aevaluate_dataset``, so loop as users now do)."""
    own = RetrieverEvaluator.from_metric_names(LI_NAMES, retriever=retriever)
    return {
        qid: own.evaluate(query, dataset.relevant_docs[qid]).metric_vals_dict
        for qid, query in dataset.queries.items()
    }


# --------------------------------------------------------------------------- 1. retrievers


def _run(script: str) -> str:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / script)],
        capture_output=True,
        text=True,
        check=True,
        timeout=180,
    )
    return done.stdout


@pytest.mark.parametrize("top_k", [1, 2, 3, 12])
def test_retriever_evaluator_equals_llamaindex_metric_by_metric(
    example: Any, notebook: tuple[list[Any], Any], top_k: int
) -> None:
    # top_k 12 > the 9 nodes: fewer ids come back than asked for (LlamaIndex's precision
    # divides by what came back); top_k 1 and 2 < the 3 nodes some questions label (its NDCG's
    # ideal counts them all). Both conventions are the ones matched.
    nodes, dataset = notebook
    retriever = VectorStoreIndex(nodes, embed_model=HashEmbedding()).as_retriever(
        similarity_top_k=top_k
    )
    theirs = _li_results(retriever, dataset)
    ours = RagbridgeRetrieverEvaluator.from_metric_names(LI_NAMES, retriever=retriever)
    results = ours.evaluate_dataset(dataset)
    assert [r.query_id for r in results] == list(dataset.queries)
    for result in results:
        assert isinstance(result, RagbridgeRetrievalEvalResult)
        expected = theirs[str(result.query_id)]
        assert set(result.metric_vals_dict) == set(LI_NAMES)
        for name in LI_NAMES:
            assert result.metric_vals_dict[name] == pytest.approx(expected[name], abs=1e-12), (
                result.query_id,
                name,
            )
    # the dataset is not trivial: misses, rank-2 hits and several labels all occur
    values = [r.metric_vals_dict for r in results]
    if top_k == 2:
        assert {v["mrr"] for v in values} == {0.0, 0.5, 1.0}
        assert any(0 < v["recall"] < 1 for v in values)


def test_where_trec_conventions_differ_and_which_number_matches(
    notebook: tuple[list[Any], Any],
) -> None:
    nodes, dataset = notebook
    retriever = VectorStoreIndex(nodes, embed_model=HashEmbedding()).as_retriever(
        similarity_top_k=2
    )
    names = ["ndcg", "ndcg@2", "precision", "precision@4"]
    ours = RagbridgeRetrieverEvaluator.from_metric_names(names, retriever=retriever)
    theirs = _li_results(retriever, dataset)
    # "What happens to leave in March?" labels three nodes and retrieves two of them at most
    many = next(q for q, ids in dataset.relevant_docs.items() if len(ids) == 3)
    result = ours.evaluate(dataset.queries[many], dataset.relevant_docs[many])
    vals = result.metric_vals_dict
    assert vals["ndcg"] == pytest.approx(theirs[many]["ndcg"])  # trec_eval's uncut ndcg
    assert vals["ndcg@2"] > vals["ndcg"]  # ndcg_cut_2: the ideal keeps only 2 of the 3
    assert vals["precision"] == pytest.approx(theirs[many]["precision"])
    assert vals["precision@4"] == pytest.approx(vals["precision"] / 2)  # P_4 divides by 4
    assert result.metric_dict["ndcg"].metadata["measure"] == "ndcg"
    assert result.metric_dict["precision"].metadata["measure"] == "precision@2"
    assert LLAMAINDEX_METRICS["ndcg"] == "ndcg"


def test_ragbridge_metrics_run_inside_llamaindex_own_evaluator(
    notebook: tuple[list[Any], Any],
) -> None:
    nodes, dataset = notebook
    retriever = VectorStoreIndex(nodes, embed_model=HashEmbedding()).as_retriever(
        similarity_top_k=2
    )
    theirs = _li_results(retriever, dataset)
    hosted = RetrieverEvaluator(
        metrics=[RagbridgeRetrievalMetric(name=n) for n in LI_NAMES], retriever=retriever
    )
    for qid, query in dataset.queries.items():
        got = hosted.evaluate(query, dataset.relevant_docs[qid]).metric_vals_dict
        assert got == pytest.approx(theirs[qid])


def test_document_labels_against_node_ids_raise_naming_use_ref_doc_id(
    notebook: tuple[list[Any], Any],
) -> None:
    nodes, dataset = notebook
    retriever = VectorStoreIndex(nodes, embed_model=HashEmbedding()).as_retriever(
        similarity_top_k=2
    )
    question = dataset.queries["q1"]  # about paid leave; its node belongs to document "leave"
    # LlamaIndex compares node ids: labels naming the document give a plausible 0.0
    own = RetrieverEvaluator.from_metric_names(LI_NAMES, retriever=retriever)
    assert own.evaluate(question, ["leave"]).metric_vals_dict["hit_rate"] == 0.0
    ours = RagbridgeRetrieverEvaluator.from_metric_names(LI_NAMES, retriever=retriever)
    with pytest.raises(IdMismatchError) as caught:
        ours.evaluate(question, ["leave"])
    message = str(caught.value)
    assert "ref_doc_id holds labelled ids" in message
    assert "use_ref_doc_id=True" in message
    assert "'node_0'" in message
    assert "'leave'" in message
    by_document = RagbridgeRetrieverEvaluator.from_metric_names(
        LI_NAMES, retriever=retriever, use_ref_doc_id=True
    )
    result = by_document.evaluate(question, ["leave"])
    assert result.metric_vals_dict["hit_rate"] == 1.0
    assert result.retrieved_ids[0] == "leave"
    # and the reverse: node labels while comparing documents
    with pytest.raises(IdMismatchError, match="use_ref_doc_id=False"):
        by_document.evaluate(question, ["node_0"])


def test_labels_naming_nothing_warn_once_for_the_dataset(
    notebook: tuple[list[Any], Any],
) -> None:
    nodes, dataset = notebook
    retriever = VectorStoreIndex(nodes, embed_model=HashEmbedding()).as_retriever(
        similarity_top_k=2
    )
    wrong = {
        "queries": dataset.queries,
        "relevant_docs": {q: [f"chunk-{i}"] for i, q in enumerate(dataset.queries)},
    }
    ours = RagbridgeRetrieverEvaluator.from_metric_names(["hit_rate"], retriever=retriever)
    with pytest.warns(IdMismatchWarning) as caught:
        results = ours.evaluate_dataset(wrong)
    # only ours: pytest.warns records every warning, and LlamaIndex's own depend on test order
    mismatches = [w for w in caught if issubclass(w.category, IdMismatchWarning)]
    assert len(mismatches) == 1
    line = str(mismatches[0].message)
    assert line.startswith("ranking measures: 10 of 10 queries retrieved no labelled id")
    assert "compares node ids" in line
    assert "use_ref_doc_id=True" in line
    assert ours.id_warnings == [line]
    assert all(r.metric_vals_dict["hit_rate"] == 0.0 for r in results)
    summary = evaluation_of(results)
    assert summary.metadata["warnings"]
    # a dataset whose labels match raises no warning and clears the last one
    with warnings.catch_warnings():
        warnings.simplefilter("error", IdMismatchWarning)
        ours.evaluate_dataset(dataset)
    assert ours.id_warnings == []


def test_dataset_shapes_and_the_native_path_agree(
    notebook: tuple[list[Any], Any], tmp_path: Path
) -> None:
    nodes, dataset = notebook
    retriever = VectorStoreIndex(nodes, embed_model=HashEmbedding()).as_retriever(
        similarity_top_k=2
    )
    ours = RagbridgeRetrieverEvaluator.from_metric_names(["mrr", "recall"], retriever=retriever)
    as_dict = {"queries": dataset.queries, "corpus": dataset.corpus,
               "relevant_docs": dataset.relevant_docs}  # fmt: skip
    path = tmp_path / "pg_eval_dataset.json"
    path.write_text(json.dumps(as_dict))
    samples = qa_samples(str(path))
    assert [s.id for s in samples] == list(dataset.queries)
    shapes = [dataset, as_dict, path, str(path), samples]
    runs = [[r.metric_vals_dict for r in ours.evaluate_dataset(shape)] for shape in shapes]
    assert all(run == runs[0] for run in runs)
    # ragbridge's own path: retrieve, then the core's measures (top 2 came back each time)
    filled = run_retriever(retriever, samples, use_ref_doc_id=False)
    native = evaluate(filled, ["mrr", "recall@2"])
    for sample, row in zip(samples, runs[0], strict=True):
        assert native.get(sample.id, "mrr").value == pytest.approx(row["mrr"])
        assert native.get(sample.id, "recall@2").value == pytest.approx(row["recall"])
    with pytest.raises(TypeError, match="queries"):
        ours.evaluate_dataset({"queries": dataset.queries})


def test_unlabelled_query_is_skipped_and_unknown_names_are_refused(
    notebook: tuple[list[Any], Any],
) -> None:
    nodes, _ = notebook
    retriever = VectorStoreIndex(nodes, embed_model=HashEmbedding()).as_retriever(
        similarity_top_k=2
    )
    ours = RagbridgeRetrieverEvaluator.from_metric_names(["mrr", "ndcg@2"], retriever=retriever)
    result = ours.evaluate("Is parking free?", [])
    assert result.metric_dict == {}
    assert result.scores["mrr"].value is None
    assert "no relevant document exists" in (result.scores["mrr"].reason or "")
    with pytest.raises(ValueError, match="LlamaIndex's names: hit_rate, mrr"):
        RagbridgeRetrieverEvaluator.from_metric_names(["hitrate"], retriever=retriever)


def test_retriever_eval_example_prints_llamaindex_own_numbers(
    example: Any, notebook: tuple[list[Any], Any]
) -> None:
    out = _run("llamaindex_retriever_eval.py")
    header, row = out.strip().splitlines()[-2:]
    assert header.split() == ["retrievers", *LI_NAMES]
    printed = dict(zip(LI_NAMES, map(float, row.split()[2:]), strict=True))
    nodes, dataset = notebook
    theirs = _li_results(example.build_retriever(nodes), dataset)
    for name in LI_NAMES:
        mean = sum(v[name] for v in theirs.values()) / len(theirs)
        assert printed[name] == pytest.approx(mean, abs=5e-5), name
    assert printed["hit_rate"] == 0.8  # two of ten questions are worded to be missed


def test_node_ids_survive_as_in_the_notebook(example: Any) -> None:
    nodes = example.build_nodes()
    assert [n.node_id for n in nodes][:3] == ["node_0", "node_1", "node_2"]
    assert {n.ref_doc_id for n in nodes} >= {"leave", "carry"}
    assert isinstance(nodes[0], TextNode)


# --------------------------------------------------------------------------- 2. pass semantics

_BLOCK = r"<<<BEGIN {label}(?: \d+)?>>>\s*(.*?)\s*<<<END {label}(?: \d+)?>>>"


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if len(w) > 2}


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=\.)\s+", text.strip()) if s.strip()]


def _supported(sentence: str, contexts: list[str]) -> bool:
    return any(_words(sentence) <= _words(c) for c in contexts)


class RuleLLM(CustomLLM):
    """One judge behind both frameworks, following one rule: a sentence is supported when one
    context holds all its words. It answers LlamaIndex's faithfulness prompt (YES/NO for the
    whole response) and ragbridge's claim prompts (claims = sentences, a verdict per claim)."""

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="rule-llm")

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return CompletionResponse(text=self._reply(prompt))

    def stream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseGen:
        raise NotImplementedError

    def _reply(self, prompt: str) -> str:
        if "[ragbridge task: answer.analyze" in prompt:
            answer = re.findall(_BLOCK.format(label="ANSWER"), prompt, re.S)[0]
            claims = _sentences(answer)
            questions = ["What is stated?", "What is true?", "What holds?"]
            return json.dumps({"claims": claims, "questions": questions, "noncommittal": False})
        if "[ragbridge task: faithfulness.verify" in prompt:
            contexts = re.findall(_BLOCK.format(label="CONTEXT"), prompt, re.S)
            claims = re.findall(_BLOCK.format(label="CLAIM"), prompt, re.S)
            verdicts = [
                {
                    "reason": "rule",
                    "verdict": "supported" if _supported(c, contexts) else "unsupported",
                    "context": 1 if _supported(c, contexts) else None,
                }
                for c in claims
            ]
            return json.dumps({"verdicts": verdicts})
        if "is supported by the context" in prompt:  # LlamaIndex's FaithfulnessEvaluator
            info = prompt.rsplit("Information:", 1)[1].split("\nContext:", 1)[0]
            context = prompt.rsplit("Context:", 1)[1].rsplit("Answer:", 1)[0]
            contexts = [c for c in context.split("\n\n") if c.strip()]
            ok = all(_supported(s, contexts) for s in _sentences(info))
            return "YES" if ok else "NO"
        raise AssertionError(f"unexpected prompt: {prompt[:200]}")


CONTEXTS = [
    "Paris is the capital of France. The Eiffel tower stands in Paris.",
    "Berlin is the capital of Germany.",
]
# (response, supported sentences of it): all, most, half, some, none
RESPONSES = [
    ("Paris is the capital of France. Berlin is the capital of Germany.", 2 / 2),
    (
        "Paris is the capital of France. The Eiffel tower stands in Paris. "
        "Berlin is the capital of Germany. Rome is the capital of Italy.",
        3 / 4,
    ),
    ("Paris is the capital of France. Madrid is the capital of Spain.", 1 / 2),
    ("Paris is the capital of France. Rome has the Colosseum. Madrid has the Prado.", 1 / 3),
    ("Rome is the capital of Italy.", 0.0),
]


def test_passing_llamaindex_reproduces_the_all_or_nothing_verdict() -> None:
    llm = RuleLLM()
    theirs = FaithfulnessEvaluator(llm=llm)
    ours = RagbridgeEvaluator("faithfulness", judge=LlamaIndexJudge(llm), passing="llamaindex")
    default = RagbridgeEvaluator("faithfulness", judge=LlamaIndexJudge(llm))
    hallucination = RagbridgeEvaluator(
        "hallucination", judge=LlamaIndexJudge(llm), passing="llamaindex"
    )
    assert ours.threshold == LLAMAINDEX_PASSING["faithfulness"] == 1.0
    disagreements_at_default = 0
    for response, share in RESPONSES:
        verdict = theirs.evaluate(query="q", response=response, contexts=CONTEXTS)
        graded = ours.evaluate(query="q", response=response, contexts=CONTEXTS)
        assert graded.score == pytest.approx(share)
        assert verdict.passing is (share == 1.0)
        assert graded.passing is verdict.passing, response
        assert hallucination.evaluate(query="q", response=response, contexts=CONTEXTS).passing is (
            verdict.passing
        )
        lenient = default.evaluate(query="q", response=response, contexts=CONTEXTS)
        disagreements_at_default += lenient.passing is not verdict.passing
    assert disagreements_at_default == 2  # 3/4 and 1/2 pass at 0.5, not in LlamaIndex


def test_passing_preset_is_refused_where_it_has_no_meaning() -> None:
    judge = ScriptedJudge({})
    with pytest.raises(ValueError, match="no verdict for 'answer_relevance'"):
        RagbridgeEvaluator("answer_relevance", judge=judge, passing="llamaindex")
    with pytest.raises(ValueError, match="threshold= or passing="):
        RagbridgeEvaluator("faithfulness", judge=judge, threshold=0.9, passing="llamaindex")
    evs = evaluators_for(
        ["faithfulness", "answer_relevance"],
        judge=judge,
        embedder=HashEmbedder(),
        passing="llamaindex",
    )
    assert evs["faithfulness"].threshold == 1.0
    assert evs["answer_relevance"].threshold == 0.5
    with pytest.raises(ValueError, match="both set"):
        evaluators_for(
            ["faithfulness"], judge=judge, thresholds={"faithfulness": 0.9}, passing="llamaindex"
        )


# --------------------------------------------------------------------------- 3. chat engines

ANALYZE = {"claims": ["Rome is the capital of Italy."], "questions": ["a", "b", "c"],
           "noncommittal": False}  # fmt: skip
VERIFY = {"verdicts": [{"reason": "c1", "verdict": "supported", "context": 1}]}


@pytest.mark.parametrize("mode", ["context", "condense_plus_context"])
def test_run_query_engine_asks_a_chat_engine_each_question_fresh(
    index: VectorStoreIndex, mode: str
) -> None:
    chat = index.as_chat_engine(chat_mode=mode, llm=MockLLM(), similarity_top_k=2)
    samples = [
        Sample(id="it", question="Tell me about Rome Italy Colosseum", relevance={"italy": 1}),
        Sample(id="es", question="And Madrid Spain Prado museum?", relevance={"spain": 1}),
        "Berlin Germany Brandenburg gate",
    ]
    filled = run_query_engine(chat, samples, max_concurrency=8)
    assert [s.id for s in filled] == ["it", "es", "2"]
    for sample in filled:
        assert "error" not in sample.metadata
        assert sample.answer  # MockLLM echoes its prompt
        assert sample.metadata["engine"] == type(chat).__name__
        assert sample.metadata["retrievals"] == 1
    assert [s.contexts[0].id for s in filled] == ["italy", "spain", "germany"]
    # each question was a fresh conversation: the engine holds only the last turn
    assert len(chat.chat_history) == 2
    assert "Rome" not in str(chat.chat_history)
    scores = evaluate(filled[:2], ["hit_rate@1"])
    assert [scores.get(s, "hit_rate@1").value for s in ("it", "es")] == [1.0, 1.0]


def test_run_query_engine_refuses_what_it_cannot_ask_up_front(index: VectorStoreIndex) -> None:
    with pytest.raises(TypeError, match="a retriever: use run_retriever"):
        run_query_engine(index.as_retriever(), ["q"])

    class Agentish:
        def run(self, question: str) -> str:
            return question

    with pytest.raises(TypeError, match=r"query engine \(aquery\) or chat engine .*agent"):
        run_query_engine(Agentish(), ["q"])


def test_live_scoring_scores_chat_turns(index: VectorStoreIndex) -> None:
    chat = index.as_chat_engine(chat_mode="context", llm=MockLLM(), similarity_top_k=2)
    judge = ScriptedJudge({"answer.analyze": ANALYZE, "faithfulness.verify": VERIFY})
    with score_queries(["faithfulness"], judge=judge) as live:
        chat.chat("Tell me about Rome Italy Colosseum")
        asyncio.run(chat.achat("And Madrid Spain Prado museum?"))
        streamed = chat.stream_chat("Berlin Germany?")
        for _ in streamed.response_gen:
            pass
    assert live.seen == 3
    by_question = {s.question: s for s in live.samples}
    rome = by_question["Tell me about Rome Italy Colosseum"]
    assert rome.metadata["engine"] == "ContextChatEngine"
    assert rome.answer
    assert rome.contexts[0].id == "italy"
    assert by_question["And Madrid Spain Prado museum?"].contexts[0].id == "spain"
    assert live.evaluation.get(rome.id, "faithfulness").value == 1.0
    berlin = by_question["Berlin Germany?"]
    skipped = live.evaluation.get(berlin.id, "faithfulness")
    assert skipped.value is None
    assert "streaming chat response" in (skipped.reason or "")
    assert not live.errors


def test_live_scoring_names_chat_samples_by_tag(index: VectorStoreIndex) -> None:
    from llama_index.core.instrumentation.dispatcher import instrument_tags

    chat = index.as_chat_engine(chat_mode="condense_plus_context", llm=MockLLM())
    judge = ScriptedJudge({"answer.analyze": ANALYZE, "faithfulness.verify": VERIFY})
    with (
        score_queries(["faithfulness"], judge=judge) as live,
        instrument_tags({"ragbridge_sample": "turn-1"}),
    ):
        chat.chat("Tell me about Rome Italy Colosseum")
    assert [s.id for s in live.samples] == ["turn-1"]
    assert live.samples[0].metadata["engine"] == "CondensePlusContextChatEngine"


# --------------------------------------------------------------------------- 4. contexts shape


def test_llamaindex_retrievals_follow_the_capture_and_share_the_langchain_shape(
    index: VectorStoreIndex,
) -> None:
    engine = index.as_query_engine(llm=MockLLM(), similarity_top_k=2)
    with capture_retrievals(use_ref_doc_id=False) as cap:
        engine.query("Rome Italy Colosseum")
        engine.query("Madrid Spain Prado")
    first = cap.retrievals[0]
    assert all(c.id == c.metadata["node_id"] for c in first.contexts())  # node ids, as asked
    assert first.contexts(use_ref_doc_id=True)[0].id == "italy"
    roots = cap.roots()
    assert len(roots) == 2
    assert [c.id for c in cap.contexts(roots[0])] == [c.id for c in first.contexts()]
    assert cap.contexts(roots[1], retriever_name="VectorIndexRetriever")
    assert cap.contexts(roots[1], retriever_name="OtherRetriever") == []
    assert len(cap.contexts()) == 4
    with pytest.warns(DeprecationWarning, match="pass a root"):
        legacy = cap.contexts(cap.retrievals[:1])
    assert legacy == first.contexts()


def test_langchain_retrievals_follow_the_capture_and_share_the_shape() -> None:
    pytest.importorskip("langchain_core")
    from langchain_core.documents import Document as LCDocument
    from langchain_core.retrievers import BaseRetriever

    from ragbridge.adapters import langchain as lc

    class Fixed(BaseRetriever):
        def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[LCDocument]:
            return [
                LCDocument(id=f"uuid-{query}-1", page_content="a", metadata={"source": query}),
                LCDocument(id=f"uuid-{query}-2", page_content="b", metadata={"source": "x"}),
            ]

    retriever = Fixed()
    with lc.capture_retrievals(id_key="source") as cap:
        retriever.invoke("q1")
        retriever.invoke("q2")
    assert [c.id for c in cap.retrievals[0].contexts()] == ["q1", "x"]  # the capture's id_key
    assert cap.retrievals[0].contexts(id_key=None)[0].id == "uuid-q1-1"
    roots = cap.roots()
    assert [c.id for c in cap.contexts(roots[1])] == ["q2", "x"]
    assert [c.id for c in cap.contexts()] == ["q1", "x", "q2"]  # every call, each id once
    with pytest.warns(DeprecationWarning, match="positionally"):
        assert cap.contexts(root_run_id=roots[0]) == cap.contexts(roots[0])


# --------------------------------------------------------------------------- 5. parameter names


def test_llm_and_embed_model_are_judge_and_embedder() -> None:
    judge = ScriptedJudge({"answer.analyze": ANALYZE, "faithfulness.verify": VERIFY})
    evaluator = RagbridgeEvaluator("faithfulness", llm=judge)
    assert evaluator.scorer.settings.judge is judge  # passed through, not inspected
    result = evaluator.evaluate(query="q", response="Rome is the capital of Italy.",
                                contexts=["Rome is the capital of Italy."])  # fmt: skip
    assert result.score == 1.0
    assert judge.calls
    embedder = HashEmbedder()
    offline = RagbridgeEvaluator("answer_relevance:offline", embed_model=embedder)
    assert offline.scorer.settings.embedder is embedder
    evs = evaluators_for(["faithfulness"], llm=judge)
    assert evs["faithfulness"].scorer.settings.judge is judge
    live = score_queries(["faithfulness"], llm=judge)
    live.close()
    assert live.scorer.settings.judge is judge


def test_a_llamaindex_llm_is_accepted_as_llm() -> None:
    # Settings wraps framework models (LlamaIndexJudge); MockLLM echoes its prompt, so the run
    # ends in a parse failure of the judge's reply: a typed failure, not an AttributeError
    evaluator = RagbridgeEvaluator("faithfulness", llm=MockLLM(), max_retries=0)
    assert isinstance(evaluator.scorer.judge.judge, LlamaIndexJudge)
    result = evaluator.evaluate(query="q", response="Rome is in Italy.", contexts=["Rome."])
    score = result.ragbridge_score
    assert score is not None
    assert score.failure is not None
    assert score.failure.kind == FailureKind.PARSE_ERROR
    assert result.invalid_result is True
    assert result.passing is None


@pytest.mark.parametrize(
    "build",
    [
        lambda **kw: RagbridgeEvaluator("faithfulness", **kw),
        lambda **kw: evaluators_for(["faithfulness"], **kw),
        lambda **kw: score_queries(["faithfulness"], **kw),
    ],
)
def test_one_model_two_names_is_refused(build: Any) -> None:
    judge = ScriptedJudge({})
    with pytest.raises(ValueError, match="llm= and judge= name the same model"):
        build(llm=judge, judge=judge)
    with pytest.raises(ValueError, match="embed_model= and embedder= name the same model"):
        build(embed_model=HashEmbedder(), embedder=HashEmbedder(), judge=judge)


# --------------------------------------------------------------------------- 6. the examples


def test_batch_eval_example_fails_the_invented_claim() -> None:
    out = _run("llamaindex_batch_eval.py")
    assert "['faithfulness', 'relevancy']" in out
    assert "not faithful: Parking at the head office is free for all staff. A parking permit" in out
    assert "✗ [unsupported] A parking permit costs 10 euros a month." in out
    # 4 of 5 pass: the parking answer is half supported, which the default 0.5 would pass
    assert "faithfulness Score: 0.8" in out
    assert "relevancy Score: 0.8" in out


@pytest.mark.parametrize(
    ("script", "changed"), [("llamaindex_batch_eval.py", 3), ("llamaindex_retriever_eval.py", 1)]
)
def test_examples_change_only_the_evaluator_lines(script: str, changed: int) -> None:
    text = (EXAMPLES / script).read_text()
    assert "run-llama/llama_index" in text  # the source is credited
    lines = [line.strip() for line in text.splitlines()]
    marks = [i for i, line in enumerate(lines) if line.startswith("# ragbridge, in place of:")]
    assert len(marks) == changed
    for i in marks:
        original, replacement = lines[i].split(":", 1)[1].strip(), lines[i + 1]
        assert "llama_index" in original or "Evaluator(llm=gpt4)" in original
        assert "ragbridge" in replacement or "RagbridgeEvaluator(" in replacement
        assert not replacement.startswith("#")
