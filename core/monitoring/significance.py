"""The significance tests behind alerts and the feedback report, as plain functions.

Monitoring compares a small recent window with a baseline many times a day, so the tests must be
cheap (no resampling on the request path), exact where counts are small, and free of scipy (the
core depends on numpy only):

* `welch_t_test` — Welch's unequal-variance t test of two means (Welch 1947), with the
  Welch–Satterthwaite degrees of freedom; the Student t tail comes from the regularized incomplete
  beta function (`student_t_sf`), evaluated by Lentz's continued fraction (Numerical Recipes,
  3rd ed., §6.4).
* `fisher_exact_greater` — the one-sided Fisher exact test that the rate in a window exceeds the
  baseline rate (Fisher 1935): the hypergeometric upper tail of the window's event count given
  both margins. Exact, hence conservative for discrete counts: its false-alarm rate is at most
  alpha even when the baseline rate is 2 % and the window holds 50 requests, where the normal
  approximation of a two-proportion z test is not to be trusted.
* `permutation_independence` — whether a binary outcome (thumbs down) depends on a grouping
  (retrieval miss, chunks used, source): Pearson's chi-square statistic over the groups, its
  p-value from seeded label permutations (``p = (k + 1) / (R + 1)``, Phipson & Smyth 2010), so no
  chi-square approximation fails on a group of five requests.
* `holm` — Holm's step-down adjustment (Holm 1979) when several factors are tested at once.

All p-values are floats in [0, 1]; none is NaN.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

__all__ = [
    "WelchResult",
    "fisher_exact_greater",
    "holm",
    "permutation_independence",
    "student_t_sf",
    "welch_t_test",
]

_EPS = 1e-15
_TINY = 1e-300


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, 1000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = 1.0 + aa / c
        c = c if abs(c) > _TINY else _TINY
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = 1.0 + aa / c
        c = c if abs(c) > _TINY else _TINY
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < _EPS:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    front = math.exp(log_front)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def student_t_sf(t: float, df: float) -> float:
    """``P(T > t)`` for Student's t with ``df`` (> 0, not necessarily whole) degrees of freedom.

    ``P(|T| > |t|) = I_{df/(df+t^2)}(df/2, 1/2)``, halved for one tail.
    """
    if not df > 0:
        raise ValueError(f"degrees of freedom must be positive, got {df!r}")
    if math.isinf(t):
        return 0.0 if t > 0 else 1.0
    tail = 0.5 * _betainc(df / 2.0, 0.5, df / (df + t * t))
    return tail if t >= 0 else 1.0 - tail


class WelchResult:
    """A one-sided Welch test of ``mean(x) > mean(y)``: the difference, t, df and p-value."""

    __slots__ = ("df", "difference", "p_value", "t")

    def __init__(self, difference: float, t: float, df: float, p_value: float) -> None:
        self.difference = difference
        self.t = t
        self.df = df
        self.p_value = p_value

    def __repr__(self) -> str:
        return (
            f"WelchResult(difference={self.difference:.4g}, t={self.t:.4g}, df={self.df:.4g}, "
            f"p_value={self.p_value:.4g})"
        )


def welch_t_test(x: npt.ArrayLike, y: npt.ArrayLike) -> WelchResult:
    """One-sided Welch test of ``H1: mean(x) > mean(y)``; both need at least two values.

    ``t = (mean(x) - mean(y)) / sqrt(s_x^2/n_x + s_y^2/n_y)`` with
    ``df = (s_x^2/n_x + s_y^2/n_y)^2 / ((s_x^2/n_x)^2/(n_x-1) + (s_y^2/n_y)^2/(n_y-1))``.
    When both samples are constant the standard error is zero: p is 0.0 when ``mean(x)`` is the
    larger and 1.0 otherwise (no evidence can be weighed, and none is needed).
    """
    a = np.asarray(x, dtype=np.float64).ravel()
    b = np.asarray(y, dtype=np.float64).ravel()
    if a.size < 2 or b.size < 2:
        raise ValueError(f"Welch's test needs two values on each side, got {a.size} and {b.size}")
    diff = float(a.mean() - b.mean())
    va = float(a.var(ddof=1)) / a.size
    vb = float(b.var(ddof=1)) / b.size
    se2 = va + vb
    if se2 <= 0.0:
        return WelchResult(
            diff, math.copysign(math.inf, diff) if diff else 0.0, math.inf, 0.0 if diff > 0 else 1.0
        )
    df = se2 * se2 / (va * va / (a.size - 1) + vb * vb / (b.size - 1))
    t = diff / math.sqrt(se2)
    return WelchResult(diff, t, df, student_t_sf(t, df))


def fisher_exact_greater(events: int, n: int, base_events: int, base_n: int) -> float:
    """One-sided Fisher exact p-value that the rate ``events / n`` exceeds ``base_events / base_n``.

    With both margins fixed the window's count is hypergeometric:
    ``P(X = k) = C(K, k) C(N - K, n - k) / C(N, n)`` with ``K = events + base_events`` and
    ``N = n + base_n``; the p-value is ``P(X >= events)``.
    """
    if not (0 <= events <= n and 0 <= base_events <= base_n):
        raise ValueError(
            f"counts must satisfy 0 <= events <= n: got {events}/{n} and {base_events}/{base_n}"
        )
    total_events = events + base_events
    total = n + base_n
    hi = min(total_events, n)
    lo = max(0, n - (total - total_events))
    if events <= lo:
        return 1.0

    def log_choose(m: int, k: int) -> float:
        return math.lgamma(m + 1) - math.lgamma(k + 1) - math.lgamma(m - k + 1)

    log_first = (
        log_choose(total_events, events)
        + log_choose(total - total_events, n - events)
        - log_choose(total, n)
    )
    k = np.arange(events, hi, dtype=np.float64)
    ratios = (total_events - k) * (n - k) / ((k + 1.0) * (total - total_events - n + k + 1.0))
    terms = np.concatenate(([1.0], np.cumprod(ratios)))
    return float(min(1.0, math.exp(log_first) * float(terms.sum())))


def permutation_independence(
    groups: Sequence[int] | npt.NDArray[np.int64],
    outcome: Sequence[bool] | npt.NDArray[np.bool_],
    *,
    n_resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float]:
    """``(chi2, p)``: Pearson's chi-square of a binary outcome across groups, permutation p-value.

    ``chi2 = sum_g (d_g - n_g p)^2 / (n_g p (1 - p))`` where group ``g`` has ``n_g`` requests of
    which ``d_g`` have the outcome and ``p`` is the overall rate. Under independence every
    assignment of the outcomes to requests is equally likely, so the outcome labels are permuted
    ``n_resamples`` times (seeded) and ``p = (k + 1) / (R + 1)`` counts statistics at least the
    observed one. An outcome that never (or always) occurs, or a single group, gives (0.0, 1.0).
    """
    g = np.asarray(groups, dtype=np.int64).ravel()
    y = np.asarray(outcome, dtype=bool).ravel()
    if g.size != y.size:
        raise ValueError(f"groups and outcome differ in length: {g.size} vs {y.size}")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be at least 1, got {n_resamples}")
    if g.size == 0:
        return 0.0, 1.0
    _, codes = np.unique(g, return_inverse=True)
    n_groups = int(codes.max()) + 1
    sizes = np.bincount(codes, minlength=n_groups).astype(np.float64)
    rate = float(y.mean())
    if n_groups < 2 or rate in (0.0, 1.0):
        return 0.0, 1.0
    scale = rate * (1.0 - rate)

    def chi2(down: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        result: npt.NDArray[np.float64] = (((down - sizes * rate) ** 2) / (sizes * scale)).sum(
            axis=-1
        )
        return result

    observed = float(chi2(np.bincount(codes[y], minlength=n_groups).astype(np.float64)))
    onehot = np.zeros((g.size, n_groups), dtype=np.float64)
    onehot[np.arange(g.size), codes] = 1.0
    rng = np.random.default_rng(seed)
    tol = 1e-9 * max(1.0, observed)
    rows = max(1, 2_000_000 // g.size)
    k = 0
    done = 0
    while done < n_resamples:
        m = min(rows, n_resamples - done)
        perms = rng.permuted(np.broadcast_to(y, (m, y.size)).astype(np.float64), axis=1)
        k += int(np.count_nonzero(chi2(perms @ onehot) >= observed - tol))
        done += m
    return observed, (k + 1) / (n_resamples + 1)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (same order as given; each in [0, 1])."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    m = len(p_values)
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted
