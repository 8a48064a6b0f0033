"""Ranking measures over many queries at once, computed exactly as trec_eval computes them.

Each measure is a few numpy operations on a `GradeMatrix` block (queries × ranks). Formulas, with
R = judged documents with grade >= level (trec_eval ``num_rel``) and rel(i) = (grade at rank i
>= level):

* P@k = |rel in top k| / k — divided by k even when fewer than k documents were retrieved;
* recall@k = |rel in top k| / R (0 when R = 0); F1@k = 2·P·R/(P+R) (0 when both are 0);
* success@k (hit rate) = 1 if a relevant document is in the top k;
  recip_rank = 1 / rank of the first relevant document (0 if none);
* AP = Σ_{i: rel(i)} (|rel in top i| / i) / R, summed in rank order (trec_eval ``map``); AP@k
  (``map_cut``) stops the sum at k; R-prec = |rel in top min(R, n)| / R;
* nDCG@k = Σ_{i<=k} gain(g_i) / log2(i+1) divided by the same sum over the ideal ranking of *all*
  judged documents with grade > 0 (``ndcg_cut``; the threshold level does not apply to nDCG).

Sums that trec_eval accumulates in rank order are accumulated in rank order here too
(``np.cumsum``), so values agree to the last bit, not just to 4 decimals.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from .measures import Measure, parse_measures
from .ranking import PAD, GradeMatrix, Qrels, Run, iter_blocks

if TYPE_CHECKING:
    from numpy.typing import NDArray

__all__ = ["RetrievalResult", "compute_block", "evaluate_run"]


@dataclass(frozen=True)
class RetrievalResult:
    """Per-query values of each measure (aligned with ``qids``) and their aggregate.

    The aggregate is trec_eval's ``all`` row: the arithmetic mean over evaluated queries (summed in
    query order), except counts (``num_*``), which are summed.
    """

    qids: tuple[str, ...]
    measures: tuple[Measure, ...]
    values: dict[Measure, NDArray[np.float64]] = field(repr=False)
    run_id: str | None = None

    def __getitem__(self, measure: str | Measure) -> NDArray[np.float64]:
        return self.values[parse_measures([measure])[0]]

    def per_query(self, measure: str | Measure) -> dict[str, float]:
        return dict(zip(self.qids, self[measure].tolist(), strict=True))

    def aggregate(self) -> dict[Measure, float]:
        out: dict[Measure, float] = {}
        n = len(self.qids)
        for measure in self.measures:
            total = sum(self.values[measure].tolist())  # sequential, as trec_eval accumulates
            out[measure] = float(total) if measure.is_count else (total / n if n else 0.0)
        return out


def evaluate_run(
    qrels: Qrels | Mapping[str, Mapping[str, int]],
    run: Run | Mapping[str, Mapping[str, float]],
    measures: Iterable[str | Measure],
    *,
    relevance_level: int = 1,
    complete: bool = False,
    depth: int | None = None,
    block_size: int = 1024,
    run_id: str | None = None,
) -> RetrievalResult:
    """Evaluate a run against qrels, trec_eval style.

    Queries evaluated are those in both the run and the qrels, sorted by id (trec_eval's rule);
    ``complete=True`` evaluates every qrels query, an absent ranking counting as empty (``-c``).
    ``relevance_level`` is the smallest grade counted relevant (``-l``). A `Run` holds ranked
    lists; a mapping ``{qid: {doc: score}}`` is ranked as trec_eval ranks (see `trec_order`).
    Memory is bounded by ``block_size`` queries.
    """
    if relevance_level < 0:
        raise ValueError("relevance_level must be >= 0")
    q = qrels if isinstance(qrels, Qrels) else Qrels(qrels)
    wanted = tuple(parse_measures(measures))
    qids = sorted(q) if complete else sorted(qid for qid in run if qid in q)
    parts: dict[Measure, list[NDArray[np.float64]]] = {m: [] for m in wanted}
    for block in iter_blocks(qids, block_size):
        if isinstance(run, Run):
            matrix = GradeMatrix.from_rankings(block, q, run, depth=depth)
        else:
            matrix = GradeMatrix.from_scores(block, q, run, depth=depth)
        for measure, block_values in compute_block(matrix, wanted, relevance_level).items():
            parts[measure].append(block_values)
    values = {
        m: (np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.float64))
        for m, chunks in parts.items()
    }
    if run_id is None and isinstance(run, Run):
        run_id = run.run_id
    return RetrievalResult(tuple(qids), wanted, values, run_id=run_id)


class _Block:
    """Lazily shared intermediates of one block, so asking for ten measures costs one cumsum."""

    def __init__(self, matrix: GradeMatrix, level: int) -> None:
        self.m = matrix
        self.level = level
        self.n, self.width = matrix.grades.shape
        self._cache: dict[str, NDArray[np.float64] | NDArray[np.int64] | NDArray[np.bool_]] = {}

    @property
    def rel(self) -> NDArray[np.bool_]:
        hit = self._cache.get("rel")
        if hit is None:
            hit = self._cache["rel"] = self.m.grades >= self.level
        return hit  # type: ignore[return-value]

    @property
    def cum_rel(self) -> NDArray[np.int64]:
        hit = self._cache.get("cum_rel")
        if hit is None:
            hit = self._cache["cum_rel"] = np.cumsum(self.rel, axis=1, dtype=np.int64)
        return hit  # type: ignore[return-value]

    @property
    def num_rel(self) -> NDArray[np.int64]:
        hit = self._cache.get("num_rel")
        if hit is None:
            hit = self._cache["num_rel"] = self.m.num_rel(self.level)
        return hit  # type: ignore[return-value]

    @property
    def num_rel_ret(self) -> NDArray[np.int64]:
        return self.at(self.cum_rel, self.width).astype(np.int64)

    @property
    def ap_prefix(self) -> NDArray[np.float64]:
        """Running sum of precision at each relevant rank (rank-ordered, like trec_eval)."""
        hit = self._cache.get("ap_prefix")
        if hit is None:
            ranks = np.arange(1, self.width + 1, dtype=np.float64)
            prec = np.where(self.rel, self.cum_rel / ranks, 0.0)
            hit = self._cache["ap_prefix"] = np.cumsum(prec, axis=1)
        return hit  # type: ignore[return-value]

    def at(self, prefix: NDArray[np.float64] | NDArray[np.int64], k: int) -> NDArray[np.float64]:
        """Value of a running sum after rank k (the last rank if the ranking is shorter)."""
        if self.width == 0:
            return np.zeros(self.n, dtype=np.float64)
        return prefix[:, min(k, self.width) - 1].astype(np.float64)

    def per_rel(self, numer: NDArray[np.float64]) -> NDArray[np.float64]:
        """numer / R, and 0 where R = 0 (trec_eval leaves such values at 0)."""
        denom = self.num_rel.astype(np.float64)
        return np.divide(numer, denom, out=np.zeros(self.n), where=denom > 0)


def _discount_prefix(length: int) -> NDArray[np.float64]:
    """D[j] = Σ_{i<j} 1/log2(i+2): the discounted weight of the first j ranks."""
    out = np.zeros(length + 1, dtype=np.float64)
    np.cumsum(1.0 / np.log2(np.arange(2, length + 2, dtype=np.float64)), out=out[1:])
    return out


def _level_gains(measure: Measure, levels: int) -> NDArray[np.float64]:
    grades = np.arange(levels, dtype=np.float64)
    if measure.gain == "exponential":
        exponential: NDArray[np.float64] = np.exp2(grades) - 1.0
        return exponential
    gains: NDArray[np.float64] = grades.copy()
    for level, gain in measure.gain_map:
        if 0 <= level < levels:
            gains[level] = gain
    return gains


def _ideal_dcg(
    block: _Block, measure: Measure, cutoffs: Sequence[int | None]
) -> list[NDArray[np.float64]]:
    """Ideal DCG at each cutoff, from the per-grade counts alone.

    The ideal ranking lists judged documents by gain, highest first; a run of c documents of gain
    g starting at rank s adds g·(D[s+c] − D[s]), truncated at the cutoff. With few grades this is
    O(queries × grades) instead of a sort per query.
    """
    counts = block.m.level_counts
    levels = counts.shape[1]
    gains = _level_gains(measure, levels)
    if measure.family == "ndcg_cut":
        gains[0] = 0.0  # ndcg_cut: the ideal is built from grades > 0 only
    order = [g for g in np.argsort(-gains, kind="stable").tolist() if gains[g] > 0]
    if not order:
        return [np.zeros(block.n) for _ in cutoffs]
    ordered = counts[:, order]
    ends = np.cumsum(ordered, axis=1)
    starts = ends - ordered
    disc = _discount_prefix(int(ends[:, -1].max()))
    out = []
    for k in cutoffs:
        e = ends if k is None else np.minimum(ends, k)
        s = starts if k is None else np.minimum(starts, k)
        ideal: NDArray[np.float64] = ((disc[e] - disc[s]) * gains[order]).sum(axis=1)
        out.append(ideal)
    return out


def _result_gains(block: _Block, measure: Measure) -> NDArray[np.float64]:
    grades = block.m.grades
    if measure.family == "ndcg_cut" or not measure.gain_map:
        positive = grades > 0
        if measure.gain == "exponential":
            return np.where(positive, np.exp2(np.maximum(grades, 0)) - 1.0, 0.0)
        return np.where(positive, grades, 0).astype(np.float64)
    # Uncut ndcg with trec_eval gain overrides: any grade code may be mapped, even negatives.
    top = max(int(grades.max(initial=0)), block.m.level_counts.shape[1] - 1)
    table = np.zeros(top + 1 - PAD, dtype=np.float64)
    table[-PAD:] = _level_gains(measure, top + 1)
    for level, gain in measure.gain_map:
        if PAD < level < 0:
            table[level - PAD] = gain
    mapped: NDArray[np.float64] = table[grades - PAD]
    return mapped


def _ndcg(block: _Block, measures: Sequence[Measure]) -> dict[Measure, NDArray[np.float64]]:
    out: dict[Measure, NDArray[np.float64]] = {}
    groups: dict[tuple[str, str, tuple[tuple[int, float], ...]], list[Measure]] = {}
    for m in measures:
        groups.setdefault((m.family, m.gain, m.gain_map), []).append(m)
    for group in groups.values():
        first = group[0]
        if block.width:
            disc = 1.0 / np.log2(np.arange(2, block.width + 2, dtype=np.float64))
            dcg_prefix = np.cumsum(_result_gains(block, first) * disc, axis=1)
        else:
            dcg_prefix = np.zeros((block.n, 0))
        ideals = _ideal_dcg(block, first, [m.cutoff for m in group])
        for m, ideal in zip(group, ideals, strict=True):
            dcg = block.at(dcg_prefix, m.cutoff if m.cutoff is not None else block.width)
            out[m] = np.divide(dcg, ideal, out=np.zeros(block.n), where=ideal > 0)
    return out


def compute_block(
    matrix: GradeMatrix, measures: Sequence[Measure], level: int
) -> dict[Measure, NDArray[np.float64]]:
    """All requested measures for one block of queries."""
    b = _Block(matrix, level)
    out: dict[Measure, NDArray[np.float64]] = {}
    ndcgs = [m for m in measures if m.family in {"ndcg", "ndcg_cut"}]
    if ndcgs:
        out.update(_ndcg(b, ndcgs))
    for m in measures:
        f, k = m.family, m.cutoff
        if f in {"ndcg", "ndcg_cut"}:
            continue
        if f == "num_q":
            out[m] = np.ones(b.n)
        elif f == "num_ret":
            out[m] = matrix.num_ret.astype(np.float64)
        elif f == "num_rel":
            out[m] = b.num_rel.astype(np.float64)
        elif f == "num_rel_ret":
            out[m] = b.num_rel_ret.astype(np.float64)
        elif f == "P":
            assert k is not None
            out[m] = b.at(b.cum_rel, k) / k
        elif f == "recall":
            assert k is not None
            out[m] = b.per_rel(b.at(b.cum_rel, k))
        elif f == "F1":
            assert k is not None
            p = b.at(b.cum_rel, k) / k
            r = b.per_rel(b.at(b.cum_rel, k))
            out[m] = np.divide(2 * p * r, p + r, out=np.zeros(b.n), where=(p + r) > 0)
        elif f == "success":
            assert k is not None
            out[m] = (b.at(b.cum_rel, k) > 0).astype(np.float64)
        elif f == "recip_rank":
            if b.width:
                first = np.argmax(b.rel, axis=1)
                found = b.rel[np.arange(b.n), first]
                out[m] = np.where(found, 1.0 / (first + 1.0), 0.0)
            else:
                out[m] = np.zeros(b.n)
        elif f == "map":
            out[m] = b.per_rel(b.at(b.ap_prefix, b.width))
        elif f == "map_cut":
            assert k is not None
            out[m] = b.per_rel(b.at(b.ap_prefix, k))
        elif f == "Rprec":
            look = np.minimum(matrix.num_ret, b.num_rel)
            value = np.zeros(b.n)
            has = look > 0
            if has.any():
                rows = np.flatnonzero(has)
                value[rows] = b.cum_rel[rows, look[rows] - 1] / b.num_rel[rows]
            out[m] = value
        else:
            raise ValueError(f"measure {m.name!r} is not a ranking measure of a run")
    return out
