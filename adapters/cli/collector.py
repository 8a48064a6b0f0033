"""Fewer full garbage collections while a streamed run scores: the CLI owns its process.

Why: ``ragbridge eval --out`` of six model-free measures over 20,000 samples spent 18% of its
CPU time in Python's cyclic garbage collector (2.9 s of 16 s, timed with ``gc.callbacks``), most
of it in 15 full collections of about 110 ms each. Each 512-sample chunk's samples and Scores
live long enough to be promoted to the oldest generation before they are freed (by reference
counting, not by the collector: a full collection of this run found about 20 cycles in all), so
a full collection came about once a second and walked everything the run holds, its caches
included. Python collects the oldest generation after ``threshold2`` (10) collections of the
middle one; 100 makes full collections ten times rarer. Young collections are left as they
are (a larger first threshold was slower: the young objects no longer fit in the CPU's cache).
Memory stays flat: what the run frees, reference counting frees at once; peak RSS was the same
(116 MB) with and without. The setting is restored when the run ends.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["FULL_EVERY", "rare_full_collections"]

FULL_EVERY = 100
"""Collections of the middle generation between two full ones (Python's default: 10)."""


@contextlib.contextmanager
def rare_full_collections(every: int = FULL_EVERY) -> Iterator[None]:
    """Within the block, the oldest generation is collected after ``every`` collections of the
    middle one (never more often than the process had it); the thresholds are put back after."""
    young, middle, old = gc.get_threshold()
    gc.set_threshold(young, middle, max(old, every))
    try:
        yield
    finally:
        gc.set_threshold(young, middle, old)
