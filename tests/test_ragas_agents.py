"""RAGAS's tool-call metrics (issue 32, the RAGAS sink), against real ragas 0.4.3 offline:
`ToolCallAccuracy` and `ToolCallF1` from ``ragbridge.adapters.ragas`` take RAGAS's constructor
arguments, score ``multi_turn_ascore(sample)`` with ragbridge's core measures and give RAGAS's
own values on the same samples (random ones, every argument comparison), run inside
``ragas.evaluate`` on an ``EvaluationDataset`` of ``MultiTurnSample``s next to RAGAS's own, and
a wrong tool call lowers exactly what it should. A conversation written by
`to_multi_turn_sample` scores as the conversation's answering turn does in ragbridge.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

ragas = pytest.importorskip("ragas")

from ragas.dataset_schema import EvaluationDataset, MultiTurnSample  # noqa: E402
from ragas.messages import AIMessage, HumanMessage, ToolMessage  # noqa: E402
from ragas.messages import ToolCall as RagasToolCall  # noqa: E402
from ragas.metrics._string import (  # noqa: E402
    DistanceMeasure,
    ExactMatch,
    NonLLMStringSimilarity,
    StringPresence,
)
from ragas.metrics._tool_call_accuracy import ToolCallAccuracy as RagasAccuracy  # noqa: E402
from ragas.metrics._tool_call_f1 import ToolCallF1 as RagasF1  # noqa: E402
from ragas.metrics.base import MultiTurnMetric  # noqa: E402

from ragbridge.adapters.ragas import (  # noqa: E402
    RagbridgeScoreError,
    ToolCallAccuracy,
    ToolCallF1,
    evaluate,
    to_multi_turn_sample,
)
from ragbridge.adapters.ragas.agent_metrics import agent_sample  # noqa: E402
from ragbridge.core import Conversation, ToolCall, Turn  # noqa: E402
from ragbridge.core import evaluate as ragbridge_evaluate  # noqa: E402

THRESHOLD = 0.6


@pytest.fixture(autouse=True)
def _hermetic(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("RAGAS_DO_NOT_TRACK", "true")
    monkeypatch.setenv("HOME", str(tmp_path))  # RAGAS writes ~/.local/share/ragas
    monkeypatch.chdir(tmp_path)
    with warnings.catch_warnings():
        # RAGAS warns on every length mismatch and on its deprecated legacy metrics
        warnings.simplefilter("ignore")
        yield


def _score(metric: MultiTurnMetric, sample: MultiTurnSample) -> float:
    return float(asyncio.run(metric.multi_turn_ascore(sample)))


def _call(name: str, **args: Any) -> RagasToolCall:
    return RagasToolCall(name=name, args=args)


def _agent(*turns: list[RagasToolCall], expected: list[RagasToolCall] | None) -> MultiTurnSample:
    """A sample as RAGAS's docs build one: the question, an AI message per list of calls (each
    answered by a tool message), then the answer."""
    messages: list[Any] = [HumanMessage(content="Weather and time in Paris?")]
    for calls in turns:
        messages.append(AIMessage(content="", tool_calls=calls))
        messages += [ToolMessage(content=f"{c.name} says ok") for c in calls]
    messages.append(AIMessage(content="Rainy, and it is ten."))
    return MultiTurnSample(user_input=messages, reference_tool_calls=expected)


# --------------------------------------------------------------------------- RAGAS's values


class _Thresholded(NonLLMStringSimilarity):
    """RAGAS's string similarity made pass/fail at `THRESHOLD`, as a RAGAS user writes it
    (RAGAS has no threshold of its own): what ragbridge's ``threshold=`` means."""

    async def _single_turn_ascore(self, sample: Any, callbacks: Any) -> float:
        score = await super()._single_turn_ascore(sample, callbacks)
        return float(score >= THRESHOLD)


def _random_sample(rng: random.Random) -> MultiTurnSample:
    values = ["paris", "Paris", "pari", "london", 1, "1", True, {"n": 1}, [1, 2]]

    def call() -> RagasToolCall:
        keys = rng.sample(["city", "unit", "day"], rng.randint(0, 2))
        return RagasToolCall(name=rng.choice("abc"), args={k: rng.choice(values) for k in keys})

    turns = [[call() for _ in range(rng.randint(1, 2))] for _ in range(rng.randint(0, 3))]
    if turns and rng.random() < 0.3:
        turns.append(list(turns[0]))  # the same calls again
    expected = [call() for _ in range(rng.randint(0, 3))]
    if turns and rng.random() < 0.6:  # often near what was expected, so pairs are compared
        expected = [c for calls in turns for c in calls]
        for k, c in enumerate(expected):
            if c.args and rng.random() < 0.5:  # one argument's value changed
                key = rng.choice(sorted(c.args))
                expected[k] = RagasToolCall(name=c.name, args={**c.args, key: rng.choice(values)})
        if rng.random() < 0.5:
            rng.shuffle(expected)
    return _agent(*turns, expected=expected)


_LEVENSHTEIN = DistanceMeasure.LEVENSHTEIN
# (label, RAGAS's argument comparison, ragbridge's drop-in arguments for the same)
_COMPARISONS: list[tuple[str, Any, Any]] = [
    ("exact", ExactMatch, lambda: {}),
    *[
        (
            d.value,
            lambda d=d: NonLLMStringSimilarity(distance_measure=d),
            lambda d=d: {"arg_comparison_metric": NonLLMStringSimilarity(distance_measure=d)},
        )
        for d in DistanceMeasure
    ],
    (
        "thresholded",
        lambda: _Thresholded(distance_measure=_LEVENSHTEIN),
        lambda: {
            "arg_comparison_metric": NonLLMStringSimilarity(distance_measure=_LEVENSHTEIN),
            "threshold": THRESHOLD,
        },
    ),
]


@pytest.mark.parametrize(
    ("label", "theirs", "ours"), _COMPARISONS, ids=[c[0] for c in _COMPARISONS]
)
def test_tool_call_accuracy_is_ragas_value_on_random_samples(
    label: str, theirs: Any, ours: Any
) -> None:
    rng = random.Random(f"accuracy-{label}")
    for _ in range(120):
        sample = _random_sample(rng)
        strict = rng.random() < 0.5
        ragas_metric = RagasAccuracy(strict_order=strict, arg_comparison_metric=theirs())
        mine = ToolCallAccuracy(strict_order=strict, **ours())
        assert _score(mine, sample) == _score(ragas_metric, sample), (sample, strict)


def test_tool_call_f1_is_ragas_value_on_random_samples() -> None:
    rng = random.Random("f1")
    for _ in range(300):
        sample = _random_sample(rng)
        assert _score(ToolCallF1(), sample) == _score(RagasF1(), sample), sample


def test_the_constructors_are_ragas() -> None:
    for ours, theirs in ((ToolCallAccuracy, RagasAccuracy), (ToolCallF1, RagasF1)):
        assert issubclass(ours, MultiTurnMetric)
        mine = {f.name: f for f in dataclasses.fields(ours)}
        for field in dataclasses.fields(theirs):
            assert field.name in mine, field.name
            assert mine[field.name].default == field.default, field.name
        assert ours().required_columns == theirs().required_columns
        assert ours().name == theirs().name
    assert ToolCallAccuracy(name="acc", strict_order=False).name == "acc"
    assert isinstance(ToolCallAccuracy().arg_comparison_metric, ExactMatch)
    with pytest.raises(ValueError, match=r"arg_comparison_metric=StringPresence\(...\)"):
        ToolCallAccuracy(arg_comparison_metric=StringPresence())
    with pytest.raises(ValueError, match="compat must be one of"):
        ToolCallF1(compat="deepeval")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- inside ragas.evaluate


def test_inside_ragas_evaluate_next_to_ragas_own_metrics() -> None:
    rng = random.Random("evaluate")
    samples = [_random_sample(rng) for _ in range(8)]
    result = ragas.evaluate(
        EvaluationDataset(samples=samples),
        metrics=[
            ToolCallAccuracy(),
            ToolCallF1(),
            RagasAccuracy(name="ragas_accuracy"),
            RagasF1(name="ragas_f1"),
        ],
        show_progress=False,
    )
    table = result.to_pandas()
    assert list(table["tool_call_accuracy"]) == list(table["ragas_accuracy"])
    assert list(table["tool_call_f1"]) == list(table["ragas_f1"])
    assert set(table["tool_call_accuracy"]) != {0.0}  # not trivially equal


def test_a_sample_without_reference_calls_is_a_typed_failure_not_a_number() -> None:
    good = _agent([_call("weather", city="Paris")], expected=[_call("weather", city="Paris")])
    bare = _agent([_call("weather", city="Paris")], expected=None)
    with pytest.raises(RagbridgeScoreError, match="needs the sample's 'reference_tool_calls'"):
        _score(ToolCallAccuracy(), bare)
    result = evaluate(
        EvaluationDataset(samples=[good, bare]), metrics=[ToolCallAccuracy()], show_progress=False
    )
    assert result.to_pandas()["tool_call_accuracy"][0] == 1.0
    failure = result.failures[1]["tool_call_accuracy"]
    assert failure.kind.value == "missing_input"


# --------------------------------------------------------------------------- a wrong call's cost

RIGHT = [_call("weather", city="Paris", unit="C"), _call("clock", city="Paris")]


@pytest.mark.parametrize(
    ("made", "accuracy", "f1", "why"),
    [
        (RIGHT, 1.0, 1.0, "as expected"),
        (
            [_call("weather", city="Paris", unit="F"), RIGHT[1]],
            0.75,
            0.5,
            "one argument of one call wrong: that call's arguments half right; F1 misses it",
        ),
        (
            [RIGHT[0], _call("web", city="Paris")],
            0.0,
            0.5,
            "a wrong tool: the sequences differ, RAGAS's accuracy is 0; F1 loses one call",
        ),
        (list(reversed(RIGHT)), 0.0, 1.0, "swapped: strict order fails, F1 does not care"),
        ([*RIGHT, RIGHT[0]], 0.0, 1.0, "a call repeated: RAGAS's sets count it once"),
    ],
    ids=["right", "wrong-argument", "wrong-tool", "swapped", "repeated"],
)
def test_a_wrong_tool_call_lowers_exactly_what_it_should(
    made: list[RagasToolCall], accuracy: float, f1: float, why: str
) -> None:
    sample = _agent(made, expected=RIGHT)
    assert _score(ToolCallAccuracy(), sample) == accuracy == _score(RagasAccuracy(), sample), why
    assert _score(ToolCallF1(), sample) == f1 == _score(RagasF1(), sample), why


def test_compat_ragbridge_prices_an_extra_or_missing_call_instead_of_zeroing() -> None:
    extra = _agent([*RIGHT, _call("web", q="x")], expected=RIGHT)
    assert _score(ToolCallAccuracy(), extra) == 0.0  # RAGAS: any extra call scores 0
    assert _score(ToolCallAccuracy(compat="ragbridge"), extra) == pytest.approx(2 / 3)
    repeated = _agent([*RIGHT, RIGHT[0]], expected=RIGHT)
    assert _score(ToolCallF1(compat="ragbridge"), repeated) == pytest.approx(0.8)
    swapped = _agent(list(reversed(RIGHT)), expected=RIGHT)
    assert _score(ToolCallAccuracy(compat="ragbridge", strict_order=False), swapped) == 1.0


# --------------------------------------------------------------------------- from a conversation

AGENT_CHAT = Conversation(
    id="paris",
    turns=[
        Turn(role="user", content="Weather and time in Paris?"),
        Turn(
            role="assistant",
            tool_calls=[
                ToolCall(name="weather", args={"city": "Paris", "unit": "C"}, id="k1"),
                ToolCall(name="web", args={"city": "Paris"}, id="k2"),
            ],
        ),
        Turn(role="tool", content="Rain, 12C.", tool_call_id="k1"),
        Turn(role="tool", content="It is ten.", tool_call_id="k2"),
        Turn(
            role="assistant",
            content="Rainy and 12C; it is ten.",
            reference_tool_calls=[
                ToolCall(name="weather", args={"city": "Paris", "unit": "C"}),
                ToolCall(name="clock", args={"city": "Paris"}),
            ],
        ),
    ],
)


def test_a_conversation_scores_as_its_answering_turn_does_in_ragbridge() -> None:
    sample = to_multi_turn_sample(AGENT_CHAT)
    assert sample.reference_tool_calls == [
        _call("weather", city="Paris", unit="C"),
        _call("clock", city="Paris"),
    ]
    turn = AGENT_CHAT.turn_sample(4)
    assert turn.trajectory is not None
    assert [s.name for s in turn.trajectory] == ["weather", "web"]
    core = ragbridge_evaluate(
        [turn],
        ["tool_call_accuracy", "tool_call_f1"],
    )
    for ours, name in (
        (ToolCallAccuracy(compat="ragbridge"), "tool_call_accuracy"),
        (ToolCallF1(compat="ragbridge"), "tool_call_f1"),
    ):
        score = core.get(turn.id, name)
        assert score is not None
        assert _score(ours, sample) == score.value
    # the wrong second call costs half in both measures, RAGAS's accuracy all of it
    assert _score(ToolCallAccuracy(compat="ragbridge"), sample) == 0.5
    assert _score(ToolCallF1(), sample) == 0.5
    assert _score(ToolCallAccuracy(), sample) == 0.0 == _score(RagasAccuracy(), sample)


def test_agent_sample_reads_what_ragas_reads() -> None:
    sample = _agent([RIGHT[0]], [RIGHT[1]], expected=RIGHT)
    read = agent_sample(sample)
    assert read.question == "Weather and time in Paris?"
    assert read.trajectory is not None
    assert [(s.name, s.args) for s in read.trajectory] == [(c.name, c.args) for c in RIGHT]
    assert read.reference_tool_calls == [ToolCall(name=c.name, args=c.args) for c in RIGHT]
    assert agent_sample(_agent(expected=None)).reference_tool_calls is None
