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
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import sqlite3
import threading
import time
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np
import numpy.typing as npt

from .backend import CacheBackend, is_cache_url, open_backend, redact_url

__all__ = [
    "CACHE_FORMAT_VERSION",
    "SCHEMA_VERSION",
    "Cache",
    "CacheGroups",
    "CacheStats",
    "CachedReply",
    "EmbeddingGroup",
    "ReplyGroup",
    "ReplyRow",
    "cache_key",
    "canonical_json",
    "decode_vector",
    "default_cache_path",
    "encode_vectors",
    "facts_json",
    "open_cache",
    "text_hash",
]

#: Part of every reply key. Bump it when the canonical form of a key changes, so that entries
#: written under the old form are never mistaken for answers to the new one.
CACHE_FORMAT_VERSION = 1

#: Version of the SQLite layout, kept in the ``meta`` table. A file written by a newer ragbridge
#: is refused rather than misread.
SCHEMA_VERSION = 1

#: Seconds a connection waits for another writer (thread or process) before giving up.
_BUSY_TIMEOUT_S = 30.0

#: Texts looked up per SELECT: stays well under SQLite's historic 999-parameter limit.
_LOOKUP_CHUNK = 500

#: Stored vector element type: float32, little-endian whatever the machine, so a cache file can
#: be copied between hosts.
_VECTOR_DTYPE = np.dtype("<f4")

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
)


# --------------------------------------------------------------------------------------------
# Keys
# --------------------------------------------------------------------------------------------


def _canonical(value: Any, where: str) -> Any:
    """``value`` rebuilt from plain JSON types, so equal requests serialise identically.

    Mappings become dicts (their key order is dropped later by ``sort_keys``), sequences become
    lists, and a float with an integral value becomes an int: ``temperature=0`` and
    ``temperature=0.0`` are the same request and must share a key. ``bool`` stays distinct from
    ``int`` because JSON keeps them apart. Non-string mapping keys are refused: JSON would turn
    ``1`` into ``"1"`` and silently merge two different requests.
    """
    if value is None or isinstance(value, (str, bool)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{where}: non-finite number {value!r} cannot be part of a cache key")
        return int(value) if value.is_integer() else value
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise TypeError(f"{where}: mapping keys must be str, got {k!r}")
            out[k] = _canonical(v, f"{where}.{k}")
        return out
    if isinstance(value, (list, tuple)):
        return [_canonical(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, np.generic):
        return _canonical(value.item(), where)
    raise TypeError(
        f"{where}: {type(value).__name__} is not JSON-like and cannot be part of a cache key"
    )


def canonical_json(value: Any, where: str) -> str:
    """``value`` as the canonical JSON a key hashes: `_canonical`, sorted keys, no spaces."""
    return json.dumps(
        _canonical(value, where),
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
    )


def _messages_json(messages: Sequence[Mapping[str, str]]) -> str:
    """`canonical_json` of chat messages, without the recursive rebuild when it changes nothing.

    Messages are nearly always dicts of strings, which `_canonical` returns as they are; the
    rebuild was a fifth of the cost of a cache hit. Anything else takes the general path.
    """
    plain = all(
        type(m) is dict and all(type(k) is str and type(v) is str for k, v in m.items())
        for m in messages
    )
    if not plain:
        return canonical_json(list(messages), "messages")
    return json.dumps(
        list(messages), sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def cache_key(
    *,
    model: str,
    template_id: str,
    template_version: str,
    messages: Sequence[Mapping[str, str]],
    schema: Mapping[str, Any] | None,
    params: Mapping[str, Any] | None = None,
    schema_json: str | None = None,
) -> str:
    """The sha256 hex key of one judge request.

    Every input that can change the judge's reply is hashed, so a changed prompt, template
    version, model, schema or parameter is a cache miss rather than a stale hit. The parts are
    serialised as canonical JSON (sorted keys, fixed separators, UTF-8 kept as is), so dict key
    order and whitespace never matter. ``params=None`` and ``params={}`` mean the same request;
    ``schema=None`` (free text) and ``schema={}`` (any JSON) do not, and get different keys.

    ``schema_json`` is the schema already serialised by `canonical_json` (give it instead of
    ``schema``): the engine computes it once per schema class, since rebuilding and
    re-serialising a JSON Schema for every request cost more than the rest of a call. Either
    way the key is the same.
    """
    if schema_json is not None:
        if schema is not None:
            raise TypeError("give schema or schema_json, not both")
        schema_part = schema_json
    else:
        schema_part = canonical_json(schema, "schema")
    # The blob is what json.dumps(parts, sort_keys=True, ...) of the dict of parts gives: the
    # parts in sorted key order, each serialised alone, so a pre-serialised schema fits in.
    parts = (
        ("format", str(CACHE_FORMAT_VERSION)),
        ("messages", _messages_json(messages)),
        ("model", canonical_json(model, "model")),
        ("params", canonical_json(params if params is not None else {}, "params")),
        ("schema", schema_part),
        ("template_id", canonical_json(template_id, "template_id")),
        ("template_version", canonical_json(template_version, "template_version")),
    )
    blob = "{" + ",".join(f'"{name}":{text}' for name, text in parts) + "}"
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


@contextlib.contextmanager
def _transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """One write transaction, taken at once (``BEGIN IMMEDIATE``): another writer waits for it
    instead of failing half-way; rolled back on any exception, Ctrl-C included."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


# --------------------------------------------------------------------------------------------
# Stored forms every backend shares
# --------------------------------------------------------------------------------------------
# A networked backend (`ragbridge.core.cache.backend`) stores the same bytes as the SQLite file,
# so the two answer alike and cannot drift: these helpers are the one definition of each form.


def text_hash(text: str) -> str:
    """Embeddings are keyed by a digest, not the text, so long passages cost 64 bytes each."""
    return hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()


def facts_json(facts: Mapping[str, Any] | None) -> str | None:
    """The stored form of a reply's ``facts`` (see `Cache.put_reply`), or None for none.

    `_canonical` refuses what JSON would silently change (non-string keys, NaN), so what is
    read back is what was checked.
    """
    if facts is None:
        return None
    return json.dumps(_canonical(dict(facts), "facts"), sort_keys=True)


def encode_vectors(
    texts: Sequence[str],
    vectors: Sequence[Sequence[float]] | npt.NDArray[np.floating[Any]],
) -> list[tuple[str, int, bytes]]:
    """``(text_hash, dim, little-endian float32 bytes)`` per text, every vector checked first.

    All vectors are checked before any is returned, so a caller that writes only what this
    returns leaves its store untouched by a bad batch: misaligned lengths, a vector that is not
    a non-empty 1-D array of numbers, or a NaN or infinite value (or one beyond float32 range)
    raise ValueError naming the text's index, because a cached NaN would poison every later run.
    """
    if len(texts) != len(vectors):
        raise ValueError(
            f"put_embeddings got {len(texts)} texts but {len(vectors)} vectors; "
            "they must be aligned one to one"
        )
    rows: list[tuple[str, int, bytes]] = []
    for i, (text, vector) in enumerate(zip(texts, vectors, strict=True)):
        try:
            arr = np.asarray(vector, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"embedding for text #{i} is not a vector of numbers: {exc}") from None
        if arr.ndim != 1 or arr.size == 0:
            raise ValueError(
                f"embedding for text #{i} must be a non-empty 1-D vector, got shape {arr.shape}"
            )
        with np.errstate(over="ignore"):
            stored = arr.astype(_VECTOR_DTYPE)
        if not np.all(np.isfinite(stored)):
            raise ValueError(
                f"embedding for text #{i} contains non-finite values "
                "(NaN, infinity, or beyond float32 range)"
            )
        rows.append((text_hash(text), int(arr.size), stored.tobytes()))
    return rows


def decode_vector(blob: bytes, dim: int) -> list[float] | None:
    """The stored vector as float64 values, or None when ``blob`` does not hold ``dim`` floats.

    A truncated or foreign value is a miss rather than an error: the caller recomputes the
    vector and the put replaces the bad entry.
    """
    if dim <= 0 or len(blob) != dim * _VECTOR_DTYPE.itemsize:
        return None
    values: list[float] = np.frombuffer(blob, dtype=_VECTOR_DTYPE).astype(np.float64).tolist()
    return values


# --------------------------------------------------------------------------------------------
# Records
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CachedReply:
    """A judge reply as cached: the raw text plus the token usage it cost when it was made.

    The usage is kept so a report can say what a run *would* have cost without the cache.
    """

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def __post_init__(self) -> None:
        """Reject values that would corrupt later cost accounting."""
        if not isinstance(self.text, str):
            raise TypeError(f"CachedReply.text must be str, got {type(self.text).__name__}")
        for name in ("prompt_tokens", "completion_tokens"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"CachedReply.{name} must be a non-negative int, got {value!r}")


@dataclass(frozen=True)
class ReplyRow:
    """One stored reply as `Cache.reply_rows` yields it (None: not recorded by the writer)."""

    key: str
    model: str
    template_id: str
    template_version: str | None
    text: str
    facts: dict[str, Any] | None
    created: float | None


@dataclass(frozen=True)
class ReplyGroup:
    """Replies of one model, template and template version (``ragbridge cache stats``)."""

    model: str
    template_id: str
    template_version: str | None
    count: int
    text_bytes: int
    oldest: float | None
    newest: float | None


@dataclass(frozen=True)
class EmbeddingGroup:
    """Embeddings of one model and dimension; ``unknown_age`` were stored before ages were."""

    model: str
    dim: int
    count: int
    vector_bytes: int
    unknown_age: int


@dataclass(frozen=True)
class CacheGroups:
    replies: list[ReplyGroup]
    embeddings: list[EmbeddingGroup]


@dataclass(frozen=True)
class CacheStats:
    """Row counts of the cache file, and the hits and misses of one :class:`Cache` object.

    ``hits``/``misses`` count :meth:`Cache.get_reply` calls and individual texts looked up by
    :meth:`Cache.get_embeddings`, so a second identical run should show ``misses == 0``.
    """

    replies: int
    embeddings: int
    hits: int
    misses: int
    results: int = 0
    """Whole Scores kept for reuse (`ragbridge.core.cache.scores`)."""


# --------------------------------------------------------------------------------------------
# Cache
# --------------------------------------------------------------------------------------------


class Cache:
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
        if not self._memory:
            Path(self._path).parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._hits = 0
        self._misses = 0
        self._conn: sqlite3.Connection | None = None
        # isolation_level=None: autocommit, so a single INSERT is durable the moment it returns;
        # multi-row writes open their own explicit transaction.
        conn = sqlite3.connect(
            self._path,
            timeout=_BUSY_TIMEOUT_S,
            check_same_thread=False,
            isolation_level=None,
        )
        try:
            self._initialise(conn)
        except sqlite3.OperationalError:
            # Locked, unwritable, a folder, ...: SQLite's own message is the useful one.
            conn.close()
            raise
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise ValueError(
                f"{self._path} is not a valid ragbridge cache file ({exc}); "
                "delete it (a fresh cache will be created) or choose another cache path"
            ) from exc
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        self._file = None if self._memory else os.path.abspath(self._path)
        self._identity = None if self._file is None else _identity(self._file)

    def _initialise(self, conn: sqlite3.Connection) -> None:
        """Switch to WAL, check the schema version and create missing tables.

        Runs in one ``BEGIN IMMEDIATE`` transaction so two processes creating the same new file
        at once cannot interleave their table creation.
        """
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        with _transaction(conn):
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

    @property
    def location(self) -> str:
        """The file this cache lives in (`CacheBackend.location`)."""
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

    def __enter__(self) -> Cache:
        """Use as ``with Cache(path) as cache:`` to close the file on exit."""
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close the connection; nothing is lost since every put has already committed."""
        self.close()

    def close(self) -> None:
        """Close the connection. Safe to call twice; the data is already committed."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    # -- replies ---------------------------------------------------------------------------

    def get_reply(self, key: str) -> CachedReply | None:
        """The reply stored under ``key`` (see :func:`cache_key`), or None on a miss."""
        with self._lock:
            row = (
                self._connection()
                .execute(
                    "SELECT text, prompt_tokens, completion_tokens FROM replies WHERE key = ?",
                    (key,),
                )
                .fetchone()
            )
            if row is None:
                self._misses += 1
                return None
            self._hits += 1
        text, prompt_tokens, completion_tokens = row
        return CachedReply(
            text=text,
            prompt_tokens=int(prompt_tokens or 0),
            completion_tokens=int(completion_tokens or 0),
        )

    def put_reply(
        self,
        key: str,
        reply: CachedReply,
        *,
        model: str,
        template_id: str,
        template_version: str | None = None,
        facts: Mapping[str, Any] | None = None,
    ) -> None:
        """Store ``reply`` under ``key`` and commit at once (a later put replaces it).

        ``model``, ``template_id`` and ``template_version`` are not part of the lookup — the key
        already covers them — but are stored so a cache file can be inspected or pruned per
        model or template version (``ragbridge cache``). ``facts`` are what the reply was
        checked against (e.g. ``{"CLAIM": 3, "CONTEXT": 4}``), kept so the check can be run
        again on the stored reply later (``ragbridge cache prune --failed``).
        """
        if not isinstance(reply, CachedReply):
            raise TypeError(f"reply must be a CachedReply, got {type(reply).__name__}")
        stored_facts = facts_json(facts)
        with self._lock:
            self._writable().execute(
                "INSERT OR REPLACE INTO replies "
                "(key, model, template_id, text, prompt_tokens, completion_tokens, created, "
                "template_version, facts) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    key,
                    model,
                    template_id,
                    reply.text,
                    reply.prompt_tokens,
                    reply.completion_tokens,
                    time.time(),
                    template_version,
                    stored_facts,
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
            for start in range(0, len(unique), _LOOKUP_CHUNK):
                chunk = unique[start : start + _LOOKUP_CHUNK]
                marks = ",".join("?" * len(chunk))
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

    def put_embeddings(
        self,
        model: str,
        texts: Sequence[str],
        vectors: Sequence[Sequence[float]] | npt.NDArray[np.floating[Any]],
    ) -> None:
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
        with self._lock:
            conn = self._writable()
            with _transaction(conn):
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
            for start in range(0, len(keys), _LOOKUP_CHUNK):
                chunk = list(keys[start : start + _LOOKUP_CHUNK])
                marks = ",".join("?" * len(chunk))
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
        with self._lock:
            conn = self._writable()
            with _transaction(conn):
                conn.executemany(
                    "INSERT OR REPLACE INTO results (key, metric, code, score, created) "
                    "VALUES (?, ?, ?, ?, ?)",
                    [(key, metric, code, score, now) for key, metric, code, score in rows],
                )

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
        with self._lock:
            conn = self._connection()
            if keep_codes is None:
                return int(conn.execute("DELETE FROM results").rowcount)
            with _transaction(conn):
                deleted = 0
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
        with self._lock:
            conn = self._connection()
            with _transaction(conn):
                for start in range(0, len(keys), _LOOKUP_CHUNK):
                    chunk = list(keys[start : start + _LOOKUP_CHUNK])
                    marks = ",".join("?" * len(chunk))
                    cursor = conn.execute(f"DELETE FROM replies WHERE key IN ({marks})", chunk)
                    deleted += cursor.rowcount
        return deleted

    def delete_older_than(self, cutoff: float) -> tuple[int, int]:
        """Delete replies, embeddings and kept results stored before ``cutoff`` (`time.time`).

        Entries of unknown age (embeddings written before ages were recorded) are kept.
        Returns (replies deleted, embeddings deleted); kept results are derived from replies, so
        they go with them and are not counted.
        """
        with self._lock:
            conn = self._connection()
            with _transaction(conn):
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
        with self._lock:
            conn = self._connection()
            with _transaction(conn):
                conn.execute("DELETE FROM replies")
                conn.execute("DELETE FROM embeddings")
                conn.execute("DELETE FROM results")


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
