"""Schema versions: a store written by the previous ragbridge (schema 1) is upgraded when it is
opened and reads back unchanged; a newer one is refused before anything is written; processes
opening an old store at once upgrade it once. On both backends."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from sqlite_locks import hold_write_lock

from ragbridge.core.monitoring import MonitorStore, RunRecord, ScoreCell, StoreError
from ragbridge.core.monitoring.migrations import SCHEMA_VERSION, STEPS, steps_after
from ragbridge.core.monitoring.store_api import open_store

pytest_plugins = ["postgres_server"]

ROOT = Path(__file__).resolve().parents[1]

SCHEMA_1 = """CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
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
);"""
"""The tables exactly as ragbridge's schema-1 SQLite store created them (copied from
core/monitoring/store.py before schema 2; never edit)."""

_RUN_1 = ("0190a3f2c4e19b2d4f10", 1700000000.5, "eval", "eval.jsonl", "a" * 40,
          '{"metrics": ["mrr"]}', '{"mrr": {"mean": 0.5}}', '{"outcome": "passed"}')  # fmt: skip


def _schema_1_file(path: Path) -> None:
    """A store as schema 1 wrote it: its tables, version, a run with cells and a request."""
    with sqlite3.connect(path) as raw:
        raw.executescript(SCHEMA_1)
        raw.execute("INSERT INTO meta VALUES ('schema', '1')")
        raw.execute("INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?)", _RUN_1)
        raw.executemany(
            "INSERT INTO run_scores VALUES (?, ?, ?, ?, ?, ?)",
            [(_RUN_1[0], "q2", "mrr", 0.25, None, 0), (_RUN_1[0], "q1", "mrr", None, "timeout", 0),
             (_RUN_1[0], "q1", "f1", None, None, 1)],
        )  # fmt: skip
        raw.execute(
            "INSERT INTO requests VALUES ('r1', 5.0, 'chain', 'why?', 1.5, NULL, 3, 1, 0, 10, "
            "NULL, 1, NULL, 1.0, '{\"k\": 1}')"
        )
        raw.execute("INSERT INTO request_scores VALUES ('r1', 'faithfulness', 0.75, NULL, 0)")
    raw.close()


def _check_schema_1_rows(store: object) -> None:
    from ragbridge.core.monitoring.store_api import ResultsStore

    assert isinstance(store, ResultsStore)
    (run,) = store.runs()
    assert run.run_id == _RUN_1[0]
    assert (run.timestamp, run.command, run.source, run.commit) == _RUN_1[1:5]
    assert run.branch is None  # schema 1 did not know it
    assert run.config == {"metrics": ["mrr"]}
    assert run.summary == {"mrr": {"mean": 0.5}}
    assert store.run("0190a3").metadata == {"outcome": "passed"}
    assert store.run_cells(run.run_id) == [
        ("q1", "f1", ScoreCell(skipped=True)),
        ("q1", "mrr", ScoreCell(failure="timeout")),
        ("q2", "mrr", ScoreCell(value=0.25)),
    ]
    (request,) = store.requests()
    assert (request.question, request.retrieval_ms, request.generation_ms) == ("why?", 1.5, None)
    assert (request.retrieval_miss, request.abstained, request.feedback) == (False, None, 1.0)
    assert request.attributes == {"k": 1}
    assert request.scores == {"faithfulness": ScoreCell(value=0.75)}


def test_the_steps_are_numbered_one_after_another() -> None:
    assert [s.version for s in STEPS] == list(range(2, SCHEMA_VERSION + 1))
    assert steps_after(SCHEMA_VERSION) == ()
    assert all(s.sqlite and s.postgres and s.why for s in STEPS)


def test_a_schema_1_file_is_upgraded_and_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    _schema_1_file(path)
    with MonitorStore(path) as store:
        _check_schema_1_rows(store)
        store.add_run(RunRecord(run_id="new", timestamp=2e9, command="eval", branch="main"))
        assert store.run("new").branch == "main"
    with sqlite3.connect(path) as raw:
        version = raw.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        assert version == (str(SCHEMA_VERSION),)  # 1 -> the current version, every step
        indexes = {r[0] for r in raw.execute("SELECT name FROM sqlite_master WHERE type='index'")}
        plan = raw.execute(
            "EXPLAIN QUERY PLAN SELECT run_id FROM runs WHERE branch = 'main' ORDER BY ts"
        ).fetchall()
    raw.close()
    assert {"runs_branch_ts", "runs_source_ts"} <= indexes
    assert "runs_branch_ts" in str(plan)


def test_a_new_file_and_an_upgraded_one_have_the_same_schema(tmp_path: Path) -> None:
    _schema_1_file(tmp_path / "old.sqlite")
    for name in ("old.sqlite", "new.sqlite"):
        MonitorStore(tmp_path / name).close()

    def schema(name: str) -> list[tuple[str, str, str]]:
        with sqlite3.connect(tmp_path / name) as raw:
            rows = raw.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall()
        raw.close()
        return rows

    assert schema("old.sqlite") == schema("new.sqlite")


def test_a_newer_file_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    path = tmp_path / "newer.sqlite"
    _schema_1_file(path)
    with sqlite3.connect(path) as raw:
        raw.execute("UPDATE meta SET value = ? WHERE key = 'schema'", (str(SCHEMA_VERSION + 1),))
    raw.close()

    def tables() -> list[tuple[str, str]]:
        with sqlite3.connect(path) as raw:
            rows = raw.execute("SELECT name, sql FROM sqlite_master ORDER BY name").fetchall()
        raw.close()
        return rows

    before = tables()
    with pytest.raises(StoreError, match=rf"newer ragbridge \(store schema {SCHEMA_VERSION + 1}"):
        MonitorStore(path)
    assert tables() == before  # no column or index of ours was added to it


_OPENER = textwrap.dedent(
    """
    import sys, time
    from ragbridge.core.monitoring import RunRecord, open_store
    spec, k, start_at = sys.argv[1], sys.argv[2], float(sys.argv[3])
    while time.time() < start_at:  # imported: every process opens the store at one moment
        time.sleep(0.001)
    with open_store(spec) as store:
        store.add_run(RunRecord(run_id=f"p{k}", command="eval", branch="b"))
    """
)


def _open_at_once(spec: str, processes: int = 4) -> None:
    start_at = time.time() + 5.0
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _OPENER, spec, str(k), str(start_at)],
            cwd=ROOT,
            stderr=subprocess.PIPE,
            text=True,
        )
        for k in range(processes)
    ]
    errors = [p.communicate(timeout=120)[1] for p in procs if p.wait(timeout=120) != 0]
    assert errors == []


def test_processes_opening_a_schema_1_file_at_once_upgrade_it_once(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    _schema_1_file(path)
    _open_at_once(str(path))
    with MonitorStore(path) as store:
        assert sorted(r.run_id for r in store.runs()) == sorted([_RUN_1[0], "p0", "p1", "p2", "p3"])
        assert store.run("p2").branch == "b"


def _hold_write_lock(path: Path) -> sqlite3.Connection:
    """A connection in the middle of a write to a schema-1 file: 4 processes opening such a file
    at once met this lock in the CI run of stop 43 (tests/sqlite_locks.py says why)."""
    return hold_write_lock(path, "INSERT INTO meta VALUES ('holder', '1')")


def test_an_opening_waits_out_a_lock_that_the_busy_timeout_does_not_cover(tmp_path: Path) -> None:
    import threading

    path = tmp_path / "old.sqlite"
    _schema_1_file(path)
    holder = _hold_write_lock(path)
    probe = sqlite3.connect(path, timeout=5.0, isolation_level=None)
    started = time.monotonic()
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        probe.execute("PRAGMA journal_mode=WAL")
    assert time.monotonic() - started < 2.0  # the window is real: no wait, despite timeout=5
    probe.close()
    release = threading.Timer(0.4, lambda: (holder.execute("COMMIT"), holder.close()))
    started = time.monotonic()
    release.start()
    with MonitorStore(path) as store:  # without the retry: StoreError "database is locked"
        assert [r.run_id for r in store.runs()] == [_RUN_1[0]]
    assert time.monotonic() - started >= 0.35
    release.join()


def test_an_opening_gives_up_on_a_lock_held_past_the_busy_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ragbridge.core.monitoring import store as store_module

    path = tmp_path / "old.sqlite"
    _schema_1_file(path)
    monkeypatch.setattr(store_module, "BUSY_TIMEOUT_MS", 300)
    holder = _hold_write_lock(path)
    try:
        started = time.monotonic()
        with pytest.raises(StoreError, match=r"old\.sqlite: still locked by another process"):
            MonitorStore(path)
        assert 0.25 <= time.monotonic() - started < 5.0
    finally:
        holder.close()


# -- PostgreSQL -------------------------------------------------------------------------------


def _schema_1_database(url: str) -> None:
    psycopg = pytest.importorskip("psycopg")
    from ragbridge.adapters.postgres_store import SCHEMA_V1

    with psycopg.connect(url, autocommit=True) as raw:
        for statement in SCHEMA_V1.split(";"):
            if statement.strip():
                raw.execute(statement)
        raw.execute("INSERT INTO meta VALUES ('schema', '1')")
        raw.execute("INSERT INTO runs VALUES (%s, %s, %s, %s, %s, %s, %s, %s)", _RUN_1)
        with raw.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO run_scores VALUES (%s, %s, %s, %s, %s, %s)",
                [(_RUN_1[0], "q2", "mrr", 0.25, None, 0),
                 (_RUN_1[0], "q1", "mrr", None, "timeout", 0),
                 (_RUN_1[0], "q1", "f1", None, None, 1)],
            )  # fmt: skip
        raw.execute(
            "INSERT INTO requests VALUES ('r1', 5.0, 'chain', 'why?', 1.5, NULL, 3, 1, 0, 10, "
            "NULL, 1, NULL, 1.0, '{\"k\": 1}')"
        )
        raw.execute("INSERT INTO request_scores VALUES ('r1', 'faithfulness', 0.75, NULL, 0)")


def test_a_schema_1_database_is_upgraded_and_reads_back(postgres_url: str) -> None:
    _schema_1_database(postgres_url)
    with open_store(postgres_url) as store:
        _check_schema_1_rows(store)
    import psycopg

    with psycopg.connect(postgres_url) as raw:
        version = raw.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        assert version == (str(SCHEMA_VERSION),)  # 1 -> the current version, every step
        names = {r[0] for r in raw.execute("SELECT indexname FROM pg_indexes").fetchall()}
    assert {"runs_branch_ts", "runs_source_ts"} <= names


def test_processes_opening_a_schema_1_database_at_once_upgrade_it_once(postgres_url: str) -> None:
    _schema_1_database(postgres_url)
    _open_at_once(postgres_url)
    with open_store(postgres_url) as store:
        assert sorted(r.run_id for r in store.runs()) == sorted([_RUN_1[0], "p0", "p1", "p2", "p3"])
        assert store.run("p1").branch == "b"


def test_processes_creating_a_database_at_once_all_succeed(postgres_url: str) -> None:
    _open_at_once(postgres_url)
    with open_store(postgres_url) as store:
        assert len(store.runs()) == 4
