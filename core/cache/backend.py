"""What a cache of judge replies, embeddings and kept Scores must do, whatever stores it.

The engines (`ragbridge.core.judging.engine`) and the kept-result reuse
(`ragbridge.core.cache.scores`) talk to a cache through this protocol only. Today's SQLite file
(`ragbridge.core.cache.disk.Cache`) is the default; a networked store lets the workers of a cluster
share one cache, so a judge answer paid on one machine is not paid again on another. A backend is
chosen by the cache spec a user gives (`open_cache`): a path is an SQLite file, ``SCHEME://...`` is
looked up among the ``ragbridge.caches`` entry points (``redis://`` is
`ragbridge.adapters.redis_cache`), so the core imports no database client.

The promises of `ragbridge.core.cache.disk` hold for every backend: keys are content addresses
(`ragbridge.core.cache.request_key.cache_key`), every ``put_*`` is durable when it returns (a
killed run resumes without repeating finished calls), and one object may be shared by many
asyncio tasks and threads. Housekeeping (``ragbridge cache stats|prune``) stays SQLite-only.

A backend whose store fails mid-run (a server gone, a file deleted, a full disk) raises OSError
(or an ``sqlite3.DatabaseError``) and never returns a wrong entry; a run's cache is wrapped in
`ragbridge.core.cache.guard.CacheGuard`, which turns such an error into one warning and an
uncached rest of the run.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from importlib import metadata
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from typing_extensions import Self, Unpack

from ..url_plugins import redact_url

if TYPE_CHECKING:
    from .stored import CachedReply, CacheStats, ReplyMeta, Vectors

__all__ = [
    "CACHE_ENTRY_POINTS",
    "BackendBase",
    "CacheBackend",
    "cache_schemes",
    "is_cache_url",
    "open_backend",
    "redact_url",
    "unknown_scheme",
]

CACHE_ENTRY_POINTS = "ragbridge.caches"
"""Entry-point group of networked backends: name = URL scheme, value = ``open(url)``."""

_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


@runtime_checkable
class CacheBackend(Protocol):
    """The operations a run needs from its cache (see the module docstring)."""

    @property
    def location(self) -> str:
        """Where the cache lives, for messages: a path, or a URL without its password."""
        ...

    def get_reply(self, key: str) -> CachedReply | None: ...

    def put_reply(self, key: str, reply: CachedReply, **meta: Unpack[ReplyMeta]) -> None:
        """Store ``reply`` under ``key`` with its metadata (`ReplyMeta`: ``model=``,
        ``template_id=``, optional ``template_version=`` and ``facts=``).

        The reply's ``logprobs`` are kept as `ragbridge.core.cache.stored.logprobs_json`
        writes them and read back by `ragbridge.core.cache.stored.read_logprobs`, so every
        backend hands back equal ones; an entry whose stored form is unreadable is a miss."""
        ...

    def get_embeddings(self, model: str, texts: Sequence[str]) -> list[list[float] | None]: ...

    def put_embeddings(self, model: str, texts: Sequence[str], vectors: Vectors) -> None: ...

    def get_results(self, keys: Sequence[str]) -> dict[str, str]: ...

    def put_results(self, rows: Sequence[tuple[str, str, str, str]]) -> None: ...

    def stats(self) -> CacheStats: ...

    def close(self) -> None: ...


class BackendBase:
    """What the cache classes share besides the protocol's operations: ``location`` and ``with``.

    `ragbridge.core.cache.disk.Cache`, `ragbridge.adapters.redis_cache.RedisCache` and
    `ragbridge.core.cache.guard.CacheGuard` derive from it, so ``with SomeCache(...) as cache:``
    closes any of them on the way out (error or not) in one place. A subclass sets
    ``_location`` and gives `close` (safe to call twice): nothing is lost by closing, since every
    put is durable when it returns.
    """

    _location: str

    @property
    def location(self) -> str:
        """Where the cache lives, for messages: a path, or a URL without its password."""
        return self._location

    def close(self) -> None:
        """Release the store (each backend says how)."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def is_cache_url(spec: str | os.PathLike[str]) -> bool:
    """Whether ``spec`` names a networked cache (``SCHEME://...``) rather than a file."""
    return isinstance(spec, str) and _URL.match(spec) is not None


def open_backend(url: str) -> CacheBackend:
    """Open the networked cache ``url`` names, through its scheme's entry point.

    An unknown scheme is a ValueError listing the known ones; a known scheme whose extra is not
    installed raises the adapter's ImportError, which names the extra.
    """
    match = _URL.match(url)
    if match is None:
        raise ValueError(f"{url!r} is not a cache URL (SCHEME://...)")
    scheme = match.group(1).lower()
    found = {ep.name: ep for ep in metadata.entry_points(group=CACHE_ENTRY_POINTS)}
    if scheme not in found:
        raise ValueError(f"cache {unknown_scheme(url)}")
    opener = found[scheme].load()
    backend: CacheBackend = opener(url)
    return backend


def cache_schemes() -> list[str]:
    """The URL schemes the installed ``ragbridge.caches`` entry points serve, sorted."""
    return sorted({ep.name.lower() for ep in metadata.entry_points(group=CACHE_ENTRY_POINTS)})


def unknown_scheme(url: str) -> str | None:
    """Why no backend serves ``url`` (a line naming the known schemes), or None when one does.

    Checks the scheme only, without loading or connecting anything: the CLI checks ``--cache``
    with it before the run starts.
    """
    match = _URL.match(url)
    if match is None:
        return f"{redact_url(url)} is not a cache URL (SCHEME://...)"
    scheme = match.group(1).lower()
    known = cache_schemes()
    if scheme in known:
        return None
    listed = ", ".join(f"{name}://" for name in known) or "none installed"
    return (
        f"{redact_url(url)}: no cache backend for {scheme}:// (known: {listed}); "
        "give an SQLite path or a URL of a known backend"
    )
