"""A key's rate budgets split between the workers of a Dask cluster, through the scheduler.

Without a shared server (``redis://``), the workers of a cluster each see only their own
machine's ledger (`ragbridge.core.judging.rate_ledger.FileLedger`): together they could send
several times the provider's limit. Asking the scheduler at every call would cost a round trip
per call, the cost the block leases removed for the in-flight cap
(`ragbridge.adapters.dask.blocks`). So, as there, each worker process holds a *quota* of the
key's budgets and spends it locally: its limiter admits calls against ``quota x budget`` from
its own log (the state's ``quota``, `ragbridge.core.judging.ratelimit.RateLimiter._budgets`),
and every `SYNC_S` seconds a task on the worker's loop settles with the scheduler in one
round trip (`settle`, run on the scheduler by ``run_on_scheduler``, so atomically: the
scheduler's loop runs one at a time): its quota, what it used, the budgets it learned and a
pause a 429 asked for.

**The bound is exact.** Every worker's calls in any window stay within its quota of the budget
(its own log says so), and the quotas *claimed* on the board, plus the parts still cooling,
never exceed 1. A quota is raised only from free budget; it is lowered in two steps: the worker
is told the lower quota, and only when it reports that it runs with it is the difference
released — at once for the part it has not used, and the part still in its log (calls that
count against the provider's window) only one window (plus ``slack``) later.

**Shares.** Each worker that made a call in the last `ACTIVE_S` seconds is active; the budget
is split evenly between the active ones, so an idle worker's quota goes to the busy ones.
At the start of a run the first worker to settle holds the whole key for one or two sync
periods, until the others have settled.

**Pauses and learned budgets** travel with the exchanges: a ``Retry-After`` seen by one worker
pauses the others within one sync period (calls already on the wire excepted), and budgets
learned from one worker's headers reach all.

**A dead worker's quota** comes back `EXPIRY_S` plus a window (and ``slack``) after its last
exchange: a live worker that cannot reach the scheduler for ``EXPIRY_S / 2`` stops sending.

Chosen by a cluster run (`ragbridge.adapters.dask.run`) whose `RateLimits` share by machine
(``shared=True``, the default): it becomes ``shared="dask://scheduler"`` (`cluster_limits`).
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar, cast

from ragbridge.core.judging.rate_ledger import State, fresh_state
from ragbridge.core.judging.ratelimit import RateLimits

__all__ = [
    "ACTIVE_S",
    "EXPIRY_S",
    "SYNC_S",
    "DaskLedger",
    "cluster_limits",
    "open_dask_ledger",
    "settle",
]

SYNC_S = 0.2
"""Seconds between a worker's exchanges with the scheduler (one round trip each)."""

ACTIVE_S = 1.0
"""A worker that made a call within this many seconds wants its share of the key."""

EXPIRY_S = 5.0
"""A worker silent this long is taken for dead; its quota cools for a window, then is free."""

URL = "dask://scheduler"

T = TypeVar("T")


def cluster_limits(limits: RateLimits | None) -> RateLimits | None:
    """A cluster run's limits: sharing by machine becomes sharing through the scheduler."""
    if limits is None or limits.shared is not True:
        return limits
    return replace(limits, shared=URL)


def settle(
    board: dict[str, Any], holder: str, report: dict[str, Any], now: float, hold: float
) -> dict[str, Any]:
    """One worker's exchange with the board (changed in place); what the worker runs with.

    ``report``: ``applied`` (the quota it runs with), ``used`` (the share of the key's budget
    its log holds, None when no budget is known), ``active``, and the ``rpm``/``tpm`` it
    learned and the pause ``until`` it knows. ``hold``: seconds a call counts against the
    provider's window (window + slack)."""
    holders: dict[str, dict[str, Any]] = board.setdefault("holders", {})
    cooling = [c for c in board.get("cooling", []) if c[0] > now]
    for name, record in list(holders.items()):
        if name != holder and record["seen"] < now - EXPIRY_S:
            cooling.append([now + hold, record["claim"]])  # it sends nothing any more
            del holders[name]
    me = holders.setdefault(holder, {"quota": 0.0, "claim": 0.0, "active_at": 0.0})
    me["seen"] = now
    if report["active"]:
        me["active_at"] = now
    quota, claim = float(me["quota"]), float(me["claim"])
    if claim > quota and abs(float(report["applied"]) - quota) < 1e-12:
        # The worker runs with its lowered quota: release what it no longer claims, the part
        # its log still holds one window later.
        used = report["used"] if report["used"] is not None else claim
        still = min(claim, max(float(used), quota))
        if still > quota:
            cooling.append([now + hold, still - quota])
        claim = quota
    active = [r for r in holders.values() if r["active_at"] >= now - ACTIVE_S]
    target = 1.0 / len(active) if me["active_at"] >= now - ACTIVE_S else 0.0
    if target < quota:
        quota = target  # the claim stays until the worker says it runs with it
    elif target > quota:
        taken = sum(float(r["claim"]) for r in holders.values()) + sum(c[1] for c in cooling)
        free = max(0.0, 1.0 - taken)
        quota = quota + min(target - quota, free)
        claim = max(claim, quota)
    me["quota"], me["claim"] = quota, claim
    board["cooling"] = cooling
    shared: dict[str, Any] = board.setdefault("shared", {"rpm": None, "tpm": None, "until": 0.0})
    for name in ("rpm", "tpm"):
        if report.get(name) is not None:
            shared[name] = report[name]
    shared["until"] = max(float(shared.get("until", 0.0)), float(report.get("until", 0.0)))
    return {"quota": quota, **shared}


class DaskLedger:
    """A worker's ledger of one key: its own state, settled with the board every `SYNC_S` by a
    task on the worker's event loop (a call never waits for the scheduler)."""

    def __init__(
        self, name: str, limits: RateLimits, client: Any, loop: asyncio.AbstractEventLoop
    ) -> None:
        self.location = f"{URL} ({name})"
        self.name = name
        self.limits = limits
        self.client = client
        self.holder = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self._state = fresh_state()
        self._state["quota"] = 0.0  # nothing until the board grants some
        self._lock = threading.Lock()
        self._used_at = time.time()
        self._synced_at = time.time()
        self.exchanges = 0
        self.error: str | None = None
        """The last exchange's failure (None: it worked)."""
        self._stopped = False
        self._task = asyncio.run_coroutine_threadsafe(self._run(), loop)

    def __repr__(self) -> str:
        return f"DaskLedger({self.name!r}, quota={self._state.get('quota')})"

    def update(self, change: Callable[[State], T]) -> T:
        """Change this worker's state (no round trip: the board is settled in the background)."""
        with self._lock:
            self._used_at = time.time()
            if self._synced_at < time.time() - EXPIRY_S / 2:
                self._state["quota"] = 0.0  # cut off from the board: send nothing
            return change(self._state)

    def _report(self, now: float) -> dict[str, Any]:
        with self._lock:
            state = self._state
            horizon = now - self.limits.window - self.limits.slack
            log = [e for e in state["log"] if e[0] > horizon]
            shares = []
            for configured, learned, spent in (
                (self.limits.rpm, state.get("rpm"), float(len(log))),
                (self.limits.tpm, state.get("tpm"), float(sum(e[1] for e in log))),
            ):
                known = [v for v in (configured, learned) if v is not None]
                if known:
                    shares.append(spent / min(known))
            return {
                "applied": float(state.get("quota", 0.0)),
                "used": max(shares) if shares else None,
                "active": self._used_at >= now - ACTIVE_S,
                "rpm": state.get("rpm"),
                "tpm": state.get("tpm"),
                "until": float(state.get("until", 0.0)),
            }

    async def _exchange(self) -> None:
        """One settlement, run on the scheduler (one round trip; atomic there: the scheduler
        runs it on its event loop, between any other worker's)."""
        answer = await asyncio.wait_for(
            self.client.run_on_scheduler(
                _settle_on_scheduler,
                self.name,
                self.holder,
                self._report(time.time()),
                self.limits.window + self.limits.slack,
                asynchronous=True,
            ),
            timeout=EXPIRY_S / 2,
        )
        with self._lock:
            state = self._state
            state["quota"] = answer["quota"]
            for name in ("rpm", "tpm"):
                if state.get(name) is None and answer.get(name) is not None:
                    state[name] = answer[name]
            state["until"] = max(float(state.get("until", 0.0)), float(answer["until"]))
            self._synced_at = time.time()
            self.exchanges += 1

    async def _run(self) -> None:
        while not self._stopped:
            try:
                await self._exchange()
                self.error = None
            except Exception as exc:  # a lost exchange: the next one retries
                self.error = f"{type(exc).__name__}: {exc}"
            await asyncio.sleep(SYNC_S)

    def close(self) -> None:
        """Stop settling (the board forgets this worker after `EXPIRY_S`)."""
        self._stopped = True


_BOARDS: dict[str, dict[str, Any]] = {}
"""On the scheduler: the board of each key's ledger."""


def _settle_on_scheduler(
    name: str, holder: str, report: dict[str, Any], hold: float
) -> dict[str, Any]:
    """`settle` on the scheduler's board of ``name`` (run there by ``run_on_scheduler``)."""
    return settle(_BOARDS.setdefault(name, {}), holder, report, time.time(), hold)


_LEDGERS: dict[str, DaskLedger] = {}
_LEDGERS_LOCK = threading.Lock()


def open_dask_ledger(url: str, name: str, limits: RateLimits) -> DaskLedger:
    """The ``ragbridge.rate_ledgers`` entry point of ``dask://``: on a worker, the ledger of key
    ``name`` settled through the worker's scheduler (one per key and process)."""
    from distributed import get_client, get_worker

    try:
        worker = get_worker()
    except ValueError:
        raise ValueError(
            f"rate ledger {url}: only a Dask worker settles through the scheduler (a cluster "
            "run sets it); elsewhere give shared=True (this machine) or a redis:// URL"
        ) from None
    with _LEDGERS_LOCK:
        found = _LEDGERS.get(name)
        if found is None:
            loop: asyncio.AbstractEventLoop = cast(Any, worker.loop).asyncio_loop
            found = _LEDGERS[name] = DaskLedger(name, limits, get_client(), loop)
        return found
