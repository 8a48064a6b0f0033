"""A judge cache on a Redis server, so the workers of a cluster pay each judge call once.

The SQLite cache (`ragbridge.core.cache.disk.Cache`) is one file on one machine; workers on other
machines cannot share it. `RedisCache` keeps the same entries on a Redis server instead, behind
the same protocol (`ragbridge.core.cache.backend.CacheBackend`), so a run on a Dask cluster, or
several CI jobs, share one cache. ``--cache redis://host:6379/0`` (or ``rediss://`` for TLS)
selects it; `ragbridge.core.cache.disk.open_cache` finds this module through the
``ragbridge.caches`` entry points, so the core never imports redis-py.

**Same answers as SQLite.** Keys are the same content addresses
(`ragbridge.core.cache.request_key.cache_key` for replies,
`ragbridge.core.cache.stored.text_hash` for embedded texts, the result-cache keys for kept Scores).
Embeddings are stored as the very bytes the SQLite file holds (little-endian float32,
`ragbridge.core.cache.stored.encode_vectors`, with its checks: a NaN, an infinity or a misaligned
batch raises ValueError and writes nothing) and read back by the same `decode_vector`, so a hit is
bit-identical whichever backend answers it. Reply metadata (model, template id and version, facts
as `ragbridge.core.cache.stored.facts_json` gives them) is kept next to the reply text.

**Layout.** Every key starts ``PREFIX:1:`` (``PREFIX`` is ``ragbridge`` unless ``?prefix=NAME``
or ``prefix=`` says otherwise; ``1`` is `REDIS_FORMAT_VERSION`), so several teams or projects
can share one database and a future layout never misreads this one:

* ``PREFIX:1:reply:KEY`` — a hash: ``text``, ``prompt_tokens``, ``completion_tokens``, ``model``,
  ``template_id``, ``template_version``, ``facts``, ``logprobs`` (the reply's token
  log-probabilities as `ragbridge.core.cache.stored.logprobs_json` writes them, the SQLite file's
  bytes), ``created`` (absent fields: not recorded);
* ``PREFIX:1:emb:MODEL:TEXT_HASH`` — a string: the float32 bytes (the dimension is its length / 4);
* ``PREFIX:1:result:KEY`` — a hash: ``score`` (the Score's JSON), ``metric``, ``code``, ``created``.

**Round trips.** A reply is one command each way; embeddings are read with one ``MGET`` per
`BATCH` texts and written in one ``MULTI``/``EXEC`` (all of a batch or none of it); kept results
are read with one pipelined round trip per `BATCH` keys. 10,000 cached vectors are 10 round trips.

**Durability and sharing.** A put returns once Redis has applied it; whether that survives a
server restart is the server's persistence setting (``appendonly yes`` with ``appendfsync
everysec`` loses at most a second; the default snapshotting can lose minutes, and
``--save ''`` everything). Expiry, if wanted, is the server's job too (``maxmemory-policy
allkeys-lru``): ``ragbridge cache stats|prune`` work on SQLite files only. redis-py's client keeps
a thread-safe connection pool, so one `RedisCache` may be shared by threads and by the asyncio
tasks of a run (each call blocks its thread for one round trip, as an SQLite call blocks for a
read). A single server (or a primary) is expected: Redis Cluster would refuse multi-key reads.

**Errors.** Opening pings the server, so a wrong address or password is one line at once, e.g.
``cache redis://127.0.0.1:6390/0: cannot connect (Connection refused); is redis-server
running?``. A Redis error later in a run raises `RedisCacheError` (an OSError) with the same kind
of line; nothing wrong is ever returned. A run does not die of it: its cache is guarded
(`ragbridge.core.cache.guard.CacheGuard`), so the first such error turns the cache off for the
rest of the run, which goes on uncached and ends with that line as a warning, saying what was
not kept.

Importing this module without redis-py raises ImportError naming the extra:
``pip install ".[redis]"`` in your ragbridge clone.
"""

from __future__ import annotations

__all__ = [
    "BATCH",
    "DEFAULT_PREFIX",
    "INSTALL_HINT",
    "REDIS_FORMAT_VERSION",
    "RedisCache",
    "RedisCacheError",
    "open_redis_cache",
]

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from typing import TYPE_CHECKING, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from typing_extensions import Unpack

from ragbridge.adapters._extras import install_hint, missing_extra
from ragbridge.core.cache.backend import BackendBase, redact_url
from ragbridge.core.cache.stored import (
    CachedReply,
    CacheStats,
    decode_vector,
    encode_vectors,
    logprobs_json,
    read_logprobs,
    stored_meta,
    text_hash,
)

if TYPE_CHECKING:
    from redis.typing import EncodableT

    from ragbridge.core.cache.stored import ReplyMeta, Vectors

INSTALL_HINT = install_hint("redis")
"""What to run when the ``redis`` extra is missing."""

try:
    import redis
    import redis.exceptions
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise missing_extra("ragbridge.adapters.redis_cache", "redis-py", "redis", exc) from exc

REDIS_FORMAT_VERSION = 1
"""Part of every key: bump it when the layout changes, so old entries are never misread."""

DEFAULT_PREFIX = "ragbridge"
"""The key prefix when neither ``?prefix=`` nor ``prefix=`` gives one."""

BATCH = 1000
"""Keys per ``MGET`` (or per pipelined round trip): large enough that 10,000 lookups are 10
round trips, small enough that one reply of 1536-dimension vectors stays near 6 MB."""

_CONNECT_TIMEOUT_S = 5.0
"""Seconds to wait for a TCP connection (a URL's ``socket_connect_timeout`` wins)."""

_TIMEOUT_S = 30.0
"""Seconds to wait for a reply (a URL's ``socket_timeout`` wins): a hung server fails a call
instead of hanging the run."""

_T = TypeVar("_T")


class RedisCacheError(OSError):
    """Redis could not do what the cache asked: one line naming the URL (no password) and the fix.

    An OSError, like a file that cannot be read: when opening, the CLI reports it as one line
    (exit 2, nothing paid yet); mid-run, the run's `CacheGuard` turns the cache off and warns.
    """


class RedisCache(BackendBase):
    """The judge cache on a Redis server (see the module docstring).

    ``url`` is a redis-py URL (``redis://[[user]:password@]host[:port][/db]``, ``rediss://`` for
    TLS; redis-py's query options such as ``socket_timeout`` apply). ``prefix`` (or the URL's
    ``?prefix=``) namespaces the keys; giving two different ones is a ValueError.
    """

    def __init__(self, url: str, *, prefix: str | None = None) -> None:
        """Connect and ping the server: a cache that cannot be reached fails here, not mid-run."""
        connect_url, url_prefix = _split_prefix(url)
        if prefix is not None and url_prefix is not None and prefix != url_prefix:
            raise ValueError(
                f"cache {redact_url(url)}: prefix {prefix!r} given, but the URL says "
                f"prefix={url_prefix!r}; give one"
            )
        chosen = prefix if prefix is not None else url_prefix
        if chosen is None:
            chosen = DEFAULT_PREFIX
        if not chosen:
            raise ValueError(f"cache {redact_url(url)}: the key prefix must not be empty")
        self._location = redact_url(url)
        self._prefix = chosen
        self._base = f"{chosen}:{REDIS_FORMAT_VERSION}:"
        self._lock = threading.Lock()
        self._hits = 0
        self._misses = 0
        self._closed = False
        try:
            self._client: redis.Redis = redis.Redis.from_url(
                connect_url,
                socket_connect_timeout=_CONNECT_TIMEOUT_S,
                socket_timeout=_TIMEOUT_S,
            )
        except ValueError as exc:  # a URL redis-py cannot parse (bad port, bad option value)
            raise ValueError(f"cache {self._location}: {exc}") from None
        try:
            self._call("ping", self._client.ping)
        except BaseException:
            self._client.close()
            raise

    # -- plumbing ----------------------------------------------------------------------------

    @property
    def prefix(self) -> str:
        """The key prefix in use (before ``:1:``)."""
        return self._prefix

    def __repr__(self) -> str:
        """Show the URL (no password), so logs say which cache a run used."""
        state = ", closed" if self._closed else ""
        return f"RedisCache({self._location!r}{state})"

    def close(self) -> None:
        """Close the pool's connections (``with RedisCache(url) as cache:`` does on exit). Safe
        to call twice; nothing is lost, every put has already been applied on the server."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._client.close()

    def _open(self) -> redis.Redis:
        """The client; using a closed cache is a programming error, as with `Cache`."""
        if self._closed:
            raise ValueError(f"cache {self._location} is closed")
        return self._client

    def _call(self, doing: str, call: Callable[[], _T]) -> _T:
        """``call()`` with any Redis error turned into one `RedisCacheError` line."""
        with self._errors(doing):
            return call()

    @contextmanager
    def _errors(self, doing: str) -> Iterator[None]:
        try:
            yield
        except redis.exceptions.RedisError as exc:
            raise RedisCacheError(_explain(self._location, doing, exc)) from exc

    def _key(self, kind: str, name: str) -> str:
        return f"{self._base}{kind}:{name}"

    # -- replies -----------------------------------------------------------------------------

    def get_reply(self, key: str) -> CachedReply | None:
        """The reply stored under ``key``, or None on a miss (one round trip).

        As in the SQLite file, unreadable stored log-probabilities make the entry a miss.
        """
        client = self._open()
        text, prompt, completion, stored = self._call(
            "get_reply",
            lambda: client.hmget(
                self._key("reply", key),
                ["text", "prompt_tokens", "completion_tokens", "logprobs"],
            ),
        )
        logprobs = None
        if text is not None:
            try:
                logprobs = read_logprobs(stored)
            except ValueError:
                text = None
        with self._lock:
            if text is None:
                self._misses += 1
                return None
            self._hits += 1
        return CachedReply(
            text=_text(text),
            prompt_tokens=_int(prompt),
            completion_tokens=_int(completion),
            logprobs=logprobs,
        )

    def put_reply(self, key: str, reply: CachedReply, **meta: Unpack[ReplyMeta]) -> None:
        """Store ``reply`` and its metadata (`ReplyMeta`) under ``key``, replacing any earlier
        entry whole.

        One ``MULTI``/``EXEC`` (delete, then write the fields), so a reader never sees the new
        text next to the old metadata; as `Cache.put_reply`, the metadata is not part of the
        lookup but is kept for inspection. An absent optional field is not written.
        """
        kept = stored_meta(reply, meta)
        fields: dict[EncodableT, EncodableT] = {
            "text": reply.text,
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
            "created": time.time(),
        }
        fields.update(
            (field, value) for field, value in kept._asdict().items() if value is not None
        )
        logprobs = logprobs_json(reply.logprobs)
        if logprobs is not None:
            fields["logprobs"] = logprobs
        name = self._key("reply", key)
        pipe = self._open().pipeline(transaction=True)
        pipe.delete(name)
        pipe.hset(name, mapping=fields)
        self._call("put_reply", pipe.execute)

    # -- embeddings --------------------------------------------------------------------------

    def get_embeddings(self, model: str, texts: Sequence[str]) -> list[list[float] | None]:
        """The cached vector of each text under ``model``, aligned with ``texts`` (None = miss).

        One ``MGET`` per `BATCH` distinct texts; a value that is not whole float32s is a miss.
        """
        client = self._open()
        hashes = [text_hash(t) for t in texts]
        unique = list(dict.fromkeys(hashes))
        found: dict[str, list[float]] = {}
        for start in range(0, len(unique), BATCH):
            chunk = unique[start : start + BATCH]
            names = [self._key("emb", f"{model}:{h}") for h in chunk]
            blobs = self._call("get_embeddings", partial(client.mget, names))
            for digest, blob in zip(chunk, blobs, strict=True):
                if not isinstance(blob, bytes):  # None: a miss (str never: responses are raw)
                    continue
                # The dimension is the length in float32s; a ragged length is a miss.
                vector = decode_vector(blob, len(blob) // 4)
                if vector is not None:
                    found[digest] = vector
        result: list[list[float] | None] = [list(found[h]) if h in found else None for h in hashes]
        hit_count = sum(v is not None for v in result)
        with self._lock:
            self._hits += hit_count
            self._misses += len(result) - hit_count
        return result

    def put_embeddings(self, model: str, texts: Sequence[str], vectors: Vectors) -> None:
        """Store one vector per text under ``model``: all of them in one ``MULTI``/``EXEC``.

        Every vector is checked first (`encode_vectors`), so a bad batch writes nothing.
        """
        rows = encode_vectors(texts, vectors)
        if not rows:
            return
        pipe = self._open().pipeline(transaction=True)
        for start in range(0, len(rows), BATCH):
            pipe.mset(
                {
                    self._key("emb", f"{model}:{h}"): blob
                    for h, _, blob in rows[start : start + BATCH]
                }
            )
        self._call("put_embeddings", pipe.execute)

    # -- whole results -----------------------------------------------------------------------

    def get_results(self, keys: Sequence[str]) -> dict[str, str]:
        """The stored Score JSON of each of ``keys`` that is present (not counted in `stats`)."""
        client = self._open()
        found: dict[str, str] = {}
        for start in range(0, len(keys), BATCH):
            chunk = list(keys[start : start + BATCH])
            pipe = client.pipeline(transaction=False)
            for key in chunk:
                pipe.hget(self._key("result", key), "score")
            scores = self._call("get_results", pipe.execute)
            for key, score in zip(chunk, scores, strict=True):
                if score is not None:
                    found[key] = _text(score)
        return found

    def put_results(self, rows: Sequence[tuple[str, str, str, str]]) -> None:
        """Store ``(key, metric, code, score_json)`` rows, all in one ``MULTI``/``EXEC``."""
        if not rows:
            return
        now = time.time()
        pipe = self._open().pipeline(transaction=True)
        for key, metric, code, score in rows:
            pipe.hset(
                self._key("result", key),
                mapping={"score": score, "metric": metric, "code": code, "created": now},
            )
        self._call("put_results", pipe.execute)

    # -- housekeeping ------------------------------------------------------------------------

    def stats(self) -> CacheStats:
        """Entry counts under this prefix plus this object's hits and misses.

        Counting walks the database's whole keyspace with ``SCAN`` (1000 keys per round trip,
        matching this prefix on the server): O(keys in the database), about a second per few
        million keys. Fine for a report at the end of a run; not for a hot path.
        """
        client = self._open()
        counts = {"reply": 0, "emb": 0, "result": 0}
        pattern = _glob_escape(self._base) + "*"
        skip = len(self._base.encode("utf-8"))
        with self._errors("stats"):
            for name in client.scan_iter(match=pattern, count=1000):
                kind = bytes(name)[skip:].split(b":", 1)[0].decode("ascii", "replace")
                if kind in counts:
                    counts[kind] += 1
        with self._lock:
            return CacheStats(
                replies=counts["reply"],
                embeddings=counts["emb"],
                hits=self._hits,
                misses=self._misses,
                results=counts["result"],
            )


def open_redis_cache(url: str) -> RedisCache:
    """The ``ragbridge.caches`` entry point of ``redis://`` and ``rediss://``."""
    return RedisCache(url)


def _split_prefix(url: str) -> tuple[str, str | None]:
    """``url`` without its ``prefix`` query parameter (redis-py would refuse it), and the prefix."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    prefixes = [value for name, value in query if name == "prefix"]
    if len(prefixes) > 1:
        raise ValueError(f"cache {redact_url(url)}: give ?prefix= once")
    if not prefixes:
        return url, None
    rest = urlencode([(name, value) for name, value in query if name != "prefix"])
    return urlunsplit(parts._replace(query=rest)), prefixes[0]


def _explain(location: str, doing: str, exc: redis.exceptions.RedisError) -> str:
    """One line: which cache, what failed, why, and what to do about it."""
    cause = exc.__cause__ or exc.__context__
    detail = cause.strerror if isinstance(cause, OSError) and cause.strerror else str(exc)
    detail = " ".join(detail.split()).rstrip(".") or type(exc).__name__
    if isinstance(exc, redis.exceptions.AuthenticationError) or "NOAUTH" in detail:
        what, fix = "authentication failed", "check the user and password in the URL"
    elif isinstance(exc, redis.exceptions.TimeoutError):
        what, fix = "timed out", "is the server overloaded, or the address wrong?"
    elif isinstance(exc, redis.exceptions.ConnectionError):
        what = "cannot connect" if doing == "ping" else f"{doing}: lost the connection"
        fix = "is redis-server running?"
    elif isinstance(exc, redis.exceptions.ResponseError):
        # The server's own words: out of memory, a read-only replica, a missing permission.
        what, fix = f"{doing}: Redis refused the command", "check the server's memory and role"
    else:
        what, fix = f"{doing} failed", "check the server's log"
    return f"cache {location}: {what} ({detail}); {fix}"


def _glob_escape(text: str) -> str:
    """``text`` as a literal in a ``SCAN MATCH`` pattern."""
    return "".join("\\" + ch if ch in "*?[]\\" else ch for ch in text)


def _text(value: bytes | str) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else value


def _int(value: bytes | str | None) -> int:
    return int(value) if value else 0
