"""A rate limiter's ledger on a Redis server: one key's budgets shared by every machine.

The file ledger (`ragbridge.core.judging.rate_ledger.FileLedger`) is exact for the runs of one
machine; the machines of a cluster, or CI jobs on several runners, each have their own, so
together they can send several times the provider's limit. `RedisLedger` keeps the same state
(the log of admitted calls, learned budgets, the pause of a ``Retry-After``, the queue of
waiting runs) in one Redis key, so every process that reaches the server is admitted against
one log, and a 429 seen by one pauses all.

**Exact.** Each change is an optimistic transaction: ``WATCH`` the key, ``GET`` the state,
apply the limiter's change in Python, then ``MULTI``/``SET``/``EXEC``; if another process wrote
the key in between, ``EXEC`` fails and the change is retried on the new state. So admissions are
serialised as under the file's ``flock``: no window sees more than the budget, whichever
machine admitted the calls. A call costs two such transactions (admit, reply), three round
trips each (~1 ms on a LAN).

**Keys.** ``PREFIX:1:ratelimit:NAME`` where ``NAME`` is the ledger's name, a hash of the judge's
``rate_key`` (`ragbridge.core.judging.rate_ledger.ledger_name`): the API key is never sent to
Redis. ``PREFIX`` is ``ragbridge`` (or the URL's ``?prefix=``, as for the cache). Every write
sets a time-to-live (two windows plus a minute, longer while a pause lasts), so an idle key's
state is removed by the server; a dead run leaves only log entries that age out.

Chosen by ``RateLimits(shared="redis://host:6379/0")``, CLI ``--rate-ledger URL``, or a run's
``--cache redis://...`` (the ``ragbridge.rate_ledgers`` entry points ``redis``/``rediss``).
"""

from __future__ import annotations

__all__ = ["RedisLedger", "open_redis_ledger"]

import contextlib
import json
import math
import time
from collections.abc import Callable
from typing import Any, TypeVar

from ragbridge.adapters._extras import missing_extra
from ragbridge.core.cache.backend import redact_url
from ragbridge.core.judging.rate_ledger import State, fresh_state
from ragbridge.core.judging.ratelimit import RateLimits

try:
    import redis
    import redis.exceptions
except ImportError as exc:  # pragma: no cover - the redis extra is missing
    raise missing_extra("ragbridge.adapters.redis_ratelimit", "redis-py", "redis", exc) from exc

from ragbridge.adapters.redis_cache import (
    _CONNECT_TIMEOUT_S,
    _TIMEOUT_S,
    DEFAULT_PREFIX,
    REDIS_FORMAT_VERSION,
    _split_prefix,
)

T = TypeVar("T")


class RedisLedger:
    """The state of one key's rate limiter in one Redis key (see the module docstring)."""

    def __init__(self, url: str, name: str, *, ttl: float = 180.0) -> None:
        """Connect (and ping) ``url``; the state of ledger ``name`` expires ``ttl`` seconds
        after its last write (longer while a pause lasts)."""
        connect_url, prefix = _split_prefix(url)
        self.location = redact_url(url)
        self.key = f"{prefix or DEFAULT_PREFIX}:{REDIS_FORMAT_VERSION}:ratelimit:{name}"
        self.ttl = ttl
        try:
            self._client: redis.Redis = redis.Redis.from_url(
                connect_url, socket_connect_timeout=_CONNECT_TIMEOUT_S, socket_timeout=_TIMEOUT_S
            )
            self._client.ping()
        except (ValueError, redis.exceptions.RedisError) as exc:
            raise OSError(f"rate ledger {self.location}: cannot use it ({exc})") from None

    def __repr__(self) -> str:
        return f"RedisLedger({self.location!r}, {self.key!r})"

    def update(self, change: Callable[[State], T]) -> T:
        """Apply ``change`` to the state in a WATCH/MULTI transaction, retried on a conflict."""
        result: list[T] = []

        def transaction(pipe: Any) -> None:
            raw = pipe.get(self.key)  # immediate: the pipeline is watching the key
            state = fresh_state()
            if raw:
                with contextlib.suppress(ValueError):  # unreadable: start over, as a file does
                    state.update(json.loads(raw))
            result[:] = [change(state)]
            ttl = max(self.ttl, float(state.get("until", 0.0)) - time.time() + self.ttl)
            pipe.multi()
            pipe.set(self.key, json.dumps(state, separators=(",", ":")), px=math.ceil(ttl * 1000))

        try:
            self._client.transaction(transaction, self.key)
        except redis.exceptions.RedisError as exc:
            raise OSError(f"rate ledger {self.location}: {exc}") from None
        return result[0]

    def close(self) -> None:
        self._client.close()


def open_redis_ledger(url: str, name: str, limits: RateLimits) -> RedisLedger:
    """The ``ragbridge.rate_ledgers`` entry point of ``redis://`` and ``rediss://``: the state
    lives two windows and a minute after its last write, long enough for what matters in it
    (the log, learned budgets, a pause) and no longer."""
    return RedisLedger(url, name, ttl=2.0 * (limits.window + limits.slack) + 60.0)
