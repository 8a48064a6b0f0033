"""Checks every adapter runs on the samples a user hands it, worded the same everywhere.

Not an adapter of its own and imports nothing optional, so sharing it keeps the rule that no
adapter imports another.
"""

from __future__ import annotations

from collections.abc import Iterable

from ragbridge.core.sample import Sample

__all__ = ["distinct_samples"]


def distinct_samples(samples: Iterable[Sample]) -> list[Sample]:
    """``samples`` as a list, refused when an item is not a `Sample` or an id comes twice.

    Why: an adapter that writes a framework's dataset, or lines up several frameworks' scores,
    keys everything by sample id; a repeated id would silently merge two records. The message
    names both positions (``samples[3]: id: duplicate sample id 'q1' (first at [0])``).
    """
    items = list(samples)
    seen: dict[str, int] = {}
    for i, sample in enumerate(items):
        if not isinstance(sample, Sample):
            raise TypeError(f"samples[{i}]: expected a Sample, got {type(sample).__name__}")
        if sample.id in seen:
            first = seen[sample.id]
            raise ValueError(
                f"samples[{i}]: id: duplicate sample id {sample.id!r} (first at [{first}])"
            )
        seen[sample.id] = i
    return items
