"""`MonitorStore`: the local SQLite file that keeps live requests and evaluation runs.

One file for both, because the questions a team asks cross them: did the faithfulness of live
traffic fall after the run that shipped the new retriever? Rows are written as they happen
(WAL mode, one short transaction per write, a lock around the one connection), so a process
that dies loses at most the row it was writing, and readers (``ragbridge history``, the report)
can open the file while a service is writing to it.

Nothing here knows OpenTelemetry or a framework: wrappers record `RequestRecord`s, the CLI
records `RunRecord`s, and exporters read them back or receive them alongside.

The schema is versioned (`ragbridge.core.monitoring.migrations`): a file of an older version is
upgraded when it is opened (one transaction under the write lock), a newer one is refused.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from typing_extensions import Self

from ..sqlite_wal import is_busy, open_wal
from .migrations import SCHEMA_VERSION, newer_schema, steps_after
from .records import RequestRecord, RunRecord, ScoreCell
from .sample_records import decode_details, decode_record, encode_details, encode_record

__all__ = [
    "REQUEST_COLUMNS",
    "SCHEMA_V1",
    "SCHEMA_VERSION",
    "MonitorStore",
    "StoreError",
    "request_of",
    "request_row",
    "where_clause",
]

SCHEMA_V1 = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS requests (
    request_id TEXT PRIMARY KEY,
    ts REAL NOT NULL,
    pipeline TEXT,
    question TEXT,
    retrieval_ms REAL,
    generation_ms REAL,
    chunks_retrieved INTEGER,
    chunks_used INTEGER,
    retrieval_miss INTEGER,
    answer_chars INTEGER,
    abstained INTEGER,
    sampled INTEGER NOT NULL,
    error TEXT,
    feedback REAL,
    attributes TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS requests_ts ON requests (ts);
CREATE TABLE IF NOT EXISTS request_scores (
    request_id TEXT NOT NULL,
    metric TEXT NOT NULL,
    value REAL,
    failure TEXT,
    skipped INTEGER NOT NULL,
    PRIMARY KEY (request_id, metric)
);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    ts REAL NOT NULL,
    command TEXT NOT NULL,
    source TEXT,
    git_commit TEXT,
    config TEXT NOT NULL,
    summary TEXT NOT NULL,
    metadata TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_ts ON runs (ts);
CREATE TABLE IF NOT EXISTS run_scores (
    run_id TEXT NOT NULL,
    sample_id TEXT NOT NULL,
    metric TEXT NOT NULL,
    value REAL,
    failure TEXT,
    skipped INTEGER NOT NULL,
    PRIMARY KEY (run_id, sample_id, metric)
);
"""
"""The tables as schema version 1 shipped them: every store is created from them and then
brought up to date by the migration steps, so a new file and an upgraded one cannot differ."""

BUSY_TIMEOUT_MS = 60_000
"""How long a write waits for another process's transaction before failing."""

_RUN_COLUMNS = "run_id, ts, command, source, git_commit, config, summary, metadata, branch"

_REQUEST_COLUMNS = (
    "request_id", "ts", "pipeline", "question", "retrieval_ms", "generation_ms",
    "chunks_retrieved", "chunks_used", "retrieval_miss", "answer_chars", "abstained",
    "sampled", "error", "feedback", "attributes",
)  # fmt: skip


class StoreError(ValueError):
    """The file is not a ragbridge monitor store, or one of a newer schema."""


def _flag(value: bool | None) -> int | None:
    return None if value is None else int(value)


def _bool(value: Any) -> bool | None:
    return None if value is None else bool(value)


REQUEST_COLUMNS = _REQUEST_COLUMNS
"""The ``requests`` table's columns, in the order of `request_row` (both stores)."""


def request_row(record: RequestRecord) -> tuple[Any, ...]:
    """A request as the ``requests`` table keeps it (`REQUEST_COLUMNS` order), in every store."""
    return (
        record.request_id, record.timestamp, record.pipeline, record.question,
        record.retrieval_ms, record.generation_ms, record.chunks_retrieved,
        record.chunks_used, _flag(record.retrieval_miss), record.answer_chars,
        _flag(record.abstained), int(record.sampled), record.error, record.feedback,
        json.dumps(record.attributes, sort_keys=True, default=str),
    )  # fmt: skip


def request_of(row: Sequence[Any], scores: Mapping[str, ScoreCell]) -> RequestRecord:
    """The request a ``requests`` row (`REQUEST_COLUMNS` order) holds, with its scores."""
    data = dict(zip(_REQUEST_COLUMNS, row, strict=True))
    return RequestRecord(
        request_id=data["request_id"],
        timestamp=data["ts"],
        pipeline=data["pipeline"],
        question=data["question"],
        retrieval_ms=data["retrieval_ms"],
        generation_ms=data["generation_ms"],
        chunks_retrieved=data["chunks_retrieved"],
        chunks_used=data["chunks_used"],
        retrieval_miss=_bool(data["retrieval_miss"]),
        answer_chars=data["answer_chars"],
        abstained=_bool(data["abstained"]),
        sampled=bool(data["sampled"]),
        error=data["error"],
        feedback=data["feedback"],
        attributes=json.loads(data["attributes"]),
        scores=dict(scores),
    )


def where_clause(*conditions: tuple[str, Any]) -> tuple[str, list[Any]]:
    """A WHERE clause of the ``(condition, value)`` pairs whose value is given (not None), with
    its parameters: every filter of a listing is optional, and none given means every row. The
    conditions carry the store's own placeholder (``?`` for SQLite, ``%s`` for psycopg)."""
    given = [(condition, value) for condition, value in conditions if value is not None]
    clause = " AND ".join(["1=1", *(condition for condition, _ in given)])
    return clause, [value for _, value in given]


class MonitorStore:
    """A monitor store at ``path`` (created with its folder when missing)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        try:
            # Writers queue for the one write lock; SQLite's busy handler is not a fair queue, so
            # with 8 processes streaming 1,000-cell batches on a loaded 2-core machine a writer
            # waited over 5 s (benchmarks/store_throughput.py): wait up to a minute instead.
            self._conn = open_wal(
                str(self.path), timeout_s=BUSY_TIMEOUT_MS / 1000, initialise=self._initialise
            )
        except sqlite3.OperationalError as exc:
            if is_busy(exc):
                raise StoreError(
                    f"{self.path}: still locked by another process after "
                    f"{BUSY_TIMEOUT_MS / 1000:g} s ({exc})"
                ) from None
            raise StoreError(f"{self.path}: not a ragbridge monitor store ({exc})") from None
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path}: not a ragbridge monitor store ({exc})") from None

    def _initialise(self, conn: sqlite3.Connection) -> None:
        """Create the tables or upgrade them; refuse a newer schema before writing anything.

        A current store is only read (no write lock), so many processes open it at once; an
        old or new one is created/upgraded in one ``BEGIN IMMEDIATE`` transaction that reads
        the version again under the lock: of two processes upgrading at once, the second
        finds the work done. Safe to run again after a "locked" refusal (`open_wal`).
        """
        self._conn = conn
        found = self._version()
        if found == SCHEMA_VERSION:
            return
        if found is not None and found > SCHEMA_VERSION:
            raise StoreError(newer_schema(str(self.path), found))
        with self._write():
            for statement in SCHEMA_V1.split(";"):
                if statement.strip():
                    self._conn.execute(statement)
            version = self._version()
            if version is None:
                self._conn.execute("INSERT INTO meta VALUES ('schema', '1')")
                version = 1
            if version > SCHEMA_VERSION:
                raise StoreError(newer_schema(str(self.path), version))
            for step in steps_after(version):
                for statement in step.sql("sqlite"):
                    self._conn.execute(statement)
            self._conn.execute(
                "UPDATE meta SET value = ? WHERE key = 'schema'", (str(SCHEMA_VERSION),)
            )

    def _version(self) -> int | None:
        """The schema version the file records; None for a file without our tables yet."""
        try:
            row = self._conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return None
            raise
        if row is None:
            return None
        try:
            return int(row[0])
        except ValueError:
            raise StoreError(f"{self.path}: unreadable store schema {row[0]!r}") from None

    @contextmanager
    def _write(self) -> Iterator[None]:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def _read(self, sql: str, params: Iterable[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._conn.execute(sql, tuple(params)).fetchall()

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"MonitorStore({str(self.path)!r})"

    @property
    def location(self) -> str:
        """Where the store lives, for messages (`ResultsStore.location`)."""
        return str(self.path)

    # -- requests ---------------------------------------------------------------------------

    def add_request(self, record: RequestRecord) -> None:
        """Insert or replace a request (its scores too, when it carries any)."""
        row = request_row(record)
        marks = ", ".join("?" * len(_REQUEST_COLUMNS))
        with self._write():
            self._conn.execute(
                f"INSERT OR REPLACE INTO requests ({', '.join(_REQUEST_COLUMNS)}) VALUES ({marks})",
                row,
            )
            self._put_scores(record.request_id, record.scores)

    def add_scores(self, request_id: str, scores: Mapping[str, ScoreCell]) -> None:
        """Attach (or replace) metric outcomes of a recorded request."""
        with self._write():
            self._known(request_id)
            self._put_scores(request_id, scores)

    def add_feedback(self, request_id: str, value: float) -> None:
        """Record a user's verdict on a request: 1.0 thumbs up, 0.0 down (or any [0, 1])."""
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"feedback must lie within [0, 1], got {value!r}")
        with self._write():
            self._known(request_id)
            self._conn.execute(
                "UPDATE requests SET feedback = ? WHERE request_id = ?", (value, request_id)
            )

    def _known(self, request_id: str) -> None:
        found = self._conn.execute(
            "SELECT 1 FROM requests WHERE request_id = ?", (request_id,)
        ).fetchone()
        if found is None:
            raise KeyError(f"no request {request_id!r} in {self.path}")

    def _put_scores(self, request_id: str, scores: Mapping[str, ScoreCell]) -> None:
        self._conn.executemany(
            "INSERT OR REPLACE INTO request_scores VALUES (?, ?, ?, ?, ?)",
            [
                (request_id, metric, c.value, c.failure, int(c.skipped))
                for metric, c in scores.items()
            ],
        )

    def requests(
        self,
        *,
        since: float | None = None,
        until: float | None = None,
        pipeline: str | None = None,
        limit: int | None = None,
    ) -> list[RequestRecord]:
        """Requests in time order (``since`` <= ts < ``until``), each with its scores."""
        where, params = where_clause(
            ("ts >= ?", since), ("ts < ?", until), ("pipeline = ?", pipeline)
        )
        sql = f"SELECT {', '.join(_REQUEST_COLUMNS)} FROM requests WHERE {where}"
        sql += " ORDER BY ts, request_id"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        rows = self._read(sql, params)
        scores = self._scores_of([r[0] for r in rows])
        return [request_of(r, scores.get(r[0], {})) for r in rows]

    def _scores_of(self, ids: list[str]) -> dict[str, dict[str, ScoreCell]]:
        out: dict[str, dict[str, ScoreCell]] = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ", ".join("?" * len(chunk))
            for request_id, metric, value, failure, skipped in self._read(
                f"SELECT request_id, metric, value, failure, skipped FROM request_scores "
                f"WHERE request_id IN ({marks})",
                chunk,
            ):
                out.setdefault(request_id, {})[metric] = ScoreCell(
                    value=value, failure=failure, skipped=bool(skipped)
                )
        return out

    def count_requests(self) -> int:
        return int(self._read("SELECT COUNT(*) FROM requests")[0][0])

    # -- runs -------------------------------------------------------------------------------

    def add_run(self, run: RunRecord, cells: Iterable[tuple[str, str, ScoreCell]] = ()) -> None:
        """Record a run and its ``(sample_id, metric, cell)`` cells; a run id is recorded once."""
        with self._write():
            if self._conn.execute("SELECT 1 FROM runs WHERE run_id = ?", (run.run_id,)).fetchone():
                raise ValueError(f"run {run.run_id!r} is already recorded in {self.path}")
            self._conn.execute(
                f"INSERT INTO runs ({_RUN_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                run_row(run),
            )
            self._put_cells(run.run_id, cells)

    def add_run_cells(self, run_id: str, cells: Iterable[tuple[str, str, ScoreCell]]) -> None:
        """Append cells of a run in one transaction, before or after its row is added.

        A streamed run writes its cells in batches as they are scored and its row (`add_run`,
        with no cells) at the end, once the summary is known; readers look for the row, so they
        never see half a run.
        """
        with self._write():
            self._put_cells(run_id, cells)

    def _put_cells(self, run_id: str, cells: Iterable[tuple[str, str, ScoreCell]]) -> None:
        """Insert cells; those without a reason or details as schema 2 did (six columns): a
        row that ends before its NULL columns is smaller, and a 100k-cell write was ~25%
        slower writing the two NULLs (benchmarks/store_throughput.py's write pattern)."""
        plain: list[tuple[Any, ...]] = []
        explained: list[tuple[Any, ...]] = []
        for sample_id, metric, c in cells:
            if c.reason is None and c.details is None:
                plain.append((run_id, sample_id, metric, c.value, c.failure, int(c.skipped)))
            else:
                explained.extend(cell_rows(run_id, [(sample_id, metric, c)]))
        self._conn.executemany(_PLAIN_CELL_INSERT, plain)
        if explained:
            self._conn.executemany(_CELL_INSERT, explained)

    def delete_run_cells(self, run_id: str) -> None:
        """Delete the cells (and kept samples) of a run that will not be recorded (an
        interrupted stream)."""
        with self._write():
            self._conn.execute("DELETE FROM run_scores WHERE run_id = ?", (run_id,))
            self._conn.execute("DELETE FROM run_samples WHERE run_id = ?", (run_id,))

    def add_run_samples(self, run_id: str, rows: Iterable[tuple[str, dict[str, Any]]]) -> None:
        """Keep ``(sample_id, record)`` rows of a run in one transaction (`ResultsStore`)."""
        with self._write():
            self._conn.executemany(
                "INSERT INTO run_samples VALUES (?, ?, ?)",
                [(run_id, sample_id, encode_record(record)) for sample_id, record in rows],
            )

    def run_sample(self, run_id: str, sample_id: str) -> dict[str, Any] | None:
        """The kept record of one sample of a run; None when none was kept."""
        rows = self._read(
            "SELECT record FROM run_samples WHERE run_id = ? AND sample_id = ?", (run_id, sample_id)
        )
        return decode_record(rows[0][0]) if rows else None

    def runs(
        self, *, command: str | None = None, source: str | None = None, limit: int | None = None
    ) -> list[RunRecord]:
        """Recorded runs, oldest first (the last ``limit`` when given)."""
        where, params = where_clause(("command = ?", command), ("source = ?", source))
        sql = f"SELECT {_RUN_COLUMNS} FROM runs WHERE {where} ORDER BY ts DESC, run_id DESC"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        rows = self._read(sql, params)
        return [run_of(r) for r in reversed(rows)]

    def run(self, run_id: str) -> RunRecord:
        """One recorded run; a unique prefix of its id is enough (as with git commits).

        The prefix is compared as text (``substr``), not as a LIKE pattern: an id holding
        ``_`` or ``%`` matches only itself, and case counts, as on every backend.
        """
        rows = self._read(
            "SELECT run_id FROM runs WHERE substr(run_id, 1, ?) = ?", (len(run_id), run_id)
        )
        full = pick_run_id(run_id, [r[0] for r in rows], str(self.path))
        found = self._read(f"SELECT {_RUN_COLUMNS} FROM runs WHERE run_id = ?", (full,))
        return run_of(found[0])

    def run_cells(self, run_id: str) -> list[tuple[str, str, ScoreCell]]:
        """The ``(sample_id, metric, cell)`` cells of a recorded run, in sample, metric order."""
        rows = self._read(
            f"SELECT {CELL_COLUMNS} FROM run_scores WHERE run_id = ? ORDER BY sample_id, metric",
            (run_id,),
        )
        return cells_of_rows(rows)


CELL_COLUMNS = "sample_id, metric, value, failure, skipped, reason, details"
"""The columns of a run's cell as `cell_of_row` reads them."""

_PLAIN_CELL_INSERT = (
    "INSERT INTO run_scores (run_id, sample_id, metric, value, failure, skipped) "
    "VALUES (?, ?, ?, ?, ?, ?)"
)
_CELL_INSERT = (
    "INSERT INTO run_scores (run_id, sample_id, metric, value, failure, skipped, reason, details) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)


def cell_rows(
    run_id: str, cells: Iterable[tuple[str, str, ScoreCell]]
) -> Iterator[tuple[Any, ...]]:
    """Cells as ``run_scores`` rows (run_id, then `CELL_COLUMNS`), shared with the other
    backends: the details as JSON text (`encode_details`)."""
    for sample_id, metric, c in cells:
        details = c.details
        yield (
            run_id, sample_id, metric, c.value, c.failure, int(c.skipped), c.reason,
            None if details is None else encode_details(details),
        )  # fmt: skip


def cells_of_rows(rows: Iterable[Sequence[Any]]) -> list[tuple[str, str, ScoreCell]]:
    """`cell_of_row` of each row; a run's cells mostly keep no reason nor details, so those
    are read without the second look (a 100k-cell run is read at the schema-2 speed)."""
    return [
        (s, m, ScoreCell(value=v, failure=f, skipped=bool(k)))
        if r is None and d is None
        else cell_of_row((s, m, v, f, k, r, d))
        for s, m, v, f, k, r, d in rows
    ]


def cell_of_row(row: Sequence[Any]) -> tuple[str, str, ScoreCell]:
    """The ``(sample_id, metric, cell)`` of a row in `CELL_COLUMNS` order."""
    sample_id, metric, value, failure, skipped, reason, details = row
    if reason is None and details is None:  # most cells: validate only what is there
        return sample_id, metric, ScoreCell(value=value, failure=failure, skipped=bool(skipped))
    return sample_id, metric, ScoreCell(
        value=value, failure=failure, skipped=bool(skipped), reason=reason,
        details=decode_details(details),
    )  # fmt: skip


def run_row(run: RunRecord) -> tuple[Any, ...]:
    """A run as a row of ``runs`` (`_RUN_COLUMNS` order), shared with the other backends."""
    return (
        run.run_id, run.timestamp, run.command, run.source, run.commit,
        json.dumps(run.config, sort_keys=True, default=str),
        json.dumps(run.summary, sort_keys=True, default=str),
        json.dumps(run.metadata, sort_keys=True, default=str),
        run.branch,
    )  # fmt: skip


def run_of(row: Sequence[Any]) -> RunRecord:
    """The `RunRecord` of a ``runs`` row in `_RUN_COLUMNS` order."""
    run_id, ts, command, source, commit, config, summary, metadata, branch = row
    return RunRecord(
        run_id=run_id,
        timestamp=ts,
        command=command,
        source=source,
        commit=commit,
        branch=branch,
        config=json.loads(config),
        summary=json.loads(summary),
        metadata=json.loads(metadata),
    )


def pick_run_id(prefix: str, matches: Sequence[str], location: str) -> str:
    """The run id ``prefix`` names among the ids it starts: itself when recorded, else the only
    one; KeyError when none or several match (every backend answers `run` alike)."""
    if prefix in matches:
        return prefix
    if not matches:
        raise KeyError(f"no run {prefix!r} in {location}")
    if len(matches) > 1:
        raise KeyError(f"run id {prefix!r} is ambiguous in {location}")
    return matches[0]
