"""DeepEval's ``GEval`` as a drop-in (issue 30): ``from ragbridge.adapters.deepeval import GEval``
in code written for ``from deepeval.metrics import GEval``.

Inside the real DeepEval: its constructor's names, order and defaults; its column
(``"Correctness [GEval]"``); ``measure``, ``a_measure``, ``assert_test`` and ``evaluate`` (whose
per-test-case copies share one scorer, so the steps are written once); scripted scores giving
exact values on DeepEval's 0-10 scale and in strict mode; ``evaluation_params`` deciding the
blocks the judge sees; a missing field refused with DeepEval's own error and message before any
call; the arguments refused because they would change what is measured. Every model is
scripted (a ``DeepEvalBaseLLM`` as DeepEval users write one, or ragbridge's `ScriptedJudge`).

The last section runs DeepEval's own ``GEval`` and ours on one counting judge: the way the
criteria cost benchmark compares prompt characters.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import warnings
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("deepeval")

import deepeval
import deepeval.metrics as deepeval_metrics
from deepeval.errors import MissingTestCaseParamsError
from deepeval.evaluate.configs import DisplayConfig
from deepeval.metrics.g_eval import Rubric as DeepEvalRubric
from deepeval.models import DeepEvalBaseLLM
from deepeval.test_case import LLMTestCase, SingleTurnParams
from pydantic import BaseModel

from ragbridge.adapters.deepeval import DeepEvalJudge, GEval
from ragbridge.adapters.deepeval.criteria import measure_name
from ragbridge.core.testing import CountingJudge, ScriptedJudge, task_of

P = SingleTurnParams
CORRECTNESS = "Determine whether the actual output is factually correct given the expected output."
CASE = LLMTestCase(
    input="When was the Eiffel Tower finished?",
    actual_output="It was finished in 1889.",
    expected_output="The Eiffel Tower was completed in 1889.",
    retrieval_context=["The tower was completed in March 1889 for the World's Fair."],
    context=["Gustave Eiffel's company built the tower between 1887 and 1889."],
)
QUIET = DisplayConfig(show_indicator=False, print_results=False)


@pytest.fixture(autouse=True)
def _offline_deepeval(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # DeepEval writes ./.deepeval/
    monkeypatch.setenv("DEEPEVAL_TELEMETRY_OPT_OUT", "YES")
    monkeypatch.setenv("DEEPEVAL_DISABLE_DOTENV", "1")


class ScriptedGEvalModel(DeepEvalBaseLLM):  # type: ignore[misc]
    """A DeepEval model as a DeepEval user writes one: G-Eval's prompts (DeepEval's and
    ragbridge's) get the scripted steps and score; every prompt is kept."""

    def __init__(self, score: int, steps: tuple[str, ...] = ("Compare the output.",)) -> None:
        self.score = score
        self.steps = list(steps)
        self.prompts: list[str] = []
        super().__init__(model="scripted-geval-model")

    def load_model(self) -> ScriptedGEvalModel:
        return self

    def get_model_name(self) -> str:
        return "scripted-geval-model"

    def generate(self, prompt: str, schema: type[BaseModel] | None = None) -> Any:
        self.prompts.append(prompt)
        task = task_of([{"role": "user", "content": prompt}])
        kind = task or (schema.__name__ if schema is not None else "")
        if kind in ("criteria.steps", "Steps"):
            reply: dict[str, Any] = {"steps": self.steps}
        elif kind in ("criteria.score", "ReasonScore"):
            reply = {"reason": "scripted", "score": self.score}
        else:
            raise AssertionError(f"not a G-Eval prompt: {kind!r}")
        return schema.model_validate(reply) if schema is not None else json.dumps(reply)

    async def a_generate(self, prompt: str, schema: type[BaseModel] | None = None) -> Any:
        return self.generate(prompt, schema)


def scripted(score: int, steps: tuple[str, ...] = ("Compare the output.",)) -> ScriptedJudge:
    return ScriptedJudge(
        {
            "criteria.steps": {"steps": list(steps)},
            "criteria.score": {"reason": f"scored {score}", "score": score},
        }
    )


def deepevals_geval(**kwargs: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return deepeval_metrics.GEval(**kwargs)


def geval(judge: Any, **kwargs: Any) -> GEval:
    kwargs.setdefault("name", "Correctness")
    kwargs.setdefault("criteria", CORRECTNESS)
    kwargs.setdefault("evaluation_params", [P.INPUT, P.ACTUAL_OUTPUT, P.EXPECTED_OUTPUT])
    return GEval(model=judge, **kwargs)


def user_prompt(judge: ScriptedJudge, task: str = "criteria.score") -> str:
    [call] = [c for c in judge.calls if c.task == task][-1:]
    return call.messages[-1]["content"]


# --------------------------------------------------------------------------- 1. the constructor


def test_geval_takes_deepevals_arguments_in_deepevals_order_and_defaults() -> None:
    theirs = inspect.signature(deepeval_metrics.GEval.__init__).parameters
    ours = inspect.signature(GEval.__init__).parameters
    assert list(ours)[: len(theirs)] == list(theirs)
    for name, param in theirs.items():
        if name in ("self", "evaluation_template"):
            continue  # ours: None, meaning DeepEval's own template (which is also accepted)
        assert ours[name].default == param.default, name
        assert ours[name].kind == param.kind, name


def test_the_one_line_change_gives_deepevals_column_and_the_same_score() -> None:
    """The same code, the same DeepEval model scripted to answer 7 of 10: DeepEval's GEval
    and ours both report 0.7 under the column "Correctness [GEval]"."""
    code = {
        "name": "Correctness",
        "criteria": CORRECTNESS,
        "evaluation_params": [P.INPUT, P.ACTUAL_OUTPUT, P.EXPECTED_OUTPUT],
        "threshold": 0.6,
    }
    theirs = deepevals_geval(model=ScriptedGEvalModel(7), async_mode=False, **code)
    model = ScriptedGEvalModel(7)
    ours = GEval(model=model, **code)
    assert theirs.measure(CASE, _show_indicator=False) == pytest.approx(0.7)
    assert ours.measure(CASE) == pytest.approx(0.7)
    assert ours.__name__ == theirs.__name__ == "Correctness [GEval]"
    assert (ours.success, ours.threshold) == (theirs.success, theirs.threshold) == (True, 0.6)
    assert theirs.reason == "scripted"
    assert (ours.reason or "").startswith("scripted")
    assert [task_of([{"role": "user", "content": p}]) for p in model.prompts] == [
        "criteria.steps",
        "criteria.score",
    ]


def test_name_is_the_column_and_names_the_ragbridge_measure() -> None:
    ours = geval(scripted(5), name="Answer Correctness")
    assert ours.name == "Answer Correctness"
    assert ours.__name__ == "Answer Correctness [GEval]"
    assert ours.metric.name == ours.criterion.name == "Answer_Correctness"
    bare = geval(scripted(5), name="Answer Correctness", _include_g_eval_suffix=False)
    assert bare.__name__ == "Answer Correctness"
    assert [measure_name(n) for n in ("Tone", "tone of voice!", "3rd-party")] == [
        "Tone",
        "tone_of_voice",
        "geval_3rd_party",
    ]


# --------------------------------------------------------------------------- 2. scores


@pytest.mark.parametrize(("score", "value"), [(0, 0.0), (3, 0.3), (10, 1.0)])
def test_a_scripted_score_is_deepevals_normalised_value(score: int, value: float) -> None:
    judge = scripted(score)
    ours = geval(judge)
    assert ours.measure(CASE) == pytest.approx(value)
    assert ours.success is (value >= 0.5)
    assert ours.error is None
    details = ours.last_score.details
    assert details["scale"] == [0, 10]
    assert details["raw"] == score
    assert details["weighting"] == "integer"  # a scripted judge returns no log-probabilities
    assert details["steps_source"] == "generated"
    assert details["steps"] == ["Compare the output."]


@pytest.mark.parametrize(("verdict", "score", "success"), [(1, 1.0, True), (0, 0.0, False)])
def test_strict_mode_is_deepevals_binary_form(verdict: int, score: float, success: bool) -> None:
    judge = scripted(verdict)
    ours = geval(judge, strict_mode=True, threshold=0.3)
    assert ours.threshold == 1.0  # as DeepEval's strict mode sets it
    assert ours.measure(CASE) == score
    assert ours.success is success
    assert ours.criterion.scale == (0, 1)
    assert '"score":0|1' in user_prompt(judge)


def test_given_steps_are_used_as_given_and_never_generated() -> None:
    judge = scripted(8)
    ours = geval(judge, criteria=None, evaluation_steps=["Check the year.", "Check the place."])
    assert ours.measure(CASE) == pytest.approx(0.8)
    assert judge.tasks() == ["criteria.score"]
    assert ours.last_score.details["steps_source"] == "given"
    assert "1. Check the year.\n2. Check the place." in user_prompt(judge)


def test_a_measure_scores_on_the_callers_loop() -> None:
    ours = geval(scripted(6))
    assert asyncio.run(ours.a_measure(CASE)) == pytest.approx(0.6)
    assert ours.success is True


# --------------------------------------------------------------------------- 3. fields read


@pytest.mark.parametrize(
    ("params", "shown", "hidden"),
    [
        ([P.ACTUAL_OUTPUT], ["ANSWER"], ["QUESTION", "REFERENCE", "CONTEXT 1"]),
        (
            [P.INPUT, P.ACTUAL_OUTPUT, P.EXPECTED_OUTPUT],
            ["QUESTION", "ANSWER", "REFERENCE"],
            ["CONTEXT 1"],
        ),
        ([P.ACTUAL_OUTPUT, P.RETRIEVAL_CONTEXT], ["ANSWER", "CONTEXT 1"], ["QUESTION"]),
    ],
    ids=["output-only", "input-output-expected", "output-retrieval"],
)
def test_evaluation_params_are_the_blocks_the_judge_sees(
    params: list[Any], shown: list[str], hidden: list[str]
) -> None:
    judge = scripted(5)
    geval(judge, evaluation_params=params).measure(CASE)
    prompt = user_prompt(judge)
    for label in shown:
        assert f"<<<BEGIN {label}>>>" in prompt, label
    for label in hidden:
        assert f"<<<BEGIN {label}>>>" not in prompt, label


@pytest.mark.parametrize(
    ("param", "passage"),
    [(P.RETRIEVAL_CONTEXT, "World's Fair"), (P.CONTEXT, "Gustave Eiffel's company")],
)
def test_context_and_retrieval_context_each_read_their_own_field(param: Any, passage: str) -> None:
    judge = scripted(5)
    geval(judge, evaluation_params=[P.ACTUAL_OUTPUT, param]).measure(CASE)
    prompt = user_prompt(judge)
    assert passage in prompt
    other = "Gustave Eiffel's company" if param is P.RETRIEVAL_CONTEXT else "World's Fair"
    assert other not in prompt


def test_a_missing_field_raises_deepevals_error_and_message_before_any_call() -> None:
    case = LLMTestCase(input="q?", actual_output="An answer.")  # no expected_output
    params = [P.INPUT, P.ACTUAL_OUTPUT, P.EXPECTED_OUTPUT]
    theirs = deepevals_geval(
        name="Correctness",
        criteria=CORRECTNESS,
        evaluation_params=params,
        model=ScriptedGEvalModel(5),
        async_mode=False,
    )
    with pytest.raises(MissingTestCaseParamsError) as want:
        theirs.measure(case, _show_indicator=False)
    judge = scripted(5)
    ours = geval(judge, evaluation_params=params)
    with pytest.raises(MissingTestCaseParamsError) as got:
        ours.measure(case)
    assert str(got.value) == str(want.value)
    assert ours.error == str(want.value)
    assert judge.calls == []  # neither the steps nor the score were asked for


def test_an_empty_retrieval_context_is_a_ragbridge_missing_input_failure() -> None:
    case = LLMTestCase(input="q?", actual_output="An answer.", retrieval_context=[])
    judge = scripted(5)
    ours = geval(judge, evaluation_params=[P.ACTUAL_OUTPUT, P.RETRIEVAL_CONTEXT])
    assert ours.measure(case) is None
    assert ours.success is False
    assert "contexts" in (ours.error or "")
    assert judge.calls == []


# --------------------------------------------------------------------------- 4. refusals


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        (
            {"rubric": [DeepEvalRubric(score_range=(0, 10), expected_outcome="Correct.")]},
            ValueError,
            "criterion would be dropped",
        ),
        ({"top_logprobs": 5}, ValueError, "top_logprobs=5"),
        ({"evaluation_template": type("Mine", (), {})}, ValueError, "evaluation_template"),
        ({"evaluation_params": [P.ACTUAL_OUTPUT, P.METADATA]}, ValueError, "METADATA"),
        ({"evaluation_params": [P.CONTEXT, P.RETRIEVAL_CONTEXT]}, ValueError, "one list"),
        ({"evaluation_params": None}, ValueError, "trace"),
        ({"evaluation_params": []}, ValueError, "cannot be an empty list"),
        ({"evaluation_params": ["input"]}, TypeError, "SingleTurnParams"),
        ({"criteria": None}, ValueError, "Either 'criteria' or 'evaluation_steps'"),
        ({"criteria": "  "}, ValueError, "cannot be an empty string"),
        ({"threshold": None}, ValueError, "threshold=None"),
        ({"contexts_from": "context"}, ValueError, "disagrees"),
    ],
    ids=[
        "rubric",
        "top-logprobs",
        "template",
        "metadata",
        "two-passage-lists",
        "no-params",
        "empty-params",
        "string-param",
        "no-criteria",
        "blank-criteria",
        "no-threshold",
        "contexts-from",
    ],
)
def test_arguments_that_would_change_the_measure_are_refused(
    kwargs: dict[str, Any], error: type[Exception], words: str
) -> None:
    if "contexts_from" in kwargs:
        kwargs["evaluation_params"] = [P.ACTUAL_OUTPUT, P.RETRIEVAL_CONTEXT]
    with pytest.raises(error) as info:
        geval(CountingJudge(), **kwargs)
    assert words in str(info.value)


def test_deepevals_own_template_is_accepted() -> None:
    from deepeval.metrics.g_eval.g_eval import GEvalTemplate

    assert geval(CountingJudge(), evaluation_template=GEvalTemplate).evaluation_template is (
        GEvalTemplate
    )


# --------------------------------------------------------------------------- 5. DeepEval's runners


def test_deepeval_evaluate_copies_share_one_scorer_and_write_the_steps_once() -> None:
    judge = scripted(9)
    ours = geval(judge)
    cases = [
        CASE,
        LLMTestCase(input="Who?", actual_output="Gustave Eiffel.", expected_output="Eiffel."),
    ]
    result = deepeval.evaluate(test_cases=cases, metrics=[ours], display_config=QUIET)
    data = [md for tr in result.test_results for md in tr.metrics_data]
    assert [(md.name, md.score, md.success) for md in data] == [
        ("Correctness [GEval]", pytest.approx(0.9), True)
    ] * 2
    assert judge.tasks().count("criteria.steps") == 1  # DeepEval's own: once per test case
    assert judge.tasks().count("criteria.score") == 2


def test_assert_test_fails_with_deepevals_column_name() -> None:
    deepeval.assert_test(CASE, [geval(scripted(8))])
    with pytest.raises(AssertionError, match=r"Correctness \[GEval\]"):
        deepeval.assert_test(CASE, [geval(scripted(2))])


# --------------------------------------------------------------------------- 6. one counting judge


def test_deepevals_geval_and_ours_run_on_one_counting_judge() -> None:
    """How the cost benchmark compares them: DeepEval's GEval on the counting judge through
    `DeepEvalJudge`, ours on the same judge directly; every prompt character is counted where
    the judge receives it."""
    cases = [
        LLMTestCase(input=f"Question {i}?", actual_output=f"Answer {i}.", expected_output="Ref.")
        for i in range(3)
    ]
    code = {
        "name": "Correctness",
        "criteria": CORRECTNESS,
        "evaluation_params": [P.INPUT, P.ACTUAL_OUTPUT, P.EXPECTED_OUTPUT],
    }
    theirs_judge = CountingJudge()
    theirs = deepevals_geval(model=DeepEvalJudge(theirs_judge), **code)
    deepeval.evaluate(test_cases=cases, metrics=[theirs], display_config=QUIET)
    ours_judge = CountingJudge()
    deepeval.evaluate(
        test_cases=cases, metrics=[GEval(model=ours_judge, **code)], display_config=QUIET
    )
    assert theirs_judge.calls == 2 * len(cases)  # DeepEval writes the steps for each test case
    assert ours_judge.calls == 1 + len(cases)  # once per run, then one score per case
    assert theirs_judge.by_task == {None: 2 * len(cases)}
    # every message's characters, as sent (DeepEval: one prompt; ours: system + user), which
    # its token estimate (len // 4 per message) brackets
    for judge, messages in ((theirs_judge, 1), (ours_judge, 2)):
        tokens = 4 * judge.prompt_tokens
        assert tokens <= judge.prompt_chars < tokens + 4 * messages * judge.calls
