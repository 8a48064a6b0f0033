"""The two habits every multi-row statement on the SQLite cache file follows.

* A write of several rows is one transaction taken at once (``BEGIN IMMEDIATE``), so another
  writer (thread or process) waits for it instead of failing half-way, and a Ctrl-C rolls it
  back instead of leaving half a batch (`transaction`).
* A lookup or delete by many keys goes ``LOOKUP_CHUNK`` keys per statement, well under SQLite's
  historic 999-parameter limit, whatever the number of keys (`in_chunks`).

Shared by the cache's reads and writes (`ragbridge.core.cache.disk`) and its housekeeping
(`ragbridge.core.cache.maintenance`), so both keep them the same way.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator, Sequence

__all__ = ["LOOKUP_CHUNK", "in_chunks", "transaction"]

#: Keys looked up (or deleted) per statement: stays well under SQLite's historic 999-parameter
#: limit.
LOOKUP_CHUNK = 500


@contextlib.contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """One write transaction, taken at once (``BEGIN IMMEDIATE``): another writer waits for it
    instead of failing half-way; rolled back on any exception, Ctrl-C included."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def in_chunks(keys: Sequence[str]) -> Iterator[tuple[list[str], str]]:
    """``(chunk, marks)`` per `LOOKUP_CHUNK` keys: the keys and their ``?,?,...`` placeholders
    for an ``IN (...)`` clause."""
    for start in range(0, len(keys), LOOKUP_CHUNK):
        chunk = list(keys[start : start + LOOKUP_CHUNK])
        yield chunk, ",".join("?" * len(chunk))
