"""The RAGAS adapter against real ragas 0.4.3: data round trips, both metric stacks on
ragbridge's judge and cache, RAGAS's non-LLM metrics, and NaN-free results.

Also unit tests of `CountingJudge`'s JSON-Schema-driven replies (`minimal_json`,
`find_json_schema`), which RAGAS's schema-less prompts rely on.
"""

from __future__ import annotations

import asyncio
import json
import math
import subprocess
import sys
import warnings
from enum import Enum
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pytest
from pydantic import BaseModel, Field

from ragbridge.adapters._extras import install_hint
from ragbridge.core.judging.judge import PermanentJudgeError
from ragbridge.core.results.evaluation import FailureKind
from ragbridge.core.sample import Context, Sample
from ragbridge.core.testing import (
    CountingJudge,
    HashEmbedder,
    ScriptedJudge,
    find_json_schema,
    minimal_json,
)

ragas = pytest.importorskip("ragas")

from ragas.dataset_schema import EvaluationDataset, SingleTurnSample  # noqa: E402
from ragas.metrics.result import MetricResult  # noqa: E402

from ragbridge.adapters.ragas import (  # noqa: E402
    EXTRAS_KEY,
    RagasEmbedder,
    RagasInstructorJudge,
    RagasJudge,
    RagasJudgeError,
    RagasModernEmbedder,
    from_hf_dataset,
    from_ragas_dataset,
    from_ragas_jsonl,
    ragas_extras,
    score_from_ragas,
    scores_from_ragas,
    to_hf_dataset,
    to_ragas_dataset,
    to_ragas_jsonl,
)


@pytest.fixture(autouse=True)
def _hermetic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # RAGAS writes ~/.local/share/ragas and may post telemetry: keep both inside tmp_path / off.
    monkeypatch.setenv("RAGAS_DO_NOT_TRACK", "true")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    # RAGAS 0.4 deprecates its legacy metrics and evaluate(); they are what we test here.
    # (pytest restores the warning filters after each test.)
    warnings.simplefilter("ignore", DeprecationWarning)


def _samples() -> list[Sample]:
    return [
        Sample(
            id="q-1",
            question="What is the capital of France?",
            answer="Paris is the capital of France.",
            contexts=[
                Context(text="Paris is the capital of France.", id="d1", score=0.91),
                Context(text="Lyon is a city in France.", id="d2", score=0.4, metadata={"p": 3}),
            ],
            reference="Paris",
            reference_contexts=["Paris is the capital of France."],
            relevance={"d1": 2, "d2": 0, "d7": 1},
            metadata={"split": "dev", "tags": ["geo"]},
        ),
        Sample(
            id="q-2",
            question="Wie heißt die Hauptstadt von Österreich? 🏔",
            answer=None,
            contexts=[Context(text="Wien ist die Hauptstadt Österreichs — «Vienna».", id="w")],
            reference=None,
        ),
        Sample(
            id="q-3",
            question="Which ids are missing?",
            answer="Some.",
            contexts=[Context(text="first", id="a"), Context(text="second")],  # partial ids
            reference="None of them.",
            relevance={},
        ),
        Sample(id="q-4", question="No retrieval at all", answer="ok", contexts=[]),
    ]


def _assert_same(got: list[Sample], want: list[Sample]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        for field in Sample.model_fields:
            assert getattr(g, field) == getattr(w, field), (w.id, field)


# --------------------------------------------------------------------------- EvaluationDataset


def test_to_ragas_dataset_fills_ragas_fields() -> None:
    ds = to_ragas_dataset(_samples())
    assert isinstance(ds, EvaluationDataset)
    assert len(ds) == 4
    first = ds[0]
    assert isinstance(first, SingleTurnSample)
    assert first.user_input == "What is the capital of France?"
    assert first.response == "Paris is the capital of France."
    assert first.retrieved_contexts == [
        "Paris is the capital of France.",
        "Lyon is a city in France.",
    ]
    assert first.retrieved_context_ids == ["d1", "d2"]
    assert first.reference == "Paris"
    assert first.reference_contexts == ["Paris is the capital of France."]
    assert first.reference_context_ids == ["d1", "d7"]  # grades > 0 only
    second = ds[1]
    assert second.response is None
    assert second.reference is None
    assert second.reference_context_ids is None  # not labelled
    third = ds[2]
    assert third.retrieved_context_ids is None  # some ids missing: no placeholder ids
    assert third.reference_context_ids == []  # labelled, nothing relevant
    assert ds[3].retrieved_contexts == []


def test_ragas_dataset_round_trip_with_extras_is_lossless() -> None:
    samples = _samples()
    ds = to_ragas_dataset(samples)
    back = from_ragas_dataset(ds, extras=[ragas_extras(s) for s in samples])
    _assert_same(back, samples)
    assert back == samples


def test_ragas_dataset_round_trip_without_extras_keeps_what_ragas_carries() -> None:
    samples = _samples()
    back = from_ragas_dataset(to_ragas_dataset(samples), ids=[s.id for s in samples])
    for got, want in zip(back, samples, strict=True):
        assert got.id == want.id
        assert got.question == want.question
        assert got.answer == want.answer
        assert got.reference == want.reference
        assert got.reference_contexts == want.reference_contexts
        assert [c.text for c in got.contexts] == [c.text for c in want.contexts]
        assert all(c.score is None and c.metadata == {} for c in got.contexts)
        assert got.metadata == {}
    assert [c.id for c in back[0].contexts] == ["d1", "d2"]
    assert back[0].relevance == {"d1": 1, "d7": 1}  # grades are not carried by RAGAS
    assert [c.id for c in back[2].contexts] == [None, None]  # partial ids were not written
    assert back[2].relevance == {}
    assert back[1].relevance is None


def test_ragas_dataset_ids_default_to_row_index() -> None:
    back = from_ragas_dataset(to_ragas_dataset(_samples()[:2]))
    assert [s.id for s in back] == ["0", "1"]


def test_ragas_only_fields_are_kept_in_metadata_and_written_back() -> None:
    ds = EvaluationDataset(
        samples=[SingleTurnSample(user_input="q", response="a", rubrics={"score1": "bad"})]
    )
    (sample,) = from_ragas_dataset(ds, ids=["r"])
    assert sample.metadata == {"ragas": {"rubrics": {"score1": "bad"}}}
    again = to_ragas_dataset([sample])
    assert again[0].rubrics == {"score1": "bad"}


def test_extras_of_wrong_length_are_refused() -> None:
    with pytest.raises(ValueError, match="extras has 1 entries for 4 rows"):
        from_ragas_dataset(to_ragas_dataset(_samples()), extras=[{}])


# --------------------------------------------------------------------------- JSONL


def test_jsonl_round_trip_and_ragas_reads_the_file(tmp_path: Path) -> None:
    samples = _samples()
    path = tmp_path / "ragas.jsonl"
    assert to_ragas_jsonl(samples, path) == 4
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert lines[1]["user_input"] == "Wie heißt die Hauptstadt von Österreich? 🏔"
    assert "response" not in lines[1]  # absent fields omitted, as RAGAS writes them
    assert lines[0][EXTRAS_KEY]["id"] == "q-1"
    assert "Österreich" in path.read_text(encoding="utf-8")  # unicode written as is
    _assert_same(from_ragas_jsonl(path), samples)
    # RAGAS reads our file and ignores the extras key.
    theirs = EvaluationDataset.from_jsonl(str(path))
    assert theirs.to_list() == to_ragas_dataset(samples).to_list()


def test_jsonl_written_by_ragas_is_read(tmp_path: Path) -> None:
    path = tmp_path / "theirs.jsonl"
    to_ragas_dataset(_samples()).to_jsonl(str(path))
    back = from_ragas_jsonl(path, ids=["a", "b", "c", "d"])
    assert [s.id for s in back] == ["a", "b", "c", "d"]
    assert back[0].question == "What is the capital of France?"
    assert back[0].contexts[1] == Context(text="Lyon is a city in France.", id="d2")
    assert back[1].answer is None


@pytest.mark.parametrize(
    ("legacy", "instead"),
    [
        ("question", "user_input"),
        ("answer", "response"),
        ("contexts", "retrieved_contexts"),
        ("ground_truth", "reference"),
    ],
)
def test_jsonl_legacy_names_are_refused(tmp_path: Path, legacy: str, instead: str) -> None:
    path = tmp_path / "old.jsonl"
    good = {"user_input": "q"}
    bad: dict[str, Any] = {"user_input": "q", legacy: ["x"] if legacy == "contexts" else "x"}
    if legacy == "question":
        bad = {"question": "q"}
    path.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match="legacy RAGAS name") as info:
        from_ragas_jsonl(path)
    message = str(info.value)
    assert "row 1" in message
    assert repr(instead) in message
    assert f"{legacy}:" in message
    assert "silently drops" in message


@pytest.mark.parametrize(
    ("row", "field"),
    [
        # worded by the mapping every framework shares (ragbridge.core.sample_fields)
        ({"response": "a"}, "user_input: expected a string, got null"),
        ({"user_input": 3}, "user_input: expected a string, got 3"),
        ({"user_input": [{"content": "hi", "type": "human"}]}, "user_input: multi-turn"),
        ({"user_input": "q", "retrieved_contexts": "one"}, "retrieved_contexts: expected a list"),
        ({"user_input": "q", "retrieved_contexts": ["a", 2]}, "retrieved_contexts[1]: expected"),
        (
            {"user_input": "q", "retrieved_contexts": ["a"], "retrieved_context_ids": [1, 2]},
            "retrieved_context_ids: expected one id per retrieved context (1)",
        ),
        ({"user_input": "q", "response": 5}, "response: expected a string"),
        ({"user_input": "q", "score": 1}, "score: unknown key"),
        (
            {"user_input": "q", EXTRAS_KEY: {"contexts": [{}]}},
            "ragbridge.contexts: expected one entry per retrieved context (0)",
        ),
    ],
)
def test_jsonl_bad_rows_name_row_and_field(tmp_path: Path, row: dict[str, Any], field: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"user_input": "fine"}) + "\n" + json.dumps(row) + "\n")
    with pytest.raises(ValueError, match="row 1: ") as info:
        from_ragas_jsonl(path)
    assert f"{path}: row 1: {field}" in str(info.value)


def test_jsonl_duplicate_ids_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "dup.jsonl"
    to_ragas_jsonl(_samples()[:1], path)
    path.write_text(path.read_text() * 2)
    with pytest.raises(
        ValueError, match=r"row 1: id: duplicate sample id 'q-1' \(first in row 0\)"
    ):
        from_ragas_jsonl(path)


# --------------------------------------------------------------------------- HF datasets


def test_hf_dataset_round_trip_and_ragas_reads_it() -> None:
    samples = _samples()
    hf = to_hf_dataset(samples)
    assert hf.column_names == [
        "user_input",
        "retrieved_contexts",
        "retrieved_context_ids",
        "reference_contexts",
        "reference_context_ids",
        "response",
        "reference",
        EXTRAS_KEY,
    ]
    assert hf[1]["response"] is None
    _assert_same(from_hf_dataset(hf), samples)
    theirs = EvaluationDataset.from_hf_dataset(hf)
    assert theirs.to_list() == to_ragas_dataset(samples).to_list()


def test_hf_dataset_keeps_columns_absent_from_the_first_row() -> None:
    # RAGAS's own to_hf_dataset takes columns from the first row only (Dataset.from_list): a
    # response missing in row 0 is dropped for every row. Ours keeps it.
    samples = [Sample(id="a", question="q"), Sample(id="b", question="q2", answer="kept")]
    assert "response" not in to_ragas_dataset(samples).to_hf_dataset().column_names
    back = from_hf_dataset(to_hf_dataset(samples))
    assert [s.answer for s in back] == [None, "kept"]


def test_hf_dataset_with_legacy_column_is_refused() -> None:
    from datasets import Dataset

    legacy = Dataset.from_dict({"question": ["q"], "answer": ["a"]})
    with pytest.raises(ValueError, match=r"column 'question' is a legacy RAGAS name.*'user_input'"):
        from_hf_dataset(legacy)


def test_hf_dataset_in_ragas_schema_without_extras() -> None:
    hf = to_ragas_dataset(_samples()[:1]).to_hf_dataset()
    (sample,) = from_hf_dataset(hf, ids=["x"])
    assert sample.id == "x"
    assert sample.relevance == {"d1": 1, "d7": 1}
    assert [c.id for c in sample.contexts] == ["d1", "d2"]


# --------------------------------------------------------------------------- legacy stack


LEGACY = ("faithfulness", "answer_relevancy", "context_precision", "context_recall")


def _legacy_metrics() -> list[Any]:
    from ragas.metrics import answer_relevancy, context_precision, context_recall, faithfulness

    return [faithfulness, answer_relevancy, context_precision, context_recall]


def _evaluate(judge: Any, embedder: Any, samples: list[Sample]) -> Any:
    return ragas.evaluate(
        to_ragas_dataset(samples),
        metrics=_legacy_metrics(),
        llm=judge,
        embeddings=embedder,
        show_progress=False,
    )


def test_legacy_evaluate_runs_on_ragbridge_judge_and_cache(tmp_path: Path) -> None:
    samples = [_samples()[0], _samples()[2]]
    counting = CountingJudge()
    judge = RagasJudge(counting, cache=tmp_path / "c.sqlite")
    result = _evaluate(judge, RagasEmbedder(HashEmbedder()), samples)
    evaluation = scores_from_ragas(result, samples=samples, judge=judge)
    assert evaluation.sample_ids == ["q-1", "q-3"]
    assert sorted(evaluation.metrics) == sorted(LEGACY)
    for row in evaluation:
        assert row.score.status == "scored", (row.sample_id, row.metric, row.score.failure)
        assert row.score.value is not None
        assert 0.0 <= row.score.value <= 1.0
        assert row.score.provider == "ragas"
    # Minimal replies: zero verdicts of support, "x" as the regenerated question.
    assert evaluation.get("q-1", "faithfulness").value == 0.0  # type: ignore[union-attr]
    assert evaluation.get("q-1", "context_recall").value == 0.0  # type: ignore[union-attr]
    assert counting.calls > 0
    assert judge.usage.calls == counting.calls
    assert judge.usage.prompt_tokens == counting.prompt_tokens
    assert evaluation.metadata["judge_usage"]["calls"] == counting.calls
    first = counting.calls

    # A fresh wrapper on the same cache file: every prompt is answered from cache.
    again = CountingJudge()
    judge2 = RagasJudge(again, cache=tmp_path / "c.sqlite")
    result2 = _evaluate(judge2, RagasEmbedder(HashEmbedder()), samples)
    assert again.calls == 0
    assert judge2.usage.calls == 0
    assert judge2.usage.cached_calls == first
    assert scores_from_ragas(result2, samples=samples) == scores_from_ragas(result, samples=samples)


def test_legacy_answer_relevancy_asks_n_completions_as_separate_calls(tmp_path: Path) -> None:
    from ragas.metrics import answer_relevancy

    counting = CountingJudge()
    judge = RagasJudge(counting, cache=tmp_path / "c.sqlite")
    ragas.evaluate(
        to_ragas_dataset(_samples()[:1]),
        metrics=[answer_relevancy],
        llm=judge,
        embeddings=RagasEmbedder(HashEmbedder()),
        show_progress=False,
    )
    assert counting.calls == answer_relevancy.strictness == 3


def test_n_completions_are_cached_separately(tmp_path: Path) -> None:
    from langchain_core.prompt_values import StringPromptValue

    prompt = StringPromptValue(text="generate a question")
    first = RagasJudge(ScriptedJudge({"*": ["one", "two", "three"]}), cache=tmp_path / "c.sqlite")
    texts = [g.text for g in asyncio.run(first.agenerate_text(prompt, n=3)).generations[0]]
    assert sorted(texts) == ["one", "three", "two"]
    # From cache, the three samples stay three different answers, not one answer three times.
    # (Same model name: the cache is keyed by model.)
    fresh = ScriptedJudge({"*": "fresh"})
    again = RagasJudge(fresh, cache=tmp_path / "c.sqlite")
    cached = [g.text for g in asyncio.run(again.agenerate_text(prompt, n=3)).generations[0]]
    assert cached == texts
    assert fresh.calls == []
    assert again.usage.cached_calls == 3


def test_sync_generate_text_works_inside_a_running_loop() -> None:
    from langchain_core.prompt_values import StringPromptValue

    judge = RagasJudge(CountingJudge())

    async def inside() -> str:
        result = judge.generate_text(StringPromptValue(text="say something"), n=2)
        return "|".join(g.text for g in result.generations[0])

    assert asyncio.run(inside()) == "ok|ok"
    assert judge.usage.calls == 2


def test_failed_judge_call_raises_naming_the_failure_kind() -> None:
    from langchain_core.prompt_values import StringPromptValue

    judge = RagasJudge(ScriptedJudge({"*": PermanentJudgeError("bad request")}), max_retries=0)
    with pytest.raises(RagasJudgeError, match=r"\(judge_error\): bad request") as info:
        asyncio.run(judge.agenerate_text(StringPromptValue(text="q")))
    assert info.value.failure.kind is FailureKind.JUDGE_ERROR
    assert judge.usage.calls == 1


def test_failed_judge_becomes_a_typed_failure_not_nan() -> None:
    from ragas.metrics import faithfulness

    judge = RagasJudge(ScriptedJudge({"*": PermanentJudgeError("quota")}), max_retries=0)
    samples = _samples()[:1]
    result = ragas.evaluate(
        to_ragas_dataset(samples), metrics=[faithfulness], llm=judge, show_progress=False
    )
    assert math.isnan(result.scores[0]["faithfulness"])
    score = scores_from_ragas(result, samples=samples).get("q-1", "faithfulness")
    assert score is not None
    assert score.status == "failed"
    assert score.failure is not None
    assert score.failure.kind is FailureKind.JUDGE_ERROR
    assert "RAGAS returned NaN for faithfulness" in score.failure.message


# --------------------------------------------------------------------------- collections stack


def test_collections_metrics_score_on_the_same_wrappers(tmp_path: Path) -> None:
    from ragas.metrics.collections import AnswerRelevancy, ContextRecall, Faithfulness

    counting = CountingJudge()
    legacy = RagasJudge(counting, cache=tmp_path / "c.sqlite")
    llm = legacy.for_collections()
    embeddings = RagasEmbedder(HashEmbedder()).for_collections()
    assert isinstance(llm, RagasInstructorJudge)
    assert isinstance(embeddings, RagasModernEmbedder)
    sample = _samples()[0]

    async def run() -> list[MetricResult]:
        return [
            await Faithfulness(llm=llm).ascore(
                user_input=sample.question,
                response=sample.answer,
                retrieved_contexts=[c.text for c in sample.contexts],
            ),
            await AnswerRelevancy(llm=llm, embeddings=embeddings).ascore(
                user_input=sample.question, response=sample.answer
            ),
            await ContextRecall(llm=llm).ascore(
                user_input=sample.question,
                retrieved_contexts=[c.text for c in sample.contexts],
                reference=sample.reference,
            ),
        ]

    results = asyncio.run(run())
    names = ("f", "ar", "cr")
    scores = [score_from_ragas(r, metric=n) for r, n in zip(results, names, strict=True)]
    assert [s.status for s in scores] == ["scored"] * 3
    assert scores[0].value == 0.0
    assert scores[2].value == 0.0
    assert scores[1].value is not None
    assert 0.0 <= scores[1].value <= 1.0
    assert counting.calls > 0
    # One ledger for both stacks: the legacy wrapper sees the collections calls.
    assert legacy.usage == llm.usage
    assert llm.usage.calls + llm.usage.cached_calls >= 5
    assert llm.usage.calls == counting.calls


def test_instructor_judge_sync_generate_inside_a_loop() -> None:
    class Verdict(BaseModel):
        reason: str
        verdict: int

    llm = RagasInstructorJudge(CountingJudge())

    async def inside() -> Verdict:
        return llm.generate("judge this", Verdict)

    assert asyncio.run(inside()) == Verdict(reason="x", verdict=0)


def test_embedders_embed_through_the_engine_cache(tmp_path: Path) -> None:
    hashing = HashEmbedder()
    legacy = RagasEmbedder(hashing, cache=tmp_path / "e.sqlite")
    vectors = legacy.embed_documents(["a b", "c"])
    assert len(vectors) == 2
    assert len(vectors[0]) == hashing.dim
    assert legacy.embed_query("a b") == vectors[0]
    modern = RagasEmbedder(HashEmbedder(), cache=tmp_path / "e.sqlite").for_collections()
    assert modern.embed_texts(["a b", "c"]) == vectors  # answered from the cache file
    assert asyncio.run(modern.aembed_text("c")) == vectors[1]


# --------------------------------------------------------------------------- non-LLM metrics


def test_non_llm_metrics_run_with_no_llm() -> None:
    from ragas.metrics import (
        BleuScore,
        ChrfScore,
        ExactMatch,
        IDBasedContextPrecision,
        IDBasedContextRecall,
        RougeScore,
        StringPresence,
    )

    samples = [
        Sample(
            id="a",
            question="Q1",
            answer="Paris is the capital",
            reference="Paris is the capital",
            contexts=[Context(text="c1", id="d1"), Context(text="c2", id="d2")],
            relevance={"d1": 1},
        ),
        Sample(
            id="b",
            question="Q2",
            answer="Lyon",
            reference="Marseille",
            contexts=[Context(text="c3", id="d3"), Context(text="c4", id="d4")],
            relevance={"d4": 1, "d9": 1},
        ),
    ]
    metrics = [
        ExactMatch(),
        RougeScore(),  # needs rouge_score
        BleuScore(),  # needs sacrebleu
        ChrfScore(),  # needs sacrebleu
        StringPresence(),
        IDBasedContextPrecision(),
        IDBasedContextRecall(),
    ]
    result = ragas.evaluate(
        to_ragas_dataset(samples), metrics=metrics, show_progress=False, raise_exceptions=True
    )
    ev = scores_from_ragas(result, samples=samples)
    expected = {
        ("a", "exact_match"): 1.0,
        ("b", "exact_match"): 0.0,
        ("a", "rouge_score(mode=fmeasure)"): 1.0,
        ("b", "rouge_score(mode=fmeasure)"): 0.0,
        ("a", "bleu_score"): 1.0,  # RAGAS gives 1.0000000000000004: clipped
        ("b", "bleu_score"): 0.0,
        ("a", "chrf_score"): 1.0,
        ("a", "string_present"): 1.0,
        ("b", "string_present"): 0.0,
        ("a", "id_based_context_precision"): 0.5,
        ("b", "id_based_context_precision"): 0.5,
        ("a", "id_based_context_recall"): 1.0,
        ("b", "id_based_context_recall"): 0.5,
    }
    for (sample_id, metric), value in expected.items():
        score = ev.get(sample_id, metric)
        assert score is not None, (sample_id, metric)
        assert score.value == pytest.approx(value), (sample_id, metric)


def test_rapidfuzz_metrics_when_installed() -> None:
    pytest.importorskip("rapidfuzz")
    from ragas.metrics import NonLLMContextPrecisionWithReference, NonLLMContextRecall

    sample = Sample(
        id="a",
        question="q",
        answer="a",
        contexts=[Context(text="Paris is the capital of France.")],
        reference_contexts=["Paris is the capital of France."],
    )
    result = ragas.evaluate(
        to_ragas_dataset([sample]),
        metrics=[NonLLMContextPrecisionWithReference(), NonLLMContextRecall()],
        show_progress=False,
        raise_exceptions=True,
    )
    ev = scores_from_ragas(result, samples=[sample])
    assert [row.score.value for row in ev] == [pytest.approx(1.0), pytest.approx(1.0)]


# --------------------------------------------------------------------------- results


def test_score_from_ragas_never_returns_nan() -> None:
    assert score_from_ragas(0.25, metric="m").value == 0.25
    assert score_from_ragas(1 + 4e-16, metric="m").value == 1.0
    assert score_from_ragas(-1e-12, metric="m").value == 0.0
    assert score_from_ragas(True, metric="m").value == 1.0
    assert score_from_ragas(np.float32(0.5), metric="m").value == 0.5
    assert score_from_ragas(np.int64(1), metric="m").value == 1.0
    result = MetricResult(value=0.5, reason="half")
    assert score_from_ragas(result, metric="m").value == 0.5
    assert score_from_ragas(result, metric="m").reason == "half"
    nan = score_from_ragas(float("nan"), metric="faithfulness")
    assert nan.value is None
    assert nan.failure is not None
    assert nan.failure.kind is FailureKind.JUDGE_ERROR
    assert nan.failure.message.startswith("RAGAS returned NaN for faithfulness")
    high = score_from_ragas(1.7, metric="m")
    assert high.failure is not None
    assert "1.7" in high.failure.message
    assert high.failure.kind is FailureKind.INVALID_OUTPUT  # not the judge's fault
    negative = score_from_ragas(-0.058, metric="answer_relevancy")  # a mean cosine can be < 0
    assert negative.failure is not None
    assert negative.failure.kind is FailureKind.INVALID_OUTPUT
    none = score_from_ragas(None, metric="m")
    assert none.failure is not None
    assert none.failure.kind is FailureKind.INVALID_OUTPUT
    assert "no numeric score" in none.failure.message
    assert score_from_ragas("0.3", metric="m").failure is not None


def test_scores_from_ragas_rows_and_ids() -> None:
    rows = [{"m": 0.5, "n": float("nan")}, {"m": 1.0, "n": 0.0}]
    ev = scores_from_ragas(rows, ids=["x", "y"])
    assert ev.sample_ids == ["x", "y"]
    assert ev.get("x", "m").value == 0.5  # type: ignore[union-attr]
    assert ev.get("x", "n").status == "failed"  # type: ignore[union-attr]
    assert ev.get("y", "n").value == 0.0  # type: ignore[union-attr]
    assert scores_from_ragas(rows).sample_ids == ["0", "1"]
    with pytest.raises(ValueError, match="1 sample ids for 2 RAGAS result rows"):
        scores_from_ragas(rows, ids=["x"])


# --------------------------------------------------------------------------- CountingJudge


class Kind(str, Enum):
    YES = "yes"
    NO = "no"


class Leaf(BaseModel):
    statement: str
    verdict: int = Field(ge=1)
    note: str | None = None


class Tree(BaseModel):
    items: list[Leaf]
    kind: Kind
    mode: Literal["a", "b"]
    flag: bool
    ratio: float
    maybe: int | None
    optional: str = "default"


def test_minimal_json_is_valid_for_a_pydantic_schema_with_defs() -> None:
    value = minimal_json(Tree.model_json_schema(), list_length=2)
    assert value == {
        "items": [{"statement": "x", "verdict": 1}, {"statement": "x", "verdict": 1}],
        "kind": "yes",
        "mode": "a",
        "flag": False,
        "ratio": 0.0,
        "maybe": None,
    }
    Tree.model_validate(value)


def test_minimal_json_keywords() -> None:
    assert minimal_json({"type": "array", "items": {"type": "integer"}, "minItems": 3}) == [0] * 3
    assert minimal_json({"type": "array", "items": {}, "maxItems": 0}, list_length=4) == []
    assert minimal_json({"type": "string", "minLength": 3}) == "xxx"
    assert minimal_json({"type": "number", "exclusiveMinimum": 2}) == 3.0
    assert minimal_json({"const": 7}) == 7
    assert minimal_json({"type": ["string", "null"]}) is None
    assert minimal_json({"oneOf": [{"type": "boolean"}, {"type": "string"}]}) is False
    merged = {
        "allOf": [
            {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
            {"properties": {"b": {"type": "integer"}}, "required": ["b"]},
        ]
    }
    assert minimal_json(merged) == {"a": "x", "b": 0}
    with pytest.raises(ValueError, match="does not resolve"):
        minimal_json({"$ref": "#/$defs/Missing"})


def test_find_json_schema_skips_examples_and_tolerates_trailing_text() -> None:
    schema = Tree.model_json_schema()
    text = (
        'Example output: {"items": [], "kind": "no"}\n'
        f"Return JSON matching this JSON Schema:\n{json.dumps(schema)}Do not use single quotes.\n"
        'input: {"question": "q"}'
    )
    assert find_json_schema(text) == schema
    assert find_json_schema('just {"a": 1} and {broken') is None


def test_counting_judge_answers_a_schema_stated_in_the_prompt() -> None:
    judge = CountingJudge(list_length=2)
    prompt = f"Reply in JSON per this JSON Schema:\n{json.dumps(Tree.model_json_schema())}"
    reply = asyncio.run(judge.generate([{"role": "user", "content": prompt}]))
    assert Tree.model_validate_json(reply.text).items[1].verdict == 1
    plain = asyncio.run(judge.generate([{"role": "user", "content": "hello"}]))
    assert plain.text == "ok"
    assert judge.calls == 2


def test_counting_judge_replies_parse_with_ragas_own_prompt() -> None:
    # RAGAS's legacy prompt states the schema in the text and parses the reply itself.
    from ragas.metrics._faithfulness import NLIStatementInput, NLIStatementPrompt

    prompt = NLIStatementPrompt()
    text = prompt.to_string(NLIStatementInput(context="c", statements=["s1", "s2"]))
    reply = asyncio.run(CountingJudge().generate([{"role": "user", "content": text}]))
    parsed = prompt.output_model.model_validate_json(reply.text)
    assert [s.verdict for s in parsed.statements] == [0]


# --------------------------------------------------------------------------- fence


def test_import_without_ragas_names_the_extra() -> None:
    # The package itself imports lazily (its rows and provider need no RAGAS): the names that
    # need RAGAS raise on first use.
    code = (
        "import sys\n"
        "sys.modules['ragas'] = None\n"
        "try:\n"
        "    from ragbridge.adapters.ragas import RagasJudge\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert install_hint("ragas") in out.stdout
