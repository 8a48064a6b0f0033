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
from itertools import chain, repeat
from typing import TYPE_CHECKING, Any, Generic, TypeVar

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

V = TypeVar("V")


class _ByQuery(Generic[V]):
    """A read-only table keyed by query id: what `Qrels` and `Run` both are to the measures."""

    __slots__ = ()
    _data: dict[str, V]

    def __getitem__(self, qid: str) -> V:
        return self._data[qid]

    def __contains__(self, qid: object) -> bool:
        return qid in self._data

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


class Qrels(_ByQuery[Mapping[str, int]]):
    """Graded relevance judgments: ``{query_id: {doc_id: grade}}``. Grades are integers;
    grades <= 0 are judged non-relevant (negative grades are kept, as trec_eval keeps them)."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Mapping[str, int]]) -> None:
        self._data: dict[str, Mapping[str, int]] = dict(data)

    @classmethod
    def from_dict(cls, data: Mapping[str, Mapping[str, int]]) -> Qrels:
        return cls(data)

    def get(self, qid: str) -> Mapping[str, int] | None:
        return self._data.get(qid)


class Run(_ByQuery[Sequence[str]]):
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
    def from_rankings(
        cls,
        qids: Sequence[str],
        qrels: Qrels,
        rankings: Mapping[str, Sequence[str]] | Run,
        *,
        depth: int | None = None,
    ) -> GradeMatrix:
        """Grades of pre-ranked lists (a `Run`, or the contexts of samples); ``depth`` truncates
        rankings (trec_eval ``-M``). A document ranked twice in one list is an error."""
        lists = [rankings[q] if q in rankings else () for q in qids]  # noqa: SIM401
        lengths = np.array(
            [len(r) if depth is None else min(len(r), depth) for r in lists], dtype=np.int64
        )
        for qid, ranking in zip(qids, lists, strict=True):
            _check_unique(qid, ranking)
        judged = [qrels.get(q) or {} for q in qids]
        flat = np.fromiter(
            chain.from_iterable(
                map(j.get, r if len(r) == k else r[:k], repeat(_MISSING))
                for j, r, k in zip(judged, lists, lengths.tolist(), strict=True)
            ),
            dtype=np.int64,
            count=int(lengths.sum()),
        )
        grades = _scatter_rows(_encode(flat), lengths, PAD, np.int32)
        return cls(tuple(qids), grades, lengths, _level_counts(judged))

    @classmethod
    def from_scores(
        cls,
        qids: Sequence[str],
        qrels: Qrels,
        scores: Mapping[str, Mapping[str, float]],
        *,
        depth: int | None = None,
    ) -> GradeMatrix:
        """Grades of scored results, ranked as trec_eval ranks them (see `trec_order`).

        The whole block is ranked by one row-wise numpy sort; doc ids are consulted only for the
        rare groups of tied scores. No per-query ranked list is ever built, which is what makes
        this path faster than trec_eval's own C through pytrec_eval.
        """
        dicts: list[Mapping[str, float]] = [scores.get(q) or {} for q in qids]
        lengths = np.array([len(d) for d in dicts], dtype=np.int64)
        total = int(lengths.sum())
        values = np.fromiter(
            chain.from_iterable(d.values() for d in dicts), dtype=np.float64, count=total
        )
        if np.isnan(values).any():
            row = int(
                np.searchsorted(np.cumsum(lengths), np.flatnonzero(np.isnan(values))[0], "right")
            )
            raise ValueError(f"query {qids[row]!r}: a document has a NaN score")
        judged = [qrels.get(q) or {} for q in qids]
        flat = np.fromiter(
            chain.from_iterable(
                map(j.get, d, repeat(_MISSING)) for j, d in zip(judged, dicts, strict=True)
            ),
            dtype=np.int64,
            count=total,
        )
        # -inf pads sort last under the descending order below.
        neg = _scatter_rows(-values, lengths, np.inf, np.float64)
        grades = _scatter_rows(_encode(flat), lengths, PAD, np.int32)
        order = np.argsort(neg, axis=1, kind="stable")
        ranked = np.take_along_axis(neg, order, axis=1)
        if ranked.shape[1] > 1:
            tied = (ranked[:, 1:] == ranked[:, :-1]) & np.isfinite(ranked[:, 1:])
            for row in np.flatnonzero(tied.any(axis=1)).tolist():
                _break_ties(order[row], ranked[row], tied[row], list(dicts[row]))
        grades = np.take_along_axis(grades, order, axis=1)
        if depth is not None and grades.shape[1] > depth:
            grades = np.ascontiguousarray(grades[:, :depth])
            lengths = np.minimum(lengths, depth)
        return cls(tuple(qids), grades, lengths, _level_counts(judged))


def _encode(looked_up: NDArray[np.int64]) -> NDArray[np.int64]:
    """Map qrels lookups to grade codes: missing -> NOT_JUDGED, negative grade -> NEGATIVE."""
    negative = looked_up < 0
    if negative.any():
        looked_up[negative] = np.where(looked_up[negative] == _MISSING, NOT_JUDGED, NEGATIVE)
    return looked_up


def _scatter_rows(
    flat: NDArray[Any], lengths: NDArray[np.int64], fill: float, dtype: type[Any]
) -> NDArray[Any]:
    """Lay concatenated per-query values out as a padded (queries x max length) matrix."""
    width = int(lengths.max(initial=0))
    out = np.full((len(lengths), width), fill, dtype=dtype)
    out[np.arange(width) < lengths[:, None]] = flat
    return out


def _break_ties(
    order: NDArray[np.intp], ranked: NDArray[np.float64], tied: NDArray[np.bool_], docs: list[str]
) -> None:
    """Reorder each run of equal scores by doc id, descending (trec_eval's ``strcmp(b, a)``)."""
    edges = np.flatnonzero(np.diff(np.concatenate(([False], tied, [False])).astype(np.int8)))
    for start, stop in zip(edges[::2].tolist(), edges[1::2].tolist(), strict=True):
        group = order[start : stop + 1].tolist()
        order[start : stop + 1] = sorted(group, key=docs.__getitem__, reverse=True)


def _level_counts(judged: Sequence[Mapping[str, int]]) -> NDArray[np.int64]:
    """level_counts[q, g]: documents judged at grade g >= 0 for each query, in one bincount."""
    sizes = np.array([len(j) for j in judged], dtype=np.int64)
    grades = np.fromiter(
        chain.from_iterable(j.values() for j in judged), dtype=np.int64, count=int(sizes.sum())
    )
    rows = np.repeat(np.arange(len(judged), dtype=np.int64), sizes)
    keep = grades >= 0
    levels = int(grades.max(initial=0)) + 1
    counts = np.bincount(rows[keep] * levels + grades[keep], minlength=len(judged) * levels)
    return counts.reshape(len(judged), levels)


def _check_unique(qid: str, ranking: Sequence[str]) -> None:
    # A set build is cheap next to the lookups and catches a silent double count.
    if len(set(ranking)) != len(ranking):
        seen: set[str] = set()
        for doc in ranking:
            if doc in seen:
                raise ValueError(f"query {qid!r}: document {doc!r} is ranked more than once")
            seen.add(doc)


def iter_blocks(qids: Sequence[str], size: int) -> Iterable[Sequence[str]]:
    """Query blocks bound peak memory to ``size`` rows of the grade matrix."""
    for start in range(0, len(qids), size):
        yield qids[start : start + size]
