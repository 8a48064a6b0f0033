"""One in-flight cap for a whole cluster: a judge endpoint's rate limit is global, not per worker.

`ClusterSlots` is the run's `ragbridge.core.judging.limits.Slots` on every worker, so the judge and
embedding engines take it exactly as they take a local cap. A call holds two things while on
the wire: a slot of a local semaphore (at most ``limit`` waiters per partition), then one of the
leases this worker process holds of the run's Dask distributed ``Semaphore`` of ``limit`` leases
(`ragbridge.adapters.dask.blocks`). The leases are the cap; the scheduler counts them, so
workers that join, leave or restart mid-run cannot raise it. A worker keeps its leases between
calls and takes them in blocks, so a call costs no scheduler round trip (one lease per call, taken
and given back, cost two, and made 2 workers slower than one process). A worker that dies holding
leases has them back on the scheduler within `blocks.dead_share_bound` seconds (the lease
timeout plus its validation interval; 40 s with Dask's defaults).

``on_call`` is called after every call, failed or not: the worker reports its counts to the
client from there (`ragbridge.adapters.dask.ledger`), so a partition lost with its worker still
has its calls counted.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from ragbridge.core.judging.limits import Slots

from .blocks import pool_for

__all__ = ["ClusterSlots"]


class ClusterSlots(Slots):
    """``limit`` calls in flight across every worker of the run named ``name``."""

    def __init__(self, limit: int, name: str, on_call: Callable[[], None] | None = None) -> None:
        super().__init__(limit)
        self.name = name
        self.on_call = on_call

    def __repr__(self) -> str:
        return f"ClusterSlots(limit={self.limit}, name={self.name!r}, in_flight={self.in_flight})"

    @asynccontextmanager
    async def hold(self) -> AsyncIterator[None]:
        """A local slot, then one of this worker's leases, for the duration of one call."""
        async with self.semaphore():
            pool = pool_for(self.limit, self.name)  # the process's, shared by its partitions
            await pool.take()
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            try:
                yield
            finally:
                self.in_flight -= 1
                pool.give()
                if self.on_call is not None:  # a failed call was sent, and is paid, too
                    self.on_call()

    def close(self) -> None:
        """Nothing to release: the process's leases outlive a partition (`blocks.release_run`
        gives them back at the end of the run, and unused ones go back on their own)."""
