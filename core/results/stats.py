"""Statistics over scores, as ordinary functions over arrays.

Confidence intervals and significance tests say whether a difference between two runs is larger
than the noise of a few dozen samples; agreement statistics (kappa, Spearman, Pearson, AUROC) say
whether an LLM judge agrees with human labels. All of them are seeded and reproducible, and none
returns NaN: an undefined statistic (e.g. a correlation with a constant input) raises ValueError.

Only numpy and the standard library are used.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:
    from .evaluation import Evaluation

__all__ = [
    "Comparison",
    "MeanCI",
    "auroc",
    "bootstrap_ci",
    "cohen_kappa",
    "compare",
    "mean_ci",
    "paired_bootstrap_ci",
    "paired_permutation_test",
    "pearson",
    "spearman",
]

FloatArray = npt.NDArray[np.float64]
Alternative = Literal["two-sided", "greater", "less"]

#: Upper bound on the number of array elements drawn at once by the resampling loops (~8 MB).
_CHUNK_ELEMENTS = 1 << 20

#: Exact enumeration of all 2**n sign patterns up to this n (2**16 = 65 536 patterns).
_EXACT_MAX_N = 16


def sorted_scale(labels: Iterable[Hashable], refusal: str) -> list[Hashable]:
    """``labels`` in sorted order: the positions a weighted agreement measure takes distances
    between. Labels that cannot be compared raise ValueError ``"{refusal}: {why}"``."""
    try:
        return sorted(labels)  # type: ignore[type-var]
    except TypeError as exc:
        raise ValueError(f"{refusal}: {exc}") from None


def _as_values(values: npt.ArrayLike, name: str = "values", *, min_n: int = 1) -> FloatArray:
    """``values`` as a finite 1-D float64 array with at least ``min_n`` entries, or ValueError."""
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be numbers: {exc}") from None
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if arr.size < min_n:
        raise ValueError(f"{name} needs at least {min_n} value(s), got {arr.size}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite; got NaN or infinity")
    return arr


def _as_pair(
    a: npt.ArrayLike, b: npt.ArrayLike, *, min_n: int = 1
) -> tuple[FloatArray, FloatArray]:
    x = _as_values(a, "a", min_n=min_n)
    y = _as_values(b, "b", min_n=min_n)
    if x.shape != y.shape:
        raise ValueError(f"a and b must have the same length, got {x.size} and {y.size}")
    return x, y


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence!r}")


def _check_resamples(n_resamples: int) -> None:
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")


def _chunks(total: int, width: int) -> Iterator[int]:
    """Row counts of successive chunks, each at most ``_CHUNK_ELEMENTS`` elements wide."""
    rows = max(1, _CHUNK_ELEMENTS // max(1, width))
    done = 0
    while done < total:
        step = min(rows, total - done)
        yield step
        done += step


# -- confidence intervals --------------------------------------------------------------------------


def bootstrap_ci(
    values: npt.ArrayLike,
    *,
    statistic: Callable[..., Any] = np.mean,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of ``statistic(values)``.

    Draw ``n_resamples`` samples of size n with replacement, compute the statistic of each, and
    return the ``(1 - confidence) / 2`` and ``(1 + confidence) / 2`` quantiles of those statistics
    (Efron & Tibshirani 1993, *An Introduction to the Bootstrap*, ch. 13). ``statistic`` must
    accept ``axis=1`` like the numpy reductions. Resamples are drawn in chunks, so memory stays
    bounded for large n; the same ``seed`` gives the same interval.

    With a single value, or all values equal, every resample is the same and the interval
    collapses to ``(statistic(values), statistic(values))``.
    """
    arr = _as_values(values)
    _check_confidence(confidence)
    _check_resamples(n_resamples)
    if arr.size == 1 or np.all(arr == arr[0]):
        point = float(statistic(arr))
        return point, point
    rng = np.random.default_rng(seed)
    n = arr.size
    stats = np.empty(n_resamples, dtype=np.float64)
    filled = 0
    for rows in _chunks(n_resamples, n):
        idx = rng.integers(0, n, size=(rows, n))
        stats[filled : filled + rows] = np.asarray(statistic(arr[idx], axis=1), dtype=np.float64)
        filled += rows
    alpha = 1.0 - confidence
    low, high = np.quantile(stats, [alpha / 2.0, 1.0 - alpha / 2.0])
    return float(low), float(high)


class MeanCI(NamedTuple):
    """A mean with its bootstrap confidence interval over ``n`` values."""

    mean: float
    low: float
    high: float
    n: int


def mean_ci(
    values: npt.ArrayLike,
    *,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> MeanCI:
    """Mean of ``values`` with its percentile bootstrap CI (see :func:`bootstrap_ci`).

    The interval is clipped to ``[min(values), max(values)]``, where a mean always lies, so
    floating-point rounding cannot push a bound of [0, 1] scores outside [0, 1].
    """
    arr = _as_values(values)
    lo_v, hi_v = float(arr.min()), float(arr.max())
    if lo_v == hi_v:
        return MeanCI(lo_v, lo_v, lo_v, int(arr.size))
    mean = min(max(float(np.mean(arr)), lo_v), hi_v)
    _check_confidence(confidence)
    _check_resamples(n_resamples)
    grouped = _grouped_mean_ci(arr, confidence=confidence, n_resamples=n_resamples, seed=seed)
    if grouped is None:
        grouped = bootstrap_ci(arr, confidence=confidence, n_resamples=n_resamples, seed=seed)
    low, high = grouped
    return MeanCI(mean, max(low, lo_v), min(high, hi_v), int(arr.size))


#: Below this many values `mean_ci` always resamples the values themselves (`bootstrap_ci`).
_GROUPED_MIN_N = 10_000
#: The grouped bootstrap is used when the values take at most n / this many distinct values.
_GROUPED_SPARSITY = 32


def _grouped_mean_ci(
    arr: FloatArray, *, confidence: float, n_resamples: int, seed: int
) -> tuple[float, float] | None:
    """The percentile bootstrap CI of the mean drawn through counts per distinct value, or None
    where that does not pay (fewer than `_GROUPED_MIN_N` values, or too many distinct ones).

    A resample of n values with replacement is, as far as its mean goes, only how many times
    it holds each distinct value: a multinomial draw of n over the distinct values with their
    observed shares. Drawing those counts (distinct values × resamples) instead of n indices
    per resample gives the same bootstrap distribution of the mean at a fraction of the cost
    when scores take few values (ranking measures, exact match, token F1 over short answers:
    100,000 values × 2,000 resamples cost 1.6 s per metric resampled value by value). Only the
    random draws differ from `bootstrap_ci`'s, so an interval agrees with it to within the
    bootstrap's own Monte Carlo error, and a seed still gives the same interval.
    """
    n = arr.size
    if n < _GROUPED_MIN_N:
        return None
    values, counts = np.unique(arr, return_counts=True)
    if values.size * _GROUPED_SPARSITY > n:
        return None
    rng = np.random.default_rng(seed)
    draws = rng.multinomial(n, counts / n, size=n_resamples)
    means = (draws @ values) / n
    alpha = 1.0 - confidence
    low, high = np.quantile(means, [alpha / 2.0, 1.0 - alpha / 2.0])
    return float(low), float(high)


def paired_bootstrap_ci(
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    *,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float]:
    """Bootstrap CI of the mean paired difference ``mean(b - a)``.

    Resampling the differences (not a and b separately) keeps each sample's pairing, which removes
    the between-sample variance that dominates RAG score differences.
    """
    x, y = _as_pair(a, b)
    return bootstrap_ci(y - x, confidence=confidence, n_resamples=n_resamples, seed=seed)


# -- significance -------------------------------------------------------------------------------


def paired_permutation_test(
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    *,
    n_resamples: int = 10000,
    seed: int = 0,
    alternative: Alternative = "two-sided",
) -> float:
    """p-value of the paired sign-flip (randomisation) test of ``mean(b - a) = 0``.

    Under the null hypothesis each paired difference ``d_i = b_i - a_i`` is as likely to have
    either sign, so the statistic ``T = sum(s_i * d_i)`` over sign patterns ``s`` in {-1, +1}^n is
    the reference distribution for the observed ``T_obs = sum(d_i)`` (Fisher 1935; for IR
    evaluation, Smucker, Allan & Carterette 2007, CIKM). The p-value counts patterns with
    ``|T| >= |T_obs|`` (two-sided), ``T >= T_obs`` (greater: b better) or ``T <= T_obs`` (less).

    For n <= 16 all 2**n patterns are enumerated and ``p = k / 2**n`` is exact. Otherwise
    ``n_resamples`` random patterns are drawn and ``p = (k + 1) / (n_resamples + 1)``
    (Phipson & Smyth 2010, "Permutation p-values should never be zero"). All differences zero
    gives p = 1.0.
    """
    x, y = _as_pair(a, b)
    if alternative not in ("two-sided", "greater", "less"):
        raise ValueError(
            f"alternative must be 'two-sided', 'greater' or 'less', got {alternative!r}"
        )
    _check_resamples(n_resamples)
    d = y - x
    if not np.any(d):
        return 1.0
    observed = float(d.sum())
    # Sums over different sign patterns round differently; ties within this tolerance count.
    tol = 1e-9 * float(np.abs(d).sum())

    def count_extreme(totals: FloatArray) -> int:
        if alternative == "two-sided":
            return int(np.count_nonzero(np.abs(totals) >= abs(observed) - tol))
        if alternative == "greater":
            return int(np.count_nonzero(totals >= observed - tol))
        return int(np.count_nonzero(totals <= observed + tol))

    n = d.size
    if n <= _EXACT_MAX_N:
        n_patterns = 1 << n
        patterns = np.arange(n_patterns, dtype=np.int64)[:, None] >> np.arange(n, dtype=np.int64)
        signs = 1.0 - 2.0 * (patterns & 1)
        return count_extreme(signs @ d) / n_patterns
    rng = np.random.default_rng(seed)
    k = 0
    for rows in _chunks(n_resamples, n):
        signs = 1.0 - 2.0 * rng.integers(0, 2, size=(rows, n))
        k += count_extreme(signs @ d)
    return (k + 1) / (n_resamples + 1)


class Comparison(BaseModel):
    """Run b against run a on one metric, over the samples scored in both.

    ``diff = mean_b - mean_a``, with a paired bootstrap CI and a paired permutation p-value.
    Means, diff and p-value are None when no sample is scored in both; the CI is None with fewer
    than two pairs.
    """

    model_config = ConfigDict(frozen=True)

    metric: str
    n_paired: int
    n_unpaired: int
    mean_a: float | None
    mean_b: float | None
    diff: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None


def compare(
    a: Evaluation,
    b: Evaluation,
    *,
    metrics: Sequence[str] | None = None,
    confidence: float = 0.95,
    n_resamples: int = 10000,
    seed: int = 0,
) -> dict[str, Comparison]:
    """Paired comparison of two evaluations, metric by metric.

    Samples are paired by id over those scored in both runs (``n_paired``); ids scored in only one
    of them are counted in ``n_unpaired`` and left out, since an unpaired mean difference would mix
    a sample effect into the system effect. ``metrics`` defaults to the metrics present in both,
    in a's order. ``n_resamples`` is used by both the bootstrap and the permutation test.
    """
    if not set(a.sample_ids) & set(b.sample_ids):
        raise ValueError(
            "the two evaluations share no sample id, so nothing can be paired; "
            "compare runs over the same samples"
        )
    if metrics is None:
        chosen = [m for m in a.metrics if m in set(b.metrics)]
    else:
        chosen = list(metrics)
        missing = [m for m in chosen if m not in a.metrics or m not in b.metrics]
        if missing:
            raise ValueError(f"metrics not present in both evaluations: {missing}")
    out: dict[str, Comparison] = {}
    for metric in chosen:
        ids_a, vals_a = a.values(metric)
        ids_b, vals_b = b.values(metric)
        pos_b = {sid: i for i, sid in enumerate(ids_b)}
        common = [(i, pos_b[sid]) for i, sid in enumerate(ids_a) if sid in pos_b]
        n_unpaired = len(set(ids_a) ^ set(ids_b))
        if not common:
            out[metric] = Comparison(
                metric=metric,
                n_paired=0,
                n_unpaired=n_unpaired,
                mean_a=None,
                mean_b=None,
                diff=None,
                ci_low=None,
                ci_high=None,
                p_value=None,
            )
            continue
        ia, ib = (np.asarray(col, dtype=np.intp) for col in zip(*common, strict=True))
        xa, xb = vals_a[ia], vals_b[ib]
        mean_a, mean_b = float(np.mean(xa)), float(np.mean(xb))
        ci_low = ci_high = None
        if len(common) >= 2:
            ci_low, ci_high = paired_bootstrap_ci(
                xa, xb, confidence=confidence, n_resamples=n_resamples, seed=seed
            )
        out[metric] = Comparison(
            metric=metric,
            n_paired=len(common),
            n_unpaired=n_unpaired,
            mean_a=mean_a,
            mean_b=mean_b,
            diff=float(np.mean(xb - xa)),
            ci_low=ci_low,
            ci_high=ci_high,
            p_value=paired_permutation_test(xa, xb, n_resamples=n_resamples, seed=seed),
        )
    return out


# -- agreement ----------------------------------------------------------------------------------


def cohen_kappa(
    a: Iterable[Hashable],
    b: Iterable[Hashable],
    *,
    weights: Literal["linear", "quadratic"] | None = None,
) -> float:
    """Cohen's kappa between two raters' labels of the same items.

    ``kappa = 1 - sum(w * O) / sum(w * E)`` where O is the observed joint distribution of labels,
    ``E = outer(row marginals, column marginals)`` the one expected by chance, and w the
    disagreement weights: ``1 - I`` unweighted (Cohen 1960), ``|i - j|`` linear or ``(i - j)**2``
    quadratic (Cohen 1968), with i, j the positions of the labels in sorted order (so weighted
    kappa needs sortable labels). Unweighted, this equals ``(p_o - p_e) / (1 - p_e)``.

    Raises ValueError when chance disagreement is zero (both raters always give the same single
    label), where kappa is 0/0.
    """
    xs, ys = list(a), list(b)
    if len(xs) != len(ys):
        raise ValueError(f"a and b must have the same length, got {len(xs)} and {len(ys)}")
    if not xs:
        raise ValueError("cohen_kappa needs at least one pair of labels")
    if weights not in (None, "linear", "quadratic"):
        raise ValueError(f"weights must be None, 'linear' or 'quadratic', got {weights!r}")
    labels = list(dict.fromkeys(xs + ys))
    if weights is not None:
        labels = sorted_scale(labels, "weighted kappa needs labels that can be sorted")
    index = {label: i for i, label in enumerate(labels)}
    k = len(labels)
    observed = np.zeros((k, k), dtype=np.float64)
    for x, y in zip(xs, ys, strict=True):
        observed[index[x], index[y]] += 1.0
    observed /= len(xs)
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0))
    pos = np.arange(k, dtype=np.float64)
    gap = np.abs(pos[:, None] - pos[None, :])
    if weights is None:
        w = (gap > 0).astype(np.float64)
    elif weights == "linear":
        w = gap
    else:
        w = gap**2
    chance = float(np.sum(w * expected))
    if chance <= 0.0:
        raise ValueError(
            "cohen_kappa is undefined when chance disagreement is zero "
            "(both raters use one and the same label throughout)"
        )
    return 1.0 - float(np.sum(w * observed)) / chance


def _average_ranks(x: FloatArray) -> FloatArray:
    """1-based ranks of ``x``; tied values all get the mean of the ranks they span."""
    order = np.argsort(x, kind="mergesort")
    ordered = x[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    ends = np.r_[starts[1:], x.size]
    mean_rank = (starts + ends + 1) / 2.0  # mean of the 1-based ranks starts+1 .. ends
    ranks = np.empty(x.size, dtype=np.float64)
    ranks[order] = np.repeat(mean_rank, ends - starts)
    return ranks


def pearson(a: npt.ArrayLike, b: npt.ArrayLike) -> float:
    """Pearson's correlation ``r = sum(dx * dy) / sqrt(sum(dx**2) * sum(dy**2))``, dx = x - mean.

    Raises ValueError for fewer than two pairs or a constant input, where r is 0/0.
    """
    x, y = _as_pair(a, b, min_n=2)
    if np.all(x == x[0]) or np.all(y == y[0]):
        raise ValueError("correlation is undefined for constant input")
    dx, dy = x - x.mean(), y - y.mean()
    # Scaling does not change r and keeps the sums of squares clear of underflow and overflow.
    dx /= np.abs(dx).max()
    dy /= np.abs(dy).max()
    denom = math.sqrt(float(np.dot(dx, dx)) * float(np.dot(dy, dy)))
    if denom == 0.0:
        raise ValueError("correlation is undefined for constant input")
    return min(1.0, max(-1.0, float(np.dot(dx, dy)) / denom))


def spearman(a: npt.ArrayLike, b: npt.ArrayLike) -> float:
    """Spearman's rank correlation: Pearson's r of the average ranks (ties share their mean rank).

    With average ranks this is the tie-corrected coefficient (Kendall & Gibbons 1990, *Rank
    Correlation Methods*, ch. 3). Raises ValueError for a constant input.
    """
    x, y = _as_pair(a, b, min_n=2)
    return pearson(_average_ranks(x), _average_ranks(y))


def auroc(labels: npt.ArrayLike, scores: npt.ArrayLike) -> float:
    """Area under the ROC curve: the probability that a random positive outscores a random negative.

    ``AUC = U / (n_pos * n_neg)`` with the Mann–Whitney ``U = R_pos - n_pos (n_pos + 1) / 2``,
    ``R_pos`` the sum of the average ranks of the positives' scores, so a tied positive/negative
    pair counts 1/2 (Hanley & McNeil 1982, Radiology 143:29). Labels are 0/1 or booleans; a single
    class raises ValueError, since the area is then undefined.
    """
    y = np.asarray(labels)
    s = _as_values(scores, "scores")
    if y.ndim != 1 or y.shape != s.shape:
        raise ValueError(
            f"labels and scores must be 1-D of the same length, got {y.shape} and {s.shape}"
        )
    if not np.all((y == 0) | (y == 1)):
        raise ValueError("labels must be 0/1 or booleans")
    positive = y.astype(bool)
    n_pos = int(positive.sum())
    n_neg = int(positive.size - n_pos)
    if n_pos == 0 or n_neg == 0:
        raise ValueError("auroc needs both positive and negative labels; got a single class")
    rank_sum = float(_average_ranks(s)[positive].sum())
    u = rank_sum - n_pos * (n_pos + 1) / 2.0
    return min(1.0, max(0.0, u / (n_pos * n_neg)))
