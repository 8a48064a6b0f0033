"""The provider calls of partition attempts that never returned: paid, and counted.

A finished partition brings its judge and embedding call counts home in its `Evaluation`. An
attempt that does not finish brings nothing: the worker running it was killed (Dask runs the
partition again elsewhere), or the run stopped and cancelled it. Its calls were still made and
paid. Measured before this module: a 120-sample run that lost a worker reported 240 judge calls
while the endpoint had answered 246 to 271.

So each attempt reports as it goes: a Dask event when it starts and after every provider call
(`AttemptReporter`, on the worker), with the attempt's running counts. The events travel on the
worker's batched stream to the scheduler, which pushes them to the client (`CallLedger`); the
client adds the last counts of every attempt whose result it never received. A call that was on
the wire when its worker died is not counted (its event was never sent), so these totals are a
lower bound, and are reported as one ("at least").
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from distributed import Client

__all__ = ["ATTEMPT_KEY", "SUBSCRIPTIONS", "TOPIC", "AttemptReporter", "CallLedger", "Lost"]

TOPIC = "ragbridge-calls"
"""One event topic for every run (the scheduler keeps a bounded log per topic); events carry
their run's name."""

ATTEMPT_KEY = "cluster_attempt"
"""Metadata key a partition's `Evaluation` carries its attempt id home under (removed there)."""


class AttemptReporter:
    """One partition attempt on a worker: sends its running call counts to the client."""

    def __init__(self, run: str, index: int, counts: Callable[[], tuple[int, int]]) -> None:
        self.run = run
        self.index = index
        self.attempt = uuid.uuid4().hex[:12]
        self._counts = counts
        self._worker: Any = None
        try:
            from distributed import get_worker

            self._worker = get_worker()
        except (ImportError, ValueError):  # not on a worker (a direct call): nothing to tell
            self._worker = None
        self.report()

    def report(self) -> None:
        """Send ``[run, index, attempt, judge calls, embedding calls]`` (cheap: batched)."""
        if self._worker is None:
            return
        judge, embedding = self._counts()
        self._worker.log_event(TOPIC, [self.run, self.index, self.attempt, judge, embedding])


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
        """A Dask event handler: ``(timestamp, message)``; other runs' events are ignored."""
        _, message = event
        if not isinstance(message, list | tuple) or len(message) != 5 or message[0] != self.run:
            return
        _, _, attempt, judge, embedding = message
        with self._lock:
            self._last[str(attempt)] = (int(judge), int(embedding))

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
