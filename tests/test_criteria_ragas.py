"""RAGAS's ``AspectCritic`` and ``RubricsScore`` as drop-ins (issue 30): ``from
ragbridge.adapters.ragas import AspectCritic, RubricsScore`` in code written for ``from
ragas.metrics import ...``, run inside the real ``ragas.evaluate``.

RAGAS 0.4.3's constructors (names, order, defaults, the default rubric itself); the same code
giving the same columns as RAGAS's own classes on one scripted model; ``strictness`` as
self-consistency votes; what the judge sees decided row by row as RAGAS decides it, narrowed by
``required_columns=`` or ragbridge's ``reads=``; a field a criterion reads and the row lacks
refused before any call; the arguments refused; a LangChain fake chat model as the ``llm=``
RAGAS users pass. Offline: scripted judges behind RAGAS's model interface.

The last section runs RAGAS's own ``AspectCritic`` and ours on one counting judge: the way the
criteria cost benchmark compares prompt characters.
"""

from __future__ import annotations

import inspect
import json
import logging
import math
import re
import warnings
from pathlib import Path
from typing import Any

import pytest

ragas = pytest.importorskip("ragas")

from langchain_core.language_models.fake_chat_models import FakeListChatModel  # noqa: E402
from ragas import EvaluationDataset  # noqa: E402
from ragas import evaluate as ragas_evaluate  # noqa: E402
from ragas.llms import LangchainLLMWrapper  # noqa: E402
from ragas.metrics import AspectCritic as RagasAspectCritic  # noqa: E402
from ragas.metrics import RubricsScore as RagasRubricsScore  # noqa: E402
from ragas.metrics.base import MetricOutputType, MetricType  # noqa: E402

from ragbridge.adapters.ragas import (  # noqa: E402
    AspectCritic,
    RagasJudge,
    RagbridgeScoreError,
    RubricsScore,
)
from ragbridge.adapters.ragas import evaluate as ragbridge_ragas_evaluate  # noqa: E402
from ragbridge.core.judging.judge import Message  # noqa: E402
from ragbridge.core.results.evaluation import FailureKind  # noqa: E402
from ragbridge.core.sample import Sample  # noqa: E402
from ragbridge.core.testing import CountingJudge, ScriptedJudge, task_of  # noqa: E402

COURTEOUS = "Is the response courteous to the user?"
ROWS = [
    {
        "user_input": "Where is my parcel?",
        "response": "Thank you for waiting, please find the tracking link below. Zebra.",
        "retrieved_contexts": ["Parcels ship within two days."],
        "reference": "Give the tracking link politely.",
    },
    {"user_input": "Cancel my order.", "response": "No."},
]
LEVELS = {
    "score1_description": "Unusable.",
    "score2_description": "Poor.",
    "score3_description": "Fair.",
    "score4_description": "Good.",
    "score5_description": "Outstanding.",
}


@pytest.fixture(autouse=True)
def _hermetic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # RAGAS writes ~/.local/share/ragas; its telemetry is off (the adapter sets
    # RAGAS_DO_NOT_TRACK too). ragas.evaluate() is deprecated in 0.4.
    monkeypatch.setenv("RAGAS_DO_NOT_TRACK", "true")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    warnings.simplefilter("ignore", DeprecationWarning)


def dataset(rows: list[dict[str, Any]] = ROWS) -> Any:
    return EvaluationDataset.from_list(rows)


def _asked(messages: list[Message]) -> str:
    return "\n".join(m.get("content", "") for m in messages if m.get("role") != "system")


def _response(asked: str) -> str:
    """The row's response as either framework's prompt shows it: our ANSWER block, or the
    ``"response"`` of the input JSON in RAGAS's."""
    ours = re.search(r"<<<BEGIN ANSWER>>>\n(.*?)\n<<<END ANSWER>>>", asked, re.DOTALL)
    if ours is not None:
        return ours.group(1)
    theirs = re.findall(r'"response":\s*"((?:[^"\\]|\\.)*)"', asked)
    assert theirs, f"no response in {asked[:200]!r}"
    return str(theirs[-1])


def judged_by_the_response(messages: list[Message]) -> dict[str, Any]:
    """Both frameworks' aspect and rubric prompts, answered from the row's response: courteous
    when it says "please", level 5 when it says "Zebra", else level 2."""
    asked = _asked(messages)
    said = _response(asked)
    polite = "please" in said.lower()
    level = 5 if "Zebra" in said else 2
    task = task_of(messages)
    if task == "criteria.aspect":
        return {"reason": "scripted", "verdict": polite}
    if task == "criteria.rubric":
        return {"reason": "scripted", "level": level}
    if '"verdict"' in asked:  # RAGAS's AspectCritic prompt states its output schema
        return {"reason": "scripted", "verdict": int(polite)}
    if '"feedback"' in asked:  # RAGAS's RubricsScore prompt
        return {"feedback": "scripted", "score": level}
    raise AssertionError(f"unexpected prompt: {asked[:200]!r}")


def response_judge() -> ScriptedJudge:
    return ScriptedJudge({"*": judged_by_the_response})


def column(result: Any, name: str) -> list[float | None]:
    values = result.to_pandas()[name].tolist()
    return [None if isinstance(v, float) and math.isnan(v) else v for v in values]


def run(metrics: list[Any], judge: Any, rows: list[dict[str, Any]] = ROWS, **kwargs: Any) -> Any:
    return ragas_evaluate(
        dataset(rows), metrics=metrics, llm=RagasJudge(judge), show_progress=False, **kwargs
    )


# --------------------------------------------------------------------------- 1. the constructors


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [(AspectCritic, RagasAspectCritic), (RubricsScore, RagasRubricsScore)],
    ids=["AspectCritic", "RubricsScore"],
)
def test_counterparts_take_ragas_arguments_in_ragas_order_and_defaults(
    ours: type, theirs: type
) -> None:
    want = inspect.signature(theirs.__init__).parameters
    got = inspect.signature(ours.__init__).parameters
    assert list(got)[: len(want)] == list(want)
    for name, param in want.items():
        assert got[name].default is param.default or got[name].default == param.default, name
    assert ours.__name__ == theirs.__name__


def test_the_one_line_change_gives_the_same_columns_as_ragas_own() -> None:
    """The same code and the same scripted model: RAGAS's classes and ours fill the same
    columns with the same values (an aspect's 0/1, a rubric's level)."""
    values = {}
    for label, critic, rubric in (
        ("ragas", RagasAspectCritic, RagasRubricsScore),
        ("ours", AspectCritic, RubricsScore),
    ):
        metrics = [
            critic(name="courtesy", definition=COURTEOUS),
            rubric(rubrics=LEVELS),
        ]
        result = run(metrics, response_judge())
        values[label] = (column(result, "courtesy"), column(result, "domain_specific_rubrics"))
    assert values["ours"] == values["ragas"] == ([1, 0], [5, 2])


def test_default_rubric_is_ragas_reference_free_rubric() -> None:
    judge = response_judge()
    run([RubricsScore()], judge, rows=ROWS[:1])
    from ragas.metrics._domain_specific_rubrics import DEFAULT_REFERENCE_FREE_RUBRICS

    prompt = _asked(judge.calls[0].messages)
    for text in DEFAULT_REFERENCE_FREE_RUBRICS.values():
        assert text in prompt


def test_names_are_the_columns_and_the_output_types_ragas() -> None:
    critic = AspectCritic(name="tone of voice", definition=COURTEOUS)
    rubric = RubricsScore(name="helpfulness", rubrics=LEVELS)
    assert (critic.name, critic.spec.name) == ("tone of voice", "tone_of_voice")
    assert (rubric.name, rubric.spec.name) == ("helpfulness", "helpfulness")
    assert critic.output_type is MetricOutputType.BINARY
    assert rubric.output_type is MetricOutputType.DISCRETE
    assert critic.definition == COURTEOUS
    result = run([critic, rubric], response_judge())
    assert list(result.to_pandas().columns)[-2:] == ["tone of voice", "helpfulness"]


# --------------------------------------------------------------------------- 2. values


def test_strictness_is_self_consistency_votes_with_the_share_in_details() -> None:
    votes = iter([True, False, True] * 2)

    def vote(messages: list[Message]) -> dict[str, Any]:
        return {"reason": "vote", "verdict": next(votes)}

    judge = ScriptedJudge({"criteria.aspect": vote})
    critic = AspectCritic(name="courtesy", definition=COURTEOUS, strictness=2)
    assert critic.strictness == RagasAspectCritic("x", "y", strictness=2).strictness == 3
    result = ragbridge_ragas_evaluate(
        dataset(), metrics=[critic], llm=RagasJudge(judge), show_progress=False
    )
    assert column(result, "courtesy") == [1, 1]
    assert judge.tasks() == ["criteria.aspect"] * 6  # three distinct requests per row
    details = result.ragbridge_scores[0]["courtesy"].details
    assert details["votes"] == [True, False, True]
    assert details["vote_share"] == pytest.approx(2 / 3)


def test_the_rubric_level_is_the_column_and_the_ragbridge_score_is_on_0_1() -> None:
    result = ragbridge_ragas_evaluate(
        dataset(), metrics=[RubricsScore(rubrics=LEVELS)], llm=RagasJudge(response_judge())
    )
    assert column(result, "domain_specific_rubrics") == [5, 2]
    scores = [row["domain_specific_rubrics"] for row in result.ragbridge_scores]
    assert [s.value for s in scores] == [1.0, 0.25]
    assert [s.details["level"] for s in scores] == [5, 2]
    assert scores[1].details["description"] == "Poor."


def test_a_langchain_fake_chat_model_as_ragas_llm_judges_the_counterparts() -> None:
    replies = [json.dumps({"reason": "courteous", "verdict": True})]
    llm = LangchainLLMWrapper(FakeListChatModel(responses=replies))
    critic = AspectCritic(name="courtesy", definition=COURTEOUS)
    result = ragas_evaluate(dataset(ROWS[:1]), metrics=[critic], llm=llm, show_progress=False)
    assert column(result, "courtesy") == [1]


# --------------------------------------------------------------------------- 3. what the judge sees


def _blocks(judge: ScriptedJudge) -> list[set[str]]:
    return [
        set(re.findall(r"<<<BEGIN ([A-Z]+)(?: \d+)?>>>", _asked(c.messages)))
        - {"DEFINITION", "RUBRIC"}
        for c in judge.calls
    ]


def test_by_default_each_row_shows_the_fields_it_has_as_ragas_does() -> None:
    judge = response_judge()
    run([AspectCritic(name="courtesy", definition=COURTEOUS)], judge)
    assert sorted(map(sorted, _blocks(judge))) == [
        ["ANSWER", "CONTEXT", "QUESTION", "REFERENCE"],
        ["ANSWER", "QUESTION"],
    ]


def test_reads_names_the_fields_outright() -> None:
    judge = response_judge()
    critic = AspectCritic(name="courtesy", definition=COURTEOUS, reads=("question", "answer"))
    run([critic], judge)
    assert _blocks(judge) == [{"QUESTION", "ANSWER"}] * 2
    assert critic.required_columns["SINGLE_TURN"] == {"user_input", "response"}


def test_required_columns_narrow_and_require_as_for_ragas() -> None:
    judge = response_judge()
    columns = {MetricType.SINGLE_TURN: {"user_input", "response", "reference:optional"}}
    rubric = RubricsScore(rubrics=LEVELS, required_columns=columns)
    result = run([rubric], judge)
    assert column(result, "domain_specific_rubrics") == [5, 2]
    assert sorted(map(sorted, _blocks(judge))) == [
        ["ANSWER", "QUESTION"],
        ["ANSWER", "QUESTION", "REFERENCE"],
    ]


def test_a_field_read_and_missing_is_refused_before_any_call() -> None:
    judge = response_judge()
    critic = AspectCritic(name="courtesy", definition=COURTEOUS, reads=("answer", "reference"))
    result = ragbridge_ragas_evaluate(
        dataset(), metrics=[critic], llm=RagasJudge(judge), show_progress=False
    )
    assert column(result, "courtesy") == [1, None]
    failure = result.failures[1]["courtesy"]
    assert failure.kind is FailureKind.MISSING_INPUT
    assert "'reference'" in failure.message
    assert len(judge.calls) == 1  # the first row only
    with pytest.raises(RagbridgeScoreError, match="'reference'"):
        run([critic], response_judge(), raise_exceptions=True)
    # a dataset without the column at all: RAGAS's own check of required columns refuses it
    judge = response_judge()
    with pytest.raises(
        ValueError, match=r"requires the following additional columns \['reference'\]"
    ):
        run([critic], judge, rows=ROWS[1:])
    assert judge.calls == []


def test_reference_contexts_are_not_shown_and_the_log_says_so_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    rows = [{**row, "reference_contexts": ["A reference passage."]} for row in ROWS]
    judge = response_judge()
    with caplog.at_level(logging.WARNING, logger="ragbridge.adapters.ragas.criteria"):
        run([AspectCritic(name="courtesy", definition=COURTEOUS)], judge, rows=rows)
    said = [r.message for r in caplog.records if "reference_contexts" in r.message]
    assert len(said) == 1
    assert all("A reference passage." not in _asked(c.messages) for c in judge.calls)


def test_a_dry_run_plans_the_calls_of_the_rows_shape() -> None:
    critic = AspectCritic(name="courtesy", definition=COURTEOUS, strictness=3)
    planned = critic.criterion.plan(Sample(id="s", question="Where?", answer="Here."))
    assert [c.template_id for c in planned] == ["criteria.aspect"] * 3
    assert len({c.prompt_chars for c in planned}) == 1  # the same prompt, three draws
    wider = critic.criterion.plan(Sample(id="s", question="Where?", answer="Here.", reference="R"))
    assert wider[0].prompt_chars > planned[0].prompt_chars  # the row's reference is shown


# --------------------------------------------------------------------------- 4. refusals


@pytest.mark.parametrize(
    ("make", "error", "words"),
    [
        (lambda: RubricsScore(rubrics={"excellent": "x", "poor": "y"}), ValueError, "excellent"),
        (
            lambda: RubricsScore(rubrics={"score1_description": "a", "score3_description": "b"}),
            ValueError,
            "consecutive",
        ),
        (
            lambda: AspectCritic("c", COURTEOUS, single_turn_prompt=object()),
            ValueError,
            "custom RAGAS prompt",
        ),
        (
            lambda: AspectCritic(
                "c", COURTEOUS, reads=("answer",), required_columns={MetricType.SINGLE_TURN: set()}
            ),
            TypeError,
            "pass one",
        ),
        (
            lambda: AspectCritic(
                "c", COURTEOUS, required_columns={MetricType.SINGLE_TURN: {"reference_contexts"}}
            ),
            ValueError,
            "reference_contexts",
        ),
        (lambda: AspectCritic("c", COURTEOUS, reads=("answr",)), ValueError, "answr"),
        (lambda: AspectCritic("c", COURTEOUS, strictness=0), ValueError, "strictness"),
        (lambda: AspectCritic("c", "  "), ValueError, "definition"),
    ],
    ids=[
        "rubric-keys",
        "rubric-gap",
        "prompt",
        "reads-and-columns",
        "unshowable-column",
        "unknown-field",
        "strictness",
        "blank-definition",
    ],
)
def test_arguments_that_would_change_the_measure_are_refused(
    make: Any, error: type[Exception], words: str
) -> None:
    with pytest.raises(error) as info:
        make()
    assert words in str(info.value)


# --------------------------------------------------------------------------- 5. one counting judge


def test_ragas_aspect_critic_and_ours_run_on_one_counting_judge() -> None:
    """How the cost benchmark compares them: RAGAS's AspectCritic and ours in one
    ``ragas.evaluate`` on one counting judge (RAGAS's through `RagasJudge`); every prompt
    character is counted where the judge receives it."""
    rows = [{**row, "user_input": f"{row['user_input']} ({i})"} for i in range(2) for row in ROWS]
    theirs_judge, ours_judge = CountingJudge(), CountingJudge()
    run([RagasAspectCritic(name="courtesy", definition=COURTEOUS)], theirs_judge, rows=rows)
    run([AspectCritic(name="courtesy", definition=COURTEOUS)], ours_judge, rows=rows)
    assert theirs_judge.calls == ours_judge.calls == len(rows)  # one verdict per row each
    assert theirs_judge.by_task == {None: len(rows)}
    assert ours_judge.by_task == {"criteria.aspect": len(rows)}
    for judge, messages in ((theirs_judge, 1), (ours_judge, 2)):
        tokens = 4 * judge.prompt_tokens
        assert tokens <= judge.prompt_chars < tokens + 4 * messages * judge.calls
