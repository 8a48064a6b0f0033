"""The cache file's housekeeping: counts, inspection and pruning (``ragbridge cache``).

A run needs four operations of its cache (get and put, of replies and of vectors: see
`ragbridge.core.cache.backend`); a person looking after a cache file needs the rest: how much it
holds and of what (`stats`, `groups`), every stored reply to check again (`reply_rows`), and ways
to make it smaller (delete by key, by age, by code version, everything; give the space back).
These are SQLite-only and run rarely, so they live here as a base class of
`ragbridge.core.cache.disk.Cache`, which supplies the connection, its lock and its counters.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
from collections.abc import Collection, Iterator, Sequence

from .sqlite_io import in_chunks, transaction
from .stored import CacheGroups, CacheStats, EmbeddingGroup, ReplyGroup, ReplyRow

__all__ = ["CacheMaintenance"]


class CacheMaintenance:
    """Housekeeping of an SQLite cache file; `Cache` provides ``_connection`` and the state."""

    _lock: threading.Lock
    _hits: int
    _misses: int

    def _connection(self) -> sqlite3.Connection:
        """The open connection (`Cache` overrides this)."""
        raise NotImplementedError

    def _writable(self) -> sqlite3.Connection:
        """The connection, once the file is known to still be this cache's (`Cache`)."""
        raise NotImplementedError

    @contextlib.contextmanager
    def _changing(self, *, checked: bool = False) -> Iterator[sqlite3.Connection]:
        """The connection, under the lock and in one write transaction (`transaction`).

        ``checked``: first make sure the file is still this cache's (`Cache._writable`), as the
        puts of a run do; housekeeping works on the file it was opened on.
        """
        with self._lock:
            conn = self._writable() if checked else self._connection()
            with transaction(conn):
                yield conn

    # -- kept results ------------------------------------------------------------------------

    def result_codes(self) -> dict[str, int]:
        """How many kept results each code digest wrote."""
        with self._lock:
            rows = (
                self._connection()
                .execute("SELECT code, COUNT(*) FROM results GROUP BY code")
                .fetchall()
            )
        return {str(code): int(n) for code, n in rows}

    def delete_results(self, *, keep_codes: Collection[str] | None = None) -> int:
        """Delete kept results: all, or those not written by code in ``keep_codes``."""
        if keep_codes is None:
            with self._lock:
                return int(self._connection().execute("DELETE FROM results").rowcount)
        deleted = 0
        with self._changing() as conn:
            stale = [
                code
                for (code,) in conn.execute("SELECT DISTINCT code FROM results")
                if code not in keep_codes
            ]
            for code in stale:
                cursor = conn.execute("DELETE FROM results WHERE code IS ?", (code,))
                deleted += cursor.rowcount
        return deleted

    # -- housekeeping ----------------------------------------------------------------------

    def stats(self) -> CacheStats:
        """Row counts of the file plus this object's hits and misses."""
        with self._lock:
            conn = self._connection()
            (replies,) = conn.execute("SELECT COUNT(*) FROM replies").fetchone()
            (embeddings,) = conn.execute("SELECT COUNT(*) FROM embeddings").fetchone()
            (results,) = conn.execute("SELECT COUNT(*) FROM results").fetchone()
            return CacheStats(
                replies=int(replies),
                embeddings=int(embeddings),
                hits=self._hits,
                misses=self._misses,
                results=int(results),
            )

    def reply_rows(self) -> Iterator[ReplyRow]:
        """Every stored reply with what is known about it, for inspection and pruning."""
        with self._lock:
            rows = (
                self._connection()
                .execute(
                    "SELECT key, model, template_id, template_version, text, facts, created "
                    "FROM replies ORDER BY created"
                )
                .fetchall()
            )
        for key, model, template_id, version, text, facts, created in rows:
            try:
                parsed_facts = json.loads(facts) if facts else None
            except ValueError:
                parsed_facts = None
            yield ReplyRow(
                key=key,
                model=model or "",
                template_id=template_id or "",
                template_version=version,
                text=text or "",
                facts=parsed_facts if isinstance(parsed_facts, dict) else None,
                created=float(created) if created is not None else None,
            )

    def delete_replies(self, keys: Sequence[str]) -> int:
        """Delete the replies stored under ``keys`` in one transaction; how many were deleted."""
        deleted = 0
        with self._changing() as conn:
            for chunk, marks in in_chunks(keys):
                cursor = conn.execute(f"DELETE FROM replies WHERE key IN ({marks})", chunk)
                deleted += cursor.rowcount
        return deleted

    def delete_older_than(self, cutoff: float) -> tuple[int, int]:
        """Delete replies, embeddings and kept results stored before ``cutoff`` (`time.time`).

        Entries of unknown age (embeddings written before ages were recorded) are kept.
        Returns (replies deleted, embeddings deleted); kept results are derived from replies, so
        they go with them and are not counted.
        """
        with self._changing() as conn:
            replies = conn.execute("DELETE FROM replies WHERE created < ?", (cutoff,))
            vectors = conn.execute("DELETE FROM embeddings WHERE created < ?", (cutoff,))
            conn.execute("DELETE FROM results WHERE created < ?", (cutoff,))
        return replies.rowcount, vectors.rowcount

    def groups(self) -> CacheGroups:
        """Counts and bytes of replies by (model, template, version) and embeddings by model."""
        with self._lock:
            conn = self._connection()
            replies = conn.execute(
                "SELECT model, template_id, template_version, COUNT(*), "
                "COALESCE(SUM(LENGTH(CAST(text AS BLOB))), 0), MIN(created), MAX(created) "
                "FROM replies GROUP BY model, template_id, template_version "
                "ORDER BY model, template_id, template_version"
            ).fetchall()
            embeddings = conn.execute(
                "SELECT model, dim, COUNT(*), COALESCE(SUM(LENGTH(vector)), 0), "
                "SUM(created IS NULL) FROM embeddings GROUP BY model, dim ORDER BY model, dim"
            ).fetchall()
        return CacheGroups(
            replies=[
                ReplyGroup(m or "", t or "", v, int(n), int(b), lo, hi)
                for m, t, v, n, b, lo, hi in replies
            ],
            embeddings=[
                EmbeddingGroup(m or "", int(d or 0), int(n), int(b), int(u or 0))
                for m, d, n, b, u in embeddings
            ],
        )

    def vacuum(self) -> None:
        """Give the space of deleted rows back to the file system."""
        with self._lock:
            conn = self._connection()
            conn.execute("VACUUM")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def clear(self) -> None:
        """Delete every cached reply, embedding and kept result (the hit/miss counters stay)."""
        with self._changing() as conn:
            conn.execute("DELETE FROM replies")
            conn.execute("DELETE FROM embeddings")
            conn.execute("DELETE FROM results")
