"""Several criteria of one sample in one judge call (``criteria_metrics(..., batch=True)``).

Criteria that read the same fields see the same data, so one prompt can carry them all: the
data once, each criterion once as one data block labelled with its kind and name (a scored
criterion's steps inside its block), what to give each kind of block said once (a scale every
scored criterion shares stated once, differing scales listed by name), and a reply with one
entry per criterion. For five criteria that is one call instead of five, and about half the
characters. The metrics of a group share the call through
`MetricContext.shared`: the first to ask pays (its Score records the usage), the others record
none, so summed usage is the true cost.

The reply is checked before any criterion is scored: its schema (`batch_reply`) has one
required entry per criterion, keyed by name, each in its own shape and scale, so a reply that
misses a criterion, or scores one outside its scale, fails validation and is repaired or
retried by the engine like any reply that does not fit; it is never scored, and never cached.

Not batched: an aspect with ``samples`` > 1 (its verdicts are distinct requests by design) and
a criterion alone in its read set (nothing to share).
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from ..judging.engine import JudgeCall
from ..metrics._shared import planned
from ..metrics.base import MetricContext, PlannedCall
from ..prompts.base import PromptTemplate
from ..prompts.criteria import (
    CRITERIA_BATCH,
    CRITERIA_STEPS,
    AspectReply,
    Plain,
    batch_reply,
    block,
    level_reply,
    rubric_text,
    score_reply,
    steps_text,
)
from ..results.evaluation import Failure, FailureKind, Score, Usage
from ..sample import Sample
from .inputs import LOGPROBS, sample_values
from .spec import Aspect, Criterion, CriterionSpec, Rubric
from .steps import Steps, StepsSource
from .verdicts import aspect_score, criterion_score, rubric_score, spec_version

if TYPE_CHECKING:  # measures builds the batches: a batch only names the metric's type
    from .measures import CriteriaMetric

__all__ = ["BatchGroup", "batch_groups"]


def batch_groups(
    specs: Sequence[CriterionSpec], sources: Mapping[str, StepsSource]
) -> dict[str, BatchGroup]:
    """The batch each spec is judged in, by name; specs judged alone are left out."""
    by_reads: dict[tuple[str, ...], list[CriterionSpec]] = {}
    for spec in specs:
        if isinstance(spec, Aspect) and spec.samples > 1:
            continue
        by_reads.setdefault(spec.reads, []).append(spec)
    out: dict[str, BatchGroup] = {}
    for members in by_reads.values():
        if len(members) > 1:
            group = BatchGroup(members, sources)
            out.update((spec.name, group) for spec in members)
    return out


def _shape(spec: CriterionSpec) -> type[BaseModel]:
    if isinstance(spec, Criterion):
        return score_reply(*spec.scale)
    if isinstance(spec, Rubric):
        return level_reply(*spec.scale)
    return AspectReply


_UNWRITTEN = ("(steps to be written)",)
"""What a dry run shows in place of steps the judge has not written yet."""


def _item(spec: CriterionSpec, steps: Steps | None) -> str:
    """One criterion of the batch prompt: a single data block labelled with its kind and name.

    A scored criterion's steps go in its block after a ``Steps:`` line: the criterion and its
    steps are the user's text alike (or the judge's, written for this criterion), so one block
    keeps both data while costing one pair of markers instead of two.
    """
    if isinstance(spec, Criterion):
        shown = steps.steps if steps is not None else _UNWRITTEN
        return block(f"CRITERION {spec.name}", f"{spec.criteria}\nSteps:\n{steps_text(shown)}")
    if isinstance(spec, Aspect):
        return block(f"DEFINITION {spec.name}", spec.definition)
    return block(f"RUBRIC {spec.name}", rubric_text(spec.rubrics))


def _asks(specs: Sequence[CriterionSpec]) -> str:
    """What to give each kind of block, once per kind present (our text, not data). A scale
    shared by every scored criterion is stated once; differing scales are listed by name."""
    lines: list[str] = []
    scored = [s for s in specs if isinstance(s, Criterion)]
    if len({s.scale for s in scored}) == 1:
        low, high = scored[0].scale
        lines.append(
            f'Give each CRITERION a "score" from {low} (not met) to {high} (fully met), '
            "following its steps."
        )
    elif scored:
        each = ", ".join(f"{s.name} {s.scale[0]} to {s.scale[1]}" for s in scored)
        lines.append(
            'Give each CRITERION a "score" following its steps, from the low end of its scale '
            f"(not met) to the high end (fully met): {each}."
        )
    if any(isinstance(s, Aspect) for s in specs):
        lines.append('Give each DEFINITION a "verdict": true if the data meets it.')
    if any(isinstance(s, Rubric) for s in specs):
        lines.append('Give each RUBRIC the "level" that describes the data best.')
    return "\n".join(lines)


@dataclass
class _Outcome:
    """The batch call of one sample, the steps it was asked with, and what it cost."""

    call: JudgeCall[Any] | None
    steps: dict[str, Steps] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)
    failure: Failure | None = None


class BatchGroup:
    """Criteria reading the same fields, judged together in one call per sample."""

    def __init__(self, specs: Sequence[CriterionSpec], sources: Mapping[str, StepsSource]):
        self.specs = tuple(specs)
        self.names = tuple(s.name for s in self.specs)
        self.reads = self.specs[0].reads
        self.sources = {s.name: sources[s.name] for s in self.specs if isinstance(s, Criterion)}
        entries = tuple((s.name, _shape(s)) for s in self.specs)
        self.template: PromptTemplate = dataclasses.replace(
            CRITERIA_BATCH, schema=batch_reply(entries)
        )
        versions = [[s.kind, s.name, spec_version(s)] for s in self.specs]
        digest = hashlib.sha256(json.dumps(versions).encode()).hexdigest()
        self.version = digest[:12]

    def __repr__(self) -> str:
        # stable (no address): a metric's configuration is part of its kept Scores' key
        return f"BatchGroup({self.specs!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        # pickled with its metrics (the Dask sink): the steps sources it shares with them are
        # the same objects in one pickle, so they stay shared where it is loaded
        return (BatchGroup, (self.specs, self.sources))

    def _values(self, sample: Sample) -> dict[str, Any]:
        return sample_values(self.reads, sample)

    def _key(self, sample: Sample) -> tuple[Any, ...]:
        values = json.dumps(self._values(sample), sort_keys=True, default=str)
        return ("criteria.batch", self.names, sample.id, values)

    def _render(self, steps: Mapping[str, Steps]) -> dict[str, Any]:
        items = "\n".join(_item(s, steps.get(s.name)) for s in self.specs)
        return {"criteria": Plain(f"{_asks(self.specs)}\n{items}"), "count": len(self.specs)}

    async def _judge(self, sample: Sample, ctx: MetricContext) -> _Outcome:
        assert ctx.judge is not None
        judge = ctx.judge
        names = list(self.sources)
        got = await asyncio.gather(*(self.sources[n].get(judge) for n in names))
        usage = Usage()
        for outcome in got:
            if outcome.owned and outcome.call is not None:
                usage += outcome.call.usage
        for outcome in got:
            if outcome.steps is None:
                return _Outcome(None, usage=usage, failure=outcome.failure)
        steps = {n: o.steps for n, o in zip(names, got, strict=True) if o.steps is not None}
        call: JudgeCall[Any] = await ctx.ask(
            self.template,
            logprobs=LOGPROBS if self.sources else None,
            **self._render(steps),
            **self._values(sample),
        )
        usage += call.usage
        return _Outcome(call, steps, usage, call.failure)

    async def score(self, metric: CriteriaMetric, sample: Sample, ctx: MetricContext) -> Score:
        """``metric``'s Score from the group's call for this sample (made by the first asker)."""
        outcome, owner = await ctx.shared(self._key(sample), lambda: self._judge(sample, ctx))
        usage = outcome.usage if owner else Usage()
        if outcome.failure is not None or outcome.call is None or outcome.call.value is None:
            failure = outcome.failure or Failure(kind=FailureKind.JUDGE_ERROR, message="no reply")
            return Score(failure=failure, usage=usage)
        spec = metric.spec
        index = self.names.index(spec.name)
        entry: Any = getattr(outcome.call.value, f"c{index}")
        extra = {"batch": list(self.names)}
        version = f"{CRITERIA_BATCH.id}@{CRITERIA_BATCH.version}+group@{self.version}"
        if isinstance(spec, Criterion):
            steps = outcome.steps[spec.name]
            generated = f"{CRITERIA_STEPS.id}@{CRITERIA_STEPS.version}+"
            return criterion_score(
                spec,
                score=int(entry.score),
                reason=entry.reason,
                steps=steps,
                text=outcome.call.text,
                logprobs=outcome.call.logprobs,
                field=f"{spec.name}.score",
                usage=usage,
                prompt_version=(generated if steps.source == "generated" else "")
                + f"{version}+steps@{steps.version}",
                extra=extra,
            )
        if isinstance(spec, Aspect):
            return aspect_score(
                spec,
                [(entry.verdict, entry.reason)],
                usage=usage,
                prompt_version=version,
                extra=extra,
            )
        return rubric_score(
            spec,
            level=int(entry.level),
            reason=entry.reason,
            usage=usage,
            prompt_version=version,
            extra=extra,
        )

    def plan(self, metric: CriteriaMetric, sample: Sample) -> list[PlannedCall]:
        """The group's calls for a dry run: each unwritten steps call (counted once per run:
        `StepsSource.plan`), then the batch call once per sample (a share key every metric of
        the group gives). Planning changes nothing."""
        calls = [c for c in (s.plan() for s in self.sources.values()) if c is not None]
        known = {n: s.known for n, s in self.sources.items() if s.known is not None}
        calls.append(
            planned(
                self.template,
                ("criteria.batch", self.names),
                **self._render(known),
                **self._values(sample),
            )
        )
        return calls
