"""DeepEval adapter: conversions (test case, dataset, JSON file), ragbridge metrics inside
``deepeval.assert_test`` / ``deepeval.evaluate``, and DeepEval's own metrics on a ragbridge judge.

Everything runs offline against the installed deepeval; judges are ragbridge's test doubles.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("deepeval")

import deepeval
from deepeval.dataset import EvaluationDataset, Golden
from deepeval.evaluate.configs import AsyncConfig, DisplayConfig
from deepeval.metrics import (
    AnswerRelevancyMetric,
    ContextualPrecisionMetric,
    ContextualRecallMetric,
    FaithfulnessMetric,
)
from deepeval.test_case import LLMTestCase
from deepeval.test_case.llm_test_case import RetrievedContextData
from pydantic import BaseModel

from ragbridge.adapters.deepeval import (
    META_KEY,
    DeepEvalJudge,
    JudgeCallFailed,
    RagbridgeMetric,
    as_deepeval_metric,
    from_dataset,
    from_test_case,
    load_test_cases,
    save_test_cases,
    to_dataset,
    to_golden,
    to_test_case,
)
from ragbridge.core import Scorer
from ragbridge.core.judging.engine import JudgeEngine
from ragbridge.core.judging.judge import Message, PermanentJudgeError
from ragbridge.core.results.evaluation import FailureKind
from ragbridge.core.sample import Context, Sample
from ragbridge.core.testing import CountingJudge, HashEmbedder, ScriptedJudge


@pytest.fixture(autouse=True)
def _offline_deepeval(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # DeepEval writes ./.deepeval/ (test run state, cache) into the working directory.
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DEEPEVAL_TELEMETRY_OPT_OUT", "YES")
    monkeypatch.setenv("DEEPEVAL_DISABLE_DOTENV", "1")


SAMPLES = [
    Sample(
        id="s1",
        question="Where is the Eiffel Tower?",
        answer="The Eiffel Tower is in Paris.",
        contexts=[
            Context(text="The Eiffel Tower is in Paris.", id="d1", score=0.91, metadata={"p": 3}),
            Context(text="Paris | France's capital", id="d2", score=0.4),
        ],
        reference="In Paris.",
        reference_contexts=["The Eiffel Tower stands in Paris."],
        relevance={"d1": 1, "d2": 0},
        metadata={"split": "dev", "tags": ["a", "b"]},
    ),
    Sample(
        id="s2",
        question="Wie hoch ist der Turm? — 塔の高さは？",
        answer=None,
        contexts=[Context(text="Er ist 330 m hoch. 高さは330メートル。")],
        reference=None,
        relevance={},
    ),
    Sample(
        id="s3",
        question="Anything?",
        answer="",
        contexts=[],
        reference_contexts=[],
        relevance=None,
    ),
    Sample(
        id="s4",
        question="Pipes?",
        answer="a | b",
        contexts=[Context(text="x | y | z", id="7", metadata={"nested": {"k": [1, 2.5]}})],
        reference="a|b",
        reference_contexts=["one | two"],
    ),
]


def _assert_same(got: Sample, want: Sample) -> None:
    # Field by field, so a failure names the field that did not survive.
    assert got.id == want.id
    assert got.question == want.question
    assert got.answer == want.answer
    assert got.reference == want.reference
    assert got.reference_contexts == want.reference_contexts
    assert got.relevance == want.relevance
    assert got.metadata == want.metadata
    assert [c.text for c in got.contexts] == [c.text for c in want.contexts]
    assert [c.id for c in got.contexts] == [c.id for c in want.contexts]
    assert [c.score for c in got.contexts] == [c.score for c in want.contexts]
    assert [c.metadata for c in got.contexts] == [c.metadata for c in want.contexts]
    assert got == want


# --------------------------------------------------------------------------- conversions


def test_a_test_case_maps_ragbridge_fields_to_deepeval_fields() -> None:
    tc = to_test_case(SAMPLES[0])
    assert isinstance(tc, LLMTestCase)
    assert tc.input == "Where is the Eiffel Tower?"
    assert tc.actual_output == "The Eiffel Tower is in Paris."
    assert tc.expected_output == "In Paris."
    assert tc.retrieval_context == ["The Eiffel Tower is in Paris.", "Paris | France's capital"]
    assert tc.context == ["The Eiffel Tower stands in Paris."]
    assert tc.name == "s1"
    assert tc.metadata is not None
    extras = tc.metadata[META_KEY]
    assert extras["id"] == "s1"
    assert extras["relevance"] == {"d1": 1, "d2": 0}
    assert extras["contexts"][0] == {"id": "d1", "score": 0.91, "metadata": {"p": 3}}
    assert extras["metadata"] == {"split": "dev", "tags": ["a", "b"]}


@pytest.mark.parametrize("sample", SAMPLES, ids=[s.id for s in SAMPLES])
def test_test_case_and_golden_round_trip_field_by_field(sample: Sample) -> None:
    _assert_same(from_test_case(to_test_case(sample)), sample)
    _assert_same(from_test_case(to_golden(sample)), sample)


def test_relevance_none_and_empty_stay_different() -> None:
    assert from_test_case(to_test_case(SAMPLES[1])).relevance == {}
    assert from_test_case(to_test_case(SAMPLES[2])).relevance is None
    assert from_test_case(to_test_case(SAMPLES[1])).is_no_answer


def test_a_hand_built_test_case_converts_with_a_deterministic_id() -> None:
    tc = LLMTestCase(
        input="What is RAG?",
        actual_output="Retrieval-augmented generation.",
        retrieval_context=["RAG retrieves then generates."],
        metadata={"owner": "me"},
    )
    again = LLMTestCase(
        input="What is RAG?",
        actual_output="Retrieval-augmented generation.",
        retrieval_context=["RAG retrieves then generates."],
    )
    other = LLMTestCase(input="What is RAG?", actual_output="Something else.")
    sample = from_test_case(tc)
    assert sample.id.startswith("deepeval-")
    assert sample.id == from_test_case(again).id
    assert sample.id != from_test_case(other).id
    assert sample.question == "What is RAG?"
    assert sample.answer == "Retrieval-augmented generation."
    assert sample.contexts == [Context(text="RAG retrieves then generates.")]
    assert sample.reference is None
    assert sample.reference_contexts is None
    assert sample.relevance is None
    assert sample.metadata == {"owner": "me"}
    assert from_test_case(tc, id="mine").id == "mine"
    assert from_test_case(LLMTestCase(input="q", name="case-7")).id == "case-7"


def test_retrieved_context_data_keeps_its_source() -> None:
    tc = LLMTestCase(
        input="q",
        actual_output="a",
        retrieval_context=[RetrievedContextData(context="passage", source="doc.pdf"), "plain"],
    )
    sample = from_test_case(tc)
    assert sample.contexts == [
        Context(text="passage", metadata={"source": "doc.pdf"}),
        Context(text="plain"),
    ]


def test_bad_test_cases_raise_value_errors_naming_the_case_and_field() -> None:
    tc = LLMTestCase(input="q", actual_output="a", name="broken", retrieval_context=["ok"])
    tc.retrieval_context = ["ok", 3]  # assignment is not validated by DeepEval
    with pytest.raises(ValueError, match=r"test case name='broken': retrieval_context\[1\]: .*int"):
        from_test_case(tc)
    tc = LLMTestCase(input="q", actual_output="a", context=["x"])
    tc.context = ["x", None]  # type: ignore[list-item]
    with pytest.raises(ValueError, match=r"input='q': context\[1\]: expected a string"):
        from_test_case(tc)
    tc = LLMTestCase(input="q", actual_output="a")
    tc.actual_output = 5  # type: ignore[assignment]
    with pytest.raises(ValueError, match="actual_output: expected a string, got 5"):
        from_test_case(tc)
    edited = to_test_case(SAMPLES[0])
    assert edited.retrieval_context is not None
    edited.retrieval_context = edited.retrieval_context[:1]
    with pytest.raises(
        ValueError,
        match=r"name='s1': metadata\['ragbridge'\]\.contexts: expected one entry per retrieved "
        r"context \(1\), got 2",
    ):
        from_test_case(edited)
    bad_grade = to_test_case(SAMPLES[0])
    assert bad_grade.metadata is not None
    bad_grade.metadata[META_KEY]["relevance"] = {"d1": "high"}
    with pytest.raises(ValueError, match=r"name='s1': relevance"):
        from_test_case(bad_grade)


def test_dataset_round_trip_as_goldens_and_as_test_cases() -> None:
    ds = to_dataset(SAMPLES)
    assert isinstance(ds, EvaluationDataset)
    assert len(ds.goldens) == 4
    assert ds.test_cases == []
    assert all(isinstance(g, Golden) for g in ds.goldens)
    for got, want in zip(from_dataset(ds), SAMPLES, strict=True):
        _assert_same(got, want)
    ds_tc = to_dataset(SAMPLES, as_test_cases=True)
    assert ds_tc.goldens == []
    assert len(ds_tc.test_cases) == 4
    for got, want in zip(from_dataset(ds_tc), SAMPLES, strict=True):
        _assert_same(got, want)


def test_dataset_refuses_duplicate_ids() -> None:
    with pytest.raises(ValueError, match=r"samples\[1\]: id: duplicate sample id 's1'"):
        to_dataset([SAMPLES[0], SAMPLES[0]])
    ds = to_dataset(SAMPLES[:1])
    ds.add_test_case(to_test_case(SAMPLES[0]))
    with pytest.raises(
        ValueError, match=r"test_cases\[0\]: duplicate sample id 's1'.*goldens\[0\]"
    ):
        from_dataset(ds)


def test_json_file_round_trip_keeps_pipes_unicode_and_metadata(tmp_path: Path) -> None:
    path = save_test_cases(SAMPLES, tmp_path / "out" / "rag.json")
    assert path == tmp_path / "out" / "rag.json"
    assert list((tmp_path / "out").iterdir()) == [path]  # no temporary left behind
    raw = json.loads(path.read_text(encoding="utf-8"))
    assert raw[3]["retrieval_context"] == ["x | y | z"]
    assert raw[1]["input"] == "Wie hoch ist der Turm? — 塔の高さは？"
    loaded = load_test_cases(path)
    assert len(loaded) == len(SAMPLES)
    for got, want in zip(loaded, SAMPLES, strict=True):
        _assert_same(got, want)
    # DeepEval's own loader reads the same file.
    ds = EvaluationDataset()
    ds.add_goldens_from_json_file(str(path))
    assert [g.input for g in ds.goldens] == [s.question for s in SAMPLES]
    assert ds.goldens[3].retrieval_context == ["x | y | z"]


def test_saving_non_json_metadata_names_the_sample(tmp_path: Path) -> None:
    bad = Sample(id="odd", question="q", metadata={"when": object()})
    with pytest.raises(ValueError, match="sample 'odd': metadata must be JSON data"):
        save_test_cases([bad], tmp_path / "x.json")
    assert not (tmp_path / "x.json").exists()


# --------------------------------------------------------------------------- ragbridge metrics


def _block(messages: list[Message], label: str) -> str:
    text = "\n".join(m["content"] for m in messages if m["role"] == "user")
    match = re.search(rf"<<<BEGIN {label}>>>\n?(.*?)\n?<<<END {label}>>>", text, re.DOTALL)
    return match.group(1).strip() if match else ""


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


def lexical_judge() -> ScriptedJudge:
    """Claims are the answer's sentences; a claim is supported when a context has all its words."""

    def analyze(messages: list[Message]) -> dict[str, Any]:
        answer = _block(messages, "ANSWER")
        claims = [c.strip() for c in answer.split(".") if c.strip()]
        return {"claims": claims, "questions": ["a?", "b?", "c?"], "noncommittal": False}

    def verify(messages: list[Message]) -> dict[str, Any]:
        text = "\n".join(m["content"] for m in messages if m["role"] == "user")
        claims = re.findall(r"<<<BEGIN CLAIM \d+>>> (.*?) <<<END CLAIM", text)
        contexts = re.findall(r"<<<BEGIN CONTEXT \d+>>>\n(.*?)\n<<<END CONTEXT", text, re.DOTALL)
        verdicts = []
        for claim in claims:
            hit = next((i for i, c in enumerate(contexts, 1) if _words(claim) <= _words(c)), None)
            verdicts.append(
                {
                    "reason": "found" if hit else "not found",
                    "verdict": "supported" if hit else "unsupported",
                    "context": hit,
                }
            )
        return {"verdicts": verdicts}

    return ScriptedJudge({"answer.analyze": analyze, "faithfulness.verify": verify})


CASES = [
    Sample(
        id="good",
        question="Where is the tower?",
        answer="The tower is in Paris. It opened in 1889.",
        contexts=[Context(text="The tower is in Paris and it opened in 1889.", id="d1")],
    ),
    Sample(
        id="half",
        question="Where is the tower?",
        answer="The tower is in Paris. It is made of gold.",
        contexts=[Context(text="The tower is in Paris.", id="d1")],
    ),
    Sample(
        id="bad",
        question="Where is the tower?",
        answer="The tower is in Rome. It is made of gold. It floats.",
        contexts=[Context(text="The tower is in Paris.", id="d1")],
    ),
]


def test_measure_sets_score_reason_and_success() -> None:
    metric = as_deepeval_metric("faithfulness", judge=lexical_judge(), threshold=0.7)
    assert isinstance(metric, RagbridgeMetric)
    assert metric.__name__ == "ragbridge/faithfulness"
    assert metric.measure(to_test_case(CASES[1])) == 0.5
    assert metric.score == 0.5
    assert metric.success is False
    assert metric.is_successful() is False
    assert metric.error is None
    assert metric.reason is not None
    assert "1 of 2 claims supported" in metric.reason
    assert "✗ [unsupported] It is made of gold" in metric.reason
    assert metric.evaluation_model == "scripted-judge"
    assert metric.input_tokens is not None
    assert metric.input_tokens > 0
    assert metric.last_score is not None
    assert metric.last_score.usage.calls == 2
    assert asyncio.run(metric.a_measure(to_test_case(CASES[0]))) == 1.0
    assert metric.success is True


def test_assert_test_passes_a_good_case_and_fails_a_bad_one_with_the_reason() -> None:
    metric = as_deepeval_metric("faithfulness", judge=lexical_judge(), threshold=0.7)
    deepeval.assert_test(to_test_case(CASES[0]), [metric])
    with pytest.raises(AssertionError) as info:
        deepeval.assert_test(to_test_case(CASES[2]), [metric])
    message = str(info.value)
    assert "ragbridge/faithfulness" in message
    assert "score: 0.0" in message
    assert "0 of 3 claims supported" in message
    assert "It floats" in message


def test_hallucination_succeeds_when_at_or_below_the_threshold() -> None:
    metric = as_deepeval_metric("hallucination", judge=lexical_judge(), threshold=0.5)
    assert metric.measure(to_test_case(CASES[1])) == 0.5
    assert metric.success is True
    assert metric.measure(to_test_case(CASES[2])) == 1.0
    assert metric.success is False
    deepeval.assert_test(to_test_case(CASES[0]), [metric])
    with pytest.raises(AssertionError, match="hallucination"):
        deepeval.assert_test(to_test_case(CASES[2]), [metric])
    strict = as_deepeval_metric("hallucination", judge=lexical_judge(), strict_mode=True)
    assert strict.threshold == 0.0
    assert strict.measure(to_test_case(CASES[1])) == 0.5
    assert strict.success is False


def test_a_failing_judge_sets_error_and_no_score() -> None:
    judge = ScriptedJudge({"*": PermanentJudgeError("quota exhausted")})
    metric = as_deepeval_metric("faithfulness", judge=judge)
    assert metric.measure(to_test_case(CASES[0])) is None
    assert metric.score is None
    assert metric.success is False
    assert metric.error is not None
    assert metric.error.startswith("failed (judge_error):")
    assert "quota exhausted" in metric.error
    assert metric.last_score is not None
    assert metric.last_score.failure is not None
    assert metric.last_score.failure.kind is FailureKind.JUDGE_ERROR
    with pytest.raises(AssertionError, match=r"error: failed \(judge_error\).*quota exhausted"):
        deepeval.assert_test(to_test_case(CASES[0]), [metric])


def test_a_skipped_score_is_reported_as_an_error() -> None:
    metric = as_deepeval_metric("recall@5")
    # a no-answer query: labelled, nothing relevant exists, so recall does not apply
    no_answer = Sample(id="u", question="q", contexts=[Context(text="t", id="d1")], relevance={})
    assert metric.measure(to_test_case(no_answer)) is None
    assert metric.error is not None
    assert metric.error.startswith("skipped:")
    assert metric.score is None
    assert metric.success is False
    with pytest.raises(AssertionError, match="skipped:"):
        deepeval.assert_test(to_test_case(no_answer), [metric])
    labelled = no_answer.model_copy(update={"relevance": {"d1": 1}})
    assert metric.measure(to_test_case(labelled)) == 1.0
    assert metric.error is None
    assert metric.success is True


@pytest.mark.parametrize("run_async", [True, False])
def test_evaluate_gives_each_case_the_score_scorer_gives(run_async: bool) -> None:
    metrics = [
        as_deepeval_metric("faithfulness", judge=lexical_judge(), threshold=0.7),
        as_deepeval_metric("faithfulness:offline", embedder=HashEmbedder(), threshold=0.0),
    ]
    result = deepeval.evaluate(
        test_cases=[to_test_case(s) for s in CASES],
        metrics=metrics,
        async_config=AsyncConfig(run_async=run_async),
        display_config=DisplayConfig(show_indicator=False, print_results=False),
    )
    direct = Scorer(["faithfulness"], judge=lexical_judge())
    offline = Scorer(["faithfulness:offline"], embedder=HashEmbedder())
    by_name = {r.name: r for r in result.test_results}
    assert sorted(by_name) == ["bad", "good", "half"]
    for sample in CASES:
        got = by_name[sample.id]
        assert got.metrics_data is not None
        data = {m.name: m for m in got.metrics_data}
        want = direct.score(sample)["faithfulness"]
        assert data["ragbridge/faithfulness"].score == want.value
        assert data["ragbridge/faithfulness"].success is (
            want.value is not None and want.value >= 0.7
        )
        assert data["ragbridge/faithfulness"].error is None
        reason = data["ragbridge/faithfulness"].reason
        assert reason is not None
        assert want.reason is not None
        assert reason.splitlines()[0] == want.reason
        want_off = offline.score(sample)["faithfulness"]
        assert want_off.value is not None
        assert data["ragbridge/faithfulness:offline"].score == pytest.approx(want_off.value)
        assert data["ragbridge/faithfulness:offline"].success is True
    assert [by_name[s].success for s in ("good", "half", "bad")] == [True, False, False]
    assert by_name["good"].metrics_data is not None
    scores = [by_name[s].metrics_data[0].score for s in ("good", "half", "bad")]  # type: ignore[index]
    assert scores == [1.0, 0.5, 0.0]


def test_evaluate_records_a_judge_failure_as_the_metric_error() -> None:
    judge = ScriptedJudge({"*": PermanentJudgeError("judge is down")})
    result = deepeval.evaluate(
        test_cases=[to_test_case(CASES[0])],
        metrics=[as_deepeval_metric("faithfulness", judge=judge)],
        display_config=DisplayConfig(show_indicator=False, print_results=False),
    )
    (case,) = result.test_results
    assert case.success is False
    assert case.metrics_data is not None
    (data,) = case.metrics_data
    assert data.score is None
    assert data.success is False
    assert data.error is not None
    assert "judge is down" in data.error


def test_an_offline_metric_works_in_assert_test() -> None:
    metric = as_deepeval_metric("faithfulness:offline", embedder=HashEmbedder(), threshold=0.9)
    sample = CASES[0]
    assert metric.__name__ == "ragbridge/faithfulness:offline"
    want = Scorer(["faithfulness:offline"], embedder=HashEmbedder()).score(sample)["faithfulness"]
    value = metric.measure(to_test_case(sample))
    assert value is not None
    assert value == pytest.approx(want.value)
    assert metric.evaluation_model == "offline"
    assert metric.evaluation_cost == 0.0
    assert metric.input_tokens == 0
    far = Sample(
        id="far",
        question="q",
        answer="Bananas grow on plants. Volcanoes erupt lava.",
        contexts=[Context(text="The tower is in Paris.")],
    )
    with pytest.raises(AssertionError, match="faithfulness:offline"):
        deepeval.assert_test(to_test_case(far), [metric])


def test_metric_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="faithfulness need a judge"):
        as_deepeval_metric("faithfulness")
    with pytest.raises(ValueError, match="threshold must lie within"):
        as_deepeval_metric("mrr", threshold=1.5)


# --------------------------------------------------------------------------- DeepEval's metrics


def _deepeval_metrics(model: DeepEvalJudge) -> list[Any]:
    return [
        FaithfulnessMetric(model=model, async_mode=False),
        AnswerRelevancyMetric(model=model, async_mode=True),
        ContextualPrecisionMetric(model=model, async_mode=False),
        ContextualRecallMetric(model=model, async_mode=True),
    ]


def test_deepeval_rag_metrics_run_on_a_ragbridge_judge_through_the_cache(tmp_path: Path) -> None:
    tc = to_test_case(
        Sample(
            id="s",
            question="Where is the tower?",
            answer="The tower is in Paris.",
            contexts=[Context(text="The tower is in Paris."), Context(text="Paris is in France.")],
            reference="It is in Paris.",
        )
    )
    judge = CountingJudge()
    model = DeepEvalJudge(judge, cache=tmp_path / "c.sqlite")
    assert model.get_model_name() == "counting-judge"
    assert model.load_model() is model
    assert model.engine.judge is judge
    first = []
    for metric in _deepeval_metrics(model):
        score = metric.measure(tc)
        assert isinstance(score, float), type(metric).__name__
        assert 0.0 <= score <= 1.0
        assert metric.error is None
        first.append(score)
    assert judge.calls > 0
    assert model.usage.calls == judge.calls
    assert model.usage.prompt_tokens == judge.prompt_tokens
    calls = judge.calls

    again = DeepEvalJudge(judge, cache=tmp_path / "c.sqlite")
    second = [metric.measure(tc) for metric in _deepeval_metrics(again)]
    assert second == first
    assert judge.calls == calls  # every call came from the ragbridge cache
    assert again.usage.calls == 0
    assert again.usage.cached_calls == calls


def test_deepeval_judge_returns_parsed_schema_or_text_and_works_inside_a_loop() -> None:
    class Verdict(BaseModel):
        verdict: str

    model = DeepEvalJudge(ScriptedJudge({"*": {"verdict": "yes"}}))
    got = model.generate("Is it? Reply in JSON.", schema=Verdict)
    assert isinstance(got, Verdict)
    assert got.verdict == "yes"
    assert model.generate("Free text please") == '{"verdict": "yes"}'

    async def inside() -> Any:
        sync = model.generate("again", schema=Verdict)  # sync call in a running loop
        asynchronous = await model.a_generate("and again", schema=Verdict)
        return sync, asynchronous

    sync, asynchronous = asyncio.run(inside())
    assert sync == Verdict(verdict="yes")
    assert asynchronous == Verdict(verdict="yes")
    assert model.usage.calls == 4


def test_a_failed_judge_call_raises_judge_call_failed_not_type_error() -> None:
    engine = JudgeEngine(ScriptedJudge({"*": PermanentJudgeError("nope")}))
    model = DeepEvalJudge(engine)
    with pytest.raises(JudgeCallFailed) as info:
        model.generate("x")
    assert not isinstance(info.value, TypeError)
    assert info.value.failure.kind is FailureKind.JUDGE_ERROR
    assert "nope" in str(info.value)
    # DeepEval's schema fallback only catches TypeError, so the failure surfaces unchanged.
    with pytest.raises(JudgeCallFailed):
        model.generate_with_schema("x", schema=BaseModel)
    metric = FaithfulnessMetric(model=model, async_mode=False)
    with pytest.raises(JudgeCallFailed):
        metric.measure(to_test_case(CASES[0]))
    with pytest.raises(ValueError, match="pass the cache to the JudgeEngine"):
        DeepEvalJudge(engine, cache="x.sqlite")


def test_deepeval_metrics_on_a_ragbridge_judge_run_inside_evaluate(tmp_path: Path) -> None:
    judge = CountingJudge()
    model = DeepEvalJudge(judge, cache=tmp_path / "c.sqlite")
    result = deepeval.evaluate(
        test_cases=[to_test_case(s) for s in CASES[:2]],
        metrics=[FaithfulnessMetric(model=model), AnswerRelevancyMetric(model=model)],
        display_config=DisplayConfig(show_indicator=False, print_results=False),
    )
    assert len(result.test_results) == 2
    for case in result.test_results:
        assert case.metrics_data is not None
        names = sorted(m.name for m in case.metrics_data)
        assert names == ["Answer Relevancy", "Faithfulness"]
        for data in case.metrics_data:
            assert data.error is None
            assert isinstance(data.score, float)
            assert data.evaluation_model == "counting-judge"
    assert judge.calls > 0
    assert model.usage.calls == judge.calls


# --------------------------------------------------------------------------- LLMTestCase.context

# DeepEval's own HallucinationMetric example (docs: metrics-hallucination): only `context` is set.
DEEPEVAL_CONTEXT = [
    "A man with blond-hair, and a brown shirt drinking out of a public water fountain."
]
DEEPEVAL_EXAMPLE = {
    "input": "What was the blond doing?",
    "actual_output": "A blond drinking water in public.",
    "context": DEEPEVAL_CONTEXT,
}


def backed_judge() -> ScriptedJudge:
    """Every claim of the answer is backed by context 1."""
    return ScriptedJudge(
        {
            "answer.analyze": {
                "claims": ["A blond is drinking water in public."],
                "questions": ["What was the blond doing?"],
                "noncommittal": False,
            },
            "faithfulness.verify": {
                "verdicts": [{"reason": "context 1 says so", "verdict": "supported", "context": 1}]
            },
        }
    )


def test_context_stands_in_for_an_empty_retrieval_context() -> None:
    sample = from_test_case(LLMTestCase(**DEEPEVAL_EXAMPLE))
    assert sample.contexts == [
        Context(text=DEEPEVAL_CONTEXT[0], metadata={"deepeval_field": "context"})
    ]
    assert sample.reference_contexts == DEEPEVAL_CONTEXT
    # both given: retrieval_context is what the answer is checked against, context the reference
    both = from_test_case(LLMTestCase(**DEEPEVAL_EXAMPLE, retrieval_context=["Only shoes."]))
    assert [c.text for c in both.contexts] == ["Only shoes."]
    assert both.reference_contexts == DEEPEVAL_CONTEXT
    chosen = from_test_case(
        LLMTestCase(**DEEPEVAL_EXAMPLE, retrieval_context=["Only shoes."]), contexts_from="context"
    )
    assert [c.text for c in chosen.contexts] == DEEPEVAL_CONTEXT
    strict = from_test_case(LLMTestCase(**DEEPEVAL_EXAMPLE), contexts_from="retrieval_context")
    assert strict.contexts == []
    # a ragbridge round trip is unchanged: a sample with no contexts keeps none
    empty = Sample(id="e", question="q", answer="a", reference_contexts=["ref"])
    assert from_test_case(to_test_case(empty)) == empty
    with pytest.raises(ValueError, match="contexts_from"):
        from_test_case(LLMTestCase(**DEEPEVAL_EXAMPLE), contexts_from="both")  # type: ignore[arg-type]


@pytest.mark.parametrize("run_async", [False, True])
def test_hallucination_on_deepevals_own_example_reads_context(run_async: bool) -> None:
    """Before: 1.0, "no contexts were retrieved" (only retrieval_context was read). After: the
    answer is checked against LLMTestCase.context, as DeepEval's HallucinationMetric does."""
    judge = backed_judge()
    metric = as_deepeval_metric("hallucination", judge=judge, threshold=0.5)
    case = LLMTestCase(**DEEPEVAL_EXAMPLE)
    value = asyncio.run(metric.a_measure(case)) if run_async else metric.measure(case)
    assert value == 0.0
    assert metric.success is True
    assert metric.reason is not None
    assert "no contexts were retrieved" not in metric.reason
    verify = [c for c in judge.calls if c.task == "faithfulness.verify"]
    assert len(verify) == 1
    assert DEEPEVAL_CONTEXT[0] in verify[0].messages[1]["content"]
    deepeval.assert_test(case, [as_deepeval_metric("hallucination", judge=backed_judge())])
    # opting out of the fallback gives the old reading back
    plain = as_deepeval_metric(
        "hallucination", judge=backed_judge(), contexts_from="retrieval_context"
    )
    assert plain.measure(case) == 1.0
    assert plain.contexts_from == "retrieval_context"


def test_ranking_metric_reason_carries_the_run_level_id_warning() -> None:
    """UUID-like chunk ids against document labels: every case fails with the fix, and the
    DeepEval error also carries the run-level warning, counting the cases seen so far."""
    metric = as_deepeval_metric("recall@2")
    errors = []
    for n, doc in enumerate(["hr", "it", "travel"]):
        contexts = [
            Context(text=f"chunk {n}{k}", id=f"{n}{k}6f1c2e-8f0e-4c55-9d2a-6a1f4f7e9c01",
                    metadata={"source": name})
            for k, name in enumerate(["hr", "it", "travel"])
        ]  # fmt: skip
        sample = Sample(id=f"q{n}", question="q", contexts=contexts, relevance={doc: 1})
        assert metric.measure(to_test_case(sample)) is None
        assert metric.error is not None
        errors.append(metric.error)
    assert all("id_key='source'" in e for e in errors)
    # the cause is certain (metadata holds the labels), so the run-level line comes at once
    assert "warning: ranking measures: 1 of 1 labelled sample retrieved" in errors[0]
    assert "warning: ranking measures: 3 of 3 labelled samples" in errors[-1]
    assert metric.scorer.warnings == [errors[-1].split("warning: ", 1)[1]]
