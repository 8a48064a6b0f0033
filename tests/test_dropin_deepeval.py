"""DeepEval drop-in: code written for DeepEval runs on ragbridge's measures with one changed import.

Issue 16, DeepEval part: DeepEval's class names, constructor arguments, results columns and
directions (`FaithfulnessMetric`, ...), no "You're running DeepEval's latest ... Metric!" banner
for ragbridge's metrics (and DeepEval's own metrics untouched), HallucinationMetric reading
``LLMTestCase.context`` in DeepEval 4.3's direction, ``model=`` as DeepEval passes it, and the
getting-started example run end to end. Every judge is scripted; nothing leaves the machine.
"""

from __future__ import annotations

import ast
import inspect
import json
import re
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("deepeval")

import deepeval
import deepeval.metrics as deepeval_metrics
from deepeval.errors import DeepEvalError, MissingTestCaseParamsError
from deepeval.evaluate.configs import AsyncConfig, DisplayConfig, ErrorConfig
from deepeval.metrics.utils import copy_metrics
from deepeval.models import DeepEvalBaseLLM
from deepeval.test_case import LLMTestCase
from pydantic import BaseModel

from ragbridge.adapters.deepeval import (
    AnswerRelevancyMetric,
    ContextualPrecisionMetric,
    ContextualRecallMetric,
    DeepEvalJudge,
    DeepEvalNamedMetric,
    FaithfulnessMetric,
    HallucinationMetric,
    RagbridgeMetric,
    as_deepeval_metric,
)
from ragbridge.core import Scorer
from ragbridge.core.judging.judge import Message
from ragbridge.core.settings import Settings
from ragbridge.core.testing import CountingJudge, HashEmbedder, ScriptedJudge, minimal_instance

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "deepeval_getting_started.py"
BANNER = "DeepEval's latest"

DROP_INS: list[tuple[type[DeepEvalNamedMetric], str]] = [
    (FaithfulnessMetric, "FaithfulnessMetric"),
    (AnswerRelevancyMetric, "AnswerRelevancyMetric"),
    (ContextualPrecisionMetric, "ContextualPrecisionMetric"),
    (ContextualRecallMetric, "ContextualRecallMetric"),
    (HallucinationMetric, "HallucinationMetric"),
]
IDS = [name for _, name in DROP_INS]


@pytest.fixture(autouse=True)
def _offline_deepeval(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # DeepEval writes ./.deepeval/
    monkeypatch.setenv("DEEPEVAL_TELEMETRY_OPT_OUT", "YES")
    monkeypatch.setenv("DEEPEVAL_DISABLE_DOTENV", "1")


# --------------------------------------------------------------------------- scripted models


def _block(text: str, label: str) -> str:
    found = re.search(rf"<<<BEGIN {label}>>>\n?(.*?)\n?<<<END {label}>>>", text, re.DOTALL)
    return found.group(1).strip() if found else ""


def _claims(text: str) -> list[str]:
    return re.findall(r"<<<BEGIN CLAIM \d+>>> (.*?) <<<END CLAIM", text)


def _contexts(text: str) -> list[str]:
    return re.findall(r"<<<BEGIN CONTEXT \d+>>>\n(.*?)\n<<<END CONTEXT", text, re.DOTALL)


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


def lexical_reply(task: str, text: str) -> dict[str, Any]:
    """ragbridge's claim prompts answered by word containment: a claim (an answer sentence) is
    supported when one context holds all its words, contradicted when it holds all but a
    number, else unsupported."""
    if task == "answer.analyze":
        answer = _block(text, "ANSWER")
        claims = [c.strip() + "." for c in answer.split(".") if c.strip()]
        return {
            "claims": claims,
            "questions": [_block(text, "QUESTION")] * 3,
            "noncommittal": False,
        }
    assert task == "faithfulness.verify", task
    verdicts = []
    for claim in _claims(text):
        verdict, hit = "unsupported", None
        for i, context in enumerate(_contexts(text), 1):
            missing = _words(claim) - _words(context)
            if not missing:
                verdict, hit = "supported", i
                break
            if all(w.isdigit() for w in missing):
                verdict, hit = "contradicted", i
        verdicts.append({"reason": verdict, "verdict": verdict, "context": hit})
    return {"verdicts": verdicts}


def lexical_judge() -> ScriptedJudge:
    def reply(messages: list[Message]) -> dict[str, Any]:
        system = messages[0]["content"]
        task = re.search(r"\[ragbridge task: ([\w.]+)", system)
        assert task is not None
        return lexical_reply(task.group(1), "\n".join(m["content"] for m in messages[1:]))

    return ScriptedJudge({"*": reply})


class ScriptedDeepEvalModel(DeepEvalBaseLLM):  # type: ignore[misc]
    """A DeepEval model, as a DeepEval user writes one (a ``DeepEvalBaseLLM`` subclass), that
    answers ragbridge's prompts lexically, DeepEval's hallucination verdicts with the scripted
    ``verdicts`` and DeepEval's other prompts minimally. Offline; records every prompt."""

    def __init__(self, verdicts: list[str] | None = None) -> None:
        self.verdicts = verdicts or []
        self.prompts: list[str] = []
        super().__init__(model="scripted-deepeval-model")

    def load_model(self) -> ScriptedDeepEvalModel:
        return self

    def get_model_name(self) -> str:
        return "scripted-deepeval-model"

    def generate(self, prompt: str, schema: type[BaseModel] | None = None) -> Any:
        self.prompts.append(prompt)
        task = re.search(r"\[ragbridge task: ([\w.]+)", prompt)
        if task is not None:
            reply = lexical_reply(task.group(1), prompt)
        elif schema is not None and schema.__name__ == "Verdicts":
            reply = {"verdicts": [{"verdict": v, "reason": v} for v in self.verdicts]}
        elif schema is not None:
            return minimal_instance(schema)  # any other DeepEval prompt: a valid, empty reply
        else:
            reply = {"reason": "scripted"}
        return schema.model_validate(reply) if schema is not None else json.dumps(reply)

    async def a_generate(self, prompt: str, schema: type[BaseModel] | None = None) -> Any:
        return self.generate(prompt, schema)


def deepevals_own(name: str, **kwargs: Any) -> Any:
    """DeepEval's own metric class ``name`` on a scripted model (its 4.3 warning silenced)."""
    kwargs.setdefault("model", ScriptedDeepEvalModel())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return getattr(deepeval_metrics, name)(**kwargs)


# DeepEval's RAG quickstart shape: the three fields its RAG metrics read.
RAG_CASE = LLMTestCase(
    input="What if these shoes don't fit?",
    actual_output="All customers are eligible for a 30 day full refund.",
    expected_output="You are eligible for a 30 day full refund at no extra cost.",
    retrieval_context=["All customers are eligible for a 30 day full refund at no extra cost."],
)


def _drop_in(cls: type[DeepEvalNamedMetric], **kwargs: Any) -> DeepEvalNamedMetric:
    kwargs.setdefault("model", CountingJudge())
    if cls is AnswerRelevancyMetric:
        kwargs.setdefault("embedder", HashEmbedder())
    return cls(**kwargs)


# --------------------------------------------------------------------------- 1. names and arguments


@pytest.mark.parametrize(("cls", "name"), DROP_INS, ids=IDS)
def test_drop_ins_report_the_name_deepevals_own_class_reports(
    cls: type[DeepEvalNamedMetric], name: str
) -> None:
    ours = _drop_in(cls)
    assert cls.__name__ == name  # the class name a DeepEval user imports
    assert ours.__name__ == deepevals_own(name).__name__
    assert not ours.__name__.startswith("ragbridge/")
    assert isinstance(ours, RagbridgeMetric)  # everything RagbridgeMetric does, it does


@pytest.mark.parametrize(("cls", "name"), DROP_INS, ids=IDS)
def test_drop_ins_take_deepevals_arguments_in_deepevals_order(
    cls: type[DeepEvalNamedMetric], name: str
) -> None:
    theirs = inspect.signature(getattr(deepeval_metrics, name).__init__).parameters
    ours = inspect.signature(cls.__init__).parameters
    assert list(ours)[:3] == list(theirs)[:3] == ["self", "threshold", "model"]
    for arg in ("threshold", "model", "include_reason", "async_mode", "strict_mode"):
        assert ours[arg].default == theirs[arg].default, arg
    for arg in ("verbose_mode", "flaky"):
        assert ours[arg].default == theirs[arg].default, arg
    # positionally, as DeepEval's own classes allow for the first two
    metric = cls(
        0.8, CountingJudge(), **({"embedder": HashEmbedder()} if name.startswith("Ans") else {})
    )
    assert metric.threshold == 0.8
    assert metric.evaluation_model == "counting-judge"


@pytest.mark.parametrize(("cls", "name"), DROP_INS, ids=IDS)
def test_drop_ins_require_the_fields_deepevals_class_requires(
    cls: type[DeepEvalNamedMetric], name: str
) -> None:
    theirs = getattr(deepeval_metrics, name)._required_params
    assert list(cls.required_fields) == [p.value for p in theirs]


@pytest.mark.parametrize(
    "missing",
    [
        {"retrieval_context": None},
        {"actual_output": ""},
        {"expected_output": None, "context": None},
    ],
    ids=["no-retrieval-context", "empty-output", "no-expected-output"],
)
@pytest.mark.parametrize(("cls", "name"), DROP_INS, ids=IDS)
def test_a_missing_field_raises_deepevals_error_with_deepevals_message(
    cls: type[DeepEvalNamedMetric], name: str, missing: dict[str, Any]
) -> None:
    fields = {
        "input": "q?",
        "actual_output": "An answer.",
        "expected_output": "A reference.",
        "retrieval_context": ["A passage."],
        "context": ["A passage."],
    }
    case = LLMTestCase(**{**fields, **missing})
    theirs = deepevals_own(name, async_mode=False)
    try:
        theirs.measure(case, _show_indicator=False)
    except MissingTestCaseParamsError as exc:
        want: str | None = str(exc)
    else:
        want = None
    ours = _drop_in(cls)
    if want is None:
        ours.measure(case)  # DeepEval has what it needs: so do we
        assert ours.error is None
        return
    with pytest.raises(MissingTestCaseParamsError) as info:
        ours.measure(case)
    assert str(info.value) == want
    assert ours.error == want


def test_evaluate_shows_deepevals_columns_and_no_banner_for_ragbridge_metrics(
    capsys: pytest.CaptureFixture[str],
) -> None:
    judge = CountingJudge()
    ours = [
        FaithfulnessMetric(threshold=0.0, model=judge),
        AnswerRelevancyMetric(threshold=0.0, model=judge, embedder=HashEmbedder()),
        ContextualPrecisionMetric(threshold=0.0, model=judge),
        ContextualRecallMetric(threshold=0.0, model=judge),
    ]
    result = deepeval.evaluate(test_cases=[RAG_CASE], metrics=ours)
    out = capsys.readouterr()
    assert BANNER not in out.out + out.err
    assert "ragbridge/" not in out.out
    table = out.out.split("Aggregate Metrics", 1)[1]
    for name in ("Faithfulness", "Answer Relevancy", "Contextual Precision", "Contextual Recall"):
        assert name in table
    (case,) = result.test_results
    assert case.metrics_data is not None
    assert [m.name for m in case.metrics_data] == [
        "Faithfulness",
        "Answer Relevancy",
        "Contextual Precision",
        "Contextual Recall",
    ]
    assert all(m.score is not None and 0.0 <= m.score <= 1.0 for m in case.metrics_data)


def test_deepevals_own_metrics_keep_their_banner_in_the_same_run(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The banner is silenced per metric, not for DeepEval: no leak into the user's metrics."""
    model = ScriptedDeepEvalModel(verdicts=["yes"])
    case = LLMTestCase(input="q", actual_output="The sky is blue.", context=["The sky is blue."])
    deepeval.evaluate(
        test_cases=[case],
        metrics=[
            deepevals_own("HallucinationMetric", model=model),
            HallucinationMetric(model=model),
        ],
    )
    out = capsys.readouterr().out
    assert out.count(BANNER) == 1
    assert f"{BANNER} Hallucination Metric!" in out.replace("\n", " ")
    from deepeval.metrics import indicator

    label = indicator.format_metric_description(FaithfulnessMetric(model=CountingJudge()))
    assert label.startswith("ragbridge Faithfulness (using counting-judge")
    assert BANNER in indicator.format_metric_description(deepevals_own("FaithfulnessMetric"))
    # as_deepeval_metric's metrics are quiet too
    assert BANNER not in indicator.format_metric_description(as_deepeval_metric("mrr"))


def test_assert_test_names_the_failed_metric_by_deepevals_name() -> None:
    metric = FaithfulnessMetric(threshold=0.7, model=lexical_judge())
    deepeval.assert_test(RAG_CASE, [metric])
    bad = LLMTestCase(
        input="What if these shoes don't fit?",
        actual_output="All customers are eligible for a 60 day full refund.",
        retrieval_context=RAG_CASE.retrieval_context,
    )
    with pytest.raises(AssertionError, match=r"Faithfulness \(score: 0\.0, threshold: 0\.7"):
        deepeval.assert_test(bad, [metric])


def test_strict_mode_is_deepevals_all_or_nothing() -> None:
    half = LLMTestCase(
        input="q",
        actual_output="The tower is in Paris. It is made of gold.",
        retrieval_context=["The tower is in Paris."],
    )
    lenient = FaithfulnessMetric(model=lexical_judge())
    assert lenient.measure(half) == 0.5
    assert lenient.success is True
    strict = FaithfulnessMetric(model=lexical_judge(), strict_mode=True)
    assert strict.threshold == 1
    assert strict.measure(half) == 0.0  # DeepEval: a score below a strict threshold is 0
    assert strict.success is False
    assert strict.last_score is not None
    assert strict.last_score.value == 0.5  # ragbridge's measure is kept as it was
    assert strict.measure(RAG_CASE) == 1.0


def test_deepevals_copies_share_the_scorer_and_keep_the_configuration() -> None:
    metric = FaithfulnessMetric(threshold=0.6, model=CountingJudge(), strict_mode=True, flaky=True)
    (copy,) = copy_metrics([metric])
    assert type(copy) is FaithfulnessMetric
    assert copy is not metric
    assert copy.scorer is metric.scorer
    assert (copy.threshold, copy.strict_mode, copy.flaky) == (1, True, True)
    offline = FaithfulnessMetric(provider="offline", embedder=HashEmbedder())
    (copy,) = copy_metrics([offline])
    assert copy.__name__ == offline.__name__ == "Faithfulness (offline)"
    assert copy.metric.provider == "offline"


@pytest.mark.parametrize("run_async", [True, False])
def test_skip_on_missing_params_skips_like_deepevals_metric(run_async: bool) -> None:
    no_reference = LLMTestCase(input="q", actual_output="a.", retrieval_context=["a."])
    result = deepeval.evaluate(
        test_cases=[RAG_CASE, no_reference],
        metrics=[ContextualRecallMetric(model=CountingJudge())],
        async_config=AsyncConfig(run_async=run_async),
        display_config=DisplayConfig(show_indicator=False, print_results=False),
        error_config=ErrorConfig(skip_on_missing_params=True),
    )
    by_input = {r.input: r for r in result.test_results}
    assert by_input["q"].metrics_data in (None, [])
    assert by_input[RAG_CASE.input].metrics_data


def test_provider_picks_another_implementation_under_the_same_class() -> None:
    offline = FaithfulnessMetric(threshold=0.0, provider="offline", embedder=HashEmbedder())
    assert offline.__name__ == "Faithfulness (offline)"
    assert offline.evaluation_model == "offline"
    value = offline.measure(RAG_CASE)
    assert value is not None
    assert 0.0 <= value <= 1.0
    with pytest.raises(ValueError, match="scores 'faithfulness', not 'mrr'"):
        FaithfulnessMetric(metric=as_deepeval_metric("mrr").metric)


def test_answer_relevancy_uses_the_offline_default_embedder_when_none_is_given() -> None:
    pytest.importorskip("tokenizers")
    metric = AnswerRelevancyMetric(model=CountingJudge())
    assert metric.scorer.embedder is not None
    assert "MiniLM" in metric.scorer.embedder.model


# --------------------------------------------------------------------------- 2. HallucinationMetric

# DeepEval's own HallucinationMetric example (deepeval.com/docs/metrics-hallucination).
DOCS_CONTEXT = ["A man with blond-hair, and a brown shirt drinking out of a public water fountain."]
DOCS_CASE = LLMTestCase(
    input="What was the blond doing?",
    actual_output="A blond drinking water in public.",
    context=DOCS_CONTEXT,
)


def backed_judge(verdict: str = "supported") -> ScriptedJudge:
    return ScriptedJudge(
        {
            "answer.analyze": {
                "claims": ["A blond is drinking water in public."],
                "questions": ["What was the blond doing?"],
                "noncommittal": False,
            },
            "faithfulness.verify": {
                "verdicts": [{"reason": "context 1", "verdict": verdict, "context": 1}]
            },
        }
    )


def test_hallucination_reads_context_on_deepevals_docs_example() -> None:
    judge = backed_judge()
    metric = HallucinationMetric(threshold=0.5, model=judge)
    assert metric.measure(DOCS_CASE) == 1.0
    assert metric.success is True
    verify = [c for c in judge.calls if c.task == "faithfulness.verify"]
    assert len(verify) == 1
    assert DOCS_CONTEXT[0] in verify[0].messages[1]["content"]
    assert metric.reason is not None
    assert metric.reason.startswith("score 1.00 = 1 − hallucination 0.00")
    deepeval.assert_test(DOCS_CASE, [HallucinationMetric(model=backed_judge())])
    contradicted = HallucinationMetric(threshold=0.5, model=backed_judge("contradicted"))
    assert contradicted.measure(DOCS_CASE) == 0.0
    assert contradicted.success is False
    with pytest.raises(AssertionError, match=r"Hallucination \(score: 0\.0, threshold: 0\.5"):
        deepeval.assert_test(DOCS_CASE, [HallucinationMetric(model=backed_judge("contradicted"))])


def test_hallucination_checks_context_not_retrieval_context() -> None:
    judge = backed_judge()
    case = LLMTestCase(**{**DOCS_CASE.model_dump(include={"input", "actual_output", "context"})},
                       retrieval_context=["Only shoes were sold here."])  # fmt: skip
    HallucinationMetric(model=judge).measure(case)
    (verify,) = [c for c in judge.calls if c.task == "faithfulness.verify"]
    assert DOCS_CONTEXT[0] in verify.messages[1]["content"]
    assert "Only shoes" not in verify.messages[1]["content"]
    no_context = LLMTestCase(input="q", actual_output="a.", retrieval_context=["a."])
    with pytest.raises(MissingTestCaseParamsError, match="'context' cannot be None"):
        HallucinationMetric(model=backed_judge()).measure(no_context)


@pytest.mark.parametrize(
    ("verdicts", "threshold"),
    [
        (["yes"], 0.5),
        (["no"], 0.5),
        (["yes", "no"], 0.5),
        (["yes", "no"], 0.6),
        (["yes", "no"], 1.0),
    ],
)
def test_hallucination_direction_matches_deepevals_own_metric(
    verdicts: list[str], threshold: float
) -> None:
    """Same case, same per-context judgement, DeepEval's class and ours: same score, same
    pass/fail. A context agrees with the output exactly when the output's claim about it holds."""
    contexts = ["The tower is in Paris.", "The tower opened in 1889."]
    claims = ["The tower is in Paris.", "The tower opened in 1889."]
    wrong = ["The tower is in Rome.", "The tower opened in 1901."]
    n = len(verdicts)
    output = " ".join(
        c if v == "yes" else w for c, w, v in zip(claims[:n], wrong[:n], verdicts, strict=True)
    )
    case = LLMTestCase(input="q", actual_output=output, context=contexts[:n])
    theirs = deepevals_own(
        "HallucinationMetric",
        threshold=threshold,
        model=ScriptedDeepEvalModel(verdicts),
        async_mode=False,
    )
    ours = HallucinationMetric(threshold=threshold, model=lexical_judge())
    assert ours.measure(case) == pytest.approx(theirs.measure(case, _show_indicator=False))
    assert ours.success is theirs.success
    # ragbridge's own column keeps ragbridge's direction: the complement, threshold a maximum
    plain = as_deepeval_metric("hallucination", model=lexical_judge(), contexts_from="context")
    assert plain.measure(case) == pytest.approx(1.0 - ours.score)
    assert plain.higher_is_better is False


def test_installed_deepeval_scores_hallucination_as_agreement() -> None:
    """HallucinationMetric follows DeepEval 4.3, which turned the score around (1 = agrees, a
    pass); if an upgrade turns it back, this fails and the drop-in must follow."""
    agrees = deepevals_own("HallucinationMetric", model=ScriptedDeepEvalModel(["yes"]))
    assert agrees.measure(DOCS_CASE, _show_indicator=False) == 1.0
    assert agrees.success is True
    assert HallucinationMetric(model=backed_judge()).higher_is_better is True


# --------------------------------------------------------------------------- 3. model=


def test_model_is_the_judge_and_refuses_a_second_one() -> None:
    judge = lexical_judge()
    assert FaithfulnessMetric(model=judge).measure(RAG_CASE) == 1.0
    assert judge.calls
    assert as_deepeval_metric("faithfulness", model=lexical_judge()).measure(RAG_CASE) == 1.0
    scorer = Scorer(["faithfulness"], judge=CountingJudge())
    for extra in (
        {"judge": CountingJudge()},
        {"settings": Settings(judge=CountingJudge())},
        {"scorer": scorer},
    ):
        with pytest.raises(TypeError, match=r"model= and .* both name the judge"):
            FaithfulnessMetric(model=CountingJudge(), **extra)
        with pytest.raises(TypeError, match=r"model= and .* both name the judge"):
            as_deepeval_metric("faithfulness", model=CountingJudge(), **extra)
    assert FaithfulnessMetric(judge=CountingJudge()).evaluation_model == "counting-judge"


def test_a_model_name_is_resolved_by_deepeval_as_its_own_metrics_do(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from deepeval.metrics.utils import initialize_model
    from deepeval.models import OpenAIModel

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")  # construction only: no call
    named = FaithfulnessMetric(model="gpt-4.1")
    assert named.evaluation_model == "gpt-4.1"
    assert named.scorer.judge is not None
    wrapped = named.scorer.judge.judge
    assert isinstance(wrapped.deepeval_model, OpenAIModel)
    assert as_deepeval_metric("faithfulness", model="gpt-4.1").evaluation_model == "gpt-4.1"
    default = FaithfulnessMetric()  # no model: DeepEval's default, as FaithfulnessMetric() is
    assert default.evaluation_model == initialize_model(None)[0].get_model_name()
    # no judge needed, no default model built
    assert (
        FaithfulnessMetric(provider="offline", embedder=HashEmbedder()).evaluation_model
        == "offline"
    )


def test_a_model_name_without_a_key_fails_as_in_deepeval(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(DeepEvalError, match="API key"):
        deepevals_own("FaithfulnessMetric", model="gpt-4.1")
    with pytest.raises(DeepEvalError, match="API key"):
        FaithfulnessMetric(model="gpt-4.1")


@pytest.mark.parametrize("run_async", [True, False])
def test_a_custom_deepeval_model_passed_as_model_judges_ragbridges_prompts(run_async: bool) -> None:
    model = ScriptedDeepEvalModel()
    metric = FaithfulnessMetric(threshold=0.7, model=model)
    assert metric.evaluation_model == "scripted-deepeval-model"
    deepeval.assert_test(RAG_CASE, [metric], run_async=run_async)
    assert any("[ragbridge task: faithfulness.verify" in p for p in model.prompts)
    bad = LLMTestCase(
        input="q",
        actual_output="All customers are eligible for a 60 day full refund.",
        retrieval_context=RAG_CASE.retrieval_context,
    )
    assert metric.measure(bad) == 0.0
    assert metric.last_score is not None
    assert metric.last_score.details["claims"][0]["verdict"] == "contradicted"
    result = deepeval.evaluate(
        test_cases=[RAG_CASE, bad],
        metrics=[FaithfulnessMetric(threshold=0.7, model=model)],
        async_config=AsyncConfig(run_async=run_async),
        display_config=DisplayConfig(show_indicator=False, print_results=False),
    )
    scores = sorted(r.metrics_data[0].score for r in result.test_results)  # type: ignore[index]
    assert scores == [0.0, 1.0]
    assert {r.metrics_data[0].evaluation_model for r in result.test_results} == {  # type: ignore[index]
        "scripted-deepeval-model"
    }


def test_a_deepeval_judge_passed_as_model_runs_on_its_own_engine() -> None:
    judge = lexical_judge()
    metric = FaithfulnessMetric(model=DeepEvalJudge(judge))
    assert metric.measure(RAG_CASE) == 1.0
    assert judge.calls  # the ragbridge judge inside, not a second wrapper around it


# --------------------------------------------------------------------------- 4. the example


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, cwd=cwd, timeout=300
    )


def test_the_getting_started_example_runs_offline_with_deepevals_names(tmp_path: Path) -> None:
    done = _run(str(EXAMPLE), cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert BANNER not in done.stdout + done.stderr
    assert "ragbridge/" not in done.stdout
    rows: dict[tuple[str, str], tuple[float, str]] = {}
    for line in done.stdout.splitlines():
        found = re.match(r"  (\w+)\s+(\D+?)\s+(\d\.\d\d) (pass|fail)$", line)
        if found:
            rows[(found[1], found[2])] = (float(found[3]), found[4])
    names = {"Answer Relevancy", "Faithfulness", "Contextual Precision", "Contextual Recall"}
    assert {metric for _, metric in rows} == names
    assert {case for case, _ in rows} == {"refund", "shipping", "returns"}
    assert all(0.0 <= score <= 1.0 for score, _ in rows.values())
    assert all(verdict == "pass" for (case, _), (_, verdict) in rows.items() if case == "refund")
    assert rows[("shipping", "Faithfulness")] == (0.0, "fail")  # 2 days where the passage says 1
    assert rows[("returns", "Contextual Recall")] == (0.0, "fail")  # the passage was not retrieved
    for test in ("test_answer_relevancy", "test_faithfulness", "test_hallucination"):
        assert f"{test}: passed" in done.stdout


def test_the_example_is_also_a_pytest_file(tmp_path: Path) -> None:
    done = _run("-m", "pytest", "-q", "-p", "no:cacheprovider", str(EXAMPLE), cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:]
    assert "3 passed" in done.stdout


def test_the_example_changes_only_the_metric_import_and_constructors() -> None:
    """DeepEval's own names are used for everything but the metrics: those come from ragbridge,
    under DeepEval's class names, and no metric comes from deepeval.metrics."""
    tree = ast.parse(EXAMPLE.read_text(encoding="utf-8"))
    imported = {
        (node.module, alias.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    from_deepeval = {(m, n) for m, n in imported if m is not None and m.startswith("deepeval")}
    assert from_deepeval == {
        ("deepeval", "assert_test"),
        ("deepeval", "evaluate"),
        ("deepeval.test_case", "LLMTestCase"),
    }
    metrics = {n for m, n in imported if m == "ragbridge.adapters.deepeval"}
    assert metrics == {name for _, name in DROP_INS}
    assert all(hasattr(deepeval_metrics, name) for name in metrics)  # DeepEval's class names
