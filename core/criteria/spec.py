"""A team's own criteria, as data: `Criterion` (a scored criterion, G-Eval style), `Aspect` (a
yes/no definition, AspectCritic style) and `Rubric` (score descriptions per level).

Why frozen dataclasses checked at construction: a criterion is the yardstick of a measure, and
a typo in it (a scale of ``(5, 1)``, a field ``"answr"``, a rubric missing level 3) must fail
where it was written, naming the field, not halfway through a paid run. Specs are hashable and
compare by value, so registering the same spec twice is a no-op and a memo can key on one.

`criteria_metrics` (and each spec's ``metric()``) turns specs into measures with the builder
`ragbridge.core.criteria.measures` installs here when it is imported (`install_metric_builder`;
importing ``ragbridge.core.criteria`` imports it). The inversion keeps this module free of the
measures: they, the batches, steps and files all read the specs, so the specs import none of
them and the core's imports run one way.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

if TYPE_CHECKING:
    from ..metrics.base import Metric

__all__ = [
    "FIELD_NAMES",
    "MAX_SCALE_SPAN",
    "Aspect",
    "Criterion",
    "CriterionSpec",
    "Levels",
    "MetricBuilder",
    "Rubric",
    "SpecError",
    "criteria_metrics",
    "install_metric_builder",
    "normal_reads",
]

FIELD_NAMES: tuple[str, ...] = ("question", "answer", "contexts", "reference")
"""Sample fields a criterion may read, besides ``metadata.<key>``."""

MAX_SCALE_SPAN = 100
"""The widest integer scale accepted (0..100): wider ones are percentages pretending to be
judgements, and every level is listed in the reply schema the judge sees."""

MAX_SAMPLES = 15
"""The most self-consistency verdicts an aspect may ask for, one judge call each."""

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_METADATA = re.compile(r"metadata\.(?P<key>[A-Za-z0-9_\-]+)")


class Levels(Mapping[int, str]):
    """A read-only, hashable ``level -> description`` mapping (a rubric's), in level order."""

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[int, str]) -> None:
        self._items: tuple[tuple[int, str], ...] = tuple(sorted(items.items()))

    def __getitem__(self, key: int) -> str:
        for level, text in self._items:
            if level == key:
                return text
        raise KeyError(key)

    def __iter__(self) -> Iterator[int]:
        return (level for level, _ in self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(self._items)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return dict(self._items) == dict(other)
        return NotImplemented

    def __repr__(self) -> str:
        return repr(dict(self._items))


class SpecError(ValueError):
    """A criterion spec that cannot be used: ``field`` names the field (``scale``,
    ``rubrics[3]``), ``problem`` says what is wrong with it. ``str()`` names both."""

    def __init__(self, kind: str, name: str, field: str, problem: str) -> None:
        label = f"{kind} {name!r}" if isinstance(name, str) and name else kind
        super().__init__(f"{label}: {field}: {problem}")
        self.field = field
        self.problem = problem


def _fail(kind: str, name: str, field: str, problem: str) -> SpecError:
    return SpecError(kind, name, field, problem)


def _check_name(kind: str, name: Any) -> None:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise _fail(
            kind,
            "",
            "name",
            f"must be a letter then letters, digits or underscores, got {name!r}",
        )


def _check_text(kind: str, name: str, field: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _fail(kind, name, field, "must be non-empty text")
    return value.strip()


def normal_reads(reads: Sequence[str] | str) -> tuple[str, ...]:
    """``reads`` checked and in canonical order: `FIELD_NAMES` order, then ``metadata.<key>``
    sorted; duplicates dropped. Raises ValueError naming the first unknown field."""
    if isinstance(reads, str):
        reads = (reads,)
    known: list[str] = []
    metadata: list[str] = []
    for field in reads:
        if not isinstance(field, str):
            raise ValueError(f"a field name must be text, got {field!r}")
        if field in FIELD_NAMES:
            known.append(field)
        elif _METADATA.fullmatch(field):
            metadata.append(field)
        else:
            allowed = ", ".join(FIELD_NAMES)
            raise ValueError(f"unknown field {field!r}; use {allowed} or metadata.<key>")
    if not known and not metadata:
        raise ValueError("name at least one field to read")
    ordered = [f for f in FIELD_NAMES if f in known] + sorted(set(metadata))
    return tuple(ordered)


def _reads(kind: str, name: str, reads: Any) -> tuple[str, ...]:
    try:
        return normal_reads(reads)
    except ValueError as exc:
        raise _fail(kind, name, "reads", str(exc)) from None


def _threshold(kind: str, name: str, threshold: Any) -> float:
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
        raise _fail(kind, name, "threshold", f"must be a number in [0, 1], got {threshold!r}")
    if not 0.0 <= float(threshold) <= 1.0:
        raise _fail(kind, name, "threshold", f"must lie within [0, 1], got {threshold!r}")
    return float(threshold)


def _flag(kind: str, name: str, field: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise _fail(kind, name, field, f"must be true or false, got {value!r}")


def _meaning(kind: str, name: str, meaning: Any, source: str) -> str:
    if not isinstance(meaning, str):
        raise _fail(kind, name, "meaning", f"must be text, got {meaning!r}")
    if meaning.strip():
        return " ".join(meaning.split())
    line = " ".join(source.split())
    return line if len(line) <= 80 else line[:79].rstrip() + "…"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _set(obj: object, field: str, value: Any) -> None:
    object.__setattr__(obj, field, value)  # normalising a frozen dataclass in __post_init__


@dataclass(frozen=True)
class Criterion:
    """A scored criterion (G-Eval): the criterion in words, evaluation steps (given, or written
    once by the judge), an integer ``scale``; the value is ``(raw - low) / (high - low)``.

    ``name`` is the measure's key everywhere (results, LangSmith feedback key, DeepEval metric
    name, RAGAS column). ``reads`` are the sample fields the judge is shown, and must be present.
    """

    kind: ClassVar[str] = "criterion"

    name: str
    criteria: str
    evaluation_steps: tuple[str, ...] | None = None
    reads: tuple[str, ...] = ("question", "answer")
    scale: tuple[int, int] = (1, 5)
    threshold: float = 0.5
    higher_is_better: bool = True
    meaning: str = ""

    def __post_init__(self) -> None:
        k = "criterion"
        _check_name(k, self.name)
        _set(self, "criteria", _check_text(k, self.name, "criteria", self.criteria))
        if self.evaluation_steps is not None:
            steps = self.evaluation_steps
            if isinstance(steps, str) or not isinstance(steps, Sequence):
                raise _fail(k, self.name, "evaluation_steps", "must be a list of steps, or None")
            if not steps:
                raise _fail(k, self.name, "evaluation_steps", "give at least one step, or None")
            checked = tuple(
                _check_text(k, self.name, f"evaluation_steps[{i}]", s) for i, s in enumerate(steps)
            )
            _set(self, "evaluation_steps", checked)
        _set(self, "reads", _reads(k, self.name, self.reads))
        scale = self.scale
        if (
            isinstance(scale, (str, bytes))
            or not isinstance(scale, Sequence)
            or len(scale) != 2
            or not all(_is_int(v) for v in scale)
            or not scale[0] < scale[1]
        ):
            raise _fail(k, self.name, "scale", f"must be two integers, low < high, got {scale!r}")
        if scale[1] - scale[0] > MAX_SCALE_SPAN:
            raise _fail(k, self.name, "scale", f"spans more than {MAX_SCALE_SPAN} levels")
        _set(self, "scale", (int(scale[0]), int(scale[1])))
        _set(self, "threshold", _threshold(k, self.name, self.threshold))
        _flag(k, self.name, "higher_is_better", self.higher_is_better)
        _set(self, "meaning", _meaning(k, self.name, self.meaning, self.criteria))

    def metric(self) -> Metric:
        """This criterion's measure (``criteria_metrics([self])[0]``)."""
        return criteria_metrics([self])[0]


@dataclass(frozen=True)
class Aspect:
    """A yes/no aspect (AspectCritic): a definition, a verdict with a reason; value 1.0 or 0.0.

    ``samples`` > 1 asks the judge that many times (distinct requests, so a cache cannot
    answer them all with one reply) and takes the majority; a tie counts as the failing
    verdict (no for a higher-is-better aspect, yes for a lower-is-better one): a split judge
    never passes a sample. Self-consistency needs a judge that samples (temperature > 0).
    """

    kind: ClassVar[str] = "aspect"

    name: str
    definition: str
    reads: tuple[str, ...] = ("question", "answer")
    samples: int = 1
    threshold: float = 0.5
    higher_is_better: bool = True
    meaning: str = ""

    def __post_init__(self) -> None:
        k = "aspect"
        _check_name(k, self.name)
        _set(self, "definition", _check_text(k, self.name, "definition", self.definition))
        _set(self, "reads", _reads(k, self.name, self.reads))
        if not _is_int(self.samples) or not 1 <= self.samples <= MAX_SAMPLES:
            raise _fail(
                k,
                self.name,
                "samples",
                f"must be an integer 1..{MAX_SAMPLES}, got {self.samples!r}",
            )
        _set(self, "threshold", _threshold(k, self.name, self.threshold))
        _flag(k, self.name, "higher_is_better", self.higher_is_better)
        _set(self, "meaning", _meaning(k, self.name, self.meaning, self.definition))

    @property
    def scale(self) -> tuple[int, int]:
        return (0, 1)

    def metric(self) -> Metric:
        """This aspect's measure (``criteria_metrics([self])[0]``)."""
        return criteria_metrics([self])[0]


@dataclass(frozen=True)
class Rubric:
    """A rubric (RubricsScore): a description per level, consecutive integers (1..5 or the
    user's); the judge picks a level, the value is ``(level - low) / (high - low)``.

    With ``"reference"`` in ``reads`` the judge compares with the reference answer.
    """

    kind: ClassVar[str] = "rubric"

    name: str
    rubrics: Mapping[int, str]
    reads: tuple[str, ...] = ("question", "answer")
    threshold: float = 0.5
    higher_is_better: bool = True
    meaning: str = ""

    def __post_init__(self) -> None:
        k = "rubric"
        _check_name(k, self.name)
        if not isinstance(self.rubrics, Mapping) or len(self.rubrics) < 2:
            raise _fail(k, self.name, "rubrics", "must map at least two levels to descriptions")
        levels: dict[int, str] = {}
        for key, text in self.rubrics.items():
            level = int(key) if isinstance(key, str) and re.fullmatch(r"-?\d+", key) else key
            if not _is_int(level):
                raise _fail(k, self.name, "rubrics", f"levels must be integers, got {key!r}")
            levels[level] = _check_text(k, self.name, f"rubrics[{level}]", text)
        ordered = sorted(levels)
        if ordered != list(range(ordered[0], ordered[0] + len(ordered))):
            raise _fail(k, self.name, "rubrics", f"levels must be consecutive, got {ordered}")
        if ordered[-1] - ordered[0] > MAX_SCALE_SPAN:
            raise _fail(k, self.name, "rubrics", f"spans more than {MAX_SCALE_SPAN} levels")
        _set(self, "rubrics", Levels(levels))
        _set(self, "reads", _reads(k, self.name, self.reads))
        _set(self, "threshold", _threshold(k, self.name, self.threshold))
        _flag(k, self.name, "higher_is_better", self.higher_is_better)
        first = f"Rubric of {len(levels)} levels, top: {levels[ordered[-1]]}"
        _set(self, "meaning", _meaning(k, self.name, self.meaning, first))

    @property
    def scale(self) -> tuple[int, int]:
        levels = list(self.rubrics)
        return (levels[0], levels[-1])

    def metric(self) -> Metric:
        """This rubric's measure (``criteria_metrics([self])[0]``)."""
        return criteria_metrics([self])[0]


CriterionSpec = Criterion | Aspect | Rubric
"""Any of the three kinds of criterion."""


class MetricBuilder(Protocol):
    """What turns specs into measures (`ragbridge.core.criteria.measures.build_metrics`)."""

    def __call__(self, specs: Sequence[CriterionSpec], *, batch: bool = False) -> list[Metric]:
        """One measure per spec, in order; ``batch`` as in `criteria_metrics`."""
        ...


_builders: list[MetricBuilder] = []
"""The installed builder (at most one; a list, so installing needs no ``global``)."""


def install_metric_builder(builder: MetricBuilder) -> None:
    """Make ``builder`` what `criteria_metrics` and ``metric()`` call. The measures module
    calls this when imported; installing again replaces the builder (a reloaded module)."""
    _builders[:] = [builder]


def criteria_metrics(specs: Sequence[CriterionSpec], *, batch: bool = False) -> list[Metric]:
    """One measure per spec, in order (``metric.name == spec.name``).

    ``batch=True``: specs that read the same fields are judged in one call per sample, shared
    through `MetricContext.shared` (the first metric to ask pays; every criterion's verdict is
    checked to be there and in its scale). The default is one call per criterion per sample.
    Names must be unique.
    """
    if not _builders:
        raise RuntimeError(
            "no measure builder for criteria: ragbridge.core.criteria.measures installs it when "
            "imported, and importing ragbridge.core.criteria imports it; import that package "
            "(or its measures module) before building a criterion's measure"
        )
    return _builders[0](specs, batch=batch)
