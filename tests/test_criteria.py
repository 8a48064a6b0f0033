"""A team's own criteria (issue 30): the specs' checks, and each kind scored by its own call."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ragbridge.core.criteria import Aspect, Criterion, Rubric, criteria_metrics
from ragbridge.core.criteria.spec import FIELD_NAMES, Levels
from ragbridge.core.judging.engine import JudgeEngine
from ragbridge.core.metrics import Metric, MetricContext
from ragbridge.core.results.evaluation import FailureKind, Score
from ragbridge.core.sample import Sample
from ragbridge.core.testing import ScriptedJudge

SAMPLE = Sample(
    id="s1",
    question="How long is the refund window?",
    answer="You can get a refund within 30 days (policy RF-12).",
    contexts=["Refunds: 30 days from delivery (policy RF-12).", "Shipping takes 3 days."],
    reference="30 days.",
    metadata={"ticket": "T-881", "tier": "gold"},
)

SCRIPT: dict[str, Any] = {
    "criteria.steps": {"steps": ["Find the policy number.", "Check it matches the context."]},
    "criteria.score": {"reason": "Cites RF-12.", "score": 4},
    "criteria.aspect": {"reason": "It names RF-12.", "verdict": True},
    "criteria.rubric": {"reason": "Complete and cited.", "level": 5},
}


def make(script: dict[str, Any] | None = None) -> tuple[ScriptedJudge, MetricContext]:
    judge = ScriptedJudge(script or SCRIPT)
    return judge, MetricContext(judge=JudgeEngine(judge, max_retries=0, timeout=None))


def score(metric: Metric, sample: Sample, ctx: MetricContext) -> Score:
    return asyncio.run(metric.score(sample, ctx))


# -------------------------------------------------------------------- specs


def test_field_names_are_the_documented_four() -> None:
    assert FIELD_NAMES == ("question", "answer", "contexts", "reference")


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: Criterion("1bad", "x"), "name"),
        (lambda: Criterion("has space", "x"), "name"),
        (lambda: Criterion("ok", "   "), "criteria"),
        (lambda: Criterion("ok", "x", scale=(5, 1)), "scale"),
        (lambda: Criterion("ok", "x", scale=(1, 1)), "scale"),
        (lambda: Criterion("ok", "x", scale=(1.0, 5)), "scale"),  # type: ignore[arg-type]
        (lambda: Criterion("ok", "x", scale=(0, 1000)), "scale"),
        (lambda: Criterion("ok", "x", reads=("answr",)), "reads"),
        (lambda: Criterion("ok", "x", reads=()), "reads"),
        (lambda: Criterion("ok", "x", reads=("metadata.",)), "reads"),
        (lambda: Criterion("ok", "x", threshold=1.5), "threshold"),
        (lambda: Criterion("ok", "x", threshold=True), "threshold"),
        (lambda: Criterion("ok", "x", evaluation_steps=()), "evaluation_steps"),
        (lambda: Criterion("ok", "x", evaluation_steps="one step"), "evaluation_steps"),  # type: ignore[arg-type]
        (lambda: Criterion("ok", "x", evaluation_steps=("a", " ")), "evaluation_steps[1]"),
        (lambda: Criterion("ok", "x", higher_is_better="yes"), "higher_is_better"),  # type: ignore[arg-type]
        (lambda: Aspect("ok", ""), "definition"),
        (lambda: Aspect("ok", "x", samples=0), "samples"),
        (lambda: Aspect("ok", "x", samples=99), "samples"),
        (lambda: Rubric("ok", {1: "a"}), "rubrics"),
        (lambda: Rubric("ok", {1: "a", 3: "c"}), "rubrics"),
        (lambda: Rubric("ok", {1: "a", 2: ""}), "rubrics[2]"),
        (lambda: Rubric("ok", {"one": "a", 2: "b"}), "rubrics"),  # type: ignore[dict-item]
    ],
)
def test_a_bad_spec_is_refused_naming_the_field(build: Any, field: str) -> None:
    with pytest.raises(ValueError, match=rf": {field.replace('[', '.').replace(']', '.')}: "):
        build()


def test_specs_are_normalised_hashable_and_compare_by_value() -> None:
    c = Criterion(
        "cites",
        "  Cites the policy.  ",
        evaluation_steps=["Find it."],  # type: ignore[arg-type]
        reads=["reference", "metadata.ticket", "answer"],  # type: ignore[arg-type]
        scale=[0, 10],  # type: ignore[arg-type]
    )
    assert c.criteria == "Cites the policy."
    assert c.evaluation_steps == ("Find it.",)
    assert c.reads == ("answer", "reference", "metadata.ticket")
    assert c.scale == (0, 10)
    assert c.meaning == "Cites the policy."
    assert hash(c) == hash(Criterion("cites", "Cites the policy.", ("Find it.",), c.reads, (0, 10)))
    r = Rubric("depth", {"2": "ok", "1": "bad"})  # type: ignore[dict-item]
    assert isinstance(r.rubrics, Levels)
    assert list(r.rubrics.items()) == [(1, "bad"), (2, "ok")]
    assert r.scale == (1, 2)
    assert r == Rubric("depth", {1: "bad", 2: "ok"})
    assert hash(r) == hash(Rubric("depth", {1: "bad", 2: "ok"}))
    assert Aspect("a", "x").scale == (0, 1)


def test_meaning_defaults_to_one_short_line_of_the_criterion() -> None:
    long = "Word " * 40
    assert len(Criterion("c", long).meaning) == 80
    assert Criterion("c", "x", meaning=" Given   here ").meaning == "Given here"


def test_criteria_metrics_names_kinds_and_unique_names() -> None:
    specs = [Criterion("a", "x"), Aspect("b", "y"), Rubric("c", {1: "p", 2: "q"})]
    metrics = criteria_metrics(specs)
    assert [m.name for m in metrics] == ["a", "b", "c"]
    assert specs[0].metric().name == "a"
    assert type(specs[0].metric()) is type(metrics[0])  # one class per spec
    with pytest.raises(ValueError, match="two criteria are named 'a'"):
        criteria_metrics([Criterion("a", "x"), Aspect("a", "y")])


def test_the_class_declares_what_it_reads_and_requires() -> None:
    metric = criteria_metrics([Aspect("a", "x", reads=("contexts", "metadata.ticket"))])[0]
    assert type(metric).reads == ("contexts", "metadata.ticket")
    assert metric.requires == ("contexts",)
    lower = criteria_metrics([Aspect("harm", "x", higher_is_better=False)])[0]
    assert lower.higher_is_better is False


# -------------------------------------------------------------------- separate calls


def test_scored_criterion_generates_steps_then_scores() -> None:
    judge, ctx = make()
    s = score(Criterion("cites", "Does the answer cite the policy number?").metric(), SAMPLE, ctx)
    assert s.failure is None
    assert s.value == pytest.approx(0.75)  # (4 - 1) / (5 - 1)
    assert s.reason == "Cites RF-12."
    assert judge.tasks() == ["criteria.steps", "criteria.score"]
    assert s.usage.calls == 2
    details = s.details
    assert isinstance(details, dict)
    assert details["kind"] == "criterion"
    assert details["raw"] == 4
    assert details["scale"] == [1, 5]
    assert details["weighting"] == "integer"
    assert details["steps"] == SCRIPT["criteria.steps"]["steps"]
    assert details["steps_source"] == "generated"
    assert len(details["steps_version"]) == 12
    assert s.prompt_version == (
        f"criteria.steps@1+criteria.score@1+steps@{details['steps_version']}"
    )
    user = judge.calls[1].messages[1]["content"]
    assert "<<<BEGIN STEPS>>>\n1. Find the policy number.\n2. Check it matches" in user
    assert '"score":1|2|3|4|5' in user


def test_given_steps_make_no_steps_call() -> None:
    judge, ctx = make()
    spec = Criterion("cites", "Cites the policy?", evaluation_steps=("Look for RF-.",))
    s = score(spec.metric(), SAMPLE, ctx)
    assert judge.tasks() == ["criteria.score"]
    assert isinstance(s.details, dict)
    assert s.details["steps_source"] == "given"
    assert s.details["steps"] == ["Look for RF-."]


def test_a_custom_scale_is_normalised_and_shown_to_the_judge() -> None:
    judge, ctx = make({**SCRIPT, "criteria.score": {"reason": "r", "score": 7}})
    spec = Criterion("c", "x", evaluation_steps=("s",), scale=(0, 10))
    s = score(spec.metric(), SAMPLE, ctx)
    assert s.value == pytest.approx(0.7)
    assert '"score":0|1|2|3|4|5|6|7|8|9|10' in judge.calls[0].messages[1]["content"]


def test_a_score_outside_the_scale_is_never_scored() -> None:
    _, ctx = make({**SCRIPT, "criteria.score": {"reason": "r", "score": 9}})
    s = score(Criterion("c", "x", evaluation_steps=("s",)).metric(), SAMPLE, ctx)
    assert s.value is None
    assert s.failure is not None
    assert s.failure.kind == FailureKind.PARSE_ERROR


@pytest.mark.parametrize("verdict", [True, False])
def test_aspect_single_verdict(verdict: bool) -> None:
    judge, ctx = make({"criteria.aspect": {"reason": "because", "verdict": verdict}})
    s = score(Aspect("cites", "The answer cites a policy number.").metric(), SAMPLE, ctx)
    assert s.value == (1.0 if verdict else 0.0)
    assert s.reason == "because"
    assert judge.tasks() == ["criteria.aspect"]
    assert isinstance(s.details, dict)
    assert s.details["verdict"] is verdict
    assert s.details["votes"] == [verdict]
    assert s.details["vote_share"] == 1.0
    assert s.prompt_version is not None
    assert s.prompt_version.startswith("criteria.aspect@1+spec@")


def test_rubric_level_is_normalised_over_its_levels() -> None:
    judge, ctx = make({"criteria.rubric": {"reason": "fine", "level": 3}})
    spec = Rubric("depth", {1: "none", 2: "some", 3: "most", 4: "all"})
    s = score(spec.metric(), SAMPLE, ctx)
    assert s.value == pytest.approx(2 / 3)
    assert isinstance(s.details, dict)
    assert s.details["level"] == 3
    assert s.details["description"] == "most"
    user = judge.calls[0].messages[1]["content"]
    assert "<<<BEGIN RUBRIC>>>\n1: none\n2: some\n3: most\n4: all\n<<<END RUBRIC>>>" in user
    assert '"level":1|2|3|4' in user


def test_rubric_with_and_without_reference() -> None:
    judge, ctx = make({"criteria.rubric": {"reason": "r", "level": 1}})
    levels = {1: "wrong", 2: "right"}
    score(Rubric("plain", levels).metric(), SAMPLE, ctx)
    score(Rubric("ref", levels, reads=("question", "answer", "reference")).metric(), SAMPLE, ctx)
    without, with_ref = (c.messages[1]["content"] for c in judge.calls)
    assert "<<<BEGIN REFERENCE>>>" not in without
    assert "<<<BEGIN REFERENCE>>>\n30 days.\n<<<END REFERENCE>>>" in with_ref
    lacking = SAMPLE.model_copy(update={"reference": None})
    s = score(Rubric("ref", levels, reads=("answer", "reference")).metric(), lacking, ctx)
    assert s.failure is not None
    assert s.failure.kind == FailureKind.MISSING_INPUT
    assert "'reference'" in s.failure.message


def test_fields_read_are_the_blocks_the_judge_sees() -> None:
    judge, ctx = make()
    spec = Aspect("a", "x", reads=("contexts", "metadata.ticket"))
    score(spec.metric(), SAMPLE, ctx)
    user = judge.calls[0].messages[1]["content"]
    assert "<<<BEGIN CONTEXT 2>>>\nShipping takes 3 days.\n<<<END CONTEXT 2>>>" in user
    assert "<<<BEGIN METADATA ticket>>>\nT-881\n<<<END METADATA ticket>>>" in user
    assert "<<<BEGIN QUESTION>>>" not in user
    assert "<<<BEGIN ANSWER>>>" not in user
    assert "gold" not in user


@pytest.mark.parametrize(
    ("reads", "sample_update", "field"),
    [
        (("question", "answer"), {"answer": None}, "answer"),
        (("question", "answer"), {"answer": "   "}, "answer"),
        (("question", "contexts"), {"contexts": []}, "contexts"),
        (("answer", "reference"), {"reference": None}, "reference"),
        (("answer", "metadata.order"), {}, "metadata.order"),
        (("answer", "metadata.ticket"), {"metadata": {"ticket": ""}}, "metadata.ticket"),
    ],
)
@pytest.mark.parametrize("kind", ["criterion", "aspect", "rubric"])
def test_a_missing_field_is_refused_before_any_call(
    reads: tuple[str, ...], sample_update: dict[str, Any], field: str, kind: str
) -> None:
    spec: Criterion | Aspect | Rubric
    if kind == "criterion":
        spec = Criterion("c", "x", reads=reads)  # no steps: not even the steps call is made
    elif kind == "aspect":
        spec = Aspect("c", "x", reads=reads, samples=3)
    else:
        spec = Rubric("c", {1: "a", 2: "b"}, reads=reads)
    judge, ctx = make()
    s = score(spec.metric(), SAMPLE.model_copy(update=sample_update), ctx)
    assert s.failure is not None
    assert s.failure.kind == FailureKind.MISSING_INPUT
    assert f"'{field}'" in s.failure.message
    assert judge.calls == []
    assert spec.metric().plan(SAMPLE.model_copy(update=sample_update)) == []


def test_a_judge_failure_is_a_typed_failure_with_usage() -> None:
    _, ctx = make({"criteria.steps": "not json at all"})
    s = score(Criterion("c", "x").metric(), SAMPLE, ctx)
    assert s.value is None
    assert s.failure is not None
    assert s.failure.kind == FailureKind.PARSE_ERROR
    assert s.usage.calls >= 1


def test_plan_marks_the_steps_call_as_once_per_run() -> None:
    metric = Criterion("c", "x").metric()
    first = metric.plan(SAMPLE)
    assert metric.plan(SAMPLE) == first  # planning changes nothing
    assert [c.template_id for c in first] == ["criteria.steps", "criteria.score"]
    assert [c.per_run for c in first] == [True, False]  # the estimate counts it once per run
    aspect = Aspect("a", "x", samples=3).metric()
    assert [c.template_id for c in aspect.plan(SAMPLE)] == ["criteria.aspect"] * 3
    rubric = Rubric("r", {1: "a", 2: "b"}).metric()
    assert [c.template_id for c in rubric.plan(SAMPLE)] == ["criteria.rubric"]


# -------------------------------------------------------------------- versions and steps


def test_generate_steps_is_one_cached_request(tmp_path: Any) -> None:
    from ragbridge.core.cache.disk import Cache
    from ragbridge.core.criteria import generate_steps

    judge = ScriptedJudge(SCRIPT)
    eng = JudgeEngine(judge, max_retries=0, timeout=None, cache=Cache(tmp_path / "c.sqlite"))
    spec = Criterion("cites", "Cites the policy?", reads=("answer", "contexts"), scale=(0, 3))
    call = asyncio.run(generate_steps(spec, eng))
    assert call.value is not None
    assert call.value.steps == SCRIPT["criteria.steps"]["steps"]
    user = judge.calls[0].messages[1]["content"]
    assert "<<<BEGIN CRITERION>>>\nCites the policy?\n<<<END CRITERION>>>" in user
    assert "The grader will see: answer, contexts." in user
    assert "integer scale from 0 to 3" in user
    again = asyncio.run(generate_steps(spec, eng))
    assert again.value == call.value
    assert len(judge.calls) == 1
    assert again.usage.cached_calls == 1


def test_versions_follow_what_the_judge_is_asked() -> None:
    from ragbridge.core.criteria import criteria_sha, steps_version

    assert steps_version("c", ["a"]) == steps_version("c", ("a",))
    assert (
        len({steps_version("c", ["a"]), steps_version("c", ["b"]), steps_version("d", ["a"])}) == 3
    )
    base = Criterion("c", "Polite?")
    assert criteria_sha(base) == criteria_sha(Criterion("c", "Polite?", evaluation_steps=("x",)))
    for changed in (
        Criterion("c", "Warm?"),
        Criterion("c", "Polite?", scale=(0, 4)),
        Criterion("c", "Polite?", reads=("answer",)),
    ):
        assert criteria_sha(changed) != criteria_sha(base)
    one = Aspect("a", "Cites a policy.").metric().prompt_version
    two = Aspect("a", "Cites a policy number.").metric().prompt_version
    assert one != two
    given = Criterion("c", "Polite?", evaluation_steps=("x",)).metric().prompt_version
    assert given == f"criteria.score@1+steps@{steps_version('Polite?', ['x'])}"


def test_spec_errors_carry_the_field_and_the_problem() -> None:
    from ragbridge.core.criteria import SpecError

    with pytest.raises(SpecError) as info:
        Rubric("r", {1: "a", 2: " "})
    assert info.value.field == "rubrics[2]"
    assert info.value.problem == "must be non-empty text"
    assert str(info.value) == "rubric 'r': rubrics[2]: must be non-empty text"
