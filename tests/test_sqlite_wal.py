"""`ragbridge.core.sqlite_wal.open_wal`: the opening of the cache and the monitor store waits out
the lock SQLite refuses at once (a switch to WAL while another connection writes), and only that.

The monitor store's own cases are in tests/test_store_migrations.py (a schema-1 file).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest
from sqlite_locks import hold_write_lock

from ragbridge.core.cache.disk import Cache
from ragbridge.core.sqlite_wal import is_busy, open_wal


def _writer_on_a_new_file(path: Path) -> sqlite3.Connection:
    """Another process's connection creating ``path``, holding its write lock."""
    return hold_write_lock(path, "CREATE TABLE other (k TEXT)")


def test_the_refusal_is_immediate_whatever_the_busy_timeout(tmp_path: Path) -> None:
    """The premise of `open_wal`: if SQLite ever waits here, the retry is dead code."""
    path = tmp_path / "new.sqlite"
    holder = _writer_on_a_new_file(path)
    try:
        probe = sqlite3.connect(path, timeout=5.0, isolation_level=None)
        started = time.monotonic()
        with pytest.raises(sqlite3.OperationalError) as caught:
            probe.execute("PRAGMA journal_mode=WAL")
        assert is_busy(caught.value)
        assert time.monotonic() - started < 2.0
        probe.close()
    finally:
        holder.close()


def test_a_cache_opened_while_another_process_creates_it_waits(tmp_path: Path) -> None:
    """4 processes opening one new cache at once failed in 8 of 30 trials before the retry."""
    path = tmp_path / "cache.sqlite"
    holder = _writer_on_a_new_file(path)
    release = threading.Timer(0.4, lambda: (holder.execute("COMMIT"), holder.close()))
    started = time.monotonic()
    release.start()
    cache = Cache(str(path))  # before the retry: sqlite3.OperationalError "database is locked"
    try:
        assert time.monotonic() - started >= 0.35
        conn = sqlite3.connect(path)
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        conn.close()
        assert {"other", "meta"} <= tables  # the other writer's table and the cache's own
    finally:
        cache.close()
        release.join()


def test_a_lock_held_past_the_timeout_is_raised_as_sqlite_said_it(tmp_path: Path) -> None:
    path = tmp_path / "new.sqlite"
    holder = _writer_on_a_new_file(path)
    tries: list[int] = []
    try:
        started = time.monotonic()
        with pytest.raises(sqlite3.OperationalError, match="database is locked"):
            open_wal(str(path), timeout_s=0.3, initialise=lambda conn: tries.append(1))
        assert 0.25 <= time.monotonic() - started < 3.0
        assert tries == []  # refused at the switch to WAL, before the tables
    finally:
        holder.close()


def test_another_error_is_raised_at_once_and_the_connection_closed(tmp_path: Path) -> None:
    seen: list[sqlite3.Connection] = []

    def initialise(conn: sqlite3.Connection) -> None:
        seen.append(conn)
        conn.execute("SELECT * FROM missing")

    with pytest.raises(sqlite3.OperationalError, match="no such table"):
        open_wal(str(tmp_path / "f.sqlite"), timeout_s=30.0, initialise=initialise)
    assert len(seen) == 1  # not tried again
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        seen[0].execute("SELECT 1")


def test_a_refused_initialise_is_run_again_on_a_new_connection(tmp_path: Path) -> None:
    seen: list[sqlite3.Connection] = []

    def initialise(conn: sqlite3.Connection) -> None:
        seen.append(conn)
        if len(seen) < 3:
            raise sqlite3.OperationalError("database is locked")

    conn = open_wal(str(tmp_path / "f.sqlite"), timeout_s=30.0, initialise=initialise)
    try:
        assert len(seen) == 3
        assert seen[-1] is conn
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        with pytest.raises(sqlite3.ProgrammingError, match="closed"):
            seen[0].execute("SELECT 1")
    finally:
        conn.close()
