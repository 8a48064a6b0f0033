"""The provider calls of partition attempts that never returned: paid, and counted.

A finished partition brings its judge and embedding call counts home in its `Evaluation`. An
attempt that does not finish brings nothing: the worker running it was killed (Dask runs the
partition again elsewhere), or the run stopped and cancelled it. Its calls were still made and
paid. Measured before this module: a 120-sample run that lost a worker reported 240 judge calls
while the endpoint had answered 246 to 271.

So each attempt reports as it goes (`AttemptReporter`, on the worker): when it starts, as its
calls are made, and when it ends, with the attempt's running counts. The reports travel as Dask
events on the worker's batched stream to the scheduler, which pushes them to the client
(`CallLedger`); the client adds the last counts of every attempt whose result it never received.

Reports are sent in batches (`Outbox`, one per worker process): an event per call cost a
scheduler message and a client callback per judge call, as much CPU as the call itself on a
2-core machine. The counts after a call are sent at most ``FLUSH_S`` seconds later (sooner once
``FLUSH_CALLS`` calls wait), in one event per run that carries every attempt of the run that
made calls since the last one; an attempt's start and end are sent at once. Calls not yet
counted when a worker dies are those on the wire and those that ended in its last ``FLUSH_S``
seconds (at most ``FLUSH_CALLS``), so the totals are a lower bound, and are reported as one
("at least").
"""

from __future__ import annotations

import asyncio
import threading
import uuid
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from distributed import Client

__all__ = [
    "ATTEMPT_KEY",
    "FLUSH_CALLS",
    "FLUSH_S",
    "SUBSCRIPTIONS",
    "TOPIC",
    "AttemptReporter",
    "CallLedger",
    "Lost",
    "Outbox",
]

TOPIC = "ragbridge-calls"
"""One event topic for every run (the scheduler keeps a bounded log per topic); events carry
their run's name."""

ATTEMPT_KEY = "cluster_attempt"
"""Metadata key a partition's `Evaluation` carries its attempt id home under (removed there)."""


FLUSH_S = 0.05
"""Most seconds a call's count waits on its worker before it is sent."""

FLUSH_CALLS = 64
"""Calls counted on a worker since its last send that make it send at once."""

Report = list[Any]
"""``[run, index, attempt, judge calls, embedding calls]``: one attempt's running counts."""


class Outbox:
    """A worker process's unsent reports: the latest counts of each attempt, sent in batches.

    ``send(run, message)`` is the transport (`distributed.Worker.log_event` on `TOPIC`);
    ``message`` is ``[run, [[index, attempt, judge, embedding], ...]]``. Used from one event
    loop (the worker's), like everything a partition task does.
    """

    def __init__(
        self,
        send: Callable[[Any], None],
        flush_s: float = FLUSH_S,
        flush_calls: int = FLUSH_CALLS,
    ) -> None:
        self._send = send
        self.flush_s = flush_s
        self.flush_calls = flush_calls
        self._latest: dict[str, Report] = {}
        self._waiting = 0
        self._timer: asyncio.TimerHandle | None = None
        self.sent = 0

    def put(self, report: Report, now: bool = False) -> None:
        """Keep ``report`` (it replaces the attempt's earlier one) and send when due."""
        self._latest[report[2]] = report
        self._waiting += 1
        if now or self._waiting >= self.flush_calls:
            self.flush()
        elif self._timer is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # no loop to wait on: send now
                self.flush()
                return
            self._timer = loop.call_later(self.flush_s, self.flush)

    def flush(self) -> None:
        """Send every kept report: one event per run."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        latest, self._latest, self._waiting = self._latest, {}, 0
        by_run: dict[str, list[list[Any]]] = {}
        for run, index, attempt, judge, embedding in latest.values():
            by_run.setdefault(run, []).append([index, attempt, judge, embedding])
        for run, attempts in by_run.items():
            self._send([run, attempts])
            self.sent += 1


_OUTBOXES: weakref.WeakKeyDictionary[Any, Outbox] = weakref.WeakKeyDictionary()


def _outbox(worker: Any) -> Outbox:
    """The worker's outbox, made on first use."""
    outbox = _OUTBOXES.get(worker)
    if outbox is None:
        outbox = _OUTBOXES[worker] = Outbox(lambda message: worker.log_event(TOPIC, message))
    return outbox


class AttemptReporter:
    """One partition attempt on a worker: sends its running call counts to the client.

    ``outbox`` is where reports go (None: the worker's `Outbox`, or nowhere when this is not a
    Dask worker). `report` is called after every call; `close` when the attempt ends.
    """

    def __init__(
        self,
        run: str,
        index: int,
        counts: Callable[[], tuple[int, int]],
        outbox: Outbox | None = None,
    ) -> None:
        self.run = run
        self.index = index
        self.attempt = uuid.uuid4().hex[:12]
        self._counts = counts
        self._outbox = outbox
        if outbox is None:
            try:
                from distributed import get_worker

                self._outbox = _outbox(get_worker())
            except (ImportError, ValueError):  # not on a worker (a direct call): nothing to tell
                self._outbox = None
        self._put(now=True)  # the attempt is known from its start

    def report(self) -> None:
        """The counts after a call: sent with the next batch (at most ``FLUSH_S`` later)."""
        self._put(now=False)

    def close(self) -> None:
        """The attempt ended: its last counts are sent now."""
        self._put(now=True)

    def _put(self, now: bool) -> None:
        if self._outbox is None:
            return
        judge, embedding = self._counts()
        self._outbox.put([self.run, self.index, self.attempt, judge, embedding], now=now)


@dataclass(frozen=True)
class Lost:
    """What the attempts that never returned had spent, as far as their reports tell."""

    attempts: int
    judge_calls: int
    embedding_calls: int

    def metadata(self) -> dict[str, Any]:
        return {
            "attempts": self.attempts,
            "judge_calls": self.judge_calls,
            "embedding_calls": self.embedding_calls,
            "at_least": True,
        }


class CallLedger:
    """The client's record of every attempt of one run: last counts seen, and which returned.

    Event handlers run on the client's event-loop thread; the lock keeps the reads whole.
    """

    def __init__(self, run: str) -> None:
        self.run = run
        self._last: dict[str, tuple[int, int]] = {}
        self._returned: set[str] = set()
        self._lock = threading.Lock()

    def on_event(self, event: tuple[float, Any]) -> None:
        """A Dask event handler: ``(timestamp, message)``; other runs' events are ignored.

        ``message`` is a batch, ``[run, [[index, attempt, judge, embedding], ...]]`` (what
        `Outbox` sends), or one attempt's ``[run, index, attempt, judge, embedding]``.
        """
        _, message = event
        if not isinstance(message, list | tuple) or not message or message[0] != self.run:
            return
        if len(message) == 5:
            attempts = [message[1:]]
        elif len(message) == 2 and isinstance(message[1], list | tuple):
            attempts = list(message[1])
        else:
            return
        with self._lock:
            for entry in attempts:
                if isinstance(entry, list | tuple) and len(entry) == 4:
                    _, attempt, judge, embedding = entry
                    last = self._last.get(str(attempt), (0, 0))  # batches may cross: keep
                    self._last[str(attempt)] = (  # the highest counts seen
                        max(last[0], int(judge)),
                        max(last[1], int(embedding)),
                    )

    def returned(self, attempt: object) -> None:
        """The attempt whose `Evaluation` reached the client (its counts are in it)."""
        if isinstance(attempt, str):
            with self._lock:
                self._returned.add(attempt)

    def lost(self) -> Lost | None:
        """The attempts seen that never returned, and their calls; None when there were none."""
        with self._lock:
            gone = [n for attempt, n in self._last.items() if attempt not in self._returned]
        if not gone:
            return None
        return Lost(len(gone), sum(j for j, _ in gone), sum(e for _, e in gone))


class _Subscriptions:
    """One handler per client for `TOPIC`, dispatching to the ledgers of the runs under way."""

    def __init__(self) -> None:
        self._ledgers: dict[tuple[str, str], CallLedger] = {}
        self._lock = threading.Lock()

    def add(self, client: Client, ledger: CallLedger) -> None:
        with self._lock:
            first = not any(cid == client.id for cid, _ in self._ledgers)
            self._ledgers[(client.id, ledger.run)] = ledger
        if first:
            client.subscribe_topic(TOPIC, lambda event: self._dispatch(client.id, event))

    def remove(self, client: Client, ledger: CallLedger) -> None:
        with self._lock:
            self._ledgers.pop((client.id, ledger.run), None)
            last = not any(cid == client.id for cid, _ in self._ledgers)
        if last:
            try:
                client.unsubscribe_topic(TOPIC)
            except Exception:  # a closed client or scheduler: nothing left to unsubscribe
                return

    def _dispatch(self, client_id: str, event: tuple[float, Any]) -> None:
        _, message = event
        run = message[0] if isinstance(message, list | tuple) and message else None
        ledger = self._ledgers.get((client_id, str(run)))
        if ledger is not None:
            ledger.on_event(event)


SUBSCRIPTIONS = _Subscriptions()
"""This process's subscriptions (a client may carry several runs at once)."""
