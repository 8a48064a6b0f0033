"""Tests of ragbridge.core.results.stats against hand-computed cases and brute-force enumeration."""

from __future__ import annotations

import itertools
import math
import statistics
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from ragbridge.core.results.evaluation import Evaluation, Score
from ragbridge.core.results.stats import (
    Comparison,
    MeanCI,
    auroc,
    bootstrap_ci,
    cohen_kappa,
    compare,
    mean_ci,
    paired_bootstrap_ci,
    paired_permutation_test,
    pearson,
    spearman,
)

# -- bootstrap ------------------------------------------------------------------------------------


def test_bootstrap_is_reproducible_and_depends_on_the_seed() -> None:
    values = np.random.default_rng(1).random(30)
    assert bootstrap_ci(values, seed=7) == bootstrap_ci(values, seed=7)
    assert bootstrap_ci(values, seed=7) != bootstrap_ci(values, seed=8)


def test_bootstrap_degenerate_inputs() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        bootstrap_ci([])
    assert bootstrap_ci([0.3]) == (0.3, 0.3)
    assert bootstrap_ci([0.7] * 9) == (0.7, 0.7)
    with pytest.raises(ValueError, match="finite"):
        bootstrap_ci([0.1, float("nan")])
    with pytest.raises(ValueError, match="one-dimensional"):
        bootstrap_ci([[0.1, 0.2]])
    with pytest.raises(ValueError, match="confidence"):
        bootstrap_ci([0.1, 0.2], confidence=1.0)
    with pytest.raises(ValueError, match="n_resamples"):
        bootstrap_ci([0.1, 0.2], n_resamples=0)


def test_bootstrap_two_values_enumerated() -> None:
    # Resamples of [0, 1] of size 2 have mean 0, 0.5 or 1 with probability 1/4, 1/2, 1/4:
    # the 2.5 % and 97.5 % quantiles are 0 and 1, the 25 % and 75 % ones 0.5 and 0.5 (approx.).
    assert bootstrap_ci([0.0, 1.0], n_resamples=4000) == (0.0, 1.0)
    low, high = bootstrap_ci([0.0, 1.0], confidence=0.4, n_resamples=4000)
    assert (low, high) == (0.5, 0.5)


def test_bootstrap_matches_the_normal_approximation_for_a_large_sample() -> None:
    # Spans several resampling chunks (3000 values x 2000 resamples > 2**20 elements).
    values = np.random.default_rng(2).normal(0.5, 0.1, size=3000)
    low, high = bootstrap_ci(values)
    sem = statistics.stdev(values.tolist()) / math.sqrt(values.size)
    centre = statistics.fmean(values.tolist())
    assert low == pytest.approx(centre - 1.96 * sem, abs=0.3 * sem)
    assert high == pytest.approx(centre + 1.96 * sem, abs=0.3 * sem)


def test_bootstrap_is_narrower_with_more_data_and_contains_the_mean() -> None:
    rng = np.random.default_rng(3)
    small, large = rng.random(20), rng.random(2000)
    for values in (small, large):
        low, high = bootstrap_ci(values)
        assert low < float(np.mean(values)) < high
    width = [np.subtract(*bootstrap_ci(v)[::-1]) for v in (small, large)]
    assert width[1] < width[0] / 5  # ~ sqrt(100) = 10 times narrower


def test_bootstrap_with_another_statistic() -> None:
    values = [0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0]
    low, high = bootstrap_ci(values, statistic=np.median)
    assert (low, high) == (0.0, 1.0)


def test_mean_ci() -> None:
    result = mean_ci([0.2, 0.4, 0.9])
    assert isinstance(result, MeanCI)
    assert result.mean == pytest.approx(0.5)
    assert result.n == 3
    assert 0.2 <= result.low <= result.mean <= result.high <= 0.9
    assert mean_ci([0.1] * 3) == MeanCI(0.1, 0.1, 0.1, 3)


def test_paired_bootstrap_is_the_bootstrap_of_the_differences() -> None:
    rng = np.random.default_rng(4)
    a = rng.random(25)
    b = a + 0.1 + rng.normal(0, 0.02, size=25)
    ci = paired_bootstrap_ci(a, b, seed=11)
    assert ci == bootstrap_ci(b - a, seed=11)
    assert ci[0] < 0.1 < ci[1]
    with pytest.raises(ValueError, match="same length"):
        paired_bootstrap_ci([0.1, 0.2], [0.1])


# -- permutation test -----------------------------------------------------------------------------


def brute_force_p(diffs: list[int], alternative: str) -> Fraction:
    """Enumerate all 2**n sign flips with exact integer arithmetic."""
    observed = sum(diffs)
    hits = 0
    patterns = list(itertools.product((1, -1), repeat=len(diffs)))
    for signs in patterns:
        total = sum(s * d for s, d in zip(signs, diffs, strict=True))
        if alternative == "two-sided":
            hits += abs(total) >= abs(observed)
        elif alternative == "greater":
            hits += total >= observed
        else:
            hits += total <= observed
    return Fraction(hits, len(patterns))


@pytest.mark.parametrize("alternative", ["two-sided", "greater", "less"])
@pytest.mark.parametrize(
    "diffs",
    [[1, 2, 3, -1], [3, 0, 2, 2, -1, 5, 1], [1, -1, 1, -1, 2, -2], [4, 4, 4, 4, 4, 4, 4, 4, 4, -1]],
)
def test_exact_permutation_p_matches_enumeration(diffs: list[int], alternative: str) -> None:
    a = np.full(len(diffs), 0.5)
    b = a + np.asarray(diffs) / 10  # the test is invariant to scaling
    p = paired_permutation_test(a, b, alternative=alternative)  # type: ignore[arg-type]
    assert p == pytest.approx(float(brute_force_p(diffs, alternative)), abs=1e-12)


def test_exact_p_for_a_small_hand_case() -> None:
    # d = (1, 2): sums over sign flips are 3, 1, -1, -3; |T| >= 3 for 2 of 4 patterns.
    assert paired_permutation_test([0.0, 0.0], [0.1, 0.2]) == 0.5
    assert paired_permutation_test([0.0, 0.0], [0.1, 0.2], alternative="greater") == 0.25
    assert paired_permutation_test([0.0, 0.0], [0.1, 0.2], alternative="less") == 1.0


def test_random_permutation_p_approximates_the_exact_one() -> None:
    diffs = [3, -1, 2, 0, 1, 1, -2, 4, 1, 0, -1, 2, 1, 3, -2, 1, 2]  # n = 17: random branch
    signs = 1 - 2 * ((np.arange(2**17)[:, None] >> np.arange(17)) & 1)
    totals = signs @ np.asarray(diffs)
    exact = float(np.mean(np.abs(totals) >= abs(sum(diffs))))
    a = np.zeros(17)
    b = np.asarray(diffs, dtype=float)
    p = paired_permutation_test(a, b, n_resamples=20000, seed=1)
    assert p == pytest.approx(exact, abs=0.01)
    assert p == paired_permutation_test(a, b, n_resamples=20000, seed=1)


def test_random_permutation_p_is_never_zero() -> None:
    a = np.zeros(40)
    b = np.full(40, 0.5)  # exact p = 2 / 2**40
    p = paired_permutation_test(a, b, n_resamples=999)
    assert p == pytest.approx(1 / 1000)  # add-one: (0 + 1) / (999 + 1)


def test_permutation_edge_cases() -> None:
    assert paired_permutation_test([0.2, 0.4, 0.6], [0.2, 0.4, 0.6]) == 1.0
    assert paired_permutation_test(np.zeros(30), np.zeros(30)) == 1.0
    with pytest.raises(ValueError, match="alternative"):
        paired_permutation_test([0.1], [0.2], alternative="bigger")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="same length"):
        paired_permutation_test([0.1, 0.2], [0.2])


# -- compare --------------------------------------------------------------------------------------


def _ev(values: dict[str, float | None], metric: str = "m") -> Evaluation:
    return Evaluation(
        (sid, metric, Score(value=v) if v is not None else Score.fail("timeout", "t"))
        for sid, v in values.items()
    )


def test_compare_pairs_by_sample_id_over_scored_cells() -> None:
    a = _ev({"q1": 0.2, "q2": 0.5, "q3": 0.1, "q4": None, "q5": 0.9})
    b = _ev({"q3": 0.4, "q2": 0.6, "q1": 0.5, "q4": 0.8, "q6": 0.3})
    result = compare(a, b)
    assert list(result) == ["m"]
    c = result["m"]
    assert isinstance(c, Comparison)
    assert c.n_paired == 3  # q1, q2, q3 (q4 failed in a)
    assert c.n_unpaired == 3  # q4, q5, q6
    assert c.mean_a == pytest.approx((0.2 + 0.5 + 0.1) / 3)
    assert c.mean_b == pytest.approx((0.5 + 0.6 + 0.4) / 3)
    assert c.diff == pytest.approx((0.3 + 0.1 + 0.3) / 3)
    # Differences 3, 1, 3 (tenths): |T| >= 7 for the all-plus and all-minus patterns only.
    assert c.p_value == pytest.approx(float(brute_force_p([3, 1, 3], "two-sided")))
    assert c.p_value == pytest.approx(2 / 8)
    assert c.ci_low is not None
    assert c.ci_high is not None
    assert 0.1 - 1e-12 <= c.ci_low <= c.diff <= c.ci_high <= 0.3 + 1e-12


def test_compare_metric_selection_and_empty_pairs() -> None:
    a = Evaluation([("q1", "m", Score(value=0.1)), ("q1", "k", Score.skip("n/a"))])
    a.add("q1", "only_a", Score(value=0.3))
    b = Evaluation([("q1", "m", Score(value=0.2)), ("q1", "k", Score(value=0.5))])
    result = compare(a, b)
    assert list(result) == ["m", "k"]
    k = result["k"]
    assert (k.n_paired, k.n_unpaired) == (0, 1)
    assert (k.mean_a, k.diff, k.ci_low, k.p_value) == (None, None, None, None)
    single = result["m"]
    assert single.n_paired == 1
    assert single.diff == pytest.approx(0.1)
    assert (single.ci_low, single.ci_high) == (None, None)
    assert single.p_value == 1.0
    with pytest.raises(ValueError, match=r"not present in both evaluations: \['only_a'\]"):
        compare(a, b, metrics=["m", "only_a"])
    assert list(compare(a, b, metrics=["k"])) == ["k"]


def test_compare_without_common_samples_is_an_error() -> None:
    with pytest.raises(ValueError, match="share no sample id"):
        compare(_ev({"q1": 0.1}), _ev({"x1": 0.1}))


# -- agreement ------------------------------------------------------------------------------------


def test_cohen_kappa_textbook_two_by_two() -> None:
    # 50 items: both yes 20, A yes / B no 5, A no / B yes 10, both no 15.
    a = ["yes"] * 25 + ["no"] * 25
    b = ["yes"] * 20 + ["no"] * 5 + ["yes"] * 10 + ["no"] * 15
    p_o = (20 + 15) / 50
    p_e = (25 / 50) * (30 / 50) + (25 / 50) * (20 / 50)
    assert cohen_kappa(a, b) == pytest.approx((p_o - p_e) / (1 - p_e))
    assert cohen_kappa(a, b) == pytest.approx(0.4)
    # With two categories, linear and quadratic weights change nothing.
    assert cohen_kappa(a, b, weights="linear") == pytest.approx(0.4)
    assert cohen_kappa(a, b, weights="quadratic") == pytest.approx(0.4)


def brute_force_weighted_kappa(a: list[int], b: list[int], power: int) -> float:
    cats = sorted(set(a) | set(b))
    pos = {c: i for i, c in enumerate(cats)}
    n = len(a)
    observed = sum(abs(pos[x] - pos[y]) ** power for x, y in zip(a, b, strict=True)) / n
    chance = sum(abs(pos[x] - pos[y]) ** power for x in a for y in b) / n**2
    return float(1 - observed / chance)


@settings(max_examples=100, deadline=None)
@given(
    pairs=st.lists(st.tuples(st.integers(1, 4), st.integers(1, 4)), min_size=2, max_size=30),
    power=st.sampled_from([1, 2]),
)
def test_weighted_kappa_matches_brute_force(pairs: list[tuple[int, int]], power: int) -> None:
    a, b = [p[0] for p in pairs], [p[1] for p in pairs]
    assume(len(set(a) | set(b)) > 1)
    weights = "linear" if power == 1 else "quadratic"
    assert cohen_kappa(a, b, weights=weights) == pytest.approx(  # type: ignore[arg-type]
        brute_force_weighted_kappa(a, b, power)
    )


def test_cohen_kappa_edges() -> None:
    assert cohen_kappa([1, 2, 3, 1], [1, 2, 3, 1]) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="undefined when chance disagreement is zero"):
        cohen_kappa(["x", "x"], ["x", "x"])
    with pytest.raises(ValueError, match="same length"):
        cohen_kappa([1], [1, 2])
    with pytest.raises(ValueError, match="at least one"):
        cohen_kappa([], [])
    with pytest.raises(ValueError, match="can be sorted"):
        cohen_kappa([1, "a"], ["a", 1], weights="linear")
    with pytest.raises(ValueError, match="weights"):
        cohen_kappa([1, 2], [2, 1], weights="cubic")  # type: ignore[arg-type]


def test_pearson_against_the_stdlib() -> None:
    x = [0.1, 0.4, 0.35, 0.8, 0.95]
    y = [0.2, 0.1, 0.5, 0.7, 0.6]
    assert pearson(x, y) == pytest.approx(statistics.correlation(x, y))
    assert pearson(x, [2 * v + 1 for v in x]) == pytest.approx(1.0)
    assert pearson([1e-200, 2e-200, 4e-200], [1.0, 2.0, 4.0]) == pytest.approx(1.0)


def test_spearman_is_pearson_of_hand_computed_average_ranks() -> None:
    x = [0.1, 0.5, 0.5, 0.9, 0.3, 0.5]
    y = [1.0, 3.0, 2.0, 2.0, 0.0, 5.0]
    rank_x = [1, 4, 4, 6, 2, 4]  # three 0.5s share ranks 3, 4, 5
    rank_y = [2, 5, 3.5, 3.5, 1, 6]  # two 2.0s share ranks 3, 4
    assert spearman(x, y) == pytest.approx(statistics.correlation(rank_x, rank_y))


def test_spearman_without_ties_matches_the_classic_formula() -> None:
    x = [3.0, 1.0, 4.0, 1.5, 5.0, 9.0, 2.0]
    y = [2.0, 7.0, 1.0, 8.0, 2.8, 1.8, 2.9]
    rank_x = [4, 1, 5, 2, 6, 7, 3]
    rank_y = [3, 6, 1, 7, 4, 2, 5]
    n = len(x)
    d2 = sum((p - q) ** 2 for p, q in zip(rank_x, rank_y, strict=True))
    assert spearman(x, y) == pytest.approx(1 - 6 * d2 / (n * (n * n - 1)))


@pytest.mark.parametrize("fn", [spearman, pearson])
def test_correlation_with_constant_input_is_an_error_not_nan(fn: object) -> None:
    with pytest.raises(ValueError, match="undefined for constant input"):
        fn([0.5, 0.5, 0.5], [0.1, 0.2, 0.3])  # type: ignore[operator]
    with pytest.raises(ValueError, match="undefined for constant input"):
        fn([0.1, 0.2, 0.3], [1, 1, 1])  # type: ignore[operator]
    with pytest.raises(ValueError, match="at least 2"):
        fn([0.1], [0.2])  # type: ignore[operator]


def brute_force_auroc(labels: list[int], scores: list[float]) -> float:
    pos = [s for lab, s in zip(labels, scores, strict=True) if lab == 1]
    neg = [s for lab, s in zip(labels, scores, strict=True) if lab == 0]
    wins = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


@settings(max_examples=200, deadline=None)
@given(
    pairs=st.lists(st.tuples(st.integers(0, 1), st.integers(0, 5)), min_size=2, max_size=40),
)
def test_auroc_matches_counting_all_pairs(pairs: list[tuple[int, int]]) -> None:
    labels = [p[0] for p in pairs]
    assume(0 < sum(labels) < len(labels))
    scores = [p[1] / 5 for p in pairs]  # few distinct scores: many ties
    assert auroc(labels, scores) == pytest.approx(brute_force_auroc(labels, scores))


def test_auroc_hand_cases() -> None:
    assert auroc([0, 0, 1, 1], [0.1, 0.2, 0.8, 0.9]) == 1.0
    assert auroc([1, 1, 0, 0], [0.1, 0.2, 0.8, 0.9]) == 0.0
    assert auroc([True, False], [0.5, 0.5]) == 0.5
    # pos {0.4, 0.8}, neg {0.4, 0.6}: pairs (0.4,0.4)=1/2, (0.4,0.6)=0, (0.8,*)=1+1 -> 2.5 / 4
    assert auroc([1, 0, 0, 1], [0.4, 0.4, 0.6, 0.8]) == pytest.approx(0.625)


def test_auroc_errors() -> None:
    with pytest.raises(ValueError, match="single class"):
        auroc([1, 1, 1], [0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match="0/1"):
        auroc([0, 2], [0.1, 0.2])
    with pytest.raises(ValueError, match="same length"):
        auroc([0, 1], [0.1])
    with pytest.raises(ValueError, match="finite"):
        auroc([0, 1], [0.1, float("nan")])
