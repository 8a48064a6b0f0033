"""Split an eval set into a dev half (look at it, tune on it) and a held-out test half.

Three properties, each because a split that lacks it quietly stops being held out:

* **Determined by the seed and the samples, not by the file's line order.** Each sample gets a
  rank, ``sha256("ragbridge-split\\0{seed}\\0{id}")``; within each stratum the lowest ranks go
  to dev. Sorting or shuffling the file, or appending to it and splitting again, moves no sample
  across the boundary except where the counts force it (an added sample shifts the cut by one).
* **Stratified by no-answer vs answerable** (`stratum`): each half gets the file's share of
  no-answer questions, within rounding, so neither half measures a different mix of tasks.
* **Duplicates kept together.** Questions that are exact or near duplicates of each other
  (`duplicate_groups`, the rule the leak check applies later) go to the same half as one unit,
  ranked by their lowest member. Otherwise a file with a question asked twice is split into a
  leak on day one, and the leak check would rightly complain about a split it just made.

Sizes: per stratum of *n* samples, the test half gets ``round(n · (1 - dev_share))``, ties
rounded up (the test half is the one whose numbers get reported), and dev the rest. Groups are
placed greedily in rank order (a group that would overfill dev goes to test), so with duplicates
a stratum's sizes may differ from that by the size of a group.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ..sample import Sample
from .leaks import NEAR_DUPLICATE, duplicate_groups

__all__ = ["ANSWERABLE", "NO_ANSWER", "STRATA", "Split", "split_samples", "stratum"]

NO_ANSWER = "no-answer"
ANSWERABLE = "answerable"
STRATA = (ANSWERABLE, NO_ANSWER)


def stratum(sample: Sample) -> str:
    """``no-answer`` for a sample labelled as having no relevant document (`Sample.is_no_answer`:
    ``relevance == {}`` or every grade <= 0), else ``answerable`` (unlabelled samples too:
    nothing says they have no answer)."""
    return NO_ANSWER if sample.is_no_answer else ANSWERABLE


def rank(sample_id: str, seed: int) -> str:
    """The sample's place in the split's order for ``seed``: lower ranks go to dev."""
    return hashlib.sha256(f"ragbridge-split\0{seed}\0{sample_id}".encode()).hexdigest()


@dataclass(frozen=True)
class Split:
    """The two halves, each in the input's order."""

    dev: list[Sample]
    test: list[Sample]
    seed: int
    dev_share: float
    duplicate_groups: list[list[str]]
    """Groups of duplicate questions (two or more ids) kept in one half."""

    def counts(self) -> dict[str, dict[str, int]]:
        """``{"dev": {"answerable": n, "no-answer": m}, "test": {...}}``."""
        return {
            "dev": _count(self.dev),
            "test": _count(self.test),
        }


def _count(samples: Iterable[Sample]) -> dict[str, int]:
    out = dict.fromkeys(STRATA, 0)
    for sample in samples:
        out[stratum(sample)] += 1
    return out


def held_out_size(n: int, dev_share: float) -> int:
    """``round(n · (1 - dev_share))`` with a tie going to test."""
    return math.floor(n * (1.0 - dev_share) + 0.5 + 1e-9)


def split_samples(
    samples: Iterable[Sample],
    dev_share: float,
    seed: int,
    *,
    stratify: bool = True,
    keep_duplicates_together: bool = True,
    near_duplicate: float = NEAR_DUPLICATE,
) -> Split:
    """Split ``samples`` into dev (``dev_share`` of them) and test; see the module docstring.

    Raises ``ValueError`` for a share outside (0, 1), a duplicate sample id, or a split that
    would leave a half empty.
    """
    if not (math.isfinite(dev_share) and 0.0 < dev_share < 1.0):
        raise ValueError(f"the dev share must lie within (0, 1), got {dev_share}")
    items = list(samples)
    by_id = _by_id(items)
    groups: list[list[str]] = []
    if keep_duplicates_together:
        groups = duplicate_groups({s.id: s.question for s in items}, threshold=near_duplicate)
    ranks = {s.id: rank(s.id, seed) for s in items}
    dev_ids: set[str] = set()
    for members in _units_by_stratum(items, groups, by_id, stratify).values():
        dev_ids.update(_dev_units(members, ranks, dev_share))
    dev = [s for s in items if s.id in dev_ids]
    test = [s for s in items if s.id not in dev_ids]
    if not dev or not test:
        raise ValueError(
            f"{len(items)} {'sample is' if len(items) == 1 else 'samples are'} too few to split "
            f"with a dev share of {dev_share:g}: "
            f"{'dev' if not dev else 'test'} would be empty"
        )
    kept = sorted((sorted(g, key=ranks.__getitem__) for g in groups), key=lambda g: ranks[g[0]])
    return Split(dev, test, seed, dev_share, kept)


def _by_id(items: Sequence[Sample]) -> dict[str, Sample]:
    """The samples by id; a repeated id is refused (a split is a partition of ids)."""
    by_id: dict[str, Sample] = {}
    for sample in items:
        if sample.id in by_id:
            raise ValueError(f"duplicate sample id {sample.id!r}: ids must be unique to split")
        by_id[sample.id] = sample
    return by_id


def _units_by_stratum(
    items: Sequence[Sample],
    groups: list[list[str]],
    by_id: Mapping[str, Sample],
    stratify: bool,
) -> dict[str, list[list[str]]]:
    """The units a split places, by stratum: each duplicate group is one unit, every other
    sample a unit of its own (one stratum, ``all``, when not stratified)."""
    grouped = {sid for group in groups for sid in group}
    units = groups + [[s.id] for s in items if s.id not in grouped]
    strata: dict[str, list[list[str]]] = {}
    for unit in units:
        key = _unit_stratum([by_id[sid] for sid in unit]) if stratify else "all"
        strata.setdefault(key, []).append(unit)
    return strata


def _dev_units(members: list[list[str]], ranks: Mapping[str, str], dev_share: float) -> set[str]:
    """The ids of one stratum that go to dev: units in rank order (a unit ranks as its lowest
    member) while they fit the room `held_out_size` leaves; a unit too big for what is left goes
    to test."""
    members.sort(key=lambda unit: min(ranks[sid] for sid in unit))
    n = sum(len(unit) for unit in members)
    room = n - held_out_size(n, dev_share)
    chosen: set[str] = set()
    for unit in members:
        if len(unit) <= room:
            chosen.update(unit)
            room -= len(unit)
    return chosen


def _unit_stratum(members: Sequence[Sample]) -> str:
    """A duplicate group's stratum: its majority's (a tie counts as answerable). Mixed groups
    are rare: the same question labelled no-answer once and answerable once is a label error."""
    no_answer = sum(stratum(s) == NO_ANSWER for s in members)
    return NO_ANSWER if no_answer * 2 > len(members) else ANSWERABLE
