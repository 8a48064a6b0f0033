"""The run's `Evaluation`, joined from its kept partitions in input order while the run goes on.

Each finished partition is written to the parts folder first (`PartStore`), and what the run
returns is read back from there, so a fresh run and a rerun that reuses kept parts give the
same cells. Reading them back only after the last partition, though, was a pause of its own:
1.5 s for 20,000 cells, after the last judge call, while the client had sat mostly idle during
the run. So `Joiner` takes each partition as soon as every partition before it is kept: the
cells reach ``on_result`` and the evaluation in input order, during the run, and the end of the
run has at most the partitions that finished out of order left to read. A partition is read
from its file when its turn comes, never held in memory beside it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ragbridge.core.id_spill import IdLedger
from ragbridge.core.results.evaluation import Evaluation, Score
from ragbridge.core.results.id_check import IdCheck, note_id_warnings
from ragbridge.core.scoring.partitions import PartStore, combine_metadata
from ragbridge.core.scoring.runner import OnResult

__all__ = ["Joiner"]


class Joiner:
    """Joins the partitions of ``order`` (their indices, in input order) as they are kept."""

    def __init__(self, store: PartStore, *, on_result: OnResult | None, keep: bool) -> None:
        self.store = store
        self.on_result = on_result
        self.keep = keep
        self.evaluation = Evaluation()
        self.metadata: list[dict[str, Any]] = []
        self.ids = IdCheck()
        self.seen = IdLedger()  # ids were checked before the run: a guard, in bounded memory
        self.order: list[int] = []
        self.kept: set[int] = set()
        self.joined = 0
        """How many of ``order`` are joined (a prefix)."""

    def expect(self, order: Sequence[int]) -> None:
        """The run's partitions, in input order (known once they are planned)."""
        self.order = list(order)
        self.advance()

    def ready(self, index: int, *, now: bool = True) -> None:
        """Partition ``index`` is kept in the store: join it, and any it was holding back
        (not ``now``: at the next partition kept, e.g. while those of a rerun are submitted)."""
        self.kept.add(index)
        if now:
            self.advance()

    def advance(self) -> None:
        while self.joined < len(self.order) and self.order[self.joined] in self.kept:
            index = self.order[self.joined]
            self.kept.discard(index)
            self._take(index)
            self.joined += 1

    def finish(self, indices: Sequence[int]) -> Evaluation:
        """The evaluation of ``indices`` (the kept partitions, in order; a prefix is joined)."""
        done = set(self.order[: self.joined])
        for index in indices:
            if index not in done:
                self._take(index)
        repeat = self.seen.finish()  # past the ledger's spill, a repeat is found here
        self.close()
        if repeat is not None:
            raise repeated(repeat.sample_id, repeat.again[0])
        self.evaluation.metadata = combine_metadata(self.metadata)
        return self.evaluation

    def close(self) -> None:
        self.seen.close()

    def warned(self, evaluation: Evaluation) -> Evaluation:
        """``evaluation`` with the run's id warnings (over every partition) noted."""
        return note_id_warnings(evaluation, self.ids)

    def _take(self, index: int) -> None:
        part = self.store.read(index)
        self.metadata.append(part.metadata)
        by_sample: dict[str, list[Score]] = {}
        for sample_id, metric, score in part:
            if sample_id not in by_sample and self.seen.add(sample_id, (index, 0)) is not None:
                self.close()
                raise repeated(sample_id, index)
            by_sample.setdefault(sample_id, []).append(score)
            if self.keep:
                self.evaluation.add(sample_id, metric, score)
            if self.on_result is not None:
                self.on_result(sample_id, metric, score)
        for sample_id, scores in by_sample.items():
            self.ids.add_scores(sample_id, scores)


def repeated(sample_id: str, index: int) -> ValueError:
    return ValueError(
        f"duplicate sample id {sample_id!r} (in partition {index} and an earlier one)"
    )
