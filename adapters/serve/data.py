"""What the pages of ``ragbridge serve`` show, read from a results store: no web framework here.

Everything goes through the `ResultsStore` protocol (an SQLite file or a store on a server), so
the same views serve both. A recorded run never changes (a run id is recorded once, its cells
before its row), so a run's cells are read once into a `RunTable` — ids, a value matrix and a
status matrix — and the sample table is sorted, filtered, searched and paged on it with numpy,
server-side: a page of 50 rows out of 10,000 samples costs a few milliseconds, not a download
of every cell.

Two runs are compared with `ragbridge.core.results.stats.compare` itself, on evaluations rebuilt
from the stored cells (samples in id order, as the store returns them) with the report's
resamples and seed, so the numbers are the library's, not a re-implementation. Trends are
`ragbridge.core.monitoring.history.run_history` (the rule that marks the run that changed a
metric); production alerts are an `AlertMonitor` replay of the stored requests.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from ragbridge.core.monitoring.alerts import Alert, AlertMonitor, Baseline
from ragbridge.core.monitoring.history import MetricPoint, run_history
from ragbridge.core.monitoring.records import RequestRecord, RunRecord
from ragbridge.core.monitoring.store_api import ResultsStore
from ragbridge.core.results.evaluation import Evaluation, FailureKind, Score
from ragbridge.core.results.stats import Comparison, compare

__all__ = [
    "MAX_PAGE",
    "N_RESAMPLES",
    "SEED",
    "RunTable",
    "StoreView",
    "TableQuery",
    "UnknownRun",
]

#: Resamples and seed of a comparison: the static report's (and `compare`'s defaults).
N_RESAMPLES = 10_000
SEED = 0
MAX_PAGE = 500
"""The most rows one page of the sample table carries."""

SCORED, FAILED, SKIPPED, ABSENT = 0, 1, 2, 3
Status = Literal["all", "failed", "skipped", "scored"]
STATUSES: tuple[str, ...] = ("all", "failed", "skipped", "scored")


class UnknownRun(LookupError):
    """No run (or no sample of a run) answers to the id a request gave: a 404."""

    def __init__(self, what: str, given: str, why: str | None = None) -> None:
        super().__init__(why or f"no {what} {given!r}")
        self.what = what
        self.given = given


@dataclass(frozen=True)
class RunTable:
    """One run's cells as arrays: row i is ``ids[i]`` (sorted), column j is ``metrics[j]``."""

    run: RunRecord
    ids: list[str]
    metrics: list[str]
    values: npt.NDArray[np.float64]
    """NaN where the cell holds no value."""
    status: npt.NDArray[np.int8]
    """`SCORED`, `FAILED`, `SKIPPED` or `ABSENT` per cell."""
    failures: dict[tuple[int, int], str]
    """The failure kind of each failed cell."""
    folded: list[str]
    """``ids`` case-folded, for the search box."""
    notes: dict[tuple[int, int], tuple[str | None, Any]] = field(default_factory=dict)
    """The judge's reason and details of each cell that kept one (store schema 3)."""

    def row(self, sample_id: str) -> int:
        lo, hi = 0, len(self.ids)
        while lo < hi:  # ids are sorted: bisect
            mid = (lo + hi) // 2
            if self.ids[mid] < sample_id:
                lo = mid + 1
            else:
                hi = mid
        if lo == len(self.ids) or self.ids[lo] != sample_id:
            raise UnknownRun(f"sample in run {self.run.run_id}", sample_id)
        return lo

    def cell(self, i: int, j: int) -> float | str | None:
        """A cell for a page: the value, ``"failed (kind)"``, ``"skipped"``, or None (absent)."""
        code = int(self.status[i, j])
        if code == SCORED:
            return float(self.values[i, j])
        if code == FAILED:
            return f"failed ({self.failures.get((i, j), 'unknown')})"
        return "skipped" if code == SKIPPED else None

    def evaluation(self) -> Evaluation:
        """The run as an `Evaluation` (what `compare` takes). Scores are immutable, so one
        `Score` serves every cell of the same value (or failure kind): a run of 80,000 cells
        holds far fewer distinct outcomes, and building a Score is the costly part."""
        ev = Evaluation()
        made: dict[object, Score] = {}
        skipped = Score.skip("skipped")
        for i, sid in enumerate(self.ids):
            for j, metric in enumerate(self.metrics):
                code = int(self.status[i, j])
                if code == SCORED:
                    value = float(self.values[i, j])
                    score = made.get(value)
                    if score is None:
                        score = made[value] = Score(value=value)
                elif code == FAILED:
                    kind = self.failures.get((i, j), "")
                    score = made.get(("failed", kind))
                    if score is None:
                        known = kind if kind in _KINDS else FailureKind.JUDGE_ERROR.value
                        score = made[("failed", kind)] = Score.fail(known, kind or "failed")
                elif code == SKIPPED:
                    score = skipped
                else:
                    continue
                ev.add(sid, metric, score)
        return ev


_KINDS = frozenset(k.value for k in FailureKind)


def table_of(run: RunRecord, cells: list[tuple[str, str, Any]]) -> RunTable:
    """The `RunTable` of ``run`` from its stored ``(sample_id, metric, ScoreCell)`` cells."""
    ids = sorted({sid for sid, _, _ in cells})
    metrics = list(dict.fromkeys([*run.summary, *(m for _, m, _ in cells)]))
    row = {sid: i for i, sid in enumerate(ids)}
    col = {m: j for j, m in enumerate(metrics)}
    values = np.zeros((len(ids), len(metrics)))  # read only where status says SCORED
    status = np.full((len(ids), len(metrics)), ABSENT, dtype=np.int8)
    failures: dict[tuple[int, int], str] = {}
    notes: dict[tuple[int, int], tuple[str | None, Any]] = {}
    for sid, metric, c in cells:
        i, j = row[sid], col[metric]
        reason, details = getattr(c, "reason", None), getattr(c, "details", None)
        if reason is not None or details is not None:
            notes[(i, j)] = (reason, details)
        if c.value is not None:
            values[i, j] = c.value
            status[i, j] = SCORED
        elif c.failure is not None:
            status[i, j] = FAILED
            failures[(i, j)] = c.failure
        else:
            status[i, j] = SKIPPED
    used = [j for j in range(len(metrics)) if np.any(status[:, j] != ABSENT)] if ids else []
    if ids and len(used) != len(metrics):  # a summary-only metric (no cell): no column
        metrics = [metrics[j] for j in used]
        values, status = values[:, used], status[:, used]
        remap = {old: new for new, old in enumerate(used)}
        failures = {(i, remap[j]): k for (i, j), k in failures.items()}
        notes = {(i, remap[j]): n for (i, j), n in notes.items()}
    folded = [s.casefold() for s in ids]
    return RunTable(run, ids, metrics, values, status, failures, folded, notes)


@dataclass(frozen=True)
class TableQuery:
    """What the sample table shows: sort, filter, search and one page."""

    sort: str = "id"
    desc: bool = False
    q: str = ""
    status: str = "all"
    metric: str | None = None
    """The metric whose value ``low``/``high`` bound (rows without a value there drop out)."""
    low: float | None = None
    high: float | None = None
    offset: int = 0
    limit: int = 50


def query_table(table: RunTable, query: TableQuery) -> dict[str, Any]:
    """One page of the filtered, sorted sample table, with the counts a pager needs."""
    n = len(table.ids)
    keep = np.ones(n, dtype=bool)
    if query.q:
        needle = query.q.casefold()
        keep &= np.fromiter((needle in s for s in table.folded), dtype=bool, count=n)
    if table.metrics and query.status != "all":
        if query.status == "failed":
            keep &= np.any(table.status == FAILED, axis=1)
        elif query.status == "skipped":
            keep &= np.any(table.status == SKIPPED, axis=1)
        elif query.status == "scored":
            keep &= np.all(table.status == SCORED, axis=1)
    if query.metric in table.metrics and (query.low is not None or query.high is not None):
        j = table.metrics.index(query.metric)
        column = table.values[:, j]
        inside = table.status[:, j] == SCORED
        if query.low is not None:
            inside &= column >= query.low
        if query.high is not None:
            inside &= column <= query.high
        keep &= inside
    rows = np.flatnonzero(keep)
    if query.sort in table.metrics:
        j = table.metrics.index(query.sort)
        column = table.values[rows, j]
        missing = table.status[rows, j] != SCORED
        key = np.where(missing, 0.0, -column if query.desc else column)
        # rows are in id order already; lexsort is stable: ties keep it, no value sorts last
        rows = rows[np.lexsort((key, missing))]
    elif query.desc:
        rows = rows[::-1]
    page = rows[query.offset : query.offset + query.limit]
    return {
        "run": table.run.run_id,
        "metrics": table.metrics,
        "total": n,
        "matched": int(rows.size),
        "offset": query.offset,
        "limit": query.limit,
        "rows": [
            {
                "id": table.ids[i],
                "cells": [table.cell(int(i), j) for j in range(len(table.metrics))],
            }
            for i in page
        ],
    }


def sample_detail(
    table: RunTable,
    sample_id: str,
    previous: RunTable | None = None,
    record: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Every stored cell of one sample with the judge's reason and details (claims, verdicts)
    when kept, what the run kept about each metric (provider, mean), the sample's cell in
    ``previous`` (the run before, on the same input) when given, and ``record`` (the sample's
    question, answer, reference and contexts as the store kept them) when there is one."""
    i = table.row(sample_id)
    k: int | None = None
    if previous is not None:
        try:
            k = previous.row(sample_id)
        except UnknownRun:
            k = None
    cells = []
    for j, metric in enumerate(table.metrics):
        code = int(table.status[i, j])
        summary = table.run.summary.get(metric, {})
        before = None
        if previous is not None and k is not None and metric in previous.metrics:
            before = previous.cell(k, previous.metrics.index(metric))
        reason, details = table.notes.get((i, j), (None, None))
        cells.append(
            {
                "metric": metric,
                "reason": reason,
                "details": details,
                "status": ("scored", "failed", "skipped", "absent")[code],
                "value": float(table.values[i, j]) if code == SCORED else None,
                "failure": table.failures.get((i, j)),
                "provider": summary.get("provider"),
                "run_mean": summary.get("mean"),
                "previous": before,
            }
        )
    return {
        "run": table.run.run_id,
        "id": sample_id,
        "previous_run": None if previous is None or k is None else previous.run.run_id,
        "sample": record,
        "cells": cells,
    }


def moved_most(a: RunTable, b: RunTable, metric: str, *, top: int = 10) -> list[dict[str, Any]]:
    """The samples scored in both runs whose ``metric`` moved most (largest ``|b - a|``)."""
    if metric not in a.metrics or metric not in b.metrics:
        return []
    ja, jb = a.metrics.index(metric), b.metrics.index(metric)
    pos_b = {sid: i for i, sid in enumerate(b.ids)}
    pairs = []
    for i, sid in enumerate(a.ids):
        k = pos_b.get(sid)
        if k is not None and a.status[i, ja] == SCORED and b.status[k, jb] == SCORED:
            va, vb = float(a.values[i, ja]), float(b.values[k, jb])
            if vb != va:
                pairs.append((-abs(vb - va), sid, va, vb))
    pairs.sort()
    return [{"id": sid, "a": va, "b": vb, "diff": vb - va} for _, sid, va, vb in pairs[:top]]


def _points(point: MetricPoint) -> dict[str, Any]:
    return point.model_dump(mode="json")


def _buckets(records: list[RequestRecord], width: float) -> list[dict[str, Any]]:
    out: dict[float, dict[str, Any]] = {}
    sums: dict[float, dict[str, list[float]]] = {}
    for r in records:
        start = math.floor(r.timestamp / width) * width
        entry = out.setdefault(
            start, {"start": start, "requests": 0, "sampled": 0, "errors": 0, "scores": {}}
        )
        entry["requests"] += 1
        entry["sampled"] += int(r.sampled)
        entry["errors"] += int(r.error is not None)
        for metric, cell in r.scores.items():
            if cell.value is not None:
                sums.setdefault(start, {}).setdefault(metric, []).append(cell.value)
    for start, by_metric in sums.items():
        out[start]["scores"] = {
            m: {"mean": float(np.mean(v)), "n": len(v)} for m, v in sorted(by_metric.items())
        }
    return [out[k] for k in sorted(out)]


def episodes(alerts: list[Alert]) -> list[dict[str, Any]]:
    """Alert episodes: each firing with the resolving that ended it (None while active)."""
    open_: dict[str, dict[str, Any]] = {}
    out: list[dict[str, Any]] = []
    for alert in alerts:
        if alert.state == "firing":
            entry = {
                "signal": alert.signal,
                "started": alert.timestamp,
                "ended": None,
                "message": alert.message,
                "p_value": alert.p_value,
                "effect": alert.effect,
            }
            open_[alert.signal] = entry
            out.append(entry)
        elif alert.signal in open_:
            open_.pop(alert.signal)["ended"] = alert.timestamp
    return out


class _Memo:
    """A small thread-safe LRU of values computed from immutable runs."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._lock = threading.Lock()
        self._items: OrderedDict[Hashable, Any] = OrderedDict()
        self._making: dict[Hashable, threading.Lock] = {}

    def get(self, key: Hashable, make: Callable[[], Any]) -> Any:
        """The value of ``key``, made once: a second request for a key being made waits for
        the first (two tabs opening one comparison do not compute it twice)."""
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
            making = self._making.setdefault(key, threading.Lock())
        with making:
            with self._lock:
                if key in self._items:
                    return self._items[key]
            try:
                value = make()
            finally:
                with self._lock:
                    self._making.pop(key, None)
            with self._lock:
                self._items[key] = value
                while len(self._items) > self.size:
                    self._items.popitem(last=False)
        return value


class StoreView:
    """The read side of ``serve`` over one store: every view a page or the JSON API needs."""

    def __init__(self, store: ResultsStore) -> None:
        self.store = store
        self._tables = _Memo(4)
        self._compares = _Memo(16)
        self._trends = _Memo(4)

    # runs

    def runs(self, *, branch: str | None = None, source: str | None = None) -> list[RunRecord]:
        """Recorded runs, newest first, optionally of one branch or input file."""
        runs = self.store.runs(source=source)
        if branch is not None:
            runs = [r for r in runs if (r.branch or "") == branch]
        return runs[::-1]

    def run(self, run_id: str) -> RunRecord:
        """The run named by ``run_id`` (or a unique prefix); `UnknownRun` otherwise."""
        if not run_id:
            raise UnknownRun("run", run_id)
        try:
            return self.store.run(run_id)
        except KeyError as exc:  # none, or an ambiguous prefix: the store says which
            why = str(exc.args[0]) if exc.args else None
            raise UnknownRun("run", run_id, why) from None

    def previous(self, run: RunRecord) -> RunRecord | None:
        """The run recorded just before ``run`` on the same input, if any."""
        if not run.source:
            return None
        same = [r.run_id for r in self.store.runs(source=run.source)]
        index = same.index(run.run_id) if run.run_id in same else 0
        return self.run(same[index - 1]) if index > 0 else None

    def table(self, run_id: str) -> RunTable:
        run = self.run(run_id)
        made: RunTable = self._tables.get(
            run.run_id, lambda: table_of(run, self.store.run_cells(run.run_id))
        )
        return made

    def sample_record(self, run_id: str, sample_id: str) -> dict[str, Any] | None:
        """The sample's question, answer, reference and contexts as the store kept them; None
        when it kept none (runs recorded before store schema 3, or without their samples)."""
        return self.store.run_sample(run_id, sample_id)

    # two runs

    def compare(self, a_id: str, b_id: str) -> dict[str, Any]:
        """`compare` (run a, run b) by metric, or why the runs cannot be compared."""
        a, b = self.table(a_id), self.table(b_id)

        def make() -> dict[str, Any]:
            try:
                result: dict[str, Comparison] = compare(
                    a.evaluation(), b.evaluation(), n_resamples=N_RESAMPLES, seed=SEED
                )
            except ValueError as exc:
                return {"a": a.run.run_id, "b": b.run.run_id, "error": str(exc), "metrics": {}}
            return {
                "a": a.run.run_id,
                "b": b.run.run_id,
                "error": None,
                "metrics": {m: c.model_dump(mode="json") for m, c in result.items()},
                "moved": {m: moved_most(a, b, m) for m in result},
            }

        made: dict[str, Any] = self._compares.get((a.run.run_id, b.run.run_id), make)
        return made

    # trends

    def trends(self, source: str | None = None) -> dict[str, list[dict[str, Any]]]:
        """Each metric over the runs (oldest first), each point marked when its run changed it."""
        runs = self.store.runs(source=source)
        key = (source, len(runs), runs[-1].run_id if runs else None)

        def make() -> dict[str, list[dict[str, Any]]]:
            out: dict[str, list[dict[str, Any]]] = {}
            for row in run_history(self.store, source=source):
                for metric, point in row.points.items():
                    entry = _points(point)
                    entry["branch"] = row.run.branch
                    out.setdefault(metric, []).append(entry)
            return out

        made: dict[str, list[dict[str, Any]]] = self._trends.get(key, make)
        return made

    # production

    def production(self, *, days: float = 7.0, now: float | None = None) -> dict[str, Any]:
        """Live requests of the last ``days`` (0: all): counts and mean scores per bucket (an
        hour over two days or less, else a day), and the alert episodes of an `AlertMonitor`
        replay against the requests before the window (or its first 200 observations)."""
        now = time.time() if now is None else now
        since = None if days <= 0 else now - days * 86400.0
        records = self.store.requests(since=since)
        earlier = [] if since is None else self.store.requests(until=since)
        baseline = Baseline.from_requests(earlier, source="earlier requests") if earlier else None
        monitor = AlertMonitor(baseline)
        alerts = monitor.replay(records)
        width = 3600.0 if 0 < days <= 2 else 86400.0
        return {
            "since": since,
            "days": days,
            "bucket_seconds": width,
            "requests": len(records),
            "sampled": sum(int(r.sampled) for r in records),
            "buckets": _buckets(records, width),
            "episodes": episodes(alerts),
        }
