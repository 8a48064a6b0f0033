"""DeepEval's agent test cases and metrics (issue 32, the DeepEval sink), against real deepeval
4.3 offline: ``tools_called`` / ``expected_tools`` and a sample's ``trajectory`` /
``reference_tool_calls`` both ways, exactly; the drop-ins `ToolCorrectnessMetric` (DeepEval's
own number on random test cases, in every mode) and `TaskCompletionMetric` (ragbridge's
``task_completion``, one judge call); both inside ``deepeval.evaluate``; a wrong tool call
lowering exactly what it should. Judges are scripted or counting; nothing leaves the machine.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import random
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("deepeval")

import deepeval
import deepeval.metrics as deepeval_metrics
from deepeval.errors import MissingTestCaseParamsError
from deepeval.evaluate.configs import AsyncConfig, DisplayConfig
from deepeval.metrics.utils import copy_metrics
from deepeval.test_case import LLMTestCase, ToolCallParams, ToolCallType
from deepeval.test_case import ToolCall as DeepEvalToolCall

from ragbridge.adapters.deepeval import (
    META_KEY,
    DeepEvalJudge,
    TaskCompletionMetric,
    ToolCorrectnessMetric,
    from_golden,
    from_test_case,
    load_test_cases,
    save_test_cases,
    to_golden,
    to_test_case,
)
from ragbridge.adapters.deepeval.tool_correctness import ToolCorrectness
from ragbridge.core import evaluate
from ragbridge.core.judging.judge import Message
from ragbridge.core.sample import Context, Sample
from ragbridge.core.testing import CountingJudge, ScriptedJudge
from ragbridge.core.trajectory import Step
from ragbridge.core.turn import ToolCall


@pytest.fixture(autouse=True)
def _offline_deepeval(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # DeepEval writes ./.deepeval/
    monkeypatch.setenv("DEEPEVAL_TELEMETRY_OPT_OUT", "YES")
    monkeypatch.setenv("DEEPEVAL_DISABLE_DOTENV", "1")


QUIET = DisplayConfig(show_indicator=False, print_results=False)

# An agent's sample with everything a step and a reference call carry.
AGENT = Sample(
    id="agent-1",
    question="How many leave days do full-timers get, and is that above the legal minimum?",
    answer="25 days, above the legal 20.",
    contexts=[Context(text="Full-time staff get 25 days.", id="hb-3")],
    trajectory=[
        Step(
            name="search_handbook",
            args={"query": "leave full-time"},
            id="c1",
            output="Full-time staff get 25 days.",
            contexts=[Context(text="Full-time staff get 25 days.", id="hb-3", score=0.8)],
            latency_s=0.25,
            metadata={"retriever": "bm25"},
        ),
        Step(name="search_law", args={"query": "minimum leave"}, id="c2", error="timeout"),
        Step(
            name="lookup",
            args={},
            output='{"minimum": 20}',
            metadata={"deepeval": {"type": "MCP", "output": {"minimum": 20}}},
        ),
    ],
    reference_tool_calls=[
        ToolCall(name="search_handbook", args={"query": "leave full-time"}, id="r1"),
        ToolCall(name="search_law", args={"query": "minimum leave"}),
    ],
    metadata={"split": "dev", "deepeval": {"expected_tools": [{"output": "25 days"}, {}]}},
)


# --------------------------------------------------------------------------- conversions


def test_a_trajectory_is_tools_called_and_reference_calls_are_expected_tools() -> None:
    tc = to_test_case(AGENT)
    assert tc.tools_called is not None
    assert tc.expected_tools is not None
    first, second, third = tc.tools_called
    assert (first.name, first.input_parameters, first.output) == (
        "search_handbook",
        {"query": "leave full-time"},
        "Full-time staff get 25 days.",
    )
    assert second.output is None
    # what DeepEval has a field for goes there, not into metadata
    assert third.type == ToolCallType.MCP
    assert third.output == {"minimum": 20}
    assert third.input_parameters is None  # no arguments, as DeepEval writes them
    assert [c.name for c in tc.expected_tools] == ["search_handbook", "search_law"]
    assert tc.expected_tools[0].output == "25 days"
    # what it has no field for rides in the ragbridge record
    record = tc.metadata[META_KEY] if tc.metadata else {}
    assert record["trajectory"][0]["id"] == "c1"
    assert record["trajectory"][0]["contexts"][0] == {
        "text": "Full-time staff get 25 days.",
        "id": "hb-3",
        "score": 0.8,
    }
    assert record["trajectory"][1] == {"id": "c2", "error": "timeout"}
    assert record["reference_tool_calls"] == [{"id": "r1"}, {}]
    assert "deepeval" not in record["metadata"]  # the expected tools hold it now
    assert from_test_case(tc) == AGENT
    assert from_golden(to_golden(AGENT)) == AGENT


def test_none_and_empty_tool_lists_stay_apart_through_deepevals_json_file(tmp_path: Path) -> None:
    plain = Sample(id="plain", question="q", answer="a")
    idle = Sample(id="idle", question="q", answer="a", trajectory=[], reference_tool_calls=[])
    one_sided = Sample(id="one", question="q", answer="a", trajectory=[Step(name="t")])
    assert to_test_case(plain).tools_called is None
    assert to_test_case(idle).tools_called == []
    path = save_test_cases([AGENT, plain, idle, one_sided], tmp_path / "agents.json")
    written = json.loads(path.read_text())
    assert written[2]["tools_called"] is None  # DeepEval's writer drops an empty list
    assert load_test_cases(path) == [AGENT, plain, idle, one_sided]


def test_a_hand_built_agent_test_case_reads_and_writes_back_the_same() -> None:
    tc = LLMTestCase(
        input="Weather in Paris?",
        actual_output="Sunny, 20C.",
        tools_called=[
            DeepEvalToolCall(
                name="weather",
                input_parameters={"city": "Paris"},
                output={"sky": "sunny", "temp": 20},
                description="current weather",
                reasoning="the user asked for it",
            ),
            DeepEvalToolCall(name="clock", input_parameters={}, type=ToolCallType.MCP),
        ],
        expected_tools=[DeepEvalToolCall(name="weather", output="sunny")],
    )
    sample = from_test_case(tc)
    assert sample.trajectory is not None
    assert sample.reference_tool_calls is not None
    weather, clock = sample.trajectory
    # a non-string output is the step's text too, so ragbridge's measures can read it
    assert weather.output == '{"sky": "sunny", "temp": 20}'
    assert weather.args == {"city": "Paris"}
    assert clock.args == {}
    assert clock.metadata == {"deepeval": {"type": "MCP", "input_parameters": {}}}
    assert sample.reference_tool_calls == [ToolCall(name="weather")]
    assert sample.metadata == {"deepeval": {"expected_tools": [{"output": "sunny"}]}}
    back = to_test_case(sample)
    for field in ("tools_called", "expected_tools"):
        assert [c.model_dump() for c in getattr(back, field)] == [
            c.model_dump() for c in getattr(tc, field)
        ]
    # the tools are part of what names a hand-built test case
    other = tc.model_copy(update={"tools_called": tc.tools_called[:1]})
    assert from_test_case(other).id != sample.id
    assert from_test_case(tc.model_copy()).id == sample.id


def test_an_edited_or_clashing_test_case_is_refused_with_the_field_named() -> None:
    tc = to_test_case(AGENT)
    assert tc.tools_called is not None
    tc.tools_called.pop()
    with pytest.raises(ValueError, match=r"trajectory: expected one entry per tools_called call"):
        from_test_case(tc)
    clash = LLMTestCase(
        input="q",
        expected_tools=[DeepEvalToolCall(name="s", output="x")],
        metadata={"deepeval": {"expected_tools": "mine"}},
    )
    with pytest.raises(ValueError, match=r"metadata\['deepeval'\]\['expected_tools'\] is where"):
        from_test_case(clash)
    nameless = LLMTestCase(input="q", tools_called=[DeepEvalToolCall(name="")])
    with pytest.raises(ValueError, match=r"tools_called\[0\]: name: must not be empty"):
        from_test_case(nameless)


# Random samples: steps with every field, metadata using the keys the mapping uses (a
# "deepeval" object that fits, or not), reference calls with and without ids.
_TEXT = st.text(max_size=6)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | _TEXT,
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(_TEXT, inner, max_size=2),
    max_leaves=4,
)
_ARGS = st.dictionaries(_TEXT, _JSON, max_size=2)
_DEEPEVAL = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(["MCP", "FUNCTION", "other"]),
        "description": _TEXT,
        "reasoning": _TEXT | st.integers(),
        "output": _JSON,
        "input_parameters": st.just({}) | _ARGS,
    },
)
_META = st.dictionaries(st.sampled_from(["deepeval", "ragbridge", "k"]), _JSON, max_size=2)


@st.composite
def _steps(draw: st.DrawFn) -> Step:
    metadata = draw(_META)
    output = draw(st.none() | _TEXT)
    if draw(st.booleans()):
        extra = draw(_DEEPEVAL)
        if "output" in extra and draw(st.booleans()):
            output = json.dumps(extra["output"], ensure_ascii=False)  # as read from DeepEval
        metadata["deepeval"] = extra
    return Step(
        name=draw(st.text(min_size=1, max_size=4)),
        args=draw(_ARGS),
        id=draw(st.none() | st.text(min_size=1, max_size=3)),
        output=output,
        contexts=draw(
            st.lists(st.builds(Context, text=_TEXT, id=st.none() | _TEXT.filter(bool)), max_size=2)
        ),
        latency_s=draw(st.none() | st.floats(0, 10)),
        error=draw(st.none() | _TEXT),
        metadata=metadata,
    )


@st.composite
def _agent_samples(draw: st.DrawFn) -> Sample:
    calls = draw(
        st.none()
        | st.lists(
            st.builds(
                ToolCall,
                name=st.text(min_size=1, max_size=4),
                args=_ARGS,
                id=st.none() | st.text(min_size=1, max_size=3),
            ),
            max_size=3,
        )
    )
    metadata = draw(_META)
    if calls is not None and draw(st.booleans()):
        extras = draw(st.lists(_DEEPEVAL, min_size=len(calls), max_size=len(calls)))
        metadata["deepeval"] = {
            "expected_tools": extras,
            **draw(st.dictionaries(_TEXT, _JSON, max_size=1)),
        }
    return Sample(
        id=draw(st.text(min_size=1, max_size=4)),
        question=draw(_TEXT),
        answer=draw(st.none() | _TEXT),
        trajectory=draw(st.none() | st.lists(_steps(), max_size=3)),
        reference_tool_calls=calls,
        metadata=metadata,
    )


@settings(max_examples=200, deadline=None)
@given(sample=_agent_samples())
def test_any_agent_sample_comes_back_exactly(sample: Sample) -> None:
    assert from_test_case(to_test_case(sample)) == sample
    assert from_golden(to_golden(sample)) == sample


_RAW_OUTPUT = st.none() | _TEXT | st.integers() | st.dictionaries(_TEXT, _JSON, max_size=2)


def _deepeval_calls() -> st.SearchStrategy[list[DeepEvalToolCall]]:
    return st.lists(
        st.builds(
            DeepEvalToolCall,
            name=st.text(min_size=1, max_size=4),
            type=st.sampled_from(list(ToolCallType)),
            description=st.none() | _TEXT,
            reasoning=st.none() | _TEXT,
            output=_RAW_OUTPUT,
            input_parameters=st.none() | st.just({}) | _ARGS,
        ),
        max_size=3,
    )


@settings(max_examples=200, deadline=None)
@given(
    called=st.none() | _deepeval_calls(),
    expected=st.none() | _deepeval_calls(),
    metadata=st.none() | st.dictionaries(st.sampled_from(["k", "j"]), _JSON, max_size=1),
)
def test_any_hand_built_test_case_comes_back_with_the_same_tool_calls(
    called: list[DeepEvalToolCall] | None,
    expected: list[DeepEvalToolCall] | None,
    metadata: dict[str, Any] | None,
) -> None:
    tc = LLMTestCase(input="q", tools_called=called, expected_tools=expected, metadata=metadata)
    back = to_test_case(from_test_case(tc))
    for field in ("tools_called", "expected_tools"):
        mine, theirs = getattr(back, field), getattr(tc, field)
        assert (mine is None) == (theirs is None)
        assert [c.model_dump() for c in mine or []] == [c.model_dump() for c in theirs or []]


# --------------------------------------------------------------------------- ToolCorrectnessMetric

_PARAMS = [
    [],
    [ToolCallParams.INPUT_PARAMETERS],
    [ToolCallParams.OUTPUT],
    [ToolCallParams.INPUT_PARAMETERS, ToolCallParams.OUTPUT],
]


def _random_call(rng: random.Random) -> DeepEvalToolCall:
    args = None
    if rng.random() > 0.2:
        keys = rng.sample("pqr", rng.randint(0, 3))
        args = {k: rng.choice([1, "x", {"n": rng.choice([1, 2])}, [1]]) for k in keys}
    return DeepEvalToolCall(
        name=rng.choice("abc"),
        input_parameters=args,
        output=rng.choice([None, "o1", "o2", {"d": 1}, 3]),
        type=ToolCallType.MCP if rng.random() < 0.1 else ToolCallType.FUNCTION,
    )


def _random_case(rng: random.Random) -> tuple[LLMTestCase, dict[str, Any]]:
    called = [_random_call(rng) for _ in range(rng.randint(0, 4))]
    if called and rng.random() < 0.3:
        called.append(called[0].model_copy())  # a repeated call
    expected = [_random_call(rng) for _ in range(rng.randint(0, 4))]
    options = {
        "evaluation_params": rng.choice(_PARAMS),
        "should_exact_match": rng.random() < 0.2,
        "should_consider_ordering": rng.random() < 0.4,
        "strict_mode": rng.random() < 0.1,
    }
    case = LLMTestCase(input="q", actual_output="a", tools_called=called, expected_tools=expected)
    return case, options


def _unused_model() -> DeepEvalJudge:
    """DeepEval's metric needs a model object even when it calls none."""
    return DeepEvalJudge(CountingJudge())


def test_tool_correctness_is_deepevals_number_on_random_test_cases() -> None:
    rng = random.Random(32)
    compared = raised = 0
    for _ in range(400):
        case, options = _random_case(rng)
        theirs = deepeval_metrics.ToolCorrectnessMetric(
            model=_unused_model(), async_mode=False, **options
        )
        try:
            theirs.measure(case, _show_indicator=False)
        except AttributeError:  # input_parameters None on one side only: DeepEval raises
            raised += 1
            continue
        ours = ToolCorrectnessMetric(**options)
        assert ours.measure(case) == theirs.score, (case, options)
        assert asyncio.run(ours.a_measure(case)) == theirs.score
        assert ours.success == theirs.success
        compared += 1
    assert compared > 300
    assert raised > 0


def test_where_deepeval_raises_missing_arguments_read_as_none() -> None:
    params = [ToolCallParams.INPUT_PARAMETERS]
    metric = ToolCorrectnessMetric(evaluation_params=params)
    none = LLMTestCase(
        input="q",
        tools_called=[DeepEvalToolCall(name="s")],
        expected_tools=[DeepEvalToolCall(name="s", input_parameters={})],
    )
    assert metric.measure(none) == 1.0
    some = LLMTestCase(
        input="q",
        tools_called=[DeepEvalToolCall(name="s")],
        expected_tools=[DeepEvalToolCall(name="s", input_parameters={"q": "x"})],
    )
    assert metric.measure(some) == 0.0
    theirs = deepeval_metrics.ToolCorrectnessMetric(
        model=_unused_model(), async_mode=False, evaluation_params=params
    )
    with pytest.raises(AttributeError):
        theirs.measure(some, _show_indicator=False)


def test_a_wrong_tool_call_lowers_exactly_what_it_should() -> None:
    expected = [
        DeepEvalToolCall(name="search", input_parameters={"q": "leave", "k": 3}),
        DeepEvalToolCall(name="calendar", input_parameters={"day": "mon"}),
    ]
    right = [DeepEvalToolCall(name=c.name, input_parameters=c.input_parameters) for c in expected]
    wrong_arg = [right[0].model_copy(update={"input_parameters": {"q": "leave", "k": 5}}), right[1]]
    wrong_tool = [right[0], DeepEvalToolCall(name="web", input_parameters={"day": "mon"})]
    args = [ToolCallParams.INPUT_PARAMETERS]

    def scores(called: list[DeepEvalToolCall], **options: Any) -> float | None:
        case = LLMTestCase(input="q", tools_called=called, expected_tools=expected)
        return ToolCorrectnessMetric(**options).measure(case)

    assert scores(right, evaluation_params=args) == 1.0
    # one of two arguments of one of two calls wrong: that call is worth half
    assert scores(wrong_arg, evaluation_params=args) == 0.75
    assert scores(wrong_arg) == 1.0  # arguments not compared: nothing lost
    assert scores(wrong_arg, evaluation_params=args, should_exact_match=True) == 0.0
    # the wrong tool loses its call, whatever is compared; the right one keeps its own
    assert scores(wrong_tool) == 0.5
    assert scores(wrong_tool, evaluation_params=args, should_consider_ordering=True) == 0.5
    assert scores(list(reversed(right)), should_consider_ordering=True) == 0.5
    assert scores(list(reversed(right))) == 1.0
    assert scores(wrong_tool, strict_mode=True) == 0.0


def test_repeated_calls_match_once_in_deepeval_and_by_position_with_compat_off() -> None:
    twice = [DeepEvalToolCall(name="search", input_parameters={"q": "x"})] * 2
    case = LLMTestCase(input="q", tools_called=list(twice), expected_tools=list(twice))
    theirs = deepeval_metrics.ToolCorrectnessMetric(model=_unused_model(), async_mode=False)
    theirs.measure(case, _show_indicator=False)
    assert theirs.score == 0.5  # DeepEval's oddity, kept by default
    assert ToolCorrectnessMetric().measure(case) == 0.5
    assert ToolCorrectnessMetric(compat=False).measure(case) == 1.0


def test_tool_correctness_has_deepevals_constructor_and_required_fields() -> None:
    theirs = inspect.signature(deepeval_metrics.ToolCorrectnessMetric.__init__).parameters
    ours = inspect.signature(ToolCorrectnessMetric.__init__).parameters
    assert list(ours)[: len(theirs)] == list(theirs)
    for name in (
        "threshold",
        "include_reason",
        "async_mode",
        "strict_mode",
        "verbose_mode",
        "should_exact_match",
        "should_consider_ordering",
        "flaky",
    ):
        assert ours[name].default == theirs[name].default, name
    assert list(ours["evaluation_params"].default) == theirs["evaluation_params"].default
    metric = ToolCorrectnessMetric()
    assert metric.__name__ == "Tool Correctness"
    assert metric.threshold == 0.5
    assert ToolCorrectnessMetric(strict_mode=True).threshold == 1.0
    missing = LLMTestCase(input="q", tools_called=[])
    with pytest.raises(MissingTestCaseParamsError) as ours_error:
        metric.measure(missing)
    deepevals = deepeval_metrics.ToolCorrectnessMetric(model=_unused_model())
    with pytest.raises(MissingTestCaseParamsError) as their_error:
        deepevals.measure(missing, _show_indicator=False)
    assert str(ours_error.value) == str(their_error.value)
    with pytest.raises(ValueError, match="available_tools= asks DeepEval's LLM judgement"):
        ToolCorrectnessMetric(available_tools=[DeepEvalToolCall(name="s")])
    with pytest.raises(ValueError, match="evaluation_params: 'args' is not one of"):
        ToolCorrectnessMetric(evaluation_params=["args"])


def test_tool_correctness_runs_inside_deepeval_evaluate_next_to_deepevals_own() -> None:
    rng = random.Random(7)
    cases = []
    while len(cases) < 6:
        case, _ = _random_case(rng)
        if all(c.input_parameters is not None for c in (case.tools_called or [])):
            cases.append(case.model_copy(update={"name": f"case-{len(cases)}"}))
    params = [ToolCallParams.OUTPUT]
    ours = ToolCorrectnessMetric(evaluation_params=params, should_consider_ordering=True)
    copy = copy_metrics([ours])[0]  # what evaluate does: the copy scores the same way
    assert isinstance(copy, ToolCorrectnessMetric)
    assert copy.metric is ours.metric
    judge = CountingJudge()
    theirs = deepeval_metrics.ToolCorrectnessMetric(
        model=DeepEvalJudge(judge), evaluation_params=params, should_consider_ordering=True
    )
    result = deepeval.evaluate(
        test_cases=cases,
        metrics=[ours, theirs],
        async_config=AsyncConfig(run_async=False),
        display_config=QUIET,
    )
    assert len(result.test_results) == len(cases)
    for test_result in result.test_results:
        mine, deepevals = test_result.metrics_data or []  # both are "Tool Correctness"
        assert mine.name == deepevals.name == "Tool Correctness"
        assert mine.error is None
        assert deepevals.error is None
        assert mine.score == deepevals.score
        assert mine.success == deepevals.success
    assert judge.calls == 0  # no judge: a deterministic metric


def test_the_measure_reads_a_sample_as_the_test_case_would() -> None:
    # scored on a ragbridge sample directly: the same number as the drop-in on its test case
    metric = ToolCorrectness(evaluation_params=["input_parameters", "output"])
    score = evaluate([AGENT], [metric]).get(AGENT.id, "tool_correctness")
    assert score is not None
    case_score = ToolCorrectnessMetric(
        evaluation_params=[ToolCallParams.INPUT_PARAMETERS, ToolCallParams.OUTPUT]
    ).measure(to_test_case(AGENT))
    # the first expected call wants the output "25 days": not what the step returned
    assert score.value == case_score == 0.5
    assert score.details == [
        {"expected": 0, "tool": "search_handbook", "called": None, "score": 0.0},
        {"expected": 1, "tool": "search_law", "called": 1, "score": 1.0},
    ]
    missing = evaluate([Sample(id="x", question="q")], [metric]).get("x", "tool_correctness")
    assert missing is not None
    assert missing.failure is not None
    failure = missing.failure
    assert "tool_correctness needs the sample's 'trajectory', which is None" in failure.message


# --------------------------------------------------------------------------- TaskCompletionMetric


def _goal_reply(messages: list[Message]) -> dict[str, Any]:
    """A judge that finds the weather requirement met only when the agent called the weather
    tool (a STEP block names it), the answer requirement when there is an ANSWER."""
    text = "\n".join(str(m.get("content", "")) for m in messages)
    called = bool(re.search(r"<<<BEGIN STEP \d+>>>\ntool: weather\n", text))
    return {
        "task": "report the weather in Paris",
        "outcome": "the agent answered",
        "requirements": [
            {"requirement": "look the weather up", "reason": "tool", "met": called},
            {"requirement": "tell the user", "reason": "answer", "met": "BEGIN ANSWER" in text},
        ],
        "goal_reason": "see requirements",
        "goal_achieved": called,
    }


WEATHER = LLMTestCase(
    input="What's the weather in Paris?",
    actual_output="Sunny, 20C.",
    tools_called=[
        DeepEvalToolCall(name="weather", input_parameters={"city": "Paris"}, output="sunny")
    ],
    expected_tools=[DeepEvalToolCall(name="weather")],
)


def test_task_completion_is_ragbridges_measure_from_one_judge_call() -> None:
    judge = ScriptedJudge({"agent.goal": _goal_reply})
    metric = TaskCompletionMetric(model=judge)
    assert metric.__name__ == "Task Completion"
    assert metric.measure(WEATHER) == 1.0
    assert len(judge.calls) == 1
    assert metric.reason is not None
    assert "2 of 2" in metric.reason
    # the same number ragbridge gives on the converted sample
    sample = from_test_case(WEATHER)
    score = evaluate([sample], ["task_completion"], judge=judge).get(sample.id, "task_completion")
    assert score is not None
    assert score.value == 1.0
    # a wrong tool call: the requirement it served is lost, the answer's is kept
    wrong = WEATHER.model_copy(
        update={"tools_called": [DeepEvalToolCall(name="web", input_parameters={"q": "Paris"})]}
    )
    assert TaskCompletionMetric(model=judge).measure(wrong) == 0.5
    assert TaskCompletionMetric(model=judge, strict_mode=True).measure(wrong) == 0.0


def test_task_completion_costs_one_call_where_deepevals_costs_two() -> None:
    ours, theirs = CountingJudge(), CountingJudge()
    TaskCompletionMetric(model=ours).measure(WEATHER)
    deepevals = deepeval_metrics.TaskCompletionMetric(model=DeepEvalJudge(theirs), async_mode=False)
    deepevals.measure(WEATHER, _show_indicator=False)
    assert (ours.calls, theirs.calls) == (1, 2)


def test_task_replaces_the_request_judged() -> None:
    judge = ScriptedJudge({"agent.goal": _goal_reply})
    TaskCompletionMetric(model=judge, task="Book a table for two").measure(WEATHER)
    prompt = "\n".join(str(m.get("content", "")) for m in judge.calls[0].messages)
    assert "Book a table for two" in prompt
    assert "What's the weather in Paris?" not in prompt


def test_task_completion_has_deepevals_constructor_and_checks() -> None:
    theirs = inspect.signature(deepeval_metrics.TaskCompletionMetric.__init__).parameters
    ours = inspect.signature(TaskCompletionMetric.__init__).parameters
    assert list(ours)[: len(theirs)] == list(theirs)
    for name in ("threshold", "task", "include_reason", "async_mode", "strict_mode", "flaky"):
        assert ours[name].default == theirs[name].default, name
    judge = CountingJudge()
    no_output = LLMTestCase(input="q", tools_called=[])
    with pytest.raises(MissingTestCaseParamsError) as ours_error:
        TaskCompletionMetric(model=judge).measure(no_output)
    with pytest.raises(MissingTestCaseParamsError) as their_error:
        deepeval_metrics.TaskCompletionMetric(model=DeepEvalJudge(judge)).measure(
            no_output, _show_indicator=False
        )
    assert str(ours_error.value) == str(their_error.value)
    assert judge.calls == 0
    with pytest.raises(ValueError, match="eval_mode="):
        TaskCompletionMetric(model=judge, eval_mode="system_one")


def test_task_completion_runs_inside_deepeval_evaluate() -> None:
    judge = ScriptedJudge({"agent.goal": _goal_reply})
    wrong = WEATHER.model_copy(
        update={"name": "wrong", "tools_called": [DeepEvalToolCall(name="web")]}
    )
    result = deepeval.evaluate(
        test_cases=[WEATHER.model_copy(update={"name": "right"}), wrong],
        metrics=[TaskCompletionMetric(model=judge, threshold=0.9), ToolCorrectnessMetric()],
        async_config=AsyncConfig(run_async=True),
        display_config=QUIET,
    )
    by_name = {r.name: {m.name: m for m in r.metrics_data or []} for r in result.test_results}
    assert by_name["right"]["Task Completion"].score == 1.0
    assert by_name["right"]["Task Completion"].success is True
    assert by_name["wrong"]["Task Completion"].score == 0.5
    assert by_name["wrong"]["Task Completion"].success is False
    assert by_name["right"]["Tool Correctness"].score == 1.0
    assert by_name["wrong"]["Tool Correctness"].score == 0.0
