"""A content-addressed, on-disk cache of judge replies and embeddings.

Judge calls are what an evaluation costs, in money and in time. The cache makes two promises:

* **a second run of the same evaluation makes zero judge calls** — every reply is stored under
  a key derived from everything that determines it (model, prompt template and its version,
  the exact messages, the output schema, the sampling parameters), so an identical request is
  answered from disk, and any change to the request gives a new key instead of a stale answer;
* **a run killed half-way resumes without repeating finished calls** — every ``put`` is
  committed the moment it is made, so whatever finished before the kill is on disk.

Storage is one SQLite file (stdlib :mod:`sqlite3`) in WAL mode, so several processes can share a
cache file (readers never block the writer, writers wait for each other up to 30 s), and one
:class:`Cache` object can be shared by many asyncio tasks and threads (a lock serialises use of
its single connection). Embeddings are stored as little-endian float32, the precision embedding
models produce anyway; four bytes per dimension keeps large corpora cheap to cache.

The file's parts live beside it: the request key (`ragbridge.core.cache.request_key`), the stored
forms and records every backend shares (`ragbridge.core.cache.stored`), the SQL habits of its
statements (`ragbridge.core.cache.sqlite_io`) and its housekeeping for ``ragbridge cache``
(`ragbridge.core.cache.maintenance`, a base class of `Cache`). This module opens the file and
answers a run's gets and puts.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from typing_extensions import Unpack

from ..sqlite_wal import open_wal
from .backend import BackendBase, CacheBackend, is_cache_url, open_backend, redact_url
from .maintenance import CacheMaintenance
from .sqlite_io import in_chunks, transaction
from .stored import (
    CachedReply,
    decode_vector,
    encode_vectors,
    logprobs_json,
    read_logprobs,
    stored_meta,
    text_hash,
)

if TYPE_CHECKING:
    from .stored import ReplyMeta, Vectors

__all__ = ["SCHEMA_VERSION", "Cache", "default_cache_path", "open_cache"]

#: Version of the SQLite layout, kept in the ``meta`` table. A file written by a newer ragbridge
#: is refused rather than misread.
SCHEMA_VERSION = 1

#: Seconds a connection waits for another writer (thread or process) before giving up.
_BUSY_TIMEOUT_S = 30.0


_MEMORY = ":memory:"

_SCHEMA_SQL = """
CREATE TABLE IF NOT EXISTS replies (
    key TEXT PRIMARY KEY,
    model TEXT,
    template_id TEXT,
    text TEXT,
    prompt_tokens INT,
    completion_tokens INT,
    created REAL
);
CREATE TABLE IF NOT EXISTS embeddings (
    model TEXT,
    text_hash TEXT,
    dim INT,
    vector BLOB,
    PRIMARY KEY (model, text_hash)
);
CREATE TABLE IF NOT EXISTS results (
    key TEXT PRIMARY KEY,
    metric TEXT,
    code TEXT,
    score TEXT,
    created REAL
);
"""

#: Columns added after schema version 1 shipped. They are nullable, so a file gains them in
#: place (``ALTER TABLE ... ADD COLUMN``) and older ragbridge versions, which name the columns
#: they write, keep reading and writing it. A NULL means "written before the column existed".
_ADDED_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("replies", "template_version", "TEXT"),
    ("replies", "facts", "TEXT"),
    ("embeddings", "created", "REAL"),
    ("replies", "logprobs", "TEXT"),
)


# --------------------------------------------------------------------------------------------
# Cache
# --------------------------------------------------------------------------------------------


class Cache(CacheMaintenance, BackendBase):
    """A SQLite-backed cache of judge replies and embeddings, safe to share across tasks.

    ``Cache(path)`` opens (creating it and its parent folders if needed) a cache file, or an
    in-process cache with ``":memory:"``. Every ``put_*`` commits at once, which is what lets an
    interrupted run resume. The object holds one connection guarded by a lock, so many asyncio
    tasks on one loop and several threads may use it together; separate processes should each
    open their own :class:`Cache` on the same file.

    A file that is not a ragbridge cache (corrupt, or some other file) raises ``ValueError``
    naming the path; so does a cache written by a newer, incompatible ragbridge, and a cache URL
    (``redis://...``: `open_cache` opens those).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        """Open or create the cache at ``path``; see the class docstring."""
        raw = os.fspath(path)
        if raw == "":
            raise ValueError("cache path must not be empty (use ':memory:' for a temporary cache)")
        if is_cache_url(raw):
            # Taken as a path, ``redis://host/0`` would quietly become the folders ``redis:/host``.
            raise ValueError(
                f"cache {redact_url(raw)} is a URL, not an SQLite file: open it with "
                "ragbridge.core.cache.disk.open_cache (the --cache option of `ragbridge eval` does)"
            )
        self._memory = raw == _MEMORY
        self._path: str = raw if self._memory else str(Path(raw).expanduser())
        self._location = self._path
        if not self._memory:
            Path(self._path).parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._hits = 0
        self._misses = 0
        self._conn: sqlite3.Connection | None = None
        # isolation_level=None: autocommit, so a single INSERT is durable the moment it returns;
        # multi-row writes open their own explicit transaction.
        try:
            conn = open_wal(self._path, timeout_s=_BUSY_TIMEOUT_S, initialise=self._initialise)
        except sqlite3.OperationalError:
            # Locked past the timeout, unwritable, a folder, ...: SQLite's own message is the
            # useful one.
            raise
        except sqlite3.DatabaseError as exc:
            raise ValueError(
                f"{self._path} is not a valid ragbridge cache file ({exc}); "
                "delete it (a fresh cache will be created) or choose another cache path"
            ) from exc
        self._conn = conn
        self._file = None if self._memory else os.path.abspath(self._path)
        self._identity = None if self._file is None else _identity(self._file)

    def _initialise(self, conn: sqlite3.Connection) -> None:
        """Check the schema version and create missing tables (`open_wal` switched to WAL).

        Runs in one ``BEGIN IMMEDIATE`` transaction so two processes creating the same new file
        at once cannot interleave their table creation, and a "locked" refusal rolls it back
        whole before `open_wal` tries again.
        """
        conn.execute("PRAGMA synchronous=NORMAL")
        with transaction(conn):
            conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            if row is not None:
                self._check_version(row[0])
            for statement in _SCHEMA_SQL.split(";"):
                if statement.strip():
                    conn.execute(statement)
            for table, column, kind in _ADDED_COLUMNS:
                present = {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}
                if column not in present:
                    conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
            if row is None:
                conn.execute(
                    "INSERT INTO meta (key, value) VALUES ('schema_version', ?)",
                    (str(SCHEMA_VERSION),),
                )

    def _check_version(self, stored: object) -> None:
        """Refuse a layout this code does not know, instead of misreading it."""
        try:
            version = int(str(stored))
        except ValueError:
            raise ValueError(
                f"{self._path}: unreadable cache schema version {stored!r}; "
                "delete the file to start a fresh cache"
            ) from None
        if version > SCHEMA_VERSION:
            raise ValueError(
                f"{self._path} was written with cache schema version {version}, but this "
                f"ragbridge understands up to version {SCHEMA_VERSION}; upgrade ragbridge, "
                "or delete the file (or use another cache path) to start a fresh cache"
            )
        if version < SCHEMA_VERSION:  # pragma: no cover - no older layout exists yet
            raise ValueError(
                f"{self._path} uses the old cache schema version {version}; "
                "delete it to start a fresh cache"
            )

    # -- plumbing ------------------------------------------------------------------------

    @property
    def path(self) -> str:
        """The file this cache lives in, or ``":memory:"``."""
        return self._path

    def _connection(self) -> sqlite3.Connection:
        """The open connection; using a closed cache is a programming error, as with files."""
        if self._conn is None:
            raise ValueError(f"cache {self._path} is closed")
        return self._conn

    def _writable(self) -> sqlite3.Connection:
        """The connection, once a ``stat`` shows the file is still this cache's (else OSError).

        SQLite goes on writing into a file deleted while open (its folder removed): the puts
        "succeed" into an inode nobody can reach. The run's `CacheGuard` turns the OSError into
        one warning and an uncached rest of the run.
        """
        conn = self._connection()
        known = self._identity
        if self._file is not None and known is not None and _identity(self._file) != known:
            raise OSError(
                f"cache {self._path}: the file was deleted or replaced while in use; "
                "nothing more can be kept in it"
            )
        return conn

    def __repr__(self) -> str:
        """Show the path, so logs say which cache file a run used."""
        state = ", closed" if self._conn is None else ""
        return f"Cache({self._path!r}{state})"

    def close(self) -> None:
        """Close the connection (``with Cache(path) as cache:`` does on exit). Safe to call
        twice; nothing is lost, every put has already committed."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    # -- replies ---------------------------------------------------------------------------

    def get_reply(self, key: str) -> CachedReply | None:
        """The reply stored under ``key`` (see :func:`cache_key`), or None on a miss.

        A row whose stored log-probabilities are unreadable (`read_logprobs`) is a miss too:
        the request is sent again and its put replaces the row.
        """
        with self._lock:
            row = (
                self._connection()
                .execute(
                    "SELECT text, prompt_tokens, completion_tokens, logprobs "
                    "FROM replies WHERE key = ?",
                    (key,),
                )
                .fetchone()
            )
            logprobs = None
            if row is not None:
                try:
                    logprobs = read_logprobs(row[3])
                except ValueError:
                    row = None
            if row is None:
                self._misses += 1
                return None
            self._hits += 1
        text, prompt_tokens, completion_tokens, _ = row
        return CachedReply(
            text=text,
            prompt_tokens=int(prompt_tokens or 0),
            completion_tokens=int(completion_tokens or 0),
            logprobs=logprobs,
        )

    def put_reply(self, key: str, reply: CachedReply, **meta: Unpack[ReplyMeta]) -> None:
        """Store ``reply`` under ``key`` and commit at once (a later put replaces it).

        ``meta`` (`ReplyMeta`: ``model=``, ``template_id=``, optional ``template_version=`` and
        ``facts=``) is stored beside it for ``ragbridge cache`` to inspect and prune by; the
        reply's log-probabilities, if any, as `logprobs_json`.
        """
        kept = stored_meta(reply, meta)
        logprobs = logprobs_json(reply.logprobs)
        with self._lock:
            self._writable().execute(
                "INSERT OR REPLACE INTO replies "
                "(key, text, prompt_tokens, completion_tokens, created, "
                "model, template_id, template_version, facts, logprobs) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    key,
                    reply.text,
                    reply.prompt_tokens,
                    reply.completion_tokens,
                    time.time(),
                    *kept,
                    logprobs,
                ),
            )

    # -- embeddings ------------------------------------------------------------------------

    def get_embeddings(self, model: str, texts: Sequence[str]) -> list[list[float] | None]:
        """The cached vector of each text under ``model``, aligned with ``texts`` (None = miss).

        Looked up in batches rather than one query per text, since a corpus can hold many
        thousands of passages. The caller embeds only the misses and puts them back.
        """
        hashes = [text_hash(t) for t in texts]
        unique = list(dict.fromkeys(hashes))
        found: dict[str, list[float]] = {}
        with self._lock:
            conn = self._connection()
            for chunk, marks in in_chunks(unique):
                rows = conn.execute(
                    "SELECT text_hash, dim, vector FROM embeddings "
                    f"WHERE model = ? AND text_hash IN ({marks})",
                    (model, *chunk),
                ).fetchall()
                for digest, dim, blob in rows:
                    vector = decode_vector(blob, int(dim or 0))
                    if vector is not None:
                        found[digest] = vector
            result: list[list[float] | None] = [
                list(found[h]) if h in found else None for h in hashes
            ]
            hit_count = sum(v is not None for v in result)
            self._hits += hit_count
            self._misses += len(result) - hit_count
        return result

    def put_embeddings(self, model: str, texts: Sequence[str], vectors: Vectors) -> None:
        """Store one vector per text under ``model``, all in one committed transaction.

        Every vector is checked (`encode_vectors`) before anything is written, so a bad batch
        leaves the cache untouched: a NaN or infinite value (or one beyond float32 range) raises
        ValueError naming the text's index, because a cached NaN would poison every later run.
        """
        now = time.time()
        rows = [
            (model, digest, dim, blob, now) for digest, dim, blob in encode_vectors(texts, vectors)
        ]
        if not rows:
            return
        with self._changing(checked=True) as conn:
            conn.executemany(
                "INSERT OR REPLACE INTO embeddings (model, text_hash, dim, vector, created) "
                "VALUES (?, ?, ?, ?, ?)",
                rows,
            )

    # -- whole results -----------------------------------------------------------------------

    def get_results(self, keys: Sequence[str]) -> dict[str, str]:
        """The stored Score JSON of each of ``keys`` that is present (one SELECT per chunk).

        The keys are `ragbridge.core.cache.scores` keys; hits and misses are not counted in
        `stats`, which counts judge replies and embeddings.
        """
        found: dict[str, str] = {}
        with self._lock:
            conn = self._connection()
            for chunk, marks in in_chunks(keys):
                rows = conn.execute(
                    f"SELECT key, score FROM results WHERE key IN ({marks})", chunk
                ).fetchall()
                found.update(rows)
        return found

    def put_results(self, rows: Sequence[tuple[str, str, str, str]]) -> None:
        """Store ``(key, metric, code, score_json)`` rows in one transaction.

        ``code`` is the digest of the scoring code the Score came from, kept so entries of
        other code versions can be pruned (``ragbridge cache prune --old-prompts``).
        """
        if not rows:
            return
        now = time.time()
        with self._changing(checked=True) as conn:
            conn.executemany(
                "INSERT OR REPLACE INTO results (key, metric, code, score, created) "
                "VALUES (?, ?, ?, ?, ?)",
                [(key, metric, code, score, now) for key, metric, code, score in rows],
            )


# --------------------------------------------------------------------------------------------
# Helpers for callers
# --------------------------------------------------------------------------------------------


def open_cache(spec: str | os.PathLike[str] | CacheBackend | None) -> CacheBackend | None:
    """Turn a user's cache option into an open cache (or None = caching off).

    Lets APIs accept ``cache=None``, ``cache="run.sqlite"``, ``cache="redis://host:6379/0"``
    (a networked backend, `ragbridge.core.cache.backend`) or an already open cache alike. A
    cache passed in is returned as is (the caller keeps ownership of closing it).
    """
    if spec is None:
        return None
    if isinstance(spec, Cache | CacheBackend):
        return spec
    if is_cache_url(spec):
        return open_backend(str(spec))
    return Cache(spec)


def _identity(path: str) -> tuple[int, int] | None:
    """The file at ``path`` as (device, inode); None when there is none."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino


def default_cache_path() -> Path:
    """Where the CLI caches by default.

    ``$RAGBRIDGE_CACHE_DIR/cache.sqlite`` if that variable is set, else
    ``$XDG_CACHE_HOME/ragbridge/cache.sqlite`` (an absolute ``XDG_CACHE_HOME`` only, as the XDG
    spec says), else ``~/.cache/ragbridge/cache.sqlite``. Nothing is created here.
    """
    own = os.environ.get("RAGBRIDGE_CACHE_DIR")
    if own:
        return Path(own).expanduser() / "cache.sqlite"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base / "ragbridge" / "cache.sqlite"
