"""A connection holding a SQLite file's write lock in the rollback journal, for the tests of the
lock SQLite refuses at once (tests/test_sqlite_wal.py, tests/test_store_migrations.py)."""

from __future__ import annotations

import sqlite3
from pathlib import Path


def hold_write_lock(path: Path, statement: str) -> sqlite3.Connection:
    """Another process's connection in the middle of a write to ``path`` (``statement`` run in an
    open ``BEGIN IMMEDIATE``), the file still in the rollback journal a new file or a schema-1
    store is in. A second opener's switch to WAL is then refused with "database is locked" at
    once, whatever its busy timeout: SQLite does not wait on a lock upgrade that could deadlock.
    Close it (or COMMIT) to release."""
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    holder.execute(statement)
    return holder
