"""A results store on a PostgreSQL server, so a team's CI jobs and services share one history.

The SQLite store (`ragbridge.core.monitoring.store.MonitorStore`) is one file on one machine;
`PostgresStore` keeps the same tables on a server behind the same protocol
(`ragbridge.core.monitoring.store_api.ResultsStore`). ``--history postgresql://user@host/db``
(or ``postgres://``) selects it: `open_store` finds this module through the ``ragbridge.stores``
entry points, so the core never imports psycopg.

**Same answers as SQLite.** The tables and columns are the SQLite store's (numbers as double
precision, as SQLite keeps them; JSON as the very text SQLite holds), created as schema 1 and
brought up to date by the shared migration steps (`ragbridge.core.monitoring.migrations`) under
a transaction-scoped advisory lock, so processes opening an old database at once upgrade it
once and a newer schema is refused. Text keys use the "C" collation: runs, requests and cells
come back in the byte order SQLite gives them, whatever the server's locale.

**Writes and threads.** Each write is one transaction (a run's cells go in by ``COPY``); a run
id is recorded once (checked under a row lock of the id, so two writers of one id cannot both
succeed). Each thread has its own connection (opened on first use, all closed by `close`), so
one store may be shared by the threads of a process.

**Errors.** Opening connects at once, so a wrong address or password is one line naming the URL
without its password, e.g. ``store postgresql://ci:***@db:5432/evals: cannot connect
(connection refused); is the PostgreSQL server running?``; any later server error raises
`PostgresStoreError` (an OSError) with the same kind of line.

Importing this module without psycopg raises ImportError naming the extra:
``pip install ".[postgres]"`` in your ragbridge clone.
"""

from __future__ import annotations

__all__ = ["INSTALL_HINT", "PostgresStore", "PostgresStoreError", "open_postgres_store"]

import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from typing_extensions import Self

from ragbridge.adapters._extras import install_hint, missing_extra
from ragbridge.core.cache.backend import redact_url
from ragbridge.core.monitoring.migrations import SCHEMA_VERSION, newer_schema, steps_after
from ragbridge.core.monitoring.records import RequestRecord, RunRecord, ScoreCell
from ragbridge.core.monitoring.sample_records import decode_record, encode_record
from ragbridge.core.monitoring.store import (
    CELL_COLUMNS,
    REQUEST_COLUMNS,
    StoreError,
    cell_rows,
    cells_of_rows,
    pick_run_id,
    request_of,
    request_row,
    run_of,
    run_row,
    where_clause,
)

INSTALL_HINT = install_hint("postgres")
"""What to run when the ``postgres`` extra is missing."""

try:
    import psycopg
    import psycopg.errors
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise missing_extra("ragbridge.adapters.postgres_store", "psycopg", "postgres", exc) from exc

_CONNECT_TIMEOUT_S = 5
"""Seconds to wait for a connection (a URL's ``connect_timeout`` wins)."""

_LOCK_KEY = 0x7261676272696467  # "ragbridg": the advisory lock held while creating/upgrading

SCHEMA_V1 = """
CREATE TABLE IF NOT EXISTS meta (key TEXT COLLATE "C" PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS requests (
    request_id TEXT COLLATE "C" PRIMARY KEY,
    ts DOUBLE PRECISION NOT NULL,
    pipeline TEXT COLLATE "C",
    question TEXT,
    retrieval_ms DOUBLE PRECISION,
    generation_ms DOUBLE PRECISION,
    chunks_retrieved BIGINT,
    chunks_used BIGINT,
    retrieval_miss INTEGER,
    answer_chars BIGINT,
    abstained INTEGER,
    sampled INTEGER NOT NULL,
    error TEXT,
    feedback DOUBLE PRECISION,
    attributes TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS requests_ts ON requests (ts);
CREATE TABLE IF NOT EXISTS request_scores (
    request_id TEXT COLLATE "C" NOT NULL,
    metric TEXT COLLATE "C" NOT NULL,
    value DOUBLE PRECISION,
    failure TEXT,
    skipped INTEGER NOT NULL,
    PRIMARY KEY (request_id, metric)
);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT COLLATE "C" PRIMARY KEY,
    ts DOUBLE PRECISION NOT NULL,
    command TEXT COLLATE "C" NOT NULL,
    source TEXT COLLATE "C",
    git_commit TEXT,
    config TEXT NOT NULL,
    summary TEXT NOT NULL,
    metadata TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_ts ON runs (ts);
CREATE TABLE IF NOT EXISTS run_scores (
    run_id TEXT COLLATE "C" NOT NULL,
    sample_id TEXT COLLATE "C" NOT NULL,
    metric TEXT COLLATE "C" NOT NULL,
    value DOUBLE PRECISION,
    failure TEXT,
    skipped INTEGER NOT NULL,
    PRIMARY KEY (run_id, sample_id, metric)
);
"""
"""The SQLite store's schema-1 tables in PostgreSQL's words; the migration steps follow."""

_RUN_COLUMNS = "run_id, ts, command, source, git_commit, config, summary, metadata, branch"
_CELL_COPY = (
    "COPY run_scores (run_id, sample_id, metric, value, failure, skipped, reason, details) "
    "FROM STDIN"
)


class PostgresStoreError(OSError):
    """The server could not do what the store asked: one line naming the URL (no password)."""


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0].strip() if text else type(exc).__name__


class PostgresStore:
    """The results store in the PostgreSQL database ``url`` names (see the module docstring).

    ``url`` is a libpq URI (``postgresql://[user[:password]@][host][:port][/dbname][?...]``);
    its query options (``sslmode``, ``connect_timeout``, ...) apply.
    """

    def __init__(self, url: str) -> None:
        """Connect and create or upgrade the tables: a store that cannot be reached fails
        here, not at the end of a run."""
        self.url = url
        self._redacted = redact_url(url)
        self._local = threading.local()
        self._lock = threading.Lock()
        self._conns: list[psycopg.Connection[tuple[Any, ...]]] = []
        self._closed = False
        try:
            self._initialise()
        except BaseException:
            self.close()
            raise

    # -- connections --------------------------------------------------------------------------

    def _connect(self) -> psycopg.Connection[tuple[Any, ...]]:
        options: dict[str, Any] = {"autocommit": True}
        if "connect_timeout" not in self.url:
            options["connect_timeout"] = _CONNECT_TIMEOUT_S
        try:
            return psycopg.connect(self.url, **options)
        except psycopg.Error as exc:
            raise PostgresStoreError(
                f"store {self._redacted}: cannot connect ({_first_line(exc)}); "
                "is the PostgreSQL server running, and are the user, password and database right?"
            ) from None

    def _conn(self) -> psycopg.Connection[tuple[Any, ...]]:
        """This thread's connection (one per thread: psycopg serialises a connection's calls,
        and a transaction belongs to one connection)."""
        conn: psycopg.Connection[tuple[Any, ...]] | None = getattr(self._local, "conn", None)
        if conn is None or conn.closed:
            if self._closed:
                raise PostgresStoreError(f"store {self._redacted}: the store is closed")
            conn = self._connect()
            with self._lock:
                self._conns.append(conn)
            self._local.conn = conn
        return conn

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """A server error as one `PostgresStoreError` line; our own KeyError/ValueError pass."""
        try:
            yield
        except psycopg.Error as exc:
            raise PostgresStoreError(f"store {self._redacted}: {_first_line(exc)}") from None

    @contextmanager
    def _write(self) -> Iterator[psycopg.Cursor[tuple[Any, ...]]]:
        """One transaction on this thread's connection: all of it is written, or none."""
        with self._errors():
            conn = self._conn()
            with conn.transaction(), conn.cursor() as cursor:
                yield cursor

    def _read(self, sql: str, params: Iterable[Any] = ()) -> list[tuple[Any, ...]]:
        with self._errors():
            return self._conn().execute(sql, tuple(params)).fetchall()  # type: ignore[arg-type]

    def _initialise(self) -> None:
        """Create the tables or upgrade them under an advisory lock (see the module docstring)."""
        found = self._version_or_none()
        if found == SCHEMA_VERSION:
            return
        if found is not None and found > SCHEMA_VERSION:
            raise StoreError(newer_schema(self._redacted, found))
        with self._write() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
            for statement in SCHEMA_V1.split(";"):
                if statement.strip():
                    cursor.execute(statement)  # type: ignore[call-overload]
            row = cursor.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
            version = 1 if row is None else self._parse_version(row[0])
            if row is None:
                cursor.execute("INSERT INTO meta VALUES ('schema', '1')")
            if version > SCHEMA_VERSION:
                raise StoreError(newer_schema(self._redacted, version))
            for step in steps_after(version):
                for statement in step.sql("postgres"):
                    cursor.execute(statement)  # type: ignore[call-overload]
            cursor.execute(
                "UPDATE meta SET value = %s WHERE key = 'schema'", (str(SCHEMA_VERSION),)
            )

    def _version_or_none(self) -> int | None:
        """The recorded schema version; None when the tables are not there yet."""
        rows = self._read("SELECT to_regclass('meta') IS NOT NULL")
        if not rows[0][0]:
            return None
        found = self._read("SELECT value FROM meta WHERE key = 'schema'")
        return self._parse_version(found[0][0]) if found else None

    def _parse_version(self, text: str) -> int:
        try:
            return int(text)
        except ValueError:
            raise StoreError(f"{self._redacted}: unreadable store schema {text!r}") from None

    def close(self) -> None:
        """Close every thread's connection; the store cannot be used afterwards."""
        with self._lock:
            self._closed = True
            conns, self._conns = self._conns, []
        for conn in conns:
            conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"PostgresStore({self._redacted!r})"

    @property
    def location(self) -> str:
        """The URL without its password (`ResultsStore.location`)."""
        return self._redacted

    # -- requests -----------------------------------------------------------------------------

    def add_request(self, record: RequestRecord) -> None:
        """Insert or replace a request (its scores too, when it carries any)."""
        row = request_row(record)
        marks = ", ".join(["%s"] * len(REQUEST_COLUMNS))
        updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in REQUEST_COLUMNS[1:])
        with self._write() as cursor:
            cursor.execute(
                f"INSERT INTO requests ({', '.join(REQUEST_COLUMNS)}) VALUES ({marks}) "  # type: ignore[arg-type]
                f"ON CONFLICT (request_id) DO UPDATE SET {updates}",
                row,
            )
            self._put_scores(cursor, record.request_id, record.scores)

    def add_scores(self, request_id: str, scores: Mapping[str, ScoreCell]) -> None:
        """Attach (or replace) metric outcomes of a recorded request."""
        with self._write() as cursor:
            self._known(cursor, request_id)
            self._put_scores(cursor, request_id, scores)

    def add_feedback(self, request_id: str, value: float) -> None:
        """Record a user's verdict on a request: 1.0 thumbs up, 0.0 down (or any [0, 1])."""
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"feedback must lie within [0, 1], got {value!r}")
        with self._write() as cursor:
            self._known(cursor, request_id)
            cursor.execute(
                "UPDATE requests SET feedback = %s WHERE request_id = %s", (value, request_id)
            )

    def _known(self, cursor: psycopg.Cursor[tuple[Any, ...]], request_id: str) -> None:
        cursor.execute("SELECT 1 FROM requests WHERE request_id = %s", (request_id,))
        if cursor.fetchone() is None:
            raise KeyError(f"no request {request_id!r} in {self._redacted}")

    def _put_scores(
        self,
        cursor: psycopg.Cursor[tuple[Any, ...]],
        request_id: str,
        scores: Mapping[str, ScoreCell],
    ) -> None:
        if not scores:
            return
        cursor.executemany(
            "INSERT INTO request_scores VALUES (%s, %s, %s, %s, %s) ON CONFLICT (request_id, "
            "metric) DO UPDATE SET value = EXCLUDED.value, failure = EXCLUDED.failure, "
            "skipped = EXCLUDED.skipped",
            [(request_id, m, c.value, c.failure, int(c.skipped)) for m, c in scores.items()],
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
            ("ts >= %s", since), ("ts < %s", until), ("pipeline = %s", pipeline)
        )
        sql = f"SELECT {', '.join(REQUEST_COLUMNS)} FROM requests WHERE {where}"
        sql += " ORDER BY ts, request_id"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        rows = self._read(sql, params)
        scores = self._scores_of([r[0] for r in rows])
        return [request_of(r, scores.get(r[0], {})) for r in rows]

    def _scores_of(self, ids: list[str]) -> dict[str, dict[str, ScoreCell]]:
        out: dict[str, dict[str, ScoreCell]] = {}
        for start in range(0, len(ids), 5000):
            chunk = ids[start : start + 5000]
            for request_id, metric, value, failure, skipped in self._read(
                "SELECT request_id, metric, value, failure, skipped FROM request_scores "
                "WHERE request_id = ANY(%s)",
                (chunk,),
            ):
                out.setdefault(request_id, {})[metric] = ScoreCell(
                    value=value, failure=failure, skipped=bool(skipped)
                )
        return out

    def count_requests(self) -> int:
        return int(self._read("SELECT COUNT(*) FROM requests")[0][0])

    # -- runs ---------------------------------------------------------------------------------

    def add_run(self, run: RunRecord, cells: Iterable[tuple[str, str, ScoreCell]] = ()) -> None:
        """Record a run and its ``(sample_id, metric, cell)`` cells; a run id is recorded once."""
        with self._write() as cursor:
            cursor.execute(
                f"INSERT INTO runs ({_RUN_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) "
                "ON CONFLICT (run_id) DO NOTHING",
                run_row(run),
            )
            if cursor.rowcount != 1:
                raise ValueError(f"run {run.run_id!r} is already recorded in {self._redacted}")
            self._copy_cells(cursor, run.run_id, cells)

    def add_run_cells(self, run_id: str, cells: Iterable[tuple[str, str, ScoreCell]]) -> None:
        """Append cells of a run in one transaction, before or after its row is added (a
        streamed run's row comes last: readers never see half a run)."""
        with self._write() as cursor:
            self._copy_cells(cursor, run_id, cells)

    @staticmethod
    def _copy_cells(
        cursor: psycopg.Cursor[tuple[Any, ...]],
        run_id: str,
        cells: Iterable[tuple[str, str, ScoreCell]],
    ) -> None:
        with cursor.copy(_CELL_COPY) as copy:
            for row in cell_rows(run_id, cells):
                copy.write_row(row)

    def delete_run_cells(self, run_id: str) -> None:
        """Delete the cells of a run that will not be recorded (an interrupted stream)."""
        with self._write() as cursor:
            cursor.execute("DELETE FROM run_scores WHERE run_id = %s", (run_id,))
            cursor.execute("DELETE FROM run_samples WHERE run_id = %s", (run_id,))

    def add_run_samples(self, run_id: str, rows: Iterable[tuple[str, dict[str, Any]]]) -> None:
        """Keep ``(sample_id, record)`` rows of a run in one transaction (`ResultsStore`)."""
        with (
            self._write() as cursor,
            cursor.copy("COPY run_samples (run_id, sample_id, record) FROM STDIN") as copy,
        ):
            for sample_id, record in rows:
                copy.write_row((run_id, sample_id, encode_record(record)))

    def run_sample(self, run_id: str, sample_id: str) -> dict[str, Any] | None:
        """The kept record of one sample of a run; None when none was kept."""
        rows = self._read(
            "SELECT record FROM run_samples WHERE run_id = %s AND sample_id = %s",
            (run_id, sample_id),
        )
        return decode_record(rows[0][0]) if rows else None

    def runs(
        self, *, command: str | None = None, source: str | None = None, limit: int | None = None
    ) -> list[RunRecord]:
        """Recorded runs, oldest first (the last ``limit`` when given)."""
        where, params = where_clause(("command = %s", command), ("source = %s", source))
        sql = f"SELECT {_RUN_COLUMNS} FROM runs WHERE {where} ORDER BY ts DESC, run_id DESC"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return [run_of(r) for r in reversed(self._read(sql, params))]

    def run(self, run_id: str) -> RunRecord:
        """One recorded run; a unique prefix of its id is enough (as with git commits)."""
        rows = self._read(
            "SELECT run_id FROM runs WHERE left(run_id, %s) = %s LIMIT 2", (len(run_id), run_id)
        )
        matches = [r[0] for r in rows]
        if len(matches) > 1 and run_id not in matches:  # the exact id may be past the limit
            exact = self._read("SELECT run_id FROM runs WHERE run_id = %s", (run_id,))
            matches = [run_id] if exact else matches
        full = pick_run_id(run_id, matches, self._redacted)
        return run_of(self._read(f"SELECT {_RUN_COLUMNS} FROM runs WHERE run_id = %s", (full,))[0])

    def run_cells(self, run_id: str) -> list[tuple[str, str, ScoreCell]]:
        """The ``(sample_id, metric, cell)`` cells of a recorded run, in sample, metric order."""
        rows = self._read(
            f"SELECT {CELL_COLUMNS} FROM run_scores WHERE run_id = %s ORDER BY sample_id, metric",
            (run_id,),
        )
        return cells_of_rows(rows)


def open_postgres_store(url: str) -> PostgresStore:
    """The ``ragbridge.stores`` entry point of ``postgresql://`` and ``postgres://``."""
    return PostgresStore(url)
