"""A run's cache that steps aside when its store is lost, instead of taking the run with it.

The cache only saves money; the judge calls are what a run is for. When the store goes away
mid-run — a Redis server killed or restarted, an SQLite file's folder deleted, a full disk
(``sqlite3.OperationalError: database or disk is full``), a disk I/O error — a cache error
used to escape from the judge engine or the kept-Score lookup: every later cell failed, or the
run died with exit 2 and wrote nothing, while the calls already paid were thrown away.

`CacheGuard` wraps the run's backend (`ragbridge.core.scoring.runner.build_engines` puts it around
every cache it is given or opens). The first error of the store (an ``OSError``, which
`ragbridge.adapters.redis_cache.RedisCacheError` is, or an ``sqlite3`` database error) turns the
cache off for the rest of the run: reads are misses, writes are dropped and counted, and the run
goes on uncached. `CacheGuard.warning` is one line — the cache (URL without its password), what
failed and why, and what was not kept — which the runner adds to the run's warnings, so the
summary, the report and the history say it.

Errors that are the caller's, not the store's, still raise: a vector with a NaN (ValueError), a
closed cache (ValueError), a misuse of the sqlite3 API (``sqlite3.ProgrammingError``).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from typing_extensions import Unpack

from .backend import BackendBase, CacheBackend, redact_url
from .stored import CachedReply, CacheStats, ReplyMeta, Vectors

__all__ = ["CacheGuard", "guard_cache", "is_store_error", "lost_cache_lines"]

_T = TypeVar("_T")


def is_store_error(exc: BaseException) -> bool:
    """Whether ``exc`` says the cache's store is gone or unusable (not that the caller erred).

    OSError covers the file system and networked backends (`RedisCacheError` is one);
    ``sqlite3.DatabaseError`` covers a full disk, an I/O error, a file that became unreadable.
    ``sqlite3.ProgrammingError`` (a DatabaseError too) is a bug in the caller, and raises.
    """
    if isinstance(exc, sqlite3.ProgrammingError):
        return False
    return isinstance(exc, OSError | sqlite3.DatabaseError)


class CacheGuard(BackendBase):
    """``inner`` with store errors turned into one warning and an uncached rest of the run.

    Implements `CacheBackend`. Closing the guard (or leaving ``with guard:``) closes ``inner``;
    use it only around a cache the caller may close (`guard_cache` leaves that decision to its
    caller).
    """

    def __init__(self, inner: CacheBackend) -> None:
        self._inner = inner
        self._location = inner.location
        self._lock = threading.Lock()
        self._failure: str | None = None
        self._dropped = {"replies": 0, "embeddings": 0, "results": 0}

    # -- state -------------------------------------------------------------------------------

    @property
    def inner(self) -> CacheBackend:
        """The guarded backend."""
        return self._inner

    @property
    def lost(self) -> bool:
        """Whether the store failed and the cache is off for the rest of the run."""
        return self._failure is not None

    def warning(self) -> str | None:
        """The run's one line about the lost cache (None while it works).

        ``cache redis://127.0.0.1:6379/0: get_reply: lost the connection (Connection refused);
        is redis-server running? — the run went on without the cache: 46 judge replies not
        kept``: what failed, why, and what a rerun will pay again.
        """
        with self._lock:
            if self._failure is None:
                return None
            dropped = [
                f"{n} {what}"
                for what, n in (
                    ("judge replies", self._dropped["replies"]),
                    ("embedded texts", self._dropped["embeddings"]),
                    ("scores", self._dropped["results"]),
                )
                if n
            ]
            kept = f": {', '.join(dropped)} not kept" if dropped else ""
            return f"{self._failure} — the run went on without the cache{kept}"

    def __repr__(self) -> str:
        state = ", lost" if self.lost else ""
        return f"CacheGuard({self._inner!r}{state})"

    def _lose(self, doing: str, exc: BaseException) -> None:
        """Turn the cache off, keeping the first failure's line (later ones say nothing new)."""
        with self._lock:
            if self._failure is not None:
                return
            text = " ".join(str(exc).split())
            prefix = f"cache {self.location}"
            if text.startswith(prefix):  # a backend's own line (RedisCacheError) says it all
                line = text
            else:
                detail = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
                line = f"{prefix}: {doing} failed ({detail})"
            self._failure = redact_url(line)

    def _drop(self, what: str, n: int) -> None:
        with self._lock:
            self._dropped[what] += n

    def _read(self, doing: str, call: Callable[[], _T], missed: _T) -> _T:
        if self._failure is not None:
            return missed
        try:
            return call()
        except Exception as exc:
            if not is_store_error(exc):
                raise
            self._lose(doing, exc)
            return missed

    def _write(self, doing: str, what: str, n: int, call: Callable[[], None]) -> None:
        if self._failure is None:
            try:
                call()
                return
            except Exception as exc:
                if not is_store_error(exc):
                    raise
                self._lose(doing, exc)
        self._drop(what, n)

    # -- CacheBackend ----------------------------------------------------------------------

    def get_reply(self, key: str) -> CachedReply | None:
        return self._read("get_reply", lambda: self._inner.get_reply(key), None)

    def put_reply(self, key: str, reply: CachedReply, **meta: Unpack[ReplyMeta]) -> None:
        self._write("put_reply", "replies", 1, lambda: self._inner.put_reply(key, reply, **meta))

    def get_embeddings(self, model: str, texts: Sequence[str]) -> list[list[float] | None]:
        missed: list[list[float] | None] = [None] * len(texts)
        return self._read(
            "get_embeddings", lambda: self._inner.get_embeddings(model, texts), missed
        )

    def put_embeddings(self, model: str, texts: Sequence[str], vectors: Vectors) -> None:
        self._write(
            "put_embeddings",
            "embeddings",
            len(texts),
            lambda: self._inner.put_embeddings(model, texts, vectors),
        )

    def get_results(self, keys: Sequence[str]) -> dict[str, str]:
        return self._read("get_results", lambda: self._inner.get_results(keys), {})

    def put_results(self, rows: Sequence[tuple[str, str, str, str]]) -> None:
        if rows:
            self._write("put_results", "results", len(rows), lambda: self._inner.put_results(rows))

    def stats(self) -> CacheStats:
        """The inner cache's counts; all zero once the store is lost (it cannot be asked)."""
        empty = CacheStats(replies=0, embeddings=0, hits=0, misses=0)
        return self._read("stats", self._inner.stats, empty)

    def close(self) -> None:
        """Close the inner cache; a store already gone cannot fail the end of the run."""
        try:
            self._inner.close()
        except Exception as exc:
            if not is_store_error(exc):
                raise


def guard_cache(cache: CacheBackend | None) -> CacheBackend | None:
    """``cache`` inside a `CacheGuard` (None stays None; a guard is not wrapped twice)."""
    if cache is None or isinstance(cache, CacheGuard):
        return cache
    return CacheGuard(cache)


def lost_cache_lines(caches: Iterable[CacheBackend | None]) -> list[str]:
    """The warning of each guard among ``caches`` whose store was lost, each guard once.

    A run's engines may hold guards of their own (a cluster worker builds its engines before
    the run does), so the runner asks every cache it can see.
    """
    seen: set[int] = set()
    lines: list[str] = []
    for cache in caches:
        if isinstance(cache, CacheGuard) and id(cache) not in seen:
            seen.add(id(cache))
            line = cache.warning()
            if line is not None:
                lines.append(line)
    return lines
