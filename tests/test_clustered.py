"""Clustered estimators against known values: statsmodels' cluster-robust OLS, a textbook worked example,
R's p.adjust, exact binomial tails, and a true intra-cluster correlation recovered from seeded data."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_longctx.results.clustered import (
    cluster_totals,
    cr1_variance,
    icc,
    paired_difference,
    pooled_accuracy,
    weighted_cluster_size,
)
from pytest_longctx.results.stats import holm, mcnemar_drop, mcnemar_exact, t_quantile, wilson


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_cr1_variance_equals_statsmodels_cluster_robust_ols(seed: int) -> None:
    sm = pytest.importorskip("statsmodels.api")
    rng = np.random.default_rng(seed)
    groups = rng.integers(0, 12, 300)
    y = (rng.random(300) < 0.2 + 0.05 * groups).astype(float)
    fit = sm.OLS(y, np.ones(len(y))).fit(cov_type="cluster", cov_kwds={"groups": groups})
    sums, sizes = cluster_totals(list(y), list(groups))
    assert cr1_variance(sums, sizes, float(y.mean())) == pytest.approx(float(fit.bse[0]) ** 2, rel=1e-12)


def test_paired_difference_on_agrestis_prime_minister_table() -> None:
    """Agresti, An Introduction to Categorical Data Analysis (2nd ed.), Table 8.1: approval of the Prime Minister
    in two surveys of the same 1,600 people (794 approve both times, 150 approve then disapprove, 86 the reverse,
    570 disapprove both). The book: difference -0.04, standard error 0.0095, 95% CI (-0.06, -0.02), McNemar
    z = -4.17."""
    first = [True] * 794 + [True] * 150 + [False] * 86 + [False] * 570
    second = [True] * 794 + [False] * 150 + [True] * 86 + [False] * 570
    got = paired_difference(second, first, list(range(1600)))
    assert (got.regressed, got.improved, got.pairs, got.clusters) == (150, 86, 1600, 1600)
    assert got.diff == pytest.approx(-0.04)
    assert got.se == pytest.approx(0.0095, abs=1e-4)
    assert (round(got.low, 2), round(got.high, 2)) == (-0.06, -0.02)
    # The test's variance is the one at the null (McNemar's (b + c) / n^2), on Agresti-Min's adjusted counts, with
    # three quarters of McNemar's continuity correction (robust.CONTINUITY): z = 4.12, between the uncorrected
    # (b - c) / sqrt(b + c) = 4.17 and the corrected (|b - c| - 1) / sqrt(b + c) = 4.10.
    assert got.p_value == pytest.approx(2 * 0.5 * math.erfc(4.12 / math.sqrt(2)), rel=0.03)


def test_pooled_accuracy_of_independent_trials_is_wilsons_interval() -> None:
    outcomes = [True] * 81 + [False] * 182  # Newcombe (1998), Table I: 81/263 -> (0.2553, 0.3662)
    got = pooled_accuracy(outcomes, list(range(263)))
    assert (got.correct, got.n, got.clusters) == (81, 263, 263)
    assert (got.low, got.high) == pytest.approx((0.2553, 0.3662), abs=1e-3)


def test_clusters_that_share_their_fate_count_once() -> None:
    """20 questions asked in 100 cells each, every question right or wrong everywhere: 20 units of evidence."""
    fates = [True] * 14 + [False] * 6
    outcomes = [f for f in fates for _ in range(100)]
    clusters = [q for q in range(20) for _ in range(100)]
    got = pooled_accuracy(outcomes, clusters)
    assert got.deff == pytest.approx(100, rel=0.06)
    assert got.n_eff == pytest.approx(20, rel=0.06)
    expected = wilson(14 * got.n_eff / 20, got.n_eff, t_quantile(0.975, 19))
    assert (got.low, got.high) == pytest.approx(expected)
    naive = wilson(1400, 2000)
    assert got.high - got.low > 4 * (naive[1] - naive[0])


def test_no_variation_takes_the_worst_case() -> None:
    got = pooled_accuracy([False] * 2000, [q for q in range(20) for _ in range(100)])
    assert got.n_eff == 20 and got.low == 0.0 and got.high == pytest.approx(wilson(0, 20, t_quantile(0.975, 19))[1])
    same = paired_difference([True] * 400, [True] * 400, list(range(400)))
    assert same.diff == 0 and same.low < 0 < same.high and same.p_value == 1.0
    assert same.drop_upper(0.05) < 0.01  # 400 independent pairs, none discordant
    few = paired_difference([True] * 400, [True] * 400, [q for q in range(20) for _ in range(20)])
    assert few.drop_upper(0.05) > 0.05  # the same trials from only 20 items: far less is known


def test_holm_matches_r_p_adjust() -> None:
    # p.adjust(c(0.01, 0.02, 0.03, 0.04, 0.05), "holm") in R
    assert holm([0.01, 0.02, 0.03, 0.04, 0.05]) == pytest.approx([0.05, 0.08, 0.09, 0.09, 0.09])
    # p.adjust(c(0.04, 0.001, 0.5, 0.02), "holm"): order is kept
    assert holm([0.04, 0.001, 0.5, 0.02]) == pytest.approx([0.08, 0.004, 0.5, 0.06])
    assert holm([]) == []


def test_exact_mcnemar_tails() -> None:
    assert mcnemar_drop(9, 0) == pytest.approx(1 / 2**9)
    assert mcnemar_drop(0, 9) == pytest.approx(1.0)
    assert mcnemar_drop(3, 1) == pytest.approx(5 / 16)  # P(X >= 3), X ~ Bin(4, 1/2)
    assert mcnemar_exact(3, 1) == pytest.approx(0.625)
    assert mcnemar_drop(0, 0) == 1.0


@pytest.mark.parametrize("rho", [0.0, 0.3, 0.8])
def test_icc_recovers_a_known_intra_cluster_correlation(rho: float) -> None:
    """Binary outcomes built so that two trials of one cluster share their draw with probability rho."""
    rng = np.random.default_rng(7)
    groups, size = 400, 12
    shared = rng.random(groups)
    use_shared = rng.random((groups, size)) < math.sqrt(rho)
    draws = np.where(use_shared, shared[:, None], rng.random((groups, size)))
    outcomes = (draws < 0.6).ravel().tolist()
    clusters = np.repeat(np.arange(groups), size).tolist()
    estimate = icc(outcomes, clusters)
    assert estimate is not None and estimate == pytest.approx(rho, abs=0.05)


def test_weighted_cluster_size() -> None:
    assert weighted_cluster_size([1] * 50) == 1.0
    assert weighted_cluster_size([10] * 5) == 10.0
    assert weighted_cluster_size([1, 3]) == pytest.approx((1 + 9) / 4)


def test_non_inferiority_is_a_score_test_at_the_margin() -> None:
    """400 independent pairs, 20 regressions and 8 improvements: the variance is taken where 'the drop is 0.05'
    holds (regressions raised to 0.02 + 0.05), computed here with scipy's t."""
    scipy_stats = pytest.importorskip("scipy.stats")
    now = [False] * 20 + [True] * 8 + [True] * 300 + [False] * 72
    before = [True] * 20 + [False] * 8 + [True] * 300 + [False] * 72
    got = paired_difference(now, before, list(range(400)))
    assert (got.regressed, got.improved) == (20, 8) and got.null_deff == pytest.approx(1.0, abs=0.01)
    r0 = 0.02 + 0.05
    z = (0.03 - 0.05) / math.sqrt((2 * r0 - 0.05 - 0.05**2) * got.null_deff / 400)
    assert got.p_drop_under(0.05) == pytest.approx(scipy_stats.t.cdf(z, 399), rel=1e-6)
    upper = got.drop_upper(0.05)
    assert got.p_drop_under(upper) == pytest.approx(0.05, abs=1e-6) and 0.03 < upper < 0.06


def test_non_inferiority_does_not_pass_a_real_drop_hidden_in_unseen_items() -> None:
    """Seeded simulation: 20 questions asked in 100 cells, answers sharing their question's fate (correlation
    0.6), and a candidate whose drop over all questions is exactly the margin. Most samples of 20 questions show
    little of it; a Wald test with the observed variance passes such a candidate about a third of the time (35%
    here), the score test at most about alpha (under 1% here)."""
    rng = np.random.default_rng(7)
    clusters = np.repeat(np.arange(20), 100)
    passed = wald = 0
    runs = 400
    for _ in range(runs):
        u = np.where(rng.random(2000) < math.sqrt(0.6), rng.random(20)[clusters], rng.random(2000))
        before, now = u < 0.85, u < 0.80
        diff = paired_difference(now.tolist(), before.tolist(), clusters.tolist())
        passed += diff.p_drop_under(0.05) < 0.05
        wald += -diff.centre + t_quantile(0.95, diff.df) * diff.se < 0.05
    assert passed / runs <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / runs)
    assert wald / runs > 0.12  # the test this replaced
