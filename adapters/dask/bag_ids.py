"""A ``dask.bag`` of samples checked for repeated ids before any of it is scored.

A JSONL run reads every id while planning (`plan_partitions`), before the first judge call. A
bag has no file to read: its samples exist only once a worker computes them. Checking ids only
when the scored partitions are joined would pay for the whole run before saying that two
samples share an id, so a bag run first computes each partition's ids alone (`ids_of`, on the
workers; a bag is computed twice, the second time to score it) and streams them to this process,
a few partitions at a time, into an `IdLedger`: exact, in memory bounded by its threshold.

A repeat is a ``ValueError`` naming the id and both places as ``partition P, item I``
(0-based, as ``bag.to_delayed()`` and the part files number them).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ragbridge.core.id_spill import Duplicate, IdLedger
from ragbridge.core.scoring.partitions import raw_id

if TYPE_CHECKING:
    from dask.bag import Bag
    from distributed import Client, Future

__all__ = ["check_bag_ids", "ids_of"]


def ids_of(items: Iterable[Any]) -> list[str]:
    """The ids of one bag partition, in order; an item without a usable id is an error."""
    found: list[str] = []
    for item in items:
        sample_id = raw_id(item)
        if sample_id is None:
            raise ValueError(
                f"item {len(found)}: id: a non-empty string is required, got {type(item).__name__}"
            )
        found.append(sample_id)
    return found


def check_bag_ids(client: Client, bag: Bag, *, window: int = 4, spill_at: int | None = None) -> int:
    """Refuse a bag whose samples repeat an id; return how many samples it holds.

    At most ``window`` partitions' ids are computed ahead of the one being read, so neither
    the workers nor this process hold the ids of the whole bag.
    """
    pieces = bag.map_partitions(ids_of).to_delayed()
    pending: list[Future] = []
    ahead = iter(pieces)
    total = 0
    with IdLedger(spill_at) as ledger:
        try:
            for index in range(len(pieces)):
                while len(pending) < max(window, 1):
                    piece = next(ahead, None)
                    if piece is None:
                        break
                    pending.append(client.compute(piece))
                future = pending.pop(0)
                try:
                    ids: list[str] = future.result()
                except ValueError as exc:  # an item without an id, said with its partition
                    raise ValueError(f"bag partition {index}, {exc}") from None
                future.release()
                for item, sample_id in enumerate(ids):
                    _refuse(ledger.add(sample_id, (index, item)))
                total += len(ids)
            _refuse(ledger.finish())
        finally:
            for future in pending:
                future.cancel()
    return total


def _refuse(found: Duplicate | None) -> None:
    if found is None:
        return
    (part, item), (first_part, first_item) = found.again, found.first
    raise ValueError(
        f"bag partition {part}, item {item}: id: duplicate sample id {found.sample_id!r} "
        f"(first in partition {first_part}, item {first_item}); ids must be unique before "
        "the bag is scored"
    )
