"""The two limits a run puts on provider calls: how many are in flight, and when to stop.

* `Slots` is the in-flight cap. One `Slots` is shared by the judge engine and the embedding
  engine of a run, so ``max_concurrency`` bounds *provider calls* in flight across both — an
  embedding batch and a judge call each take a slot, only while they are on the wire.
* `Breaker` stops a run that cannot succeed. When the provider is unusable (wrong key, unknown
  model, nothing listening), every call fails the same way; retrying each one and scoring every
  sample turns one mistake into minutes of waiting and a results file of identical failures.
  After ``stop_after`` identical failures (same `cause`) with no reply in between, the breaker
  trips: later calls are refused at once, and the run reports one line naming the cause and
  the fix. Until a provider has answered once, at most ``stop_after`` calls are in the air, so
  a dead key costs about ``stop_after`` requests, not ``max_concurrency`` of them.

Both are safe to share across event loops (sync `evaluate` may run each call on a new loop):
semaphores are kept per loop, counters are plain integers mutated on the loop's thread.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from enum import Enum

__all__ = ["Breaker", "Outcome", "Slots"]


class Slots:
    """A cap of ``limit`` calls in flight, with a high-water mark (``max_in_flight``)."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("max_concurrency must be >= 1")
        self.limit = limit
        self.in_flight = 0
        self.max_in_flight = 0
        # Keyed by the loop object, weakly: an id() can be reused by the next asyncio.run's loop.
        self._semaphores: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, asyncio.Semaphore
        ] = weakref.WeakKeyDictionary()

    def __repr__(self) -> str:
        return f"Slots(limit={self.limit}, in_flight={self.in_flight})"

    def semaphore(self) -> asyncio.Semaphore:
        """This event loop's semaphore (a semaphore belongs to one loop)."""
        loop = asyncio.get_running_loop()
        sem = self._semaphores.get(loop)
        if sem is None:
            sem = self._semaphores[loop] = asyncio.Semaphore(self.limit)
        return sem

    @asynccontextmanager
    async def hold(self) -> AsyncIterator[None]:
        """Take a slot for the duration of the block (one provider call)."""
        async with self.semaphore():
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            try:
                yield
            finally:
                self.in_flight -= 1


class Outcome(Enum):
    """How one logical call ended, as far as the breaker is concerned."""

    REPLIED = "replied"
    """The provider answered (even with an unusable reply): it is reachable and accepts us."""
    UNUSABLE = "unusable"
    """A failure that says the provider cannot be used (see `Breaker.settle`)."""
    NEUTRAL = "neutral"
    """Says nothing about the provider: a bad request for one prompt, a bug, a cancellation."""
    NOT_SENT = "not sent"
    """Admitted, but refused on the way (the breaker tripped while it waited for a slot)."""


@dataclass
class Breaker:
    """Stops sending calls after ``stop_after`` identical unusable-provider failures.

    ``role`` names the provider in the report line ("judge", "embedder"). A call first awaits
    `admit` (None: go ahead; a string: refused, with the reason), then reports how it ended with
    `settle`. ``calls`` counts calls that were sent; ``refused`` those refused after the trip.
    """

    role: str
    stop_after: int = 5
    calls: int = 0
    refused: int = 0
    streak: int = 0
    cause: str | None = None
    hint: str | None = None
    replied: bool = False
    tripped: bool = False
    _pending: int = field(default=0, repr=False)
    _waiters: list[asyncio.Future[None]] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        if self.stop_after < 1:
            raise ValueError("stop_after must be >= 1")

    @property
    def line(self) -> str | None:
        """One line naming the cause, its count and the fix; None until the breaker trips."""
        if not self.tripped:
            return None
        fix = f" — {self.hint}" if self.hint else ""
        return f"{self.role}: {self.cause} on {self.streak}/{self.calls} calls{fix}"

    @property
    def verdict(self) -> str | None:
        """At the end of a run: `line`, or the same line when every call sent failed for one
        unusable cause without tripping the breaker (fewer than ``stop_after`` calls).

        A connection refused on each of 2 calls is the cause that trips the breaker on a
        larger run; the run's outcome must not depend on how many samples it had.
        """
        if self.tripped:
            return self.line
        if self.calls and not self.replied and self.streak == self.calls:
            fix = f" — {self.hint}" if self.hint else ""
            return f"{self.role}: {self.cause} on {self.streak}/{self.calls} calls{fix}"
        return None

    async def admit(self) -> str | None:
        """Wait for leave to send one call; the refusal reason once the breaker has tripped.

        Until the provider has replied once, calls in the air plus failures in the current
        streak stay below ``stop_after``: a provider that fails every call is found out with
        ``stop_after`` requests, however high the concurrency.
        """
        while True:
            if self.tripped:
                self.refused += 1
                return self.line
            if self.replied or self._pending + self.streak < self.stop_after:
                self._pending += 1
                return None
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)

    def settle(self, outcome: Outcome, cause: str | None = None, hint: str | None = None) -> None:
        """Record how an admitted call ended (call exactly once per admitted call)."""
        self._pending = max(0, self._pending - 1)
        if outcome is Outcome.NOT_SENT:
            self._wake()
            return
        self.calls += 1
        if outcome is Outcome.REPLIED:
            self.replied = True
            if not self.tripped:
                self.streak, self.cause, self.hint = 0, None, None
        elif outcome is Outcome.UNUSABLE and not self.tripped:
            if cause is not None and cause == self.cause:
                self.streak += 1
            else:
                self.streak, self.cause = 1, cause or "unusable provider"
            self.hint = hint
            if self.streak >= self.stop_after:
                self.tripped = True
        elif outcome is Outcome.UNUSABLE and cause == self.cause:
            self.streak += 1  # calls already in the air when it tripped: count them in the line
        self._wake()

    def reset(self) -> None:
        """Forget the streak and close the breaker again (e.g. after fixing the key)."""
        self.streak, self.cause, self.hint, self.tripped = 0, None, None, False
        self._wake()

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if waiter.done():
                continue
            loop = waiter.get_loop()
            try:
                running = asyncio.get_running_loop()
            except RuntimeError:
                running = None
            if loop is running:
                waiter.set_result(None)
            elif not loop.is_closed():
                loop.call_soon_threadsafe(_release, waiter)


def _release(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
