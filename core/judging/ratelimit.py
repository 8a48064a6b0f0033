"""A rate limiter that follows the provider: requests and tokens per window, not calls in flight.

Why it exists: providers limit requests per minute (RPM) and tokens per minute (TPM) per key,
while `ragbridge.core.judging.limits.Slots` caps calls in flight. A fixed cap either wastes the
limit (too low) or hammers it (too high: 429s, backoff, idle minutes). This limiter admits a
call only when the key's budget for the current window has room for it, so a run sends at the
limit and not above it.

How it decides, per call (`RateLimiter.acquire`, before the call goes on the wire):

* **Budgets.** ``rpm``/``tpm`` come from `RateLimits` (configured) or are learned from the
  replies' ``x-ratelimit-limit-requests``/``-tokens`` headers (the lower of the two when both
  are known). Every admitted call is written to a log of ``(time, tokens)`` over the last
  ``window`` seconds (plus ``slack``, the longest a granted call may take to reach the server);
  a call is admitted when the log's requests + 1 and tokens + its estimate stay within the
  budgets, else it waits exactly until enough entries leave the window. A sliding log rather
  than a token bucket because it is exact: no window of the server's can see more than the
  budget. Within the window, calls are paced at the budgets' rate (a bucket holding ``burst``
  of a window's budget), so they are spread over the window, not sent as one burst at its start.
* **Tokens.** Estimated before the call from the prompt's characters (`CHARS_PER_TOKEN`, on the
  high side) plus the expected completion (the request's reply budget at first, then the mean
  of what replies used), scaled by a correction learned from the replies' usage; the log entry
  is then corrected to the reply's real ``prompt + completion`` tokens.
* **In flight.** With a rate known, the calls in flight are capped at about twice what the rate
  times the observed latency needs (Little's law), so the start of a window is not a burst of a
  whole window's calls. Without a known rate the cap starts at ``start`` (2) and grows by one a
  reply until the first 429 (slow start: the first replies' headers tell the budgets before a
  run can burst), then follows AIMD: halved on a 429, +1/cap on each reply (TCP's rule).
* **429s.** ``Retry-After`` (or the reset of a header saying nothing remains) pauses every call
  on the key until then. A 429 while the log says we were within known budgets means something
  else spends the key (another machine): the budgets' ``share`` is halved (at most once per
  pause) and grows back additively, one window from half to whole.

**Shared by runs on one machine.** Runs (processes) that use the same key share one ledger: a
small JSON file under the temporary directory (``ragbridge-ratelimit-<uid>/<key hash>.json``),
read and rewritten under an exclusive ``flock`` for each admission. That is exact (admissions are
serialised, so the budgets bound every run together) and needs no coordinator process; a dead
run leaves only log entries that age out of the window. Where ``fcntl`` is missing (Windows) the
ledger is per process. The key is never written: the file is named by a hash of the judge's
``rate_key`` (`ragbridge.adapters.openai` derives it from the base URL and the key).

**Shared by machines.** The ledger is pluggable (`ragbridge.core.judging.rate_ledger.RateLedger`):
``RateLimits(shared="redis://host:6379/0")`` (CLI ``--rate-ledger URL``), or a run whose cache is
a ``redis://`` URL, keeps the same state on a Redis server, changed in optimistic transactions,
so every machine using the key is admitted against one log (`ragbridge.adapters.redis_ratelimit`);
a run on a Dask cluster without one splits the key's budgets between its workers through the
scheduler (`ragbridge.adapters.dask.rate_ledger`). Machines compare wall-clock times, so their
clocks are assumed synchronised (NTP: milliseconds, far below a window).

The core stays HTTP-free: headers reach it as a plain mapping (`JudgeReply.headers`,
`RateLimited.headers`) with lower-case names.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import os
import re
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from functools import partial
from pathlib import Path
from typing import Any

from ..cache.backend import redact_url
from ..results.evaluation import Usage
from .attempts import NotSent
from .judge import Message, RateLimited
from .rate_ledger import (
    RateLedger,
    State,
    ledger_path,
    local_ledger,
    open_ledger,
    shared_by_cache,
)

__all__ = [
    "CHARS_PER_TOKEN",
    "HeaderLimits",
    "Permit",
    "RateLedger",
    "RateLimiter",
    "RateLimits",
    "ledger_path",
    "parse_duration",
    "rate_limiter",
    "read_headers",
    "shared_by_cache",
]

CHARS_PER_TOKEN = 3.0
"""Characters per token of the first estimate: on the high side (English is nearer 4), so a
call is not under-counted before the first reply teaches the real ratio."""

_DEFAULT_COMPLETION = 256
_DEFAULT_PAUSE = 1.0
"""Seconds a 429 without ``Retry-After`` pauses the key."""
_MAX_POLL = 1.0
"""A waiting call re-reads the shared ledger at least this often (another run may free room)."""
_STALE = 3.0 * _MAX_POLL
"""Seconds after which a queued run that stopped polling is dropped from the queue."""


@dataclass(frozen=True)
class RateLimits:
    """How a run's judge calls are rate-limited (``Settings(rate_limits=RateLimits(...))``).

    ``rpm``/``tpm``: requests and tokens per ``window`` seconds (None: learn them from the
    provider's ``x-ratelimit-*`` headers; with both a configured and a learned value the lower
    applies). ``window`` is the providers' minute; a test server may use a shorter one.
    ``slack``: seconds added to the window for the time between admitting a call and its
    arrival at the server. ``burst``: the share of a window's budget that may be sent at once
    (calls are paced at the budget's rate beyond it). ``start``: calls in flight before any
    budget is known, doubled each round trip until a 429 (TCP's slow start), so a run learns
    the budgets from the first replies' headers before it can burst. ``shared``: who shares
    the budgets (`ragbridge.core.judging.rate_ledger`): True, other runs on this machine using
    the same key (a ledger file under ``directory``, default the temporary directory); False,
    nobody; a URL (``"redis://host:6379/0"``), every machine that reaches it. A run whose cache
    is a ``redis://`` URL shares through it unless ``shared`` says otherwise.
    """

    rpm: float | None = None
    tpm: float | None = None
    window: float = 60.0
    slack: float = 0.5
    burst: float = 0.1
    start: int = 2
    shared: bool | str = True
    directory: str | None = None

    def __post_init__(self) -> None:
        for name in ("rpm", "tpm"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, (int, float)) and value > 0):
                raise ValueError(f"RateLimits.{name} must be > 0 or None, got {value!r}")
        if not self.window > 0 or not math.isfinite(self.window):
            raise ValueError(f"RateLimits.window must be > 0 seconds, got {self.window!r}")
        if not 0 < self.burst <= 1:
            raise ValueError(f"RateLimits.burst must be in (0, 1], got {self.burst!r}")
        if self.start < 1:
            raise ValueError(f"RateLimits.start must be >= 1, got {self.start!r}")
        if not self.slack >= 0:
            raise ValueError(f"RateLimits.slack must be >= 0 seconds, got {self.slack!r}")
        url = r"^[A-Za-z][A-Za-z0-9+.-]*://"
        if isinstance(self.shared, str) and not re.match(url, self.shared):
            raise ValueError(
                "RateLimits.shared must be True, False or a ledger URL (redis://...), "
                f"got {redact_url(self.shared)!r}"
            )

    def __repr__(self) -> str:
        """The fields, with a ledger URL's password masked (logs show which ledger, not it)."""
        shown = {f.name: getattr(self, f.name) for f in fields(self)}
        if isinstance(self.shared, str):
            shown["shared"] = redact_url(self.shared)
        return "RateLimits(" + ", ".join(f"{k}={v!r}" for k, v in shown.items()) + ")"


# --------------------------------------------------------------------------- headers


@dataclass(frozen=True)
class HeaderLimits:
    """What a reply's ``x-ratelimit-*`` headers say (None: the header was absent)."""

    limit_requests: float | None = None
    limit_tokens: float | None = None
    remaining_requests: float | None = None
    remaining_tokens: float | None = None
    reset_requests: float | None = None
    reset_tokens: float | None = None

    @property
    def empty(self) -> bool:
        return all(v is None for v in vars(self).values())


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")


def parse_duration(text: str) -> float | None:
    """Seconds of a reset header: ``"1s"``, ``"6m0s"``, ``"20ms"``, ``"1h2m3.5s"`` or ``"0.5"``."""
    value = text.strip().lower()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    parts = _DURATION.findall(value)
    if not parts or "".join(n + u for n, u in parts) != value.replace(" ", ""):
        return None
    scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    return sum(float(n) * scale[u] for n, u in parts)


def _number(headers: Mapping[str, str], name: str) -> float | None:
    raw = headers.get(name)
    if raw is None:
        return None
    try:
        value = float(raw)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) and value >= 0 else None


def _duration(headers: Mapping[str, str], name: str) -> float | None:
    raw = headers.get(name)
    return None if raw is None else parse_duration(str(raw))


def read_headers(headers: Mapping[str, str] | None) -> HeaderLimits:
    """The rate-limit facts of a reply's headers (names lower-case, as adapters pass them)."""
    if not headers:
        return HeaderLimits()
    return HeaderLimits(
        limit_requests=_number(headers, "x-ratelimit-limit-requests"),
        limit_tokens=_number(headers, "x-ratelimit-limit-tokens"),
        remaining_requests=_number(headers, "x-ratelimit-remaining-requests"),
        remaining_tokens=_number(headers, "x-ratelimit-remaining-tokens"),
        reset_requests=_duration(headers, "x-ratelimit-reset-requests"),
        reset_tokens=_duration(headers, "x-ratelimit-reset-tokens"),
    )


# --------------------------------------------------------------------------- the limiter


@dataclass
class Permit:
    """One admitted call: close it with `replied` or `failed` (exactly one of them)."""

    limiter: RateLimiter
    entry: int
    tokens: int
    raw: float
    """The prompt's uncorrected estimate (what the reply's prompt tokens correct)."""
    started: float
    closed: bool = False

    def replied(self, usage: Usage, headers: Mapping[str, str] | None = None) -> None:
        """The call got a reply: correct its tokens from ``usage``, learn from ``headers``."""
        if self.closed:
            return
        self.closed = True
        self.limiter._replied(self, usage, read_headers(headers))

    def failed(self, error: BaseException) -> None:
        """The call failed: a 429 pauses the key (and is not counted: the server refused it);
        a call that was never sent gives its room back; other failures keep their estimate."""
        if self.closed:
            return
        self.closed = True
        self.limiter._failed(self, error)


def _loop_key() -> asyncio.AbstractEventLoop:
    return asyncio.get_running_loop()


class RateLimiter:
    """Admits calls within the key's request and token budgets (see the module).

    ``clock`` is wall-clock seconds (shared with other processes); ``sleep`` waits (tests pass
    fakes of both). ``ledger`` is where the state is shared (`RateLedger`); else
    ``ledger_path`` names a machine-wide ledger file; neither keeps it in this process.
    """

    def __init__(
        self,
        limits: RateLimits,
        *,
        ledger_path: Path | None = None,
        ledger: RateLedger | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    ) -> None:
        self.limits = limits
        self.clock = clock
        self.sleep = sleep
        self._ledger: RateLedger = ledger if ledger is not None else local_ledger(ledger_path)
        self._ids = itertools.count(int(time.time() * 1000) % 10**9 * 1000 + os.getpid() % 1000)
        self.ratio = 1.0
        """Real prompt tokens per estimated one, learned from the replies' usage."""
        self.learned = False
        self.completion: float | None = None
        """Mean completion tokens of the replies (None: none yet)."""
        self.latency: float | None = None
        """Mean seconds per call (for the in-flight cap)."""
        self.cap: float = float(limits.start)
        """The in-flight cap used while no rate is known: slow start, then AIMD."""
        self.cut = False
        """Whether a 429 has halved ``cap`` yet (slow start ends then)."""
        self.in_flight = 0
        self.max_in_flight = 0
        self.admitted = 0
        self.waited = 0.0
        """Seconds calls spent waiting for room (summed over calls)."""
        self.rate_limited = 0
        self._gates: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )
        self._counters = threading.Lock()

    def __repr__(self) -> str:
        return f"RateLimiter({self.limits!r}, in_flight={self.in_flight})"

    # -- estimating -----------------------------------------------------------------------

    def estimate(self, messages: Sequence[Message], completion_budget: int | None = None) -> int:
        """Tokens a call will cost, before it is sent: the prompt by its characters (on the
        high side) plus the expected completion, scaled by what replies taught."""
        return self._scaled(self._prompt(messages), completion_budget)

    @staticmethod
    def _prompt(messages: Sequence[Message]) -> float:
        """The prompt's tokens by its characters, before any correction."""
        return sum(len(str(m.get("content", ""))) for m in messages) / CHARS_PER_TOKEN

    def _scaled(self, prompt: float, completion_budget: int | None) -> int:
        """The prompt corrected by what replies taught (``ratio``) plus the completion
        expected (the mean of the replies', else the request's budget), with 5% headroom."""
        if self.completion is not None:
            completion = self.completion
        else:
            completion = float(completion_budget or _DEFAULT_COMPLETION)
        return max(1, math.ceil((prompt * self.ratio + completion) * 1.05))

    # -- admitting ------------------------------------------------------------------------

    def _gate(self) -> asyncio.Lock:
        """This loop's queue: one waiting call at a time reads the ledger (FIFO), not all."""
        loop = _loop_key()
        gate = self._gates.get(loop)
        if gate is None:
            gate = self._gates[loop] = asyncio.Lock()
        return gate

    async def acquire(
        self, messages: Sequence[Message], completion_budget: int | None = None
    ) -> Permit:
        """Wait until the call fits the budgets and the in-flight cap; its `Permit`."""
        raw = self._prompt(messages)
        tokens = self._scaled(raw, completion_budget)
        asked = self.clock()
        ticket = f"{os.getpid()}-{next(self._ids)}"
        async with self._gate():
            try:
                while True:
                    wait = self._try(tokens, ticket)
                    if isinstance(wait, int):
                        break
                    await self.sleep(min(max(wait, 0.001), _MAX_POLL))
            except BaseException:
                self._leave(ticket)
                raise
        now = self.clock()
        with self._counters:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self.admitted += 1
            self.waited += max(0.0, now - asked)
        return Permit(self, wait, tokens, raw, now)

    def _budgets(self, state: State) -> tuple[float | None, float | None]:
        """The request and token budgets in force: configured or learned (the lower), times
        the AIMD share and the ledger's ``quota`` (the part of the key's budgets its holders
        may use: 1 unless the ledger splits the key between holders)."""
        share = float(state.get("share", 1.0)) * float(state.get("quota", 1.0))

        def lower(configured: float | None, learned: Any) -> float | None:
            known = [v for v in (configured, learned) if v is not None]
            return min(known) * share if known else None

        return lower(self.limits.rpm, state.get("rpm")), lower(self.limits.tpm, state.get("tpm"))

    def _cap(self, rpm: float | None, tpm: float | None, tokens: int) -> float:
        """Calls in flight allowed: twice the rate times the latency with a rate, else AIMD."""
        if rpm is None and tpm is None:
            return self.cap
        per_window = [r for r in (rpm, None if tpm is None else tpm / max(tokens, 1)) if r]
        rate = min(per_window) / self.limits.window
        latency = self.latency if self.latency is not None else 1.0
        return max(2.0, math.ceil(rate * latency * 2.0) + 1.0)

    def _leave(self, ticket: str) -> None:
        """A waiting call gave up (cancelled): out of the queue, so it holds up no one."""
        self._ledger.update(lambda state: state.get("queue", {}).pop(ticket, None))

    def _queue(self, state: State, ticket: str, now: float) -> bool:
        """Join (or stay in) the key's queue of waiting runs; whether ``ticket`` is its head.

        One waiting call per run and loop is in the queue (the others queue on the loop's
        gate); runs are admitted in the order they started waiting, so no run starves however
        the wake-ups of the others fall. An entry not refreshed for `_STALE` seconds (a run
        that died waiting) is dropped."""
        queue: dict[str, list[float]] = {
            str(k): [float(v[0]), float(v[1])]
            for k, v in state.get("queue", {}).items()
            if float(v[1]) > now - _STALE
        }
        queue[ticket] = [queue.get(ticket, [now, now])[0], now]
        state["queue"] = queue
        head: str = min(queue, key=lambda k: (queue[k][0], k))
        return head == ticket

    def _try(self, tokens: int, ticket: str) -> int | float:
        """Admit (the log entry's id, an int) or the seconds to wait (a float)."""
        return self._ledger.update(partial(self._admit, tokens, ticket))

    def _admit(self, tokens: int, ticket: str, state: State) -> int | float:
        """`_try` as a transaction on ``state`` (it may run more than once: see `RateLedger`)."""
        now = self.clock()
        horizon = now - self.limits.window - self.limits.slack
        log: list[list[Any]] = [e for e in state["log"] if e[0] > horizon]
        state["log"] = log
        rpm, tpm = self._budgets(state)
        if (rpm is not None and rpm < 1.0) or (tpm is not None and tpm < 1.0):
            return 0.05  # the ledger's quota of the key is (nearly) nothing yet: wait for more
        if self.in_flight >= self._cap(rpm, tpm, tokens):
            return 0.005  # this run's cap first: a run that cannot send holds up no one
        head = self._queue(state, ticket, now)
        until = float(state.get("until", 0.0))
        if now < until:
            return until - now
        wait = 0.0 if head else 0.02
        if rpm is not None and len(log) + 1 > rpm:
            excess = len(log) + 1 - int(rpm)
            wait = max(wait, log[excess - 1][0] - horizon)
        if tpm is not None and log:
            used = sum(e[1] for e in log)
            freed = 0.0
            for entry in log:
                if used - freed + tokens <= tpm:
                    break
                freed += entry[1]
                wait = max(wait, entry[0] - horizon)
        bucket = self._refill(state, now, rpm, tpm, log)
        window = self.limits.window
        if rpm is not None and bucket[1] < 1.0:
            wait = max(wait, (1.0 - bucket[1]) * window / rpm)
        if tpm is not None:
            need = min(float(tokens), self._capacities(rpm, tpm)[1])
            if bucket[2] < need:
                wait = max(wait, (need - bucket[2]) * window / tpm)
        if wait > 0:
            return float(wait)
        entry_id = next(self._ids)
        log.append([now, tokens, entry_id])
        state["queue"].pop(ticket, None)
        bucket[1] -= 1.0 if rpm is not None else 0.0
        bucket[2] -= float(tokens) if tpm is not None else 0.0
        return entry_id

    def _capacities(self, rpm: float | None, tpm: float | None) -> tuple[float, float]:
        """The pacing bucket's size: ``burst`` of a window's requests and tokens."""
        burst = self.limits.burst
        return (max(1.0, (rpm or 0.0) * burst), (tpm or 0.0) * burst)

    def _refill(
        self,
        state: State,
        now: float,
        rpm: float | None,
        tpm: float | None,
        log: list[list[Any]],
    ) -> list[float]:
        """The pacing bucket ``[time, requests, tokens]`` refilled to ``now`` at the budgets'
        rates: calls are spread over the window rather than sent as one burst at its start,
        which a provider enforcing its limit per second (a token bucket) would refuse.

        The bucket starts full less what the log already holds (the calls sent before the
        budgets were known): those count against the first burst, or their expiry a window
        later would leave room the paced calls cannot take up."""
        capacity = self._capacities(rpm, tpm)
        bucket = state.get("bucket") or [
            now,
            max(0.0, capacity[0] - len(log)),
            max(0.0, capacity[1] - sum(float(e[1]) for e in log)),
        ]
        elapsed = max(0.0, now - float(bucket[0]))
        window = self.limits.window
        refilled = [
            now,
            min(capacity[0], float(bucket[1]) + elapsed * (rpm or 0.0) / window),
            min(capacity[1], float(bucket[2]) + elapsed * (tpm or 0.0) / window),
        ]
        state["bucket"] = refilled
        return refilled

    @staticmethod
    def _refund(state: State, requests: float, tokens: float) -> None:
        """Give back to the pacing bucket what an entry no longer costs."""
        bucket = state.get("bucket")
        if bucket:
            bucket[1] = float(bucket[1]) + requests
            bucket[2] = float(bucket[2]) + tokens

    # -- learning -------------------------------------------------------------------------

    def _closed(self) -> None:
        with self._counters:
            self.in_flight = max(0, self.in_flight - 1)

    def _replied(self, permit: Permit, usage: Usage, headers: HeaderLimits) -> None:
        self._closed()
        now = self.clock()
        latency = max(0.0, now - permit.started)
        self.latency = latency if self.latency is None else 0.8 * self.latency + 0.2 * latency
        self.cap += 1.0 / self.cap if self.cut else 1.0
        real = usage.prompt_tokens + usage.completion_tokens
        if real > 0:
            if usage.prompt_tokens:
                seen = usage.prompt_tokens / max(permit.raw, 1.0)
                self.ratio = 0.8 * self.ratio + 0.2 * seen if self.learned else seen
                self.learned = True
            if usage.completion_tokens:
                c = float(usage.completion_tokens)
                self.completion = c if self.completion is None else 0.8 * self.completion + 0.2 * c

        def change(state: State) -> None:
            if real > 0:
                for entry in state["log"]:
                    if entry[2] == permit.entry:
                        self._refund(state, 0.0, float(entry[1] - real))
                        entry[1] = real
                        break
            self._learn(state, headers, now)
            share = float(state.get("share", 1.0))
            if share < 1.0 and now >= float(state.get("until", 0.0)):
                rpm, _ = self._budgets(state)
                per_window = max(10.0, (rpm or 60.0) / share)
                state["share"] = min(1.0, share + 0.5 / per_window)

        self._ledger.update(change)

    def _learn(self, state: State, headers: HeaderLimits, now: float) -> None:
        """Budgets from the limit headers; a pause when the server says nothing remains."""
        if headers.limit_requests:
            state["rpm"] = headers.limit_requests
        if headers.limit_tokens:
            state["tpm"] = headers.limit_tokens
        for remaining, reset in (
            (headers.remaining_requests, headers.reset_requests),
            (headers.remaining_tokens, headers.reset_tokens),
        ):
            if remaining is not None and remaining <= 0 and reset:
                state["until"] = max(float(state.get("until", 0.0)), now + reset)

    def _failed(self, permit: Permit, error: BaseException) -> None:
        self._closed()
        if isinstance(error, (NotSent, asyncio.CancelledError)):
            self._forget(permit)  # never reached the server: its room is free again
            return
        if not isinstance(error, RateLimited):
            return  # a timeout or 5xx may have been counted by the server: keep the estimate
        self.rate_limited += 1
        now = self.clock()
        pause = error.retry_after if error.retry_after is not None else _DEFAULT_PAUSE
        headers = read_headers(error.headers)

        def change(state: State) -> bool:
            """The 429 in the state; whether this run's in-flight cap is to be halved."""
            self._drop(state, permit)
            self._learn(state, headers, now)
            known = state.get("rpm") is not None or state.get("tpm") is not None
            known = known or self.limits.rpm is not None or self.limits.tpm is not None
            halve = False
            if now >= float(state.get("cut_at", 0.0)):
                if known and self._within(state, now):
                    state["share"] = max(0.05, float(state.get("share", 1.0)) * 0.5)
                elif not known:
                    halve = True
                state["cut_at"] = now + pause
            state["until"] = max(float(state.get("until", 0.0)), now + pause)
            return halve

        if self._ledger.update(change):
            self.cap = max(1.0, min(self.cap, self.in_flight + 1.0) / 2.0)
            self.cut = True

    def _within(self, state: State, now: float) -> bool:
        """Whether the log says our calls were within the budgets (so a 429 is someone else)."""
        rpm, tpm = self._budgets(state)
        horizon = now - self.limits.window
        log = [e for e in state["log"] if e[0] > horizon]
        fits_requests = rpm is None or len(log) <= rpm
        fits_tokens = tpm is None or sum(e[1] for e in log) <= tpm
        return fits_requests and fits_tokens

    def _forget(self, permit: Permit) -> None:
        self._ledger.update(lambda state: self._drop(state, permit))

    def _drop(self, state: State, permit: Permit) -> None:
        """Remove a call the server did not count from the log, and refund its pacing."""
        kept = [e for e in state["log"] if e[2] != permit.entry]
        if len(kept) < len(state["log"]):
            self._refund(state, 1.0, float(permit.tokens))
        state["log"] = kept


# --------------------------------------------------------------------------- one per key

_LIMITERS: dict[tuple[str, RateLimits], RateLimiter] = {}
_LIMITERS_LOCK = threading.Lock()


def rate_limiter(rate_key: str, limits: RateLimits) -> RateLimiter:
    """The process's limiter of ``rate_key`` under ``limits`` (one per key: every engine of the
    process that calls the same key shares it; other runs share its ledger file)."""
    with _LIMITERS_LOCK:
        found = _LIMITERS.get((rate_key, limits))
        if found is None:
            ledger = open_ledger(rate_key, limits)
            found = _LIMITERS[(rate_key, limits)] = RateLimiter(limits, ledger=ledger)
        return found
