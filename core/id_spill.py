"""An exact duplicate-id check over any number of ids, in bounded memory.

Planning a cluster run reads every sample id once and must refuse a repeated one before a
judge is paid (`ragbridge.core.scoring.partitions.plan_partitions`). A set of 10 million ids
costs about 1 GB on the planning machine, so `IdLedger` keeps ids in memory only up to
``spill_at`` of them. Up to there it is the plain dictionary it replaces: a repeat is found at
the line that repeats it. Past it, ids are written to disk in sorted runs of ``spill_at``
records (an external sort), and `IdLedger.finish` merges the runs: equal ids become
neighbours, so the check stays exact while memory is bounded by ``spill_at`` records plus a
16 KB read buffer for each of at most `MERGE_FAN_IN` runs open at once. Measured with
``benchmarks/id_check_memory.py``: 10 million ids take 34 MB instead of 2.2 GB, and about twice
the time of the dictionary (the sort and the merge).

What a repeat reports does not depend on whether the ids spilled: the `Duplicate` whose
*second* occurrence comes first in input order, with the first occurrence of that id. That is
exactly what a single pass with a dictionary stops at, so the error a caller builds from it
(file, line, id, and where the id was first seen) is the same either way.

A position is any pair of integers that sorts in input order: ``(shard index, line number)``
for JSONL shards, ``(partition, item)`` for a ``dask.bag``.
"""

from __future__ import annotations

import contextlib
import heapq
import shutil
import tempfile
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import BinaryIO

__all__ = ["MERGE_FAN_IN", "SPILL_AT", "Duplicate", "IdLedger", "Position"]

SPILL_AT = 100_000
"""Ids held in memory before they spill to sorted runs on disk (some 30 MB at the peak)."""

MERGE_FAN_IN = 128
"""Runs merged at once; more runs are first merged into longer ones (few open files at a time)."""

Position = tuple[int, int]
"""Where an id was read, as a pair that sorts in input order (shard and line, or partition and
item)."""

_WHERE, _LINE = 9, 12
"""Digits of a position's two numbers on disk (fixed widths: records sort as plain bytes)."""
_WHERE_END, _LINE_END = 10**_WHERE, 10**_LINE
_TAIL = 1 + _WHERE + _LINE + 1
"""Bytes after the key in a record: 0xFF, the position, the newline."""


@dataclass(frozen=True)
class Duplicate:
    """An id read twice: where it was first read (``first``) and where again (``again``)."""

    sample_id: str
    first: Position
    again: Position


def _key(sample_id: str) -> bytes:
    """The id as a one-line byte string, injectively: UTF-8 never holds the bytes 0xFE and
    0xFF, so a newline becomes 0xFE and 0xFF can end the key (`_record`)."""
    key = sample_id.encode("utf-8", "surrogatepass")
    return key.replace(b"\n", b"\xfe") if b"\n" in key else key


def _id_of(key: bytes) -> str:
    return key.replace(b"\xfe", b"\n").decode("utf-8", "surrogatepass")


def _record(key: bytes, where: int, line: int) -> bytes:
    """One id on disk: ``key 0xFF position NEWLINE``. Sorting records groups equal keys (no key
    holds 0xFF), and within a key sorts by position (fixed-width digits)."""
    if not (0 <= where < _WHERE_END and 0 <= line < _LINE_END):
        raise ValueError(f"position out of range for the id check: {(where, line)}")
    return b"%s\xff%09d%012d\n" % (key, where, line)


def _position(record: bytes) -> Position:
    digits = record[-_TAIL + 1 : -1]
    return int(digits[:_WHERE]), int(digits[_WHERE:])


class IdLedger:
    """Ids seen so far; tells an exact repeat in memory bounded by ``spill_at`` records.

    Call `add` for each id in input order, then `finish`. While fewer than ``spill_at`` ids
    were added, `add` returns a repeat at once (and `finish` has nothing left to find); after
    that, repeats are found by `finish`, which returns the same one the in-memory check would
    have returned first. Use it as a context manager (or call `close`): spilled runs live in a
    temporary folder (under ``folder`` if given) removed on exit.
    """

    def __init__(self, spill_at: int | None = None, folder: str | Path | None = None) -> None:
        limit = SPILL_AT if spill_at is None else spill_at
        if limit < 1:
            raise ValueError(f"spill_at must be >= 1, got {limit}")
        self.spill_at = limit
        self._folder = folder
        self._memory: dict[str, Position] = {}
        self._buffer: list[bytes] = []
        self._runs: list[Path] = []
        self._tmp: Path | None = None
        self._written = 0
        self.ids = 0
        """Ids added so far."""

    @property
    def spilled(self) -> bool:
        """Whether ids went to disk (repeats are then found by `finish`)."""
        return bool(self._runs)

    @property
    def runs(self) -> int:
        """Sorted runs written to disk so far."""
        return len(self._runs)

    def add(self, sample_id: str, where: Position) -> Duplicate | None:
        """Record ``sample_id`` read at ``where``; the repeat, when it is found at once."""
        self.ids += 1
        if not self._runs:
            first = self._memory.get(sample_id)
            if first is not None:
                return Duplicate(sample_id, first, where)
            self._memory[sample_id] = where
            if len(self._memory) >= self.spill_at:
                self._write_run([_record(_key(i), w, n) for i, (w, n) in self._memory.items()])
                self._memory.clear()
            return None
        # `_record(_key(sample_id), *where)`, inlined: this line runs for every id past the spill
        key = sample_id.encode("utf-8", "surrogatepass")
        if b"\n" in key:
            key = key.replace(b"\n", b"\xfe")
        shard, line = where
        if not (0 <= shard < _WHERE_END and 0 <= line < _LINE_END):
            raise ValueError(f"position out of range for the id check: {where}")
        buffer = self._buffer
        buffer.append(b"%s\xff%09d%012d\n" % (key, shard, line))
        if len(buffer) >= self.spill_at:
            self._write_run(buffer)
            self._buffer = []
        return None

    def add_all(self, ids: Iterable[tuple[str, Position]]) -> Duplicate | None:
        """`add` each pair; the first repeat found at once stops the loop."""
        for sample_id, where in ids:
            found = self.add(sample_id, where)
            if found is not None:
                return found
        return None

    def finish(self) -> Duplicate | None:
        """The repeat whose second occurrence comes first in input order, or None.

        Without a spill, `add` has already said everything. With one, the runs are merged;
        the merge reads each record once.
        """
        if not self._runs:
            return None
        if self._buffer:
            self._write_run(self._buffer)
            self._buffer = []
        while len(self._runs) > MERGE_FAN_IN:
            self._runs = [
                self._merge_to_file(self._runs[i : i + MERGE_FAN_IN])
                for i in range(0, len(self._runs), MERGE_FAN_IN)
            ]
        best: tuple[Position, bytes, Position] | None = None
        key: bytes | None = None
        first = b""
        with contextlib.ExitStack() as stack:
            runs = [stack.enter_context(_open_run(path)) for path in self._runs]
            for record in heapq.merge(*runs):
                this = record[:-_TAIL]
                if this == key:
                    again = _position(record)
                    if best is None or again < best[0]:
                        best = (again, this, _position(first))
                    continue  # a third reading of an id comes after its second: never earlier
                key, first = this, record
        if best is None:
            return None
        again, repeated, first_read = best
        return Duplicate(_id_of(repeated), first_read, again)

    def close(self) -> None:
        """Remove the spilled runs and forget every id."""
        self._memory.clear()
        self._buffer = []
        self._runs = []
        if self._tmp is not None:
            self._removal()
            self._tmp = None

    def __enter__(self) -> IdLedger:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _next_path(self) -> Path:
        if self._tmp is None:
            self._tmp = Path(tempfile.mkdtemp(prefix="ragbridge-ids-", dir=self._folder))
            # removed by `close`, or when the ledger is dropped (an error between add and finish)
            self._removal = weakref.finalize(self, shutil.rmtree, self._tmp, True)
        self._written += 1
        return self._tmp / f"run-{self._written:06d}"

    def _write_run(self, records: list[bytes]) -> None:
        records.sort()
        path = self._next_path()
        with path.open("wb", buffering=1 << 20) as handle:
            handle.writelines(records)
        self._runs.append(path)

    def _merge_to_file(self, paths: list[Path]) -> Path:
        """Several sorted runs as one longer run (when there are too many to open at once)."""
        assert self._tmp is not None
        merged = self._tmp / f"merged-{paths[0].name}"
        with merged.open("wb", buffering=1 << 20) as handle, contextlib.ExitStack() as stack:
            handle.writelines(heapq.merge(*(stack.enter_context(_open_run(p)) for p in paths)))
        for path in paths:
            path.unlink()
        return merged


def _open_run(path: Path) -> BinaryIO:
    """A sorted run, read a line (one record) at a time through a small buffer."""
    return path.open("rb", buffering=1 << 14)
