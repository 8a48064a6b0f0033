"""A team's criteria in the measure registry: listed by ``ragbridge metrics`` (kind
``criteria``), resolvable by name like any built-in measure.

A criterion's name is its key everywhere, so it may not take a built-in measure's: a criterion
called ``faithfulness`` would shadow one column with another in the same results. The registry
looks names up normalised (``CitesPolicy`` and ``cites_policy`` are one name), so a criterion
is registered under its normalised name; its metric keeps the name as written. The check of
a name against the built-in measures, and `KIND`, are in `ragbridge.core.criteria.reserved`
(re-exported here), so that the file reader can refuse such a name without importing this
module, which imports the reader to accept a loaded `CriteriaFile`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..registry import REGISTRY, MeasureSpec, ProviderSpec, Registry, normal_name
from .files import CriteriaFile
from .measures import CriteriaMetric, build_metrics
from .reserved import KIND, is_builtin_measure
from .spec import Aspect, Criterion, CriterionSpec

if TYPE_CHECKING:
    from ..metrics.base import Metric

__all__ = ["KIND", "is_builtin_measure", "register_criteria"]


@dataclass(frozen=True)
class _Factory:
    """Builds a registered criterion's metric. Compares by spec and batch, so registering the
    same criteria again is a no-op; the objects it shares are left out of the comparison.

    Every metric it builds shares the registered criteria's steps sources and batch group, so
    criteria resolved one name at a time still batch together and write their steps once per
    run; what a run wrote is kept per run (`StepsSource`), never handed to the next one."""

    spec: CriterionSpec
    batch: tuple[str, ...]
    metric: CriteriaMetric = field(compare=False, repr=False)

    def __call__(self) -> Metric:
        return type(self.metric)(steps=self.metric.steps_source, batch=self.metric.batch)


def _calls(spec: CriterionSpec, batched: bool) -> str:
    if batched:
        return "1, shared (batch)" + (" + 1 per run (steps)" if _writes_steps(spec) else "")
    if isinstance(spec, Aspect):
        return str(spec.samples)
    return "1 + 1 per run (steps)" if _writes_steps(spec) else "1"


def _writes_steps(spec: CriterionSpec) -> bool:
    return isinstance(spec, Criterion) and not spec.evaluation_steps


def _how(spec: CriterionSpec, batched: bool) -> str:
    if batched:
        return "judged with the criteria reading the same fields in one call (criteria.batch)"
    if isinstance(spec, Criterion):
        low, high = spec.scale
        return f"G-Eval score {low}-{high}, weighted by log-probabilities when given"
    if isinstance(spec, Aspect):
        return "yes/no verdict" + (f", majority of {spec.samples}" if spec.samples > 1 else "")
    return f"rubric of {len(spec.rubrics)} levels"


def register_criteria(
    specs: Sequence[CriterionSpec] | CriteriaFile,
    *,
    batch: bool = False,
    registry: Registry | None = None,
) -> list[MeasureSpec]:
    """Add criteria to the registry (kind ``"criteria"``); returns their measure specs.

    ``specs`` may be a loaded `CriteriaFile` (its batch setting and frozen steps apply).
    A name of a built-in measure is refused; registering the same criterion again is a
    no-op, and a changed criterion under a registered name replaces it.
    """
    frozen: frozenset[str] = frozenset()
    if isinstance(specs, CriteriaFile):
        frozen, batch, specs = specs.frozen, specs.batch, specs.specs
    target = registry or REGISTRY
    for spec in specs:
        if is_builtin_measure(spec.name, target):
            raise ValueError(
                f"{spec.name!r} is a built-in measure; give the criterion another name"
            )
    metrics = build_metrics(specs, batch=batch, frozen=frozen)
    out: list[MeasureSpec] = []
    for spec, metric in zip(specs, metrics, strict=True):
        assert isinstance(metric, CriteriaMetric)
        group: Any = metric.batch
        names: tuple[str, ...] = () if group is None else tuple(group.names)
        needs = {"judge"} | ({"reference"} if "reference" in spec.reads else set())
        factory = _Factory(spec, names, metric)
        measure = MeasureSpec(
            name=normal_name(spec.name),
            meaning=spec.meaning,
            requires=tuple(metric.requires),
            higher_is_better=spec.higher_is_better,
            kind=KIND,
            factory=factory,
        )
        provider = ProviderSpec(
            measure=measure.name,
            name="llm",
            how=_how(spec, bool(names)),
            needs=frozenset(needs),
            judge_calls=_calls(spec, bool(names)),
            build=factory,  # built as is: the metric is its own provider
        )
        known = next((m for m in target.measures(plugins=False) if m.name == measure.name), None)
        if known is not None and known != measure:
            target.remove_measure(measure.name)
        out.append(target.add_measure(measure, provider))
    return out
