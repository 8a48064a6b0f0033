"""What a run's summary needs, kept as the cells stream past: values, counts, usage.

A run that streams its cells to a file (``evaluate(..., on_result=..., keep=False)``) must
not hold them, or its memory grows with the run; yet its summary, its failure bar and its cost
need every cell. A `Tally` keeps only what those need: the scored values of each metric (8
bytes a cell), counts by status and failure kind, the commonest failure messages, and the
summed usage. `Evaluation.summary` is computed from a `Tally` too, so the two cannot disagree.
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from pydantic import BaseModel, ConfigDict

from . import stats
from .usage import Usage

if TYPE_CHECKING:
    from .evaluation import Score

__all__ = ["ColumnTally", "MetricSummary", "Tally"]


class MetricSummary(BaseModel):
    """A metric's column in brief: mean with a bootstrap CI, and counts by status.

    ``mean`` is over scored cells only (``None`` when none was scored); ``ci_low``/``ci_high`` are
    ``None`` with fewer than two scored cells, where a bootstrap says nothing.
    """

    model_config = ConfigDict(frozen=True)

    metric: str
    mean: float | None
    ci_low: float | None
    ci_high: float | None
    n_scored: int
    n_failed: int
    n_skipped: int
    failures_by_kind: dict[str, int]
    confidence: float
    usage: Usage


#: Distinct failure messages remembered per metric and kind; past it only counts grow, so a run
#: whose every failure message differs (ids in the text) stays bounded.
_MESSAGES_KEPT = 64


@dataclass
class ColumnTally:
    """One metric's column in brief."""

    values: array[float] = field(default_factory=lambda: array("d"))
    n_skipped: int = 0
    failures: Counter[str] = field(default_factory=Counter)
    messages: dict[str, Counter[str]] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)

    def add(self, score: Score) -> None:
        if score.failure is not None:
            kind = score.failure.kind.value
            self.failures[kind] += 1
            seen = self.messages.setdefault(kind, Counter())
            if score.failure.message in seen or len(seen) < _MESSAGES_KEPT:
                seen[score.failure.message] += 1
        elif score.value is not None:
            self.values.append(score.value)
        else:
            self.n_skipped += 1
        if score.usage.calls or score.usage.cached_calls or score.usage.total_tokens:
            self.usage += score.usage

    def merge(self, later: ColumnTally) -> None:
        """Add ``later``'s cells, which come after this column's in the run's order."""
        self.values.extend(later.values)
        self.n_skipped += later.n_skipped
        self.failures.update(later.failures)
        for kind, found in later.messages.items():
            seen = self.messages.setdefault(kind, Counter())
            for message, count in found.items():
                if message in seen or len(seen) < _MESSAGES_KEPT:
                    seen[message] += count
        if later.usage.calls or later.usage.cached_calls or later.usage.total_tokens:
            self.usage += later.usage

    @property
    def n_failed(self) -> int:
        return sum(self.failures.values())

    @property
    def n_judged(self) -> int:
        """Cells the measure applied to: scored or failed, not skipped."""
        return len(self.values) + self.n_failed

    def commonest_failure(self) -> tuple[str, int, str] | None:
        """(kind, how many, its commonest message), or None when nothing failed."""
        if not self.failures:
            return None
        kind, count = self.failures.most_common(1)[0]
        message = self.messages[kind].most_common(1)[0][0]
        return kind, count, message

    def commonest_causes(self, n: int = 3) -> list[tuple[str, int, str]]:
        """The ``n`` commonest (kind, how many, message) causes of failure, most first.

        A kind's count is not its commonest message's: 27 judge errors may be 16 replies that
        were not JSON, 6 HTTP 500s and 5 reset connections, and a line naming only the first
        sends the reader after the wrong fault. Ties keep the order the causes were first seen.
        """
        causes = [
            (kind, count, message)
            for kind, seen in self.messages.items()
            for message, count in seen.items()
        ]
        causes.sort(key=lambda cause: -cause[1])
        return causes[:n]

    def summary(
        self, metric: str, *, confidence: float, n_resamples: int, seed: int
    ) -> MetricSummary:
        vals = np.frombuffer(self.values, dtype=np.float64) if self.values else np.zeros(0)
        mean = ci_low = ci_high = None
        if vals.size == 1:
            mean = float(vals[0])
        elif vals.size >= 2:
            mean, ci_low, ci_high, _ = stats.mean_ci(
                vals, confidence=confidence, n_resamples=n_resamples, seed=seed
            )
        return MetricSummary(
            metric=metric,
            mean=mean,
            ci_low=ci_low,
            ci_high=ci_high,
            n_scored=int(vals.size),
            n_failed=self.n_failed,
            n_skipped=self.n_skipped,
            failures_by_kind=dict(self.failures),
            confidence=confidence,
            usage=self.usage,
        )


class Tally:
    """Columns of a run, in the order metrics were first seen; fed one cell at a time."""

    def __init__(self) -> None:
        self.columns: dict[str, ColumnTally] = {}

    @classmethod
    def of(cls, cells: Iterable[tuple[str, str, Score]]) -> Tally:
        """The tally of cells already held (an `Evaluation` iterates as such cells)."""
        tally = cls()
        for sample_id, metric, score in cells:
            tally.add(sample_id, metric, score)
        return tally

    def add(self, sample_id: str, metric: str, score: Score) -> None:
        column = self.columns.get(metric)
        if column is None:
            column = self.columns[metric] = ColumnTally()
        column.add(score)

    def merge(self, later: Tally) -> None:
        """Add the cells of ``later``, a tally of the cells that follow this one's in the run
        (a file scored in parts on several processes): the values keep the run's order, so the
        seeded bootstrap of the summary is the one a single tally would give."""
        for metric, column in later.columns.items():
            mine = self.columns.get(metric)
            if mine is None:
                mine = self.columns[metric] = ColumnTally()
            mine.merge(column)

    @property
    def metrics(self) -> list[str]:
        return list(self.columns)

    def usage(self) -> Usage:
        return sum((c.usage for c in self.columns.values()), Usage())

    def summary(
        self, *, confidence: float = 0.95, n_resamples: int = 2000, seed: int = 0
    ) -> dict[str, MetricSummary]:
        """One `MetricSummary` per metric; the CI is a seeded percentile bootstrap."""
        return {
            metric: column.summary(
                metric, confidence=confidence, n_resamples=n_resamples, seed=seed
            )
            for metric, column in self.columns.items()
        }
