"""Opening a SQLite file in WAL mode when other processes may be opening it at the same moment.

The cache (`ragbridge.core.cache.disk`) and the monitor store (`ragbridge.core.monitoring.store`)
are files that several processes open at once: parallel ``ragbridge eval`` jobs sharing a cache,
Dask workers on one machine, services writing to one store. Both switch the file to WAL and then
create or upgrade their tables, and SQLite's busy timeout does not cover every lock they meet on
the way. Switching a file to WAL (a new file, or a rollback-journal file such as a schema-1 store)
upgrades a read lock to a write lock, and SQLite refuses such an upgrade at once with "database is
locked" when another connection holds the write lock, because waiting could deadlock. Four
processes opening one new cache at once failed in 8 of 30 trials, four opening a schema-1 store in
3 of 40 (and once in CI). Such a failure only means "try again", so the opening is tried again,
with a growing pause, until the same timeout the busy handler gives every other statement.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable

__all__ = ["is_busy", "open_wal"]

_FIRST_PAUSE_S = 0.005
_LONGEST_PAUSE_S = 0.2


def is_busy(exc: sqlite3.OperationalError) -> bool:
    """Whether SQLite refused because another connection held the file, rather than a fault of
    the file or the statement (those are not worth a second try)."""
    text = str(exc)
    return "database is locked" in text or "database is busy" in text


def open_wal(
    path: str,
    *,
    timeout_s: float,
    initialise: Callable[[sqlite3.Connection], None],
) -> sqlite3.Connection:
    """A connection to ``path`` in WAL mode, autocommit, usable from any thread, after
    ``initialise(conn)`` ran on it (create or upgrade the tables, in its own transaction).

    The busy timeout is given to ``connect`` so it covers the switch to WAL too. A "locked" or
    "busy" refusal from the switch or from ``initialise`` closes the connection and opens again
    until ``timeout_s`` has passed; then the last refusal is raised. Any other error is raised at
    once, the connection closed. ``initialise`` must therefore be safe to run twice: a write in
    one transaction that rolls back on error is.
    """
    deadline = time.monotonic() + timeout_s
    pause = _FIRST_PAUSE_S
    while True:
        conn = sqlite3.connect(
            path, timeout=timeout_s, check_same_thread=False, isolation_level=None
        )
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            initialise(conn)
            return conn
        except sqlite3.OperationalError as exc:
            conn.close()
            if not is_busy(exc) or time.monotonic() >= deadline:
                raise
        except BaseException:
            conn.close()
            raise
        time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
        pause = min(pause * 2, _LONGEST_PAUSE_S)
