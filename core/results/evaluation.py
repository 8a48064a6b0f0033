"""The result contract: what every measure returns and how a run's results are kept.

A measure answers one of three things for a (sample, metric) cell:

* **scored** — a value in [0, 1];
* **failed** — a typed :class:`Failure` (the judge timed out, its reply did not parse, ...);
* **skipped** — the measure does not apply (a ranking measure on a query with no relevant
  document), with a reason.

These are kept apart on purpose. Frameworks that return ``NaN`` or ``0.0`` for a failed judge
call silently bias the mean; here a failure is never a low score and no score is ever NaN, so a
summary can report how many cells failed and why next to the mean of the cells that were scored.

:class:`Evaluation` is the sample × metric table of a run. It only stores and moves results
(JSONL, CSV, pandas, merging the outputs of several processes); the statistics live in
:mod:`ragbridge.core.results.stats`.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

import numpy as np
import numpy.typing as npt
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
)

from ..files import atomic_write
from .cell_json import cell_json
from .score import Failure, FailureKind, Score, ScoreStatus
from .tally import MetricSummary, Tally
from .usage import Usage

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "Evaluation",
    "EvaluationRow",
    "Failure",
    "FailureKind",
    "MetricSummary",
    "Score",
    "ScoreStatus",
    "Usage",
]

StrPath = str | os.PathLike[str]

#: Version written in the JSONL header line; bump it when the line format changes.
JSONL_FORMAT_VERSION = 1


class EvaluationRow(NamedTuple):
    """One cell of an :class:`Evaluation`."""

    sample_id: str
    metric: str
    score: Score


class _CellLine(BaseModel):
    """Schema of one JSONL cell line; used to turn a bad line into a ``file:line: field`` error."""

    model_config = ConfigDict(extra="forbid")

    sample_id: str = Field(strict=True, min_length=1)
    metric: str = Field(strict=True, min_length=1)
    score: Score


class _HeaderLine(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ragbridge_evaluation: Literal[1]
    metadata: dict[str, Any] = Field(default_factory=dict)


_RECORD_FIELDS = (
    "sample_id",
    "metric",
    "value",
    "status",
    "failure_kind",
    "failure_message",
    "reason",
    "provider",
    "judge_model",
    "prompt_version",
    "calls",
    "cached_calls",
    "prompt_tokens",
    "completion_tokens",
    "latency_s",
    "details",
)


def _refuse_constant(name: str) -> float:
    raise ValueError(f"non-finite number {name} is not allowed")


def _first_error(err: ValidationError, prefix: str = "") -> str:
    """``'score.value: Score.value must lie within [0, 1], got 1.5'`` from a pydantic error."""
    errors = err.errors()
    first = errors[0]
    loc = ".".join(str(part) for part in first["loc"])
    field = f"{prefix}.{loc}" if prefix and loc else (prefix or loc or "line")
    msg = str(first["msg"]).removeprefix("Value error, ")
    more = f" (and {len(errors) - 1} more errors)" if len(errors) > 1 else ""
    return f"{field}: {msg}{more}"


def _check_key(sample_id: object, metric: object) -> None:
    for name, val in (("sample_id", sample_id), ("metric", metric)):
        if not isinstance(val, str):
            raise TypeError(f"{name} must be a str, got {type(val).__name__}")
        if not val:
            raise ValueError(f"{name} must not be empty")


class Evaluation:
    """The sample × metric table of one run, in the order samples and metrics were first added.

    Cells are unique: adding a second score for the same (sample, metric) is an error unless
    ``replace=True``, so a re-run cannot silently overwrite or double-count a result. Equality
    compares the cells (not their order, not the metadata).
    """

    def __init__(
        self,
        rows: Iterable[tuple[str, str, Score]] = (),
        *,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        self.metadata: dict[str, Any] = dict(metadata or {})
        self._cells: dict[tuple[str, str], Score] = {}
        self._samples: dict[str, None] = {}
        self._metrics: dict[str, None] = {}
        for sample_id, metric, score in rows:
            self.add(sample_id, metric, score)

    # -- building -------------------------------------------------------------------------------

    def add(self, sample_id: str, metric: str, score: Score, *, replace: bool = False) -> None:
        _check_key(sample_id, metric)
        if not isinstance(score, Score):
            raise TypeError(f"score must be a Score, got {type(score).__name__}")
        key = (sample_id, metric)
        if key in self._cells and not replace:
            raise ValueError(
                f"cell (sample {sample_id!r}, metric {metric!r}) already has a score; "
                "pass replace=True to overwrite it"
            )
        self._cells[key] = score
        self._samples.setdefault(sample_id, None)
        self._metrics.setdefault(metric, None)

    @classmethod
    def merge(cls, *evaluations: Evaluation) -> Evaluation:
        """Union of the cells of several evaluations, e.g. shards run in separate processes.

        A cell present in two inputs must hold equal scores there (the same result written twice
        is harmless; two different results for one cell are a conflict and raise ValueError).
        Metadata are merged like ``dict.update``: for a key set in several inputs, the last wins.
        """
        merged = cls()
        for ev in evaluations:
            merged.metadata.update(ev.metadata)
            for sample_id, metric, score in ev:
                existing = merged.get(sample_id, metric)
                if existing is None:
                    merged.add(sample_id, metric, score)
                elif existing != score:
                    raise ValueError(
                        f"merge conflict at (sample {sample_id!r}, metric {metric!r}): "
                        f"{existing.status} {existing.value!r} vs {score.status} {score.value!r}"
                    )
        return merged

    # -- reading --------------------------------------------------------------------------------

    @property
    def sample_ids(self) -> list[str]:
        return list(self._samples)

    @property
    def metrics(self) -> list[str]:
        return list(self._metrics)

    def get(self, sample_id: str, metric: str) -> Score | None:
        return self._cells.get((sample_id, metric))

    def __len__(self) -> int:
        return len(self._cells)

    def __iter__(self) -> Iterator[EvaluationRow]:
        for (sample_id, metric), score in self._cells.items():
            yield EvaluationRow(sample_id, metric, score)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Evaluation):
            return NotImplemented
        return self._cells == other._cells

    def __repr__(self) -> str:
        return (
            f"Evaluation({len(self._samples)} samples × {len(self._metrics)} metrics, "
            f"{len(self._cells)} cells)"
        )

    def column(self, metric: str) -> dict[str, Score]:
        """``{sample_id: Score}`` for one metric in sample order; KeyError for an unknown metric."""
        if metric not in self._metrics:
            raise KeyError(f"unknown metric {metric!r}; known: {self.metrics}")
        cells = ((sid, self._cells.get((sid, metric))) for sid in self._samples)
        return {sid: score for sid, score in cells if score is not None}

    def values(self, metric: str) -> tuple[list[str], npt.NDArray[np.float64]]:
        """Ids and values of the *scored* cells of ``metric`` (failures and skips left out)."""
        ids: list[str] = []
        vals: list[float] = []
        for sid, score in self.column(metric).items():
            if score.value is not None:
                ids.append(sid)
                vals.append(score.value)
        return ids, np.asarray(vals, dtype=np.float64)

    def usage(self) -> Usage:
        """Judge calls and tokens spent over all cells."""
        return sum((score.usage for score in self._cells.values()), Usage())

    def summary(
        self, *, confidence: float = 0.95, n_resamples: int = 2000, seed: int = 0
    ) -> dict[str, MetricSummary]:
        """One :class:`MetricSummary` per metric; the CI is a seeded percentile bootstrap.

        Computed by `ragbridge.core.results.tally.Tally`, as for a run whose cells were streamed.
        """
        tally = Tally()
        for metric in self._metrics:
            for sample_id, score in self.column(metric).items():
                tally.add(sample_id, metric, score)
        return tally.summary(confidence=confidence, n_resamples=n_resamples, seed=seed)

    # -- export ---------------------------------------------------------------------------------

    def to_records(self) -> list[dict[str, Any]]:
        """One flat dict per cell; ``details`` is JSON text (or None) so every column is scalar."""
        records: list[dict[str, Any]] = []
        for sample_id, metric, s in self:
            records.append(
                {
                    "sample_id": sample_id,
                    "metric": metric,
                    "value": s.value,
                    "status": s.status,
                    "failure_kind": s.failure.kind.value if s.failure else None,
                    "failure_message": s.failure.message if s.failure else None,
                    "reason": s.reason,
                    "provider": s.provider,
                    "judge_model": s.judge_model,
                    "prompt_version": s.prompt_version,
                    "calls": s.usage.calls,
                    "cached_calls": s.usage.cached_calls,
                    "prompt_tokens": s.usage.prompt_tokens,
                    "completion_tokens": s.usage.completion_tokens,
                    "latency_s": s.latency_s,
                    "details": None
                    if s.details is None
                    else json.dumps(s.details, ensure_ascii=False, allow_nan=False),
                }
            )
        return records

    def to_csv(self, path: StrPath) -> None:
        """Write :meth:`to_records` as CSV (stdlib ``csv``); empty fields stand for None.

        The write is atomic: a failure midway leaves any earlier file at ``path`` untouched.
        """
        with atomic_write(path, newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=_RECORD_FIELDS)
            writer.writeheader()
            for record in self.to_records():
                writer.writerow({k: "" if v is None else v for k, v in record.items()})

    def to_pandas(self, *, wide: bool = False) -> pd.DataFrame:
        """Long format (one row per cell, the :meth:`to_records` columns) or, with ``wide=True``,
        a sample × metric table of values.

        Values use pandas' nullable ``Float64`` dtype, so an unscored cell is ``<NA>``, not NaN.
        """
        try:
            import pandas as pd
        except ImportError as exc:
            raise ImportError("Evaluation.to_pandas() needs pandas: pip install pandas") from exc
        if not wide:
            frame = pd.DataFrame.from_records(self.to_records(), columns=list(_RECORD_FIELDS))
            frame["value"] = frame["value"].astype("Float64")
            frame["latency_s"] = frame["latency_s"].astype("Float64")
            return frame
        data = {
            metric: pd.array([self._value_or_none(sid, metric) for sid in self._samples], "Float64")
            for metric in self._metrics
        }
        frame = pd.DataFrame(data, index=pd.Index(self.sample_ids, name="sample_id"))
        frame.columns.name = "metric"
        return frame

    def _value_or_none(self, sample_id: str, metric: str) -> float | None:
        score = self._cells.get((sample_id, metric))
        return None if score is None else score.value

    # -- JSONL ----------------------------------------------------------------------------------

    def to_jsonl(self, path: StrPath) -> None:
        """Write a header line with the metadata, then one line per cell with the full Score.

        Streams cell by cell; :meth:`from_jsonl` reads the file back into an equal Evaluation.
        The write is atomic (a temporary file in the same folder, then a rename): a failure
        midway leaves no half-written file and any earlier file at ``path`` untouched.
        """
        with atomic_write(path) as fh:
            fh.write(header_line(self.metadata))
            for sample_id, metric, score in self:
                fh.write(cell_json(sample_id, metric, score))  # `cell_line`'s bytes, faster

    @classmethod
    def from_jsonl(cls, path: StrPath) -> Evaluation:
        """Read a file written by :meth:`to_jsonl` (the header line is optional).

        Reads line by line. A bad line raises ValueError ``"<file>:<line>: <field>: <problem>"``.
        """
        ev = cls()
        seen_content = False
        with open(path, encoding="utf-8") as fh:
            for lineno, raw in enumerate(fh, start=1):
                if not raw.strip():
                    continue
                where = f"{os.fspath(path)}:{lineno}"
                try:
                    obj = json.loads(raw, parse_constant=_refuse_constant)
                except ValueError as exc:
                    raise ValueError(f"{where}: invalid JSON: {exc}") from None
                if not isinstance(obj, dict):
                    raise ValueError(f"{where}: expected a JSON object, got {type(obj).__name__}")
                if "ragbridge_evaluation" in obj:
                    if seen_content:
                        raise ValueError(f"{where}: header line allowed only as the first line")
                    try:
                        header = _HeaderLine.model_validate(obj)
                    except ValidationError as exc:
                        raise ValueError(f"{where}: {_first_error(exc)}") from None
                    ev.metadata = dict(header.metadata)
                    seen_content = True
                    continue
                seen_content = True
                try:
                    cell = _CellLine.model_validate(obj)
                except ValidationError as exc:
                    raise ValueError(f"{where}: {_first_error(exc)}") from None
                if ev.get(cell.sample_id, cell.metric) is not None:
                    raise ValueError(
                        f"{where}: duplicate cell (sample {cell.sample_id!r}, "
                        f"metric {cell.metric!r})"
                    )
                ev.add(cell.sample_id, cell.metric, cell.score)
        return ev


def _dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, allow_nan=False)


def header_line(metadata: dict[str, Any]) -> str:
    """The first line of a results file: the format version and the run's metadata."""
    header = {"ragbridge_evaluation": JSONL_FORMAT_VERSION, "metadata": metadata}
    try:
        return _dumps(header) + "\n"
    except (TypeError, ValueError) as exc:
        raise ValueError(f"metadata cannot be written as JSON: {exc}") from exc
