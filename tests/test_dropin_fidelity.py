"""Drop-in fidelity (issue 28): code written for LlamaIndex, RAGAS and DeepEval, and the peers'
own unit cases, run against ragbridge's counterparts with the real installed frameworks.

* LlamaIndex: ``Settings.llm`` / ``Settings.embed_model`` serve the evaluators as they serve
  LlamaIndex's own, and a model needed and found nowhere is refused at construction in
  LlamaIndex's names; ``expected_ids=None`` raises LlamaIndex's error and message; LlamaIndex's
  own retrieval-metric unit cases give LlamaIndex's values.
* RAGAS: result columns carry RAGAS's names (``answer_relevancy``), from one table checked
  against the installed RAGAS; ``ragbridge_metrics`` takes a list; the ``:ragas`` string
  providers give RAGAS's values at RAGAS's edges; ``context_recall:ragas_non_llm`` scores
  RAGAS's own docs example as RAGAS does (0.5); the registry shows each provider's definition.
* DeepEval: ``as_deepeval_metric("hallucination:offline")`` and the drop-in
  ``HallucinationMetric`` side by side: opposite numbers, each saying its direction.

Offline throughout: scripted judges, hashing embedders, the frameworks' own classes.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("llama_index.core")
ragas = pytest.importorskip("ragas")
pytest.importorskip("deepeval")

from deepeval.test_case import LLMTestCase  # noqa: E402
from llama_index.core import Settings as LlamaSettings  # noqa: E402
from llama_index.core import VectorStoreIndex  # noqa: E402
from llama_index.core.evaluation import RetrieverEvaluator  # noqa: E402
from llama_index.core.evaluation.retrieval.metrics import (  # noqa: E402
    MRR,
    NDCG,
    AveragePrecision,
    HitRate,
    Precision,
    Recall,
)
from llama_index.core.llms import MockLLM  # noqa: E402
from llama_index.core.schema import TextNode  # noqa: E402
from llamaindex_fakes import HashEmbedding  # noqa: E402
from ragas.dataset_schema import SingleTurnSample  # noqa: E402
from ragas.metrics import collections as ragas_collections  # noqa: E402

from ragbridge.adapters.cli import main as cli  # noqa: E402
from ragbridge.adapters.deepeval import HallucinationMetric, as_deepeval_metric  # noqa: E402
from ragbridge.adapters.llamaindex import (  # noqa: E402
    LlamaIndexEmbedder,
    RagbridgeEvaluator,
    RagbridgeRetrievalMetric,
    RagbridgeRetrieverEvaluator,
    evaluators_for,
    score_queries,
)
from ragbridge.adapters.llamaindex.defaults import llamaindex_models  # noqa: E402
from ragbridge.adapters.ragas import (  # noqa: E402
    RAGAS_METRIC_NAMES,
    RagbridgeMetric,
    ragbridge_metrics,
    to_ragas_dataset,
)
from ragbridge.adapters.ragas.provider import (  # noqa: E402
    RagasStringMetric,
    ragas_score,
)
from ragbridge.core import evaluate  # noqa: E402
from ragbridge.core.registry import REGISTRY  # noqa: E402
from ragbridge.core.results.evaluation import FailureKind  # noqa: E402
from ragbridge.core.sample import Sample  # noqa: E402
from ragbridge.core.testing import CountingJudge, HashEmbedder  # noqa: E402
from tests.test_dropin_deepeval import ScriptedDeepEvalModel, deepevals_own  # noqa: E402
from tests.test_dropin_llamaindex import RuleLLM  # noqa: E402
from tests.test_dropin_ragas import SAMPLES, _overlap_judge  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _hermetic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # RAGAS writes ~/.local/share/ragas and DeepEval ./.deepeval: keep both in tmp_path.
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    warnings.simplefilter("ignore", DeprecationWarning)


# --------------------------------------------------------------------------- LlamaIndex


@pytest.fixture
def llama_settings() -> Iterator[Any]:
    """LlamaIndex's global Settings with no LLM and no embedding model, restored afterwards."""
    saved = (LlamaSettings._llm, LlamaSettings._embed_model)
    LlamaSettings._llm = None
    LlamaSettings._embed_model = None
    try:
        yield LlamaSettings
    finally:
        LlamaSettings._llm, LlamaSettings._embed_model = saved


QUERY = "What is the capital of France?"
ANSWER = "Paris is the capital of France."
CONTEXTS = ["Paris is the capital of France.", "The Loire is a river."]


def test_settings_embed_model_serves_answer_relevance_as_for_llamaindex_evaluators(
    llama_settings: Any,
) -> None:
    """Before: every result failed "answer_relevance needs an embedder (embedder=...)"."""
    llama_settings.embed_model = HashEmbedding()
    evaluator = RagbridgeEvaluator("answer_relevance", llm=RuleLLM())
    assert evaluator.scorer.embedder is not None
    wrapped = evaluator.scorer.embedder.embedder
    assert isinstance(wrapped, LlamaIndexEmbedder)
    assert wrapped.embed_model is llama_settings.embed_model
    result = evaluator.evaluate(query=QUERY, response=ANSWER, contexts=CONTEXTS)
    assert result.invalid_result is False, result.invalid_reason
    explicit = RagbridgeEvaluator("answer_relevance", llm=RuleLLM(), embed_model=HashEmbedding())
    same = explicit.evaluate(query=QUERY, response=ANSWER, contexts=CONTEXTS)
    assert result.score == same.score
    assert result.score is not None
    assert 0.0 <= result.score <= 1.0


def test_settings_llm_is_the_judge_when_none_is_given(llama_settings: Any) -> None:
    llama_settings.llm = RuleLLM()
    for evaluator in (
        RagbridgeEvaluator("faithfulness"),
        evaluators_for(["faithfulness"])["faithfulness"],
    ):
        result = evaluator.evaluate(query=QUERY, response=ANSWER, contexts=CONTEXTS)
        assert (result.score, result.passing) == (1.0, True)
    live = score_queries(["faithfulness"])
    live.close()
    assert live.scorer.judge is not None
    assert live.scorer.judge.model == "rule-llm"


@pytest.mark.parametrize(
    "build",
    [
        lambda **kw: RagbridgeEvaluator("answer_relevance", **kw),
        lambda **kw: evaluators_for(["faithfulness", "answer_relevance"], **kw),
        lambda **kw: score_queries(["answer_relevance"], **kw),
    ],
)
def test_a_missing_embed_model_is_refused_at_construction_in_llamaindex_names(
    llama_settings: Any, build: Any
) -> None:
    with pytest.raises(ValueError, match=r"embed_model=.*Settings\.embed_model"):
        build(llm=RuleLLM())
    llama_settings.embed_model = None  # LlamaIndex's "disabled": a MockEmbedding
    with pytest.raises(ValueError, match="MockEmbedding"):
        build(llm=RuleLLM())


def test_a_missing_llm_is_refused_in_llamaindex_names(llama_settings: Any) -> None:
    with pytest.raises(ValueError, match=r"llm=.*Settings\.llm"):
        RagbridgeEvaluator("faithfulness")
    llama_settings.llm = MockLLM()  # what LlamaIndex keeps when the LLM is disabled
    with pytest.raises(ValueError, match="MockLLM"):
        evaluators_for(["faithfulness"])


def test_offline_providers_keep_their_calibrated_default_embedder(llama_settings: Any) -> None:
    llama_settings.embed_model = HashEmbedding()
    _, options = llamaindex_models(["answer_relevance:offline"], None, {})
    assert "embedder" not in options  # ragbridge's default, chosen by the engines
    _, options = llamaindex_models(["answer_relevance"], None, {"judge": CountingJudge()})
    assert options["embedder"] is llama_settings.embed_model
    mine = HashEmbedder()
    given: Any = {"judge": CountingJudge(), "embedder": mine}
    _, options = llamaindex_models(["answer_relevance"], None, given)
    assert options["embedder"] is mine  # what is given wins over Settings


def _retriever() -> Any:
    nodes = [
        TextNode(id_="paris", text="Paris is the capital of France."),
        TextNode(id_="loire", text="The Loire is the longest river in France."),
        TextNode(id_="alps", text="The Alps rise in the south-east of France."),
    ]
    index = VectorStoreIndex(nodes, embed_model=HashEmbedding())
    return index.as_retriever(similarity_top_k=2)


def test_expected_ids_none_raises_llamaindexs_error_and_message() -> None:
    """Before: TypeError: 'NoneType' object is not iterable."""
    retriever = _retriever()
    names = ["hit_rate", "mrr"]
    theirs = RetrieverEvaluator.from_metric_names(names, retriever=retriever)
    ours = RagbridgeRetrieverEvaluator.from_metric_names(names, retriever=retriever)
    with pytest.raises(ValueError, match="expected ids must be provided") as their_error:
        theirs.evaluate(QUERY, expected_ids=None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="expected ids must be provided") as our_error:
        ours.evaluate(QUERY, expected_ids=None)  # type: ignore[arg-type]
    assert str(our_error.value) == str(their_error.value)
    labelled = ["paris"]  # scored as before, with LlamaIndex's numbers
    scored = ours.evaluate(QUERY, expected_ids=labelled).metric_vals_dict
    assert scored == theirs.evaluate(QUERY, expected_ids=labelled).metric_vals_dict


# The inputs of LlamaIndex's own unit tests of its retrieval metrics
# (llama-index-core/tests/evaluation/test_metrics.py, non-granular cases).
LI_CASES = [
    (["id1", "id2", "id3"], ["id3", "id1", "id2", "id4"]),
    (["id1", "id2", "id3", "id4"], ["id1", "id5", "id2"]),
    (["id1", "id2"], ["id3", "id4"]),
    (["id1", "id2"], ["id2", "id1", "id7"]),
    (["id1", "id2", "id3", "id4"], ["id5", "id1"]),
    (["id1", "id2", "id3", "id4"], ["id1", "id2", "id5"]),
    (["id1", "id2"], ["id1", "id7", "id15", "id2"]),
]
LI_METRICS = [
    ("hit_rate", HitRate),
    ("mrr", MRR),
    ("precision", Precision),
    ("recall", Recall),
    ("ap", AveragePrecision),
    ("ndcg", NDCG),
]


@pytest.mark.parametrize(("name", "cls"), LI_METRICS)
def test_llamaindexs_own_unit_cases_give_llamaindexs_values(name: str, cls: Any) -> None:
    for expected, retrieved in LI_CASES:
        theirs = cls().compute(expected_ids=expected, retrieved_ids=retrieved).score
        ours = RagbridgeRetrievalMetric(name=name).compute(
            expected_ids=expected, retrieved_ids=retrieved
        )
        assert ours.score == pytest.approx(theirs), (name, expected, retrieved)


@pytest.mark.parametrize(
    ("expected", "retrieved"), [(None, ["id3", "id1"]), (["id1", "id2"], None), ([], [])]
)
@pytest.mark.parametrize(("name", "cls"), LI_METRICS)
def test_llamaindexs_own_exception_cases_raise_valueerror(
    expected: Any, retrieved: Any, name: str, cls: Any
) -> None:
    with pytest.raises(ValueError, match="must be provided"):
        cls().compute(expected_ids=expected, retrieved_ids=retrieved)
    ours = RagbridgeRetrievalMetric(name=name)
    with pytest.raises(ValueError, match=r"must be provided|no relevant"):
        ours.compute(expected_ids=expected, retrieved_ids=retrieved)


# --------------------------------------------------------------------------- RAGAS: names


def _installed_ragas_names() -> dict[str, str]:
    """The name the installed RAGAS gives each counterpart (its classes, built as users do)."""
    from ragas import metrics as legacy

    return {
        "faithfulness": legacy.Faithfulness().name,
        "answer_relevance": legacy.AnswerRelevancy().name,
        "context_precision": legacy.context_precision.name,
        "context_recall": legacy.LLMContextRecall().name,
        "answer_correctness": legacy.AnswerCorrectness().name,
        "answer_similarity": legacy.answer_similarity.name,
        "rouge_l": ragas_collections.RougeScore().name,
        "bleu": ragas_collections.BleuScore().name,
        "exact_match": ragas_collections.ExactMatch().name,
        "context_precision:ragas_non_llm": legacy.NonLLMContextPrecisionWithReference().name,
        "context_recall:ragas_non_llm": legacy.NonLLMContextRecall().name,
    }


def test_the_name_table_is_the_installed_ragas_own() -> None:
    assert dict(RAGAS_METRIC_NAMES) == _installed_ragas_names()


def test_columns_carry_ragas_names_so_ragas_code_reads_them() -> None:
    """Before: KeyError: 'answer_relevancy' (the column was ragbridge's answer_relevance)."""
    metrics = ragbridge_metrics(
        ["faithfulness", "answer_relevance", "context_recall"],
        judge=_overlap_judge(),
        embedder=HashEmbedder(),
    )
    result = ragas.evaluate(to_ragas_dataset(SAMPLES), metrics=metrics, show_progress=False)
    table = result.to_pandas()
    for column in ("faithfulness", "answer_relevancy", "context_recall"):
        assert column in table.columns
    mine = evaluate(SAMPLES, ["answer_relevance"], judge=_overlap_judge(), embedder=HashEmbedder())
    expected = [mine.get(s.id, "answer_relevance").value for s in SAMPLES]  # type: ignore[union-attr]
    assert list(result["answer_relevancy"]) == pytest.approx(expected)


@pytest.mark.parametrize("spelled", ["answer_relevance", "bleu", "rouge_l", "exact_match"])
def test_ragas_names_by_default_ours_on_request(spelled: str) -> None:
    kw: dict[str, Any] = {"judge": CountingJudge(), "embedder": HashEmbedder()}
    assert RagbridgeMetric(spelled, **kw).name == RAGAS_METRIC_NAMES[spelled]
    assert RagbridgeMetric(spelled, names="ragbridge", **kw).name == spelled
    assert RagbridgeMetric(spelled, name="mine", **kw).name == "mine"
    non_llm = RagbridgeMetric("context_recall:ragas_non_llm")
    assert non_llm.name == "non_llm_context_recall"
    assert RagbridgeMetric("non_llm_context_recall").metric.provider == "ragas_non_llm"


def test_ragbridge_metrics_takes_a_list_as_the_other_sinks_do() -> None:
    """Before: TypeError: not a metric: ['context_recall', 'faithfulness']."""
    as_list = ragbridge_metrics(["context_recall", "faithfulness"], judge=CountingJudge())
    one_by_one = ragbridge_metrics("context_recall", "faithfulness", judge=CountingJudge())
    assert [m.name for m in as_list] == [m.name for m in one_by_one]
    assert [m.name for m in as_list] == ["context_recall", "faithfulness"]
    assert as_list[0]._group is as_list[1]._group  # one judge engine, shared sub-results
    with pytest.raises(TypeError, match="one list of measures"):
        ragbridge_metrics(["faithfulness"], "context_recall", judge=CountingJudge())


# --------------------------------------------------------------------------- RAGAS: edges

EDGE_PAIRS = [
    ("", ""),
    ("", "Paris"),
    ("Paris", ""),
    ("Paris", "Paris"),
    ("The capital is Paris.", "Paris is the capital."),
]
RAGAS_STRINGS = [("exact_match", "ExactMatch"), ("bleu", "BleuScore"), ("rouge_l", "RougeScore")]


@pytest.mark.parametrize(("measure", "cls"), RAGAS_STRINGS)
def test_ragas_string_providers_give_ragas_values_at_ragas_edges(measure: str, cls: str) -> None:
    """Before: an empty answer or reference was missing_input; RAGAS gives a number."""
    for answer, reference in EDGE_PAIRS:
        metric = getattr(ragas_collections, cls)()
        theirs = asyncio.run(metric.ascore(reference=reference, response=answer)).value
        sample = Sample(id="s", question="q", answer=answer, reference=reference)
        ours = evaluate([sample], [f"{measure}:ragas"]).get("s", measure)
        assert ours is not None
        assert ours.failure is None, (answer, reference, ours.failure)
        assert ours.value == pytest.approx(theirs), (answer, reference)
        compared = asyncio.run(ragas_score(measure, sample, None))  # the comparison's path
        assert compared.value == pytest.approx(theirs)
        strict = RagasStringMetric(measure, edges="ragbridge")
        policy = evaluate([sample], [strict]).get("s", measure)
        assert policy is not None
        if answer and reference:
            assert policy.value == ours.value
        else:
            assert policy.failure is not None
            assert policy.failure.kind is FailureKind.MISSING_INPUT
    assert asyncio.run(ragas_collections.ExactMatch().ascore(reference="", response="")).value == 1


def test_an_absent_field_is_still_missing_for_the_ragas_string_providers() -> None:
    sample = Sample(id="s", question="q", answer="Paris", reference=None)
    score = evaluate([sample], ["exact_match:ragas"]).get("s", "exact_match")
    assert score is not None
    assert score.failure is not None
    assert score.failure.kind is FailureKind.MISSING_INPUT
    assert "reference" in score.failure.message


def test_non_llm_context_recall_scores_ragas_docs_example_as_ragas_does() -> None:
    """RAGAS's NonLLMContextRecall docs example has neither a question nor a reference answer:
    RAGAS gives 0.5; before, ragbridge refused it (missing_input: question, then reference)."""
    from ragas.metrics import NonLLMContextPrecisionWithReference, NonLLMContextRecall

    retrieved = ["Paris is the capital of France."]
    reference_contexts = [
        "Paris is the capital of France.",
        "The Eiffel Tower is one of the most famous landmarks in Paris.",
    ]
    row = SingleTurnSample(retrieved_contexts=retrieved, reference_contexts=reference_contexts)
    recall = asyncio.run(NonLLMContextRecall().single_turn_ascore(row))
    precision = asyncio.run(NonLLMContextPrecisionWithReference().single_turn_ascore(row))
    assert recall == 0.5
    sample = Sample(
        id="docs", question="", contexts=retrieved, reference_contexts=reference_contexts
    )
    run = evaluate([sample], ["context_recall:ragas_non_llm", "context_precision:ragas_non_llm"])
    ours_recall = run.get("docs", "context_recall")
    ours_precision = run.get("docs", "context_precision")
    assert ours_recall is not None
    assert ours_precision is not None
    assert (ours_recall.value, ours_recall.provider) == (0.5, "ragas_non_llm")
    assert ours_precision.value == pytest.approx(precision)


def test_each_provider_row_shows_the_definition_it_computes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Before: the table said "SQuAD-normalised" for exact_match:ragas, which is raw equality."""
    rows = {(r["measure"], r["provider"]): r["meaning"] for r in REGISTRY.rows()}
    assert "SQuAD" in rows["exact_match", "string"]
    assert "SQuAD" not in rows["exact_match", "ragas"]
    assert "no normalisation" in rows["exact_match", "ragas"]
    assert "'. '-split" in rows["bleu", "ragas"]
    assert "reference_contexts" in rows["context_recall", "ragas_non_llm"]
    assert "relevant to the question" in rows["answer_relevance", "deepeval"]
    assert rows["faithfulness", "ragas"] == rows["faithfulness", "llm"]  # the same definition
    assert cli(["metrics"]) == 0
    lines = capsys.readouterr().out.splitlines()
    (line,) = [x for x in lines if x.startswith("exact_match:ragas ")]
    assert "no normalisation" in line
    assert "SQuAD" not in line


# --------------------------------------------------------------------------- DeepEval

DOCS_CASE = LLMTestCase(  # DeepEval's own HallucinationMetric example
    input="What was the blond doing?",
    actual_output="A blond drinking water in public.",
    context=["A man with blond-hair, and a brown shirt drinking out of a public water fountain."],
)


def test_hallucination_entry_points_side_by_side_each_saying_its_direction() -> None:
    """Same case: ``as_deepeval_metric`` gives ragbridge's hallucination (0 is best), the
    drop-in DeepEval 4.3's agreement (1 is a pass), as DeepEval's own class does; both pass,
    and each reason says which direction its number runs."""
    ours = as_deepeval_metric("hallucination:offline", embedder=HashEmbedder())
    drop_in = HallucinationMetric(provider="offline", embedder=HashEmbedder())
    theirs = deepevals_own("HallucinationMetric", model=ScriptedDeepEvalModel(["yes"]))
    # offline support is graded: "in" is the one word the context lacks (a function word)
    assert ours.measure(DOCS_CASE) == pytest.approx(1.0 - drop_in.measure(DOCS_CASE))
    assert ours.score is not None
    assert ours.score < 0.5 < drop_in.measure(DOCS_CASE)
    assert theirs.measure(DOCS_CASE, _show_indicator=False) == 1.0
    assert ours.success is drop_in.success is theirs.success is True
    assert ours.reason is not None
    assert drop_in.reason is not None
    assert "ragbridge's direction, 0 is best" in ours.reason
    assert "score <= threshold 0.5" in ours.reason
    assert "DeepEval 4.3's direction" in drop_in.reason
    assert "score >= threshold 0.5" in drop_in.reason


def test_the_readme_states_both_hallucination_directions() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]  # README and the site
    text = " ".join(" ".join(p.read_text(encoding="utf-8").split()) for p in pages)
    assert '`as_deepeval_metric("hallucination")` keeps ragbridge\'s direction' in text
    assert "0 is best" in text
    assert "1 is a pass" in text
