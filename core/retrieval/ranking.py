"""Judgments and rankings, and their meeting: a padded matrix of grades by rank.

Every measure in this package reads one structure, `GradeMatrix`: for each query, the qrels grade
of the document at each rank, plus how many judged documents the query has at each grade. Building
it is the only per-document Python work; the measures are then whole-matrix numpy operations.

Grade codes follow trec_eval's ``form_res_rels.c``: a retrieved document absent from the qrels is
`NOT_JUDGED` (-1), one judged with a negative grade is `NEGATIVE` (-2); padding past the end of a
short ranking is `PAD` (-3). All three are below every relevance threshold (thresholds are >= 0).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from numpy.typing import NDArray

__all__ = [
    "NEGATIVE",
    "NOT_JUDGED",
    "PAD",
    "GradeMatrix",
    "Qrels",
    "Run",
    "trec_order",
]

NOT_JUDGED = -1
NEGATIVE = -2
PAD = -3
_MISSING = int(np.iinfo(np.int64).min)


class Qrels:
    """Graded relevance judgments: ``{query_id: {doc_id: grade}}``. Grades are integers;
    grades <= 0 are judged non-relevant (negative grades are kept, as trec_eval keeps them)."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Mapping[str, int]]) -> None:
        self._data: dict[str, Mapping[str, int]] = dict(data)

    @classmethod
    def from_dict(cls, data: Mapping[str, Mapping[str, int]]) -> Qrels:
        return cls(data)

    def __getitem__(self, qid: str) -> Mapping[str, int]:
        return self._data[qid]

    def __contains__(self, qid: object) -> bool:
        return qid in self._data

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def get(self, qid: str) -> Mapping[str, int] | None:
        return self._data.get(qid)


class Run:
    """Ranked retrieval results: ``{query_id: [doc_id, ...]}`` in rank order (best first).

    Use `Run.from_scores` for scored results: it ranks them as trec_eval does. A ranking must not
    repeat a document (trec_eval rejects that too).
    """

    __slots__ = ("_data", "run_id")

    def __init__(self, rankings: Mapping[str, Sequence[str]], run_id: str | None = None) -> None:
        self._data: dict[str, Sequence[str]] = dict(rankings)
        self.run_id = run_id

    @classmethod
    def from_scores(
        cls, scores: Mapping[str, Mapping[str, float]], run_id: str | None = None
    ) -> Run:
        """Rank ``{qid: {doc_id: score}}`` by trec_eval's rule (see `trec_order`)."""
        return cls({qid: trec_order(docs) for qid, docs in scores.items()}, run_id=run_id)

    def __getitem__(self, qid: str) -> Sequence[str]:
        return self._data[qid]

    def __contains__(self, qid: object) -> bool:
        return qid in self._data

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


def trec_order(scores: Mapping[str, float]) -> list[str]:
    """Order documents as trec_eval does: score descending, ties by doc id *descending*.

    trec_eval sorts with ``strcmp(b, a)`` on ties (``form_res_rels.c``); Python's code-point order
    equals strcmp's byte order on UTF-8. The rank column of a run file is ignored. A numpy argsort
    handles the common untied case; only tied groups fall back to Python sorting.
    """
    n = len(scores)
    if n == 0:
        return []
    docs = list(scores)
    values = np.fromiter(scores.values(), dtype=np.float64, count=n)
    if np.isnan(values).any():
        bad = docs[int(np.flatnonzero(np.isnan(values))[0])]
        raise ValueError(f"score of document {bad!r} is NaN")
    order = np.argsort(-values, kind="stable")
    ranked = values[order]
    if n > 1 and bool((ranked[1:] == ranked[:-1]).any()):
        return [d for _, d in sorted(zip(values.tolist(), docs, strict=True), reverse=True)]
    return [docs[i] for i in order.tolist()]


@dataclass(frozen=True)
class GradeMatrix:
    """Grades by rank for a block of queries.

    ``grades[q, r]`` is the qrels grade of the document at rank r+1 of query q (or a negative code,
    see module doc); ``num_ret[q]`` is the ranking's length; ``level_counts[q, g]`` is how many
    documents query q has judged at grade g (g >= 0), retrieved or not — the ideal rankings of
    nDCG and the denominators of recall and AP come from it.
    """

    qids: tuple[str, ...]
    grades: NDArray[np.int32]
    num_ret: NDArray[np.int64]
    level_counts: NDArray[np.int64]

    @property
    def depth(self) -> int:
        return int(self.grades.shape[1])

    def num_rel(self, level: int) -> NDArray[np.int64]:
        """Judged documents with grade >= level, retrieved or not (trec_eval ``num_rel``)."""
        counts: NDArray[np.int64] = self.level_counts[:, level:].sum(axis=1)
        return counts

    @classmethod
    def build(
        cls,
        qids: Sequence[str],
        qrels: Qrels,
        run: Run,
        *,
        depth: int | None = None,
    ) -> GradeMatrix:
        """Look up each ranked document's grade; ``depth`` truncates rankings (trec_eval ``-M``)."""
        n = len(qids)
        rankings = [run[q] if q in run else () for q in qids]  # noqa: SIM401
        lengths = [len(r) if depth is None else min(len(r), depth) for r in rankings]
        width = max(lengths, default=0)
        grades = np.full((n, width), PAD, dtype=np.int32)
        max_grade = 0
        judged_per_query: list[Mapping[str, int]] = []
        for qid in qids:
            judged = qrels.get(qid) or {}
            judged_per_query.append(judged)
            if judged:
                max_grade = max(max_grade, max(judged.values()))
        level_counts = np.zeros((n, max_grade + 1), dtype=np.int64)
        for row, (qid, ranking, length, judged) in enumerate(
            zip(qids, rankings, lengths, judged_per_query, strict=True)
        ):
            if length:
                docs = ranking if len(ranking) == length else ranking[:length]
                looked_up = np.fromiter(
                    map(judged.get, docs, repeat(_MISSING)), dtype=np.int64, count=length
                )
                negative = looked_up < 0
                if negative.any():
                    looked_up[negative] = np.where(
                        looked_up[negative] == _MISSING, NOT_JUDGED, NEGATIVE
                    )
                grades[row, :length] = looked_up
            if judged:
                values = np.fromiter(judged.values(), dtype=np.int64, count=len(judged))
                values = values[values >= 0]
                if values.size:
                    level_counts[row] = np.bincount(values, minlength=max_grade + 1)
            _check_unique(qid, ranking, length)
        return cls(
            qids=tuple(qids),
            grades=grades,
            num_ret=np.asarray(lengths, dtype=np.int64),
            level_counts=level_counts,
        )


def _check_unique(qid: str, ranking: Sequence[str], length: int) -> None:
    # A set build is cheap next to the lookups above and catches a silent double count.
    if length and len(set(ranking)) != len(ranking):
        seen: set[str] = set()
        for doc in ranking:
            if doc in seen:
                raise ValueError(f"query {qid!r}: document {doc!r} is ranked more than once")
            seen.add(doc)


def iter_blocks(qids: Sequence[str], size: int) -> Iterable[Sequence[str]]:
    """Query blocks bound peak memory to ``size`` rows of the grade matrix."""
    for start in range(0, len(qids), size):
        yield qids[start : start + size]
