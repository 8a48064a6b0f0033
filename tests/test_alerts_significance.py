"""The tests behind alerts, checked against scipy where it is installed and by their own
properties (exactness, Holm's order) where it is not."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ragbridge.core.monitoring.significance import (
    fisher_exact_greater,
    holm,
    permutation_independence,
    student_t_sf,
    welch_t_test,
)


@pytest.mark.parametrize(
    ("t", "df"), [(0.5, 3), (2.1, 7.3), (-1.2, 30), (4.0, 120.5), (10.0, 5), (0.0, 2), (-6, 400)]
)
def test_student_t_tail_matches_scipy(t: float, df: float) -> None:
    stats = pytest.importorskip("scipy.stats")
    assert student_t_sf(t, df) == pytest.approx(float(stats.t.sf(t, df)), rel=1e-9, abs=1e-15)


def test_student_t_tail_known_values_without_scipy() -> None:
    assert student_t_sf(0.0, 7) == 0.5
    assert student_t_sf(1.0, 1) == pytest.approx(0.25)  # Cauchy: 1/2 - atan(1)/pi
    assert student_t_sf(1.959963984540054, 1e7) == pytest.approx(0.025, rel=1e-5)  # ~ normal
    assert student_t_sf(math.inf, 3) == 0.0
    with pytest.raises(ValueError, match="degrees of freedom"):
        student_t_sf(1.0, 0)


def test_welch_matches_scipy() -> None:
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(1)
    x, y = rng.normal(0.8, 0.2, 40), rng.normal(0.7, 0.3, 200)
    ours = welch_t_test(x, y)
    ref = stats.ttest_ind(x, y, equal_var=False, alternative="greater")
    assert ours.t == pytest.approx(float(ref.statistic))
    assert ours.df == pytest.approx(float(ref.df))
    assert ours.p_value == pytest.approx(float(ref.pvalue), rel=1e-9)


def test_welch_with_constant_samples() -> None:
    assert welch_t_test([1.0, 1.0], [0.9, 0.9]).p_value == 0.0
    assert welch_t_test([0.9, 0.9], [0.9, 0.9]).p_value == 1.0
    with pytest.raises(ValueError, match="two values"):
        welch_t_test([1.0], [0.5, 0.6])


@pytest.mark.parametrize(
    "counts",
    [(10, 50, 20, 500), (0, 50, 3, 100), (5, 50, 5, 50), (50, 50, 0, 100), (3, 100, 40, 1000)],
)
def test_fisher_exact_matches_scipy(counts: tuple[int, int, int, int]) -> None:
    stats = pytest.importorskip("scipy.stats")
    e, n, be, bn = counts
    ref = stats.fisher_exact([[e, n - e], [be, bn - be]], alternative="greater").pvalue
    assert fisher_exact_greater(*counts) == pytest.approx(float(ref), rel=1e-9)


def test_fisher_exact_is_a_hypergeometric_tail_by_enumeration() -> None:
    e, n, be, bn = 4, 10, 2, 20
    k_total, total = e + be, n + bn
    pmf = [
        math.comb(k_total, k) * math.comb(total - k_total, n - k) / math.comb(total, n)
        for k in range(0, min(k_total, n) + 1)
    ]
    assert fisher_exact_greater(e, n, be, bn) == pytest.approx(sum(pmf[e:]))
    with pytest.raises(ValueError, match="counts"):
        fisher_exact_greater(5, 4, 0, 10)


def test_permutation_independence() -> None:
    rng = np.random.default_rng(0)
    groups = rng.integers(0, 3, 300)
    linked = rng.random(300) < np.where(groups == 2, 0.5, 0.1)
    chi2, p = permutation_independence(groups, linked, n_resamples=999, seed=0)
    assert chi2 > 20
    assert p == pytest.approx(1 / 1000)
    _, p_null = permutation_independence(groups, rng.random(300) < 0.2, n_resamples=999, seed=0)
    assert p_null > 0.05
    assert permutation_independence([0, 1, 0], [False, False, False]) == (0.0, 1.0)
    assert permutation_independence([0, 0, 0], [True, False, True]) == (0.0, 1.0)


def test_holm() -> None:
    assert holm([0.01, 0.04, 0.03, 0.5]) == pytest.approx([0.04, 0.09, 0.09, 0.5])
    assert holm([]) == []
