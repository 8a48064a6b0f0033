"""RAGAS's ``AspectCritic`` and ``RubricsScore`` on ragbridge's criteria, inside
``ragas.evaluate``: change the import, keep the code.

``from ragas.metrics import AspectCritic, RubricsScore`` becomes ``from
ragbridge.adapters.ragas import AspectCritic, RubricsScore``; the constructors (RAGAS 0.4.3's
argument names and defaults), the result columns (``name``), the ``llm=`` RAGAS hands its
metrics and the values RAGAS users read (an aspect's 0/1, a rubric's level) stay as they were.
Behind them are ragbridge's `Aspect` and `Rubric` (`ragbridge.core.criteria`): a validated reply
(a verdict that is not yes/no, a level outside the rubric, is repaired or retried, never
scored), the definition and the rubric as data in delimited blocks, the judge's reason kept in
the ragbridge `Score` (`ragbridge.adapters.ragas.evaluate` returns it), and a row that lacks a
field the criterion reads refused before any call.

What the judge sees is decided as RAGAS decides it. RAGAS's own metrics show the judge every
field the row has among their columns (all optional): so do these, row by row — the question
(``user_input``), the answer (``response``), the contexts (``retrieved_contexts``) and the
reference (``reference``) when the row holds them. ``required_columns=`` narrows and requires
as it does for RAGAS (a column without ``:optional`` must be there), and ragbridge's ``reads=``
names the fields outright (``reads=("question", "answer")``: cheaper, and a row lacking one is
a failure naming it, not a silently different prompt). A rubric "with reference" is therefore a
row with a ``reference``, as in RAGAS 0.4.3; RAGAS's ``reference_contexts`` has no criterion
field and is not shown (said once in the log when a row has it).

``AspectCritic(strictness=n)`` asks ``n`` verdicts (odd, rounded up as RAGAS rounds it) and takes
the majority, the self-consistency RAGAS's docstring describes (RAGAS 0.4.3 itself asks once
whatever the strictness); the vote share is in the Score's details. ``max_retries`` is
accepted and ignored (the judge engine's retry budget applies); a custom
``single_turn_prompt``/``multi_turn_prompt`` is refused (the prompts are ragbridge's). As the
name ``max_retries`` is RAGAS's here, ragbridge's retry budget is set with
``settings=Settings(max_retries=...)``.
Single-turn rows only.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from typing_extensions import Unpack

from . import _framework  # noqa: F401  (first: RAGAS through the one guard)

# isort: split
from ragas.dataset_schema import SingleTurnSample
from ragas.metrics._domain_specific_rubrics import DEFAULT_REFERENCE_FREE_RUBRICS
from ragas.metrics.base import MetricOutputType, MetricType

from ragbridge.core.criteria import FIELD_NAMES, Aspect, CriterionSpec, Rubric
from ragbridge.core.metrics.base import Metric, MetricContext, PlannedCall
from ragbridge.core.results.evaluation import Score
from ragbridge.core.sample import Sample
from ragbridge.core.settings import Settings, SettingsOptions

from .metrics import _WithLLM

__all__ = ["AspectCritic", "RubricsScore", "rubric_levels"]

logger = logging.getLogger(__name__)

_FIELD_OF = {
    "user_input": "question",
    "response": "answer",
    "retrieved_contexts": "contexts",
    "reference": "reference",
}
_COLUMN_OF = {field: column for column, field in _FIELD_OF.items()}
_UNSHOWN = "reference_contexts"
_RUBRIC_KEY = re.compile(r"score(-?\d+)_description")


def _measure_name(name: str) -> str:
    """The ragbridge measure name of a RAGAS metric name (a criterion's name is a letter, then
    letters, digits or underscores; anything else becomes ``_``)."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"name must be non-empty text, got {name!r}")
    slug = re.sub(r"[^A-Za-z0-9_]+", "_", name.strip()).strip("_")
    return slug if slug[:1].isalpha() else f"ragas_{slug}".rstrip("_")


def rubric_levels(rubrics: Mapping[str, str]) -> dict[int, str]:
    """RAGAS's ``{"score1_description": ..., ...}`` as ``{1: ..., ...}``; any other key is
    refused, naming it (ragbridge's `Rubric` then checks the levels are consecutive)."""
    if not isinstance(rubrics, Mapping) or not rubrics:
        raise ValueError(f"rubrics must map 'score<N>_description' keys to text, got {rubrics!r}")
    levels: dict[int, str] = {}
    for key, text in rubrics.items():
        found = _RUBRIC_KEY.fullmatch(key) if isinstance(key, str) else None
        if found is None:
            raise ValueError(
                f"rubrics: key {key!r} is not RAGAS's 'score<N>_description' (e.g. "
                "'score1_description')"
            )
        levels[int(found.group(1))] = text
    return levels


@dataclass(frozen=True)
class _Shown:
    """What the judge sees: ``required`` fields always (a row lacking one is refused),
    ``optional`` ones when the row has them; ``unshown``: RAGAS would show the row's
    ``reference_contexts`` and we cannot (the log says so once)."""

    required: tuple[str, ...]
    optional: tuple[str, ...] = ()
    unshown: bool = False


def _fields(reads: Any, required_columns: Mapping[Any, Any] | None) -> _Shown:
    """What the judge sees, from ragbridge's ``reads=`` or RAGAS's ``required_columns=``; by
    default RAGAS's: every column optional (the question is always there: a row is not a
    sample without it)."""
    if reads is not None and required_columns is not None:
        raise TypeError("reads= and required_columns= both say what the judge sees; pass one")
    if reads is not None:
        return _Shown((reads,) if isinstance(reads, str) else tuple(reads))
    if required_columns is None:
        return _Shown(("question",), ("answer", "contexts", "reference"), unshown=True)
    columns = required_columns.get(MetricType.SINGLE_TURN, set())
    required: list[str] = []
    optional: list[str] = []
    unshown = False
    for column in columns:
        base, _, marker = str(column).partition(":")
        if base == _UNSHOWN and marker:
            unshown = marker == "optional"
            continue
        if base not in _FIELD_OF:
            raise ValueError(
                f"required_columns: {base!r} has no criterion field (a criterion reads "
                f"{', '.join(_FIELD_OF)})"
            )
        field = _FIELD_OF[base]
        if not marker:
            required.append(field)
        elif marker == "optional":
            optional.append(field)
    if not required and not optional:
        raise ValueError("required_columns: name at least one single-turn column")
    return _Shown(tuple(required), tuple(f for f in optional if f not in required), unshown)


def _present(sample: Sample, field: str) -> bool:
    value: Any = sample.contexts if field == "contexts" else getattr(sample, field)
    return bool(value.strip()) if isinstance(value, str) else bool(value)


class _RowCriterion(Metric):
    """One criterion that reads, row by row, the fields RAGAS would show its judge: the
    required ones, and the optional ones the row has. One ragbridge measure per shape of row
    (at most a few), made when first needed; the Score is that measure's."""

    needs_judge = True

    def __init__(
        self, name: str, make: Callable[[tuple[str, ...]], CriterionSpec], shown: _Shown
    ) -> None:
        self.name = name
        self.make = make
        self.required = shown.required
        self.optional = shown.optional
        self.unshown = shown.unshown
        self.spec = make(self.required or ("question",))  # checks the arguments now
        self._metrics: dict[tuple[str, ...], Metric] = {}
        self._lock = threading.Lock()
        self._warned = False

    def shown(self, sample: Sample) -> tuple[str, ...]:
        """The fields the judge sees for ``sample``, in `FIELD_NAMES` order."""
        wanted = set(self.required) | {f for f in self.optional if _present(sample, f)}
        fields = tuple(f for f in FIELD_NAMES if f in wanted)
        return fields + tuple(sorted(f for f in wanted if f not in FIELD_NAMES))

    def measure_for(self, reads: tuple[str, ...]) -> Metric:
        with self._lock:
            metric = self._metrics.get(reads)
            if metric is None:
                metric = self._metrics[reads] = self.make(reads).metric()
            return metric

    async def _score(self, sample: Sample, ctx: MetricContext) -> Score:
        if self.unshown and sample.reference_contexts and not self._warned:
            self._warned = True
            logger.warning(
                "%s: the row's reference_contexts are not shown to the judge (a criterion "
                "reads the question, answer, contexts and reference)",
                self.name,
            )
        return await self.measure_for(self.shown(sample)).score(sample, ctx)

    def _plan(self, sample: Sample, shared_tags: frozenset[str]) -> list[PlannedCall]:
        return self.measure_for(self.shown(sample)).plan(sample, shared_tags)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.spec!r})"


class _CriterionCounterpart(_WithLLM):
    """A RAGAS metric over a `_RowCriterion`: RAGAS's columns, ``llm=`` and output type."""

    def __init__(
        self,
        name: str,
        make: Callable[[tuple[str, ...]], CriterionSpec],
        *,
        llm: Any,
        required_columns: Mapping[Any, Any] | None,
        output_type: MetricOutputType | None,
        single_turn_prompt: Any,
        multi_turn_prompt: Any,
        reads: Any,
        settings: Settings | None,
        options: dict[str, Any],
    ) -> None:
        if single_turn_prompt is not None or multi_turn_prompt is not None:
            raise ValueError(
                f"{type(self).__name__}: a custom RAGAS prompt is not supported: the judge's "
                "prompt is ragbridge's (the definition or rubric is data in a delimited block)"
            )
        shown = _fields(reads, required_columns)
        criterion = _RowCriterion(_measure_name(name), make, shown)
        super().__init__(criterion, settings=settings, llm=llm, name=name, **options)
        self.criterion = criterion
        columns = {"user_input"} | {_COLUMN_OF[f] for f in shown.required if f in _COLUMN_OF}
        columns |= {f"{_COLUMN_OF[f]}:optional" for f in shown.optional if f in _COLUMN_OF}
        if shown.unshown:  # listed, though never shown: RAGAS drops the columns not listed,
            columns.add(f"{_UNSHOWN}:optional")  # and the log must see it to say so
        self._required_columns = {MetricType.SINGLE_TURN: columns}
        self.output_type = output_type

    @property
    def spec(self) -> CriterionSpec:
        """The ragbridge spec (as built for the fields every row shows)."""
        return self.criterion.spec

    def _shown(self, value: float) -> float:
        """The value RAGAS's own metric would put in the column, from ragbridge's [0, 1]."""
        return value

    async def _single_turn_ascore(self, sample: SingleTurnSample, callbacks: Any) -> float:
        return self._shown(await super()._single_turn_ascore(sample, callbacks))


class AspectCritic(_CriterionCounterpart):
    """RAGAS's ``AspectCritic`` on ragbridge's `Aspect`: 1 when the row meets ``definition``,
    else 0 (the column RAGAS's has), the judge's reason in the ragbridge Score.

    ``AspectCritic(name, definition, llm=None, required_columns=None,
    output_type=MetricOutputType.BINARY, single_turn_prompt=None, multi_turn_prompt=None,
    strictness=1, max_retries=1)`` as RAGAS 0.4.3 takes it (see the module for what each
    means here); ragbridge's ``reads=``, ``judge=`` (or any `Settings` field) and
    ``settings=`` besides.
    """

    def __init__(  # type: ignore[misc]  # RAGAS's max_retries, not Settings.max_retries
        self,
        name: str,
        definition: str,
        llm: Any = None,
        required_columns: Mapping[Any, Any] | None = None,
        output_type: MetricOutputType | None = MetricOutputType.BINARY,
        single_turn_prompt: Any = None,
        multi_turn_prompt: Any = None,
        strictness: int = 1,
        max_retries: int = 1,
        *,
        reads: Any = None,
        settings: Settings | None = None,
        **options: Unpack[SettingsOptions],
    ) -> None:
        if isinstance(strictness, bool) or not isinstance(strictness, int) or strictness < 1:
            raise ValueError(f"strictness must be a positive integer, got {strictness!r}")
        votes = strictness if strictness % 2 else strictness + 1  # odd, as RAGAS makes it
        measure = _measure_name(name)
        self._definition = definition
        self.strictness = votes
        self.max_retries = max_retries

        def make(fields: tuple[str, ...]) -> CriterionSpec:
            return Aspect(measure, definition, reads=fields, samples=votes)

        super().__init__(
            name,
            make,
            llm=llm,
            required_columns=required_columns,
            output_type=output_type,
            single_turn_prompt=single_turn_prompt,
            multi_turn_prompt=multi_turn_prompt,
            reads=reads,
            settings=settings,
            options=dict(options),
        )

    @property
    def definition(self) -> str:
        """The definition judged (read-only: make a new metric for another)."""
        return self._definition


class RubricsScore(_CriterionCounterpart):
    """RAGAS's ``RubricsScore`` on ragbridge's `Rubric`: the column holds the level chosen
    (1..5 with RAGAS's default rubric), as RAGAS's does; the ragbridge Score holds it on [0, 1]
    with the level and the judge's feedback.

    ``RubricsScore(name="domain_specific_rubrics", rubrics=<RAGAS's reference-free rubric>,
    llm=None, required_columns=None, output_type=MetricOutputType.DISCRETE,
    single_turn_prompt=None, multi_turn_prompt=None, max_retries=1)`` as RAGAS 0.4.3 takes
    it; ``rubrics`` keys are ``"score<N>_description"`` with consecutive N. A row with a
    ``reference`` is judged with it, as RAGAS does (``reads=`` fixes the fields instead).
    """

    def __init__(  # type: ignore[misc]  # RAGAS's max_retries, not Settings.max_retries
        self,
        name: str = "domain_specific_rubrics",
        rubrics: Mapping[str, str] = DEFAULT_REFERENCE_FREE_RUBRICS,
        llm: Any = None,
        required_columns: Mapping[Any, Any] | None = None,
        output_type: MetricOutputType | None = MetricOutputType.DISCRETE,
        single_turn_prompt: Any = None,
        multi_turn_prompt: Any = None,
        max_retries: int = 1,
        *,
        reads: Any = None,
        settings: Settings | None = None,
        **options: Unpack[SettingsOptions],
    ) -> None:
        levels = rubric_levels(rubrics)
        measure = _measure_name(name)
        self.rubrics = rubrics
        self.max_retries = max_retries

        def make(fields: tuple[str, ...]) -> CriterionSpec:
            return Rubric(measure, levels, reads=fields)

        super().__init__(
            name,
            make,
            llm=llm,
            required_columns=required_columns,
            output_type=output_type,
            single_turn_prompt=single_turn_prompt,
            multi_turn_prompt=multi_turn_prompt,
            reads=reads,
            settings=settings,
            options=dict(options),
        )

    def _shown(self, value: float) -> float:
        low, high = self.spec.scale
        return round(low + value * (high - low), 6)
