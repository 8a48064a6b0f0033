"""Where a rate limiter keeps the state it shares: the `RateLedger` protocol, its local kinds.

`ragbridge.core.judging.ratelimit.RateLimiter` decides from a small state (the log of admitted
calls over the last window, the budgets learned from headers, the pause a 429 asked for, the
queue of waiting runs). Who sees that state decides who shares the budget:

* `MemoryLedger` — this process only (``RateLimits(shared=False)``, or no ``fcntl``);
* `FileLedger` — every run on this machine using the key (``shared=True``, the default): a JSON
  file under the temporary directory, read and rewritten under an exclusive ``flock``;
* a URL (``RateLimits(shared="redis://host:6379/0")``) — every machine that reaches it. The
  scheme names an entry point of the ``ragbridge.rate_ledgers`` group (``redis``/``rediss``:
  `ragbridge.adapters.redis_ratelimit`; ``dask``: `ragbridge.adapters.dask.rate_ledger`), so the
  core imports no client library. A run whose cache is such a URL uses it for its ledger too
  (`shared_by_cache`, applied by `ragbridge.core.settings.Settings`).

**The contract** (`RateLedger.update`): ``update(change)`` calls ``change(state)`` on the current
state, stores what it left and returns what it returned, as one transaction against every other
holder of the ledger. ``change`` may be called more than once (a ledger on a server may retry it
after a conflicting write), so it must change nothing but the state it is given. A ledger never
sees the API key: it is named by a hash of the judge's ``rate_key`` (`ledger_name`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from ..url_plugins import entry_point_for, scheme_of, schemes

if TYPE_CHECKING:
    from .ratelimit import RateLimits

try:  # POSIX: runs on one machine share one ledger file
    import fcntl
except ImportError:  # pragma: no cover - Windows: the ledger is per process
    fcntl = None  # type: ignore[assignment,unused-ignore]

__all__ = [
    "LEDGER_ENTRY_POINTS",
    "FileLedger",
    "MemoryLedger",
    "RateLedger",
    "State",
    "fresh_state",
    "ledger_name",
    "ledger_path",
    "ledger_schemes",
    "local_ledger",
    "open_ledger",
    "shared_by_cache",
]

LEDGER_ENTRY_POINTS = "ragbridge.rate_ledgers"
"""Entry-point group of shared ledgers: name = URL scheme, value = ``open(url, name, limits)``
(``name``: `ledger_name` of the key; ``limits``: the `RateLimits`, for the window and budgets)."""


State = dict[str, Any]
"""The shared state: ``log`` ([[time, tokens, id], ...] oldest first), learned ``rpm``/``tpm``,
``share`` (AIMD on the budgets), ``until`` (paused until), ``cut_at`` (last halving), ``queue``
(waiting runs), ``bucket`` (pacing), and ``quota`` (the part of the key's budgets this ledger's
holders may use: 1 unless a ledger that splits the budget sets it)."""

T = TypeVar("T")


def fresh_state() -> State:
    """The state of a key nobody has used yet."""
    return {"log": [], "rpm": None, "tpm": None, "share": 1.0, "until": 0.0, "cut_at": 0.0}


@runtime_checkable
class RateLedger(Protocol):
    """A rate limiter's shared state, changed in transactions (see the module docstring)."""

    @property
    def location(self) -> str:
        """Where the state lives, for messages (no password)."""
        ...

    def update(self, change: Callable[[State], T]) -> T:
        """Apply ``change`` to the state atomically; its result. ``change`` may run again."""
        ...


class MemoryLedger:
    """The state of one process (no other run shares it)."""

    location = "memory"

    def __init__(self) -> None:
        self._state = fresh_state()
        self._lock = threading.Lock()

    def update(self, change: Callable[[State], T]) -> T:
        with self._lock:
            return change(self._state)


class FileLedger:
    """The state in a JSON file, read and rewritten under an exclusive ``flock``: every run on
    the machine that opens the same path sees one ledger, and admissions are serialised."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.location = str(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()  # flock is per open file; threads of one process queue here

    def update(self, change: Callable[[State], T]) -> T:
        with self._open() as state:
            return change(state)

    @contextlib.contextmanager
    def _open(self) -> Iterator[State]:
        assert fcntl is not None
        with self._lock, open(self.path, "a+", encoding="utf-8") as handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            try:
                handle.seek(0)
                text = handle.read()
                try:
                    state = {**fresh_state(), **json.loads(text)} if text.strip() else fresh_state()
                except ValueError:
                    state = fresh_state()  # a torn file (a run killed mid-write): start over
                yield state
                handle.seek(0)
                handle.truncate()
                handle.write(json.dumps(state, separators=(",", ":")))
                handle.flush()
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def local_ledger(path: Path | None) -> RateLedger:
    """The file ledger at ``path`` (this machine), or this process's when there is no path or
    no ``fcntl`` (Windows)."""
    return FileLedger(path) if path is not None and fcntl is not None else MemoryLedger()


def ledger_name(rate_key: str) -> str:
    """The name of ``rate_key``'s ledger: a hash, so no file or server key reveals the key."""
    return hashlib.sha256(rate_key.encode("utf-8")).hexdigest()[:24]


def ledger_path(rate_key: str, limits: RateLimits) -> Path:
    """The ledger file of ``rate_key`` on this machine (named by `ledger_name`)."""
    user = getattr(os, "getuid", lambda: 0)()
    base = Path(limits.directory) if limits.directory else Path(tempfile.gettempdir())
    return base / f"ragbridge-ratelimit-{user}" / f"{ledger_name(rate_key)}.json"


def ledger_schemes() -> list[str]:
    """The URL schemes the installed ``ragbridge.rate_ledgers`` entry points serve, sorted."""
    return schemes(LEDGER_ENTRY_POINTS)


def open_ledger(rate_key: str, limits: RateLimits) -> RateLedger:
    """The ledger ``limits.shared`` asks for, for ``rate_key``.

    ``False``: this process; ``True``: this machine (a file; this process without ``fcntl``);
    a URL: the entry point of its scheme."""
    shared = limits.shared
    if shared is False:
        return MemoryLedger()
    if shared is True:
        return local_ledger(ledger_path(rate_key, limits))
    opener = entry_point_for(LEDGER_ENTRY_POINTS, shared, label="rate ledger", noun="ledger")
    ledger: RateLedger = opener(shared, ledger_name(rate_key), limits)
    return ledger


def shared_by_cache(limits: RateLimits | None, cache: object) -> RateLimits | None:
    """``limits`` sharing their ledger through the run's cache when that is a URL a ledger
    serves (``redis://``): machines that share a cache then share the key's budgets too.

    Only the default (``shared=True``, one machine) is widened; ``False`` or an explicit URL
    stays as given."""
    if limits is None or limits.shared is not True or not isinstance(cache, str):
        return limits
    if scheme_of(cache) not in ledger_schemes():
        return limits
    from dataclasses import replace

    return replace(limits, shared=cache)
