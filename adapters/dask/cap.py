"""One in-flight cap for a whole cluster: a judge endpoint's rate limit is global, not per worker.

`ClusterSlots` is the run's `ragbridge.core.judging.limits.Slots` on every worker, so the judge and
embedding engines take it exactly as they take a local cap. A call holds two things while on
the wire: a slot of a local semaphore (at most ``limit`` waiters per process), then a lease of
a Dask distributed ``Semaphore`` named for the run, of ``limit`` leases cluster-wide. The local
gate matters for speed, not for correctness: without it thousands of queued calls each poll the
scheduler for a lease (measured here on 2 workers: 4,000 queued 50 ms calls at a cap of 16 had
not finished after 150 s, against a floor of 12.5 s; with the gate, 2,000 such calls took 1.07x
their floor of 6.25 s). The leases are the cap; the scheduler holds them, so
workers that join, leave or restart mid-run cannot raise it. A worker that dies holding leases
gets them back after ``distributed.scheduler.locks.lease-timeout`` (30 s by default).

``on_call`` is called after every call, failed or not: the worker reports its counts to the
client from there (`ragbridge.adapters.dask.ledger`), so a partition lost with its worker still
has its calls counted.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from ragbridge.core.judging.limits import Slots

__all__ = ["ClusterSlots"]


class ClusterSlots(Slots):
    """``limit`` calls in flight across every worker of the run named ``name``."""

    def __init__(self, limit: int, name: str, on_call: Callable[[], None] | None = None) -> None:
        super().__init__(limit)
        self.name = name
        self.on_call = on_call
        self._lease: Any = None

    def __repr__(self) -> str:
        return f"ClusterSlots(limit={self.limit}, name={self.name!r}, in_flight={self.in_flight})"

    def _semaphore(self) -> Any:
        """The run's distributed semaphore, bound to this worker (or client) on first use."""
        if self._lease is None:
            from distributed import Semaphore

            self._lease = Semaphore(max_leases=self.limit, name=self.name)
        return self._lease

    @asynccontextmanager
    async def hold(self) -> AsyncIterator[None]:
        """A local slot, then a cluster lease, for the duration of one provider call."""
        async with self.semaphore():
            lease = self._semaphore()
            await lease.acquire()
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            try:
                yield
            finally:
                self.in_flight -= 1
                if self.on_call is not None:  # a failed call was sent, and is paid, too
                    self.on_call()
                await lease.release()

    def close(self) -> None:
        """Stop refreshing leases (all are released by now); the semaphore stays the run's.

        `distributed.Semaphore.close` would close it for every worker, so only the client that
        created the run's semaphore closes it, at the end of the run.
        """
        if self._lease is not None:
            callback = getattr(self._lease, "refresh_callback", None)
            if callback is not None:
                callback.stop()
            self._lease = None
