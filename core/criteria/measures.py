"""A criterion as a measure: one `Metric` subclass per spec, named after it.

Each spec gets a class of its own (`metric_class`), because what the rest of ragbridge reads
from a measure is declared on its class: ``name``, ``requires``, ``reads`` (the key of a kept
Score), ``higher_is_better`` and ``prompt_version``. The class is made once per spec and
reused, so a criterion built twice is the same measure.

Scoring, one call per criterion per sample unless batched (`ragbridge.core.criteria.batch`):

* `ScoredMetric` — steps (`ragbridge.core.criteria.steps`), then ``criteria.score`` asking for
  log-probabilities (``logprobs=20``) to weight the score as G-Eval does;
* `AspectMetric` — ``criteria.aspect`` once, or ``samples`` times with distinct requests;
* `RubricMetric` — ``criteria.rubric``.

A sample lacking a field the criterion reads (``metadata.<key>`` included) fails with
``missing_input`` naming the field, before any call (the steps' included). What a call is given
(`sample_values`, `missing_field`, `LOGPROBS`) is in `ragbridge.core.criteria.inputs`, shared
with the batches, and re-exported here.

`build_metrics` is what `criteria_metrics` and each spec's ``metric()`` call. This module
installs it into `ragbridge.core.criteria.spec` when imported (importing the package imports
it), so the specs, which every other part of the criteria reads, import nothing of the
measures built from them and the core's imports run one way.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
from collections.abc import Collection, Sequence
from typing import Any, ClassVar

from ..judging.engine import JudgeCall
from ..metrics._shared import planned
from ..metrics.base import Metric, MetricContext, PlannedCall, usage_of
from ..prompts.base import PromptTemplate
from ..prompts.criteria import (
    CRITERIA_ASPECT,
    CRITERIA_RUBRIC,
    CRITERIA_SCORE,
    CRITERIA_STEPS,
    AspectReply,
    Plain,
    level_reply,
    rubric_text,
    score_reply,
    steps_text,
)
from ..results.evaluation import Failure, FailureKind, Score
from ..sample import Sample
from .batch import batch_groups
from .inputs import LOGPROBS, missing_field, sample_values
from .spec import FIELD_NAMES, Aspect, Criterion, CriterionSpec, Rubric, install_metric_builder
from .steps import StepsSource, steps_version
from .verdicts import aspect_score, criterion_score, rubric_score, spec_version

__all__ = [
    "LOGPROBS",
    "AspectMetric",
    "CriteriaMetric",
    "RubricMetric",
    "ScoredMetric",
    "build_metrics",
    "metric_class",
    "missing_field",
    "sample_values",
]


@functools.cache
def _scored_template(low: int, high: int) -> PromptTemplate:
    return dataclasses.replace(CRITERIA_SCORE, schema=score_reply(low, high))


@functools.cache
def _rubric_template(low: int, high: int) -> PromptTemplate:
    return dataclasses.replace(CRITERIA_RUBRIC, schema=level_reply(low, high))


def _version(template: PromptTemplate) -> str:
    return f"{template.id}@{template.version}"


class CriteriaMetric(Metric):
    """Base of the three kinds: the spec on the class, steps and batch on the instance."""

    spec: ClassVar[CriterionSpec]
    needs_judge = True

    def __init__(self, *, steps: StepsSource | None = None, batch: Any = None) -> None:
        self.steps_source = steps
        self.batch = batch
        """The `BatchGroup` judging this criterion with others, or None: a call of its own."""

    def missing_input(self, sample: Sample, ctx: MetricContext) -> Failure | None:
        lacking = missing_field(self.spec.reads, sample)
        if lacking is not None:
            return Failure(
                kind=FailureKind.MISSING_INPUT,
                message=f"{self.name} needs the sample's {lacking!r}, which is missing or empty",
            )
        return super().missing_input(sample, ctx)

    async def _score(self, sample: Sample, ctx: MetricContext) -> Score:
        if self.batch is not None:
            score: Score = await self.batch.score(self, sample, ctx)
            return score
        return await self._alone(sample, ctx)

    async def _alone(self, sample: Sample, ctx: MetricContext) -> Score:
        raise NotImplementedError

    def _plan(self, sample: Sample, shared_tags: frozenset[str]) -> list[PlannedCall]:
        if missing_field(self.spec.reads, sample) is not None:
            return []
        if self.batch is not None:
            planned_calls: list[PlannedCall] = self.batch.plan(self, sample)
            return planned_calls
        return self._plan_alone(sample)

    def _plan_alone(self, sample: Sample) -> list[PlannedCall]:
        return []

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.spec!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        # the class is made per spec at run time, so it is made again where this is loaded
        return (_restored, (self.spec, self.steps_source, self.batch))


class ScoredMetric(CriteriaMetric):
    """A scored criterion: steps, then one ``criteria.score`` call weighted by log-probs."""

    spec: ClassVar[Criterion]

    def source(self) -> StepsSource:
        if self.steps_source is None:
            self.steps_source = StepsSource(self.spec)
        return self.steps_source

    async def _alone(self, sample: Sample, ctx: MetricContext) -> Score:
        assert ctx.judge is not None
        got = await self.source().get(ctx.judge)
        steps_usage = usage_of(got.call, owned=(got.owned,))
        if got.steps is None:
            assert got.failure is not None
            return Score(failure=got.failure, usage=steps_usage)
        low, high = self.spec.scale
        call: JudgeCall[Any] = await ctx.ask(
            _scored_template(low, high),
            logprobs=LOGPROBS,
            criterion=self.spec.criteria,
            steps=steps_text(got.steps.steps),
            low=low,
            high=high,
            **sample_values(self.spec.reads, sample),
        )
        usage = steps_usage + usage_of(call)
        if call.value is None:
            assert call.failure is not None
            return Score(failure=call.failure, usage=usage)
        generated = "criteria.steps@1+" if got.steps.source == "generated" else ""
        return criterion_score(
            self.spec,
            score=int(call.value.score),
            reason=call.value.reason,
            steps=got.steps,
            text=call.text,
            logprobs=call.logprobs,
            field="score",
            usage=usage,
            prompt_version=f"{generated}{_version(CRITERIA_SCORE)}+steps@{got.steps.version}",
        )

    def _plan_alone(self, sample: Sample) -> list[PlannedCall]:
        source = self.source()
        known = source.known
        steps_call = source.plan()  # planned with every sample, counted once per run
        calls: list[PlannedCall] = [] if steps_call is None else [steps_call]
        steps = known.steps if known is not None else ("(steps to be written)",) * 4
        low, high = self.spec.scale
        calls.append(
            planned(
                _scored_template(low, high),
                criterion=self.spec.criteria,
                steps=steps_text(steps),
                low=low,
                high=high,
                **sample_values(self.spec.reads, sample),
            )
        )
        return calls


def _draw(k: int, n: int) -> Plain:
    """What makes the k-th of n self-consistency requests distinct (so no cache or in-flight
    join answers all n with one reply); empty for a single verdict."""
    return Plain("" if n == 1 else f"\n(Independent judgement {k} of {n}.)")


class AspectMetric(CriteriaMetric):
    """A yes/no aspect: ``criteria.aspect`` once, or ``samples`` times and the majority."""

    spec: ClassVar[Aspect]

    async def _alone(self, sample: Sample, ctx: MetricContext) -> Score:
        n = self.spec.samples
        values = sample_values(self.spec.reads, sample)
        calls: list[JudgeCall[AspectReply]] = await asyncio.gather(
            *(
                ctx.ask(
                    CRITERIA_ASPECT, definition=self.spec.definition, draw=_draw(k, n), **values
                )
                for k in range(1, n + 1)
            )
        )
        usage = usage_of(*calls)
        for call in calls:
            if call.value is None:
                assert call.failure is not None
                return Score(failure=call.failure, usage=usage)
        votes = [(c.value.verdict, c.value.reason) for c in calls if c.value is not None]
        return aspect_score(
            self.spec,
            votes,
            usage=usage,
            prompt_version=f"{_version(CRITERIA_ASPECT)}+spec@{spec_version(self.spec)}",
        )

    def _plan_alone(self, sample: Sample) -> list[PlannedCall]:
        n = self.spec.samples
        values = sample_values(self.spec.reads, sample)
        return [
            planned(CRITERIA_ASPECT, definition=self.spec.definition, draw=_draw(k, n), **values)
            for k in range(1, n + 1)
        ]


class RubricMetric(CriteriaMetric):
    """A rubric: one ``criteria.rubric`` call choosing a level."""

    spec: ClassVar[Rubric]

    def _values(self, sample: Sample) -> dict[str, Any]:
        return {
            "rubric": rubric_text(self.spec.rubrics),
            **sample_values(self.spec.reads, sample),
        }

    async def _alone(self, sample: Sample, ctx: MetricContext) -> Score:
        low, high = self.spec.scale
        call: JudgeCall[Any] = await ctx.ask(_rubric_template(low, high), **self._values(sample))
        usage = usage_of(call)
        if call.value is None:
            assert call.failure is not None
            return Score(failure=call.failure, usage=usage)
        return rubric_score(
            self.spec,
            level=int(call.value.level),
            reason=call.value.reason,
            usage=usage,
            prompt_version=f"{_version(CRITERIA_RUBRIC)}+spec@{spec_version(self.spec)}",
        )

    def _plan_alone(self, sample: Sample) -> list[PlannedCall]:
        low, high = self.spec.scale
        return [planned(_rubric_template(low, high), **self._values(sample))]


_KINDS: dict[str, type[CriteriaMetric]] = {
    "criterion": ScoredMetric,
    "aspect": AspectMetric,
    "rubric": RubricMetric,
}


def _class_version(spec: CriterionSpec) -> str:
    if isinstance(spec, Criterion):
        if not spec.evaluation_steps:
            return f"{_version(CRITERIA_STEPS)}+{_version(CRITERIA_SCORE)}"
        version = steps_version(spec.criteria, spec.evaluation_steps)
        return f"{_version(CRITERIA_SCORE)}+steps@{version}"
    template = CRITERIA_ASPECT if isinstance(spec, Aspect) else CRITERIA_RUBRIC
    return f"{_version(template)}+spec@{spec_version(spec)}"


@functools.cache
def metric_class(spec: CriterionSpec) -> type[CriteriaMetric]:
    """The measure class of ``spec`` (made once per spec: equal specs share it)."""
    base = _KINDS[spec.kind]
    attrs: dict[str, Any] = {
        "__module__": base.__module__,
        "__qualname__": f"{base.__qualname__}[{spec.name}]",
        "__doc__": f"{spec.kind} {spec.name!r}: {spec.meaning}",
        "name": spec.name,
        "spec": spec,
        "requires": tuple(f for f in spec.reads if f in FIELD_NAMES),
        "reads": spec.reads,
        "higher_is_better": spec.higher_is_better,
        "prompt_version": _class_version(spec),
    }
    return type(f"{base.__name__}_{spec.name}", (base,), attrs)


def _restored(spec: CriterionSpec, steps: StepsSource | None, batch: Any) -> CriteriaMetric:
    """A criterion's metric unpickled (see `CriteriaMetric.__reduce__`)."""
    return metric_class(spec)(steps=steps, batch=batch)


def build_metrics(
    specs: Sequence[CriterionSpec], *, batch: bool = False, frozen: Collection[str] = ()
) -> list[Metric]:
    """One metric per spec (see `ragbridge.core.criteria.spec.criteria_metrics`); ``frozen``
    names the criteria whose given steps came from a lock (their ``steps_source``)."""
    names: set[str] = set()
    for spec in specs:
        if not isinstance(spec, (Criterion, Aspect, Rubric)):
            raise TypeError(f"expected a Criterion, Aspect or Rubric, got {type(spec).__name__}")
        if spec.name in names:
            raise ValueError(f"two criteria are named {spec.name!r}; names must be unique")
        names.add(spec.name)
    sources = {
        s.name: StepsSource(s, frozen=s.name in frozen) for s in specs if isinstance(s, Criterion)
    }
    groups: dict[str, Any] = batch_groups(specs, sources) if batch else {}
    return [metric_class(s)(steps=sources.get(s.name), batch=groups.get(s.name)) for s in specs]


install_metric_builder(build_metrics)  # what Criterion.metric() and criteria_metrics call
