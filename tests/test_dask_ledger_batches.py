"""The call ledger's reports travel in batches, and none is lost on the way.

An event per judge call (the ledger before batching) cost a scheduler message and a client
callback per call. Checked here without a cluster: the worker's `Outbox` with a recording
transport, on an event loop; the client's `CallLedger` reads what it sent. The cluster path
(a worker killed mid-run, its calls counted) is `tests/test_dask_faults.py`.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("distributed", reason='needs the dask extra: pip install ".[dask]"')

from ragbridge.adapters.dask.ledger import FLUSH_CALLS, FLUSH_S, AttemptReporter, CallLedger, Outbox


class _Calls:
    """A partition's running judge and embedding counts."""

    def __init__(self) -> None:
        self.judge = 0
        self.embedding = 0

    def __call__(self) -> tuple[int, int]:
        return self.judge, self.embedding


def _ledger_of(sent: list[Any], run: str) -> CallLedger:
    ledger = CallLedger(run)
    for message in sent:
        ledger.on_event((0.0, message))
    return ledger


def test_a_thousand_calls_send_a_few_events_and_every_count() -> None:
    async def main() -> tuple[list[Any], int]:
        sent: list[Any] = []
        outbox = Outbox(sent.append)
        counts = [_Calls(), _Calls()]
        reporters = [AttemptReporter("run1", i, c, outbox=outbox) for i, c in enumerate(counts)]
        at_start = len(sent)
        for call in range(1000):  # two partitions' calls, interleaved, as fast as they come
            counts[call % 2].judge += 1
            counts[call % 2].embedding += call % 3 == 0
            reporters[call % 2].report()
            if call % 100 == 99:
                await asyncio.sleep(0)
        await asyncio.sleep(FLUSH_S * 3)  # the last batch goes out within FLUSH_S
        return sent, at_start

    sent, at_start = asyncio.run(main())
    assert at_start == 2  # each attempt is known as it starts
    # One event per call before; now one per FLUSH_CALLS calls at most (and the timer's last).
    assert len(sent) <= 2 + 1000 // FLUSH_CALLS + 1, len(sent)
    lost = _ledger_of(sent, "run1").lost()
    assert lost is not None
    assert (lost.attempts, lost.judge_calls, lost.embedding_calls) == (2, 1000, 334)


def test_a_slow_call_is_sent_after_flush_s_and_the_end_at_once() -> None:
    async def main() -> tuple[list[Any], list[Any], list[Any]]:
        sent: list[Any] = []
        counts = _Calls()
        reporter = AttemptReporter("run1", 0, counts, outbox=Outbox(sent.append))
        counts.judge = 1
        reporter.report()
        waiting = list(sent)  # not yet: batched
        await asyncio.sleep(FLUSH_S * 3)
        after = list(sent)
        counts.judge = 2
        reporter.close()  # the attempt ended: no wait
        return waiting, after, sent

    waiting, after, sent = asyncio.run(main())
    assert waiting == [["run1", [[0, waiting[0][1][0][1], 0, 0]]]]
    assert after[-1][1][0][2:] == [1, 0]
    assert sent[-1][1][0][2:] == [2, 0]
    assert len(sent) == 3


def test_a_batch_carries_only_its_runs_attempts() -> None:
    sent: list[Any] = []
    outbox = Outbox(sent.append)
    AttemptReporter("run1", 0, lambda: (3, 0), outbox=outbox)
    AttemptReporter("run2", 0, lambda: (5, 1), outbox=outbox)
    outbox.put(["run1", 1, "late", 4, 0], now=True)
    one, two = _ledger_of(sent, "run1").lost(), _ledger_of(sent, "run2").lost()
    assert one is not None
    assert (one.attempts, one.judge_calls) == (2, 7)
    assert two is not None
    assert (two.attempts, two.judge_calls, two.embedding_calls) == (1, 5, 1)


def test_batches_that_arrive_out_of_order_keep_the_highest_counts() -> None:
    ledger = CallLedger("run1")
    ledger.on_event((0.0, ["run1", [[0, "a", 9, 2]]]))
    ledger.on_event((0.0, ["run1", [[0, "a", 7, 1]]]))  # an older batch, late
    ledger.on_event((0.0, ["run1", "not a batch"]))
    lost = ledger.lost()
    assert lost is not None
    assert (lost.judge_calls, lost.embedding_calls) == (9, 2)
