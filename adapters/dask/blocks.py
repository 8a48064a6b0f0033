"""A worker's share of the cluster-wide in-flight cap, kept in leases between calls.

The run's budget is a ``distributed.Semaphore`` of ``limit`` leases that the scheduler holds.
Taking one lease per call and giving it back after costs two scheduler round trips per call:
measured with 20,000 calls of a 50 ms judge at a cap of 64, two workers were slower than one
process (0.82x). So each worker process keeps one `LeasePool` per run, shared by the run's
partitions on it: leases are taken from the scheduler in blocks when calls wait, kept between
calls, and a call takes one of the pool's leases locally, with no round trip.

Who holds what. A pool keeps up to its *share* (``ceil(limit / worker processes)``, counted
when the pool starts) for as long as its calls use them. A lease above the share is *borrowed*:
a pool takes it only when the scheduler has one free (another worker is idle), and gives it back
as soon as the call that used it ends, so the next worker that asks gets it. Leases the pool
does not use for ``linger`` seconds go back as well, and all of them when the run ends
(`release_run`, called on every worker by the client).

The bound is exact. Calls in flight on a worker never exceed the leases its pool holds, and
the leases held by all pools never exceed ``limit`` (the scheduler counts them): so calls in
flight across the cluster never exceed ``limit``, whatever the number of workers.

A dead worker's share. The stock semaphore refreshes a process's leases every
``lease-timeout / 5``; the scheduler frees a lease not refreshed for ``lease-timeout``, and looks
every ``lease-validation-interval``. A worker that dies therefore has its whole share back on
the scheduler at most ``lease-timeout + lease-validation-interval`` after it died (Dask's
``distributed.scheduler.locks`` settings: 30 s + 10 s by default; `dead_share_bound` reads them).
Its calls are no longer in flight by then: the process is gone. As with any lease timeout, a
*live* worker that holds the GIL past ``lease-timeout`` can have its leases freed under it.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import weakref
from collections import deque
from typing import Any

__all__ = ["LeasePool", "dead_share_bound", "pool_for", "release_run"]

LINGER_S = 0.25
"""Seconds a lease may sit unused in a pool before it goes back (a partition's tail, the gap
before the next partition starts, the end of the run)."""

ASK_TIMEOUT_S = 1.0
"""How long one ask waits on the scheduler before it is asked again (if calls still wait): no
ask outlives the pool by more than this."""

_POOLS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, LeasePool]] = (
    weakref.WeakKeyDictionary()
)


def dead_share_bound() -> float:
    """Seconds after which a dead worker's leases are free again, from Dask's config."""
    import dask
    from dask.utils import parse_timedelta

    timeout = parse_timedelta(dask.config.get("distributed.scheduler.locks.lease-timeout"), "s")
    interval = parse_timedelta(
        dask.config.get("distributed.scheduler.locks.lease-validation-interval"), "s"
    )
    return float(timeout) + float(interval)


class LeasePool:
    """This process's leases of the run's semaphore ``name`` (``limit`` leases cluster-wide).

    ``share`` is how many it may keep (None: counted from the scheduler's workers when the
    pool starts); ``block`` how many it asks for at once (None: a quarter of the share).
    ``round_trips`` counts the asks and gives-back sent to the scheduler.
    """

    def __init__(
        self,
        limit: int,
        name: str,
        share: int | None = None,
        block: int | None = None,
        linger: float = LINGER_S,
    ) -> None:
        self.limit = limit
        self.name = name
        self.share = share
        self.block = block
        self.linger = linger
        self.held = 0
        self.busy = 0
        self.asking = 0
        self.users = 0
        self.round_trips = 0
        self.closed = False
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._semaphore: Any = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._timer: asyncio.TimerHandle | None = None
        self._last_take = 0.0
        self._starting: asyncio.Task[None] | None = None

    def __repr__(self) -> str:
        return (
            f"LeasePool({self.name!r}, limit={self.limit}, share={self.share}, "
            f"held={self.held}, busy={self.busy}, asking={self.asking})"
        )

    async def take(self) -> None:
        """Wait for one of the pool's leases (no round trip when one is free)."""
        self._last_take = asyncio.get_running_loop().time()
        if self.busy < self.held and not self._waiters:
            self.busy += 1
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        self._ask()
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():  # handed a lease as it was cancelled
                self.give()
            else:
                with contextlib.suppress(ValueError):
                    self._waiters.remove(waiter)
            raise

    def give(self) -> None:
        """A call ended: its lease serves the next waiting call, or goes back if borrowed."""
        self.busy -= 1
        if self.share is not None and self.held > self.share:
            self._give_back(1)  # borrowed: the next worker that asks gets it (calls waiting
        self._hand()  # here ask again, and queue on the scheduler behind the others)

    def _hand(self) -> None:
        while self._waiters and self.busy < self.held:
            waiter = self._waiters.popleft()
            if waiter.done():
                continue
            self.busy += 1
            waiter.set_result(None)
        if self._waiters:
            self._ask()  # calls still wait: borrow what the scheduler has free
        elif self.held > self.busy:
            self._idle_later()

    def _ask(self) -> None:
        """Ask the scheduler for what waiting calls need: a block inside the share, fewer beyond."""
        if self.closed:
            return
        if self.share is None:  # the share is counted once, before the first ask
            if self._starting is None:
                self._starting = self._spawn(self._start())
            return
        missing = self.busy + len(self._waiters) - self.held - self.asking
        if missing <= 0:
            return
        assert self.block is not None
        inside = max(0, self.share - self.held - self.asking)
        wanted = min(inside, max(missing, self.block)) if inside else 0
        outstanding = max(self.block, self.share - self.held)
        wanted = max(wanted, min(missing, outstanding - self.asking))
        wanted = min(wanted, self.limit - self.held - self.asking, outstanding - self.asking)
        for _ in range(max(0, wanted)):
            self.asking += 1
            self._spawn(self._ask_one())

    async def _start(self) -> None:
        workers = 1
        with contextlib.suppress(Exception):  # not on a worker, or a scheduler away: one
            from distributed import get_worker

            workers = max(1, len(await get_worker().scheduler.ncores()))
        if self.share is None:
            self.share = min(self.limit, math.ceil(self.limit / workers))
        if self.block is None:
            self.block = max(1, self.share // 4)
        self._ask()

    async def _ask_one(self) -> None:
        try:
            got = await self._lease().acquire(timeout=ASK_TIMEOUT_S)
        except Exception as exc:
            self.asking -= 1
            self._fail(exc)
            return
        self.asking -= 1
        self.round_trips += 1
        if not got:
            self._ask()  # none came free in time: ask again if calls still wait
            return
        self.held += 1
        if self.closed:
            self._give_back(1)
            return
        self._hand()
        if self.share is not None and self.held > self.busy and self.held > self.share:
            self._give_back(min(self.held - self.busy, self.held - self.share))

    def _lease(self) -> Any:
        if self._semaphore is None:
            from distributed import Semaphore

            self._semaphore = Semaphore(max_leases=self.limit, name=self.name)
        return self._semaphore

    def _give_back(self, count: int) -> None:
        for _ in range(count):
            self.held -= 1
            self.round_trips += 1
            self._spawn(self._release_one())

    async def _release_one(self) -> None:
        with contextlib.suppress(Exception):  # a closed run or scheduler: the lease is gone
            await self._lease().release()

    def _fail(self, exc: BaseException) -> None:
        """The scheduler refused or is unreachable: the calls waiting here fail with it."""
        if self.asking or self.held:
            return  # others may still come; the waiters are served by those
        waiters, self._waiters = self._waiters, deque()
        for waiter in waiters:
            if not waiter.done():
                waiter.set_exception(exc)

    def _idle_later(self) -> None:
        if self._timer is None and not self.closed:
            self._timer = asyncio.get_running_loop().call_later(self.linger, self._trim)

    def _trim(self) -> None:
        """Give back the leases no call used for ``linger`` seconds."""
        self._timer = None
        if self._waiters or self.held <= self.busy or self.closed:
            return
        idle = asyncio.get_running_loop().time() - self._last_take
        if idle < self.linger:
            self._timer = asyncio.get_running_loop().call_later(self.linger - idle, self._trim)
            return
        self._give_back(self.held - self.busy)

    def _spawn(self, coro: Any) -> asyncio.Task[None]:
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def close(self) -> None:
        """Give back every lease (no call is in flight) and stop refreshing them."""
        self.closed = True
        waiters, self._waiters = self._waiters, deque()
        for waiter in waiters:  # a partition cancelled as the run ended: its calls are not sent
            if not waiter.done():
                waiter.set_exception(RuntimeError(f"the run of {self.name} has ended"))
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._give_back(self.held - self.busy)
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=ASK_TIMEOUT_S + 1)
        if self._semaphore is not None and not self.held:
            callback = getattr(self._semaphore, "refresh_callback", None)
            if callback is not None:
                callback.stop()


def pool_for(limit: int, name: str) -> LeasePool:
    """This process's pool for the run's semaphore ``name``, made on first use."""
    pools = _POOLS.setdefault(asyncio.get_running_loop(), {})
    pool = pools.get(name)
    if pool is None or pool.closed:
        pool = pools[name] = LeasePool(limit, name)
    return pool


async def release_run(name: str) -> int:
    """Close this process's pool of run ``name`` (called on every worker at the run's end).

    Returns the leases it gave back.
    """
    pool = _POOLS.get(asyncio.get_running_loop(), {}).pop(name, None)
    if pool is None:
        return 0
    held = pool.held
    await pool.close()
    return held


def release_leases(client: Any, name: str) -> None:
    """At the end of a run, on the client: every worker gives back its leases of ``name``.

    Before the run's semaphore is closed, so none is left out (a lost worker's are dropped
    with the semaphore). A worker that does not answer keeps nothing for long: unused leases go
    back after ``LINGER_S`` on their own.
    """
    with contextlib.suppress(Exception):
        client.run(release_run, name)
