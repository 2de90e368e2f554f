"""The robust estimators against independent computations: the Bell-McCaffrey (CR2) matrices built explicitly with
numpy, statsmodels' HC2 and cluster-robust covariances, the Satterthwaite degrees of freedom from their definition,
and the properties the gate relies on (bounds invert the tests; no jump at the ceiling)."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_longctx.results.clustered import paired_difference, pooled_accuracy
from pytest_longctx.results.robust import Shape, cr2_variance, satterthwaite_df


def _inverse_sqrt(matrix: np.ndarray) -> np.ndarray:
    values, vectors = np.linalg.eigh(matrix)
    return np.asarray(vectors @ np.diag(values ** -0.5) @ vectors.T)


def _explicit(y: np.ndarray, groups: np.ndarray, rho: float) -> tuple[float, float]:
    """CR2 variance of the mean and its Satterthwaite df, from the matrices (Pustejovsky & Tipton 2018, eq. 11)."""
    n = y.size
    x = np.ones((n, 1))
    bread = np.linalg.inv(x.T @ x)
    hat = x @ bread @ x.T
    residuals = y - hat @ y
    meat = 0.0
    ps = []
    omega = np.zeros((n, n))
    for g in np.unique(groups):
        idx = np.flatnonzero(groups == g)
        adjust = _inverse_sqrt(np.eye(idx.size) - hat[np.ix_(idx, idx)])
        term = (x[idx].T @ adjust @ residuals[idx]).item()
        meat += term * term
        p = np.zeros(n)  # p_g = (I - H)_g' A_g X_g M
        p += ((np.eye(n) - hat)[idx].T @ adjust @ x[idx] @ bread).ravel()
        ps.append(p)
        omega[np.ix_(idx, idx)] = rho
    np.fill_diagonal(omega, 1.0)
    b = np.array([[p @ omega @ q for q in ps] for p in ps])
    return float(bread.item() ** 2 * meat), float(np.trace(b) ** 2 / (b * b).sum())


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("rho", [0.0, 0.4])
def test_cr2_and_its_degrees_of_freedom_equal_the_matrices(seed: int, rho: float) -> None:
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 15, 9)
    groups = np.repeat(np.arange(sizes.size), sizes)
    y = (rng.random(groups.size) < 0.7).astype(float)
    variance, df = _explicit(y, groups, rho)
    shape = Shape.of(sizes)
    sums = np.add.reduceat(y, np.concatenate([[0], np.cumsum(sizes)[:-1]]))
    got = cr2_variance((sums - y.mean() * sizes)[None, :], shape)[0]
    assert got == pytest.approx(variance, rel=1e-10)
    assert satterthwaite_df(shape, np.array([rho]))[0] == pytest.approx(min(df, sizes.size - 1), rel=1e-9)


def test_cr2_of_single_trials_is_statsmodels_hc2() -> None:
    sm = pytest.importorskip("statsmodels.api")
    y = (np.random.default_rng(4).random(60) < 0.4).astype(float)
    fit = sm.OLS(y, np.ones(60)).fit(cov_type="HC2")
    shape = Shape.of([1] * 60)
    assert cr2_variance((y - y.mean())[None, :], shape)[0] == pytest.approx(float(fit.bse[0]) ** 2, rel=1e-12)


def test_equal_clusters_give_cr1_and_g_minus_one_degrees_of_freedom() -> None:
    """With equal sizes CR2 is statsmodels' cluster-robust (CR1) variance, and the df is G - 1."""
    sm = pytest.importorskip("statsmodels.api")
    rng = np.random.default_rng(5)
    groups = np.repeat(np.arange(12), 7)
    y = (rng.random(groups.size) < 0.3 + 0.04 * groups).astype(float)
    fit = sm.OLS(y, np.ones(y.size)).fit(cov_type="cluster", cov_kwds={"groups": groups})
    shape = Shape.of([7] * 12)
    sums = np.add.reduceat(y, np.arange(0, y.size, 7))
    assert cr2_variance((sums - y.mean() * 7)[None, :], shape)[0] == pytest.approx(float(fit.bse[0]) ** 2, rel=1e-12)
    assert satterthwaite_df(shape, np.array([0.0, 0.5, 1.0])) == pytest.approx([11, 11, 11])


def test_degrees_of_freedom_count_the_items_that_carry_the_weight() -> None:
    """A '*' threshold over 400 one-trial items and 20 items of 116 trials: not 419 degrees of freedom."""
    df = satterthwaite_df(Shape.of([1] * 400 + [116] * 20), np.array([0.0, 0.5]))
    assert 19 < df[0] < 30 and 19 <= df[1] < 21


def test_bounds_invert_the_tests() -> None:
    rng = np.random.default_rng(6)
    clusters = np.repeat(np.arange(15), rng.integers(2, 30, 15)).tolist()
    outcomes = (rng.random(len(clusters)) < 0.8).tolist()
    pooled = pooled_accuracy(outcomes, clusters)
    low, high = pooled.bounds(0.05)
    assert pooled.p_above(low) == pytest.approx(0.05, abs=1e-6)
    assert pooled.p_below(high) == pytest.approx(0.05, abs=1e-6)
    before = (rng.random(len(clusters)) < 0.8).tolist()
    diff = paired_difference(outcomes, before, clusters)
    lower = diff.drop_lower(0.05)
    assert diff.p_drop_over(lower) == pytest.approx(0.05, abs=1e-6)
    assert diff.low < diff.diff < diff.high


@pytest.mark.parametrize("right", [True, False])
def test_no_jump_at_the_ceiling_or_the_floor(right: bool) -> None:
    """2,320 trials over 20 questions: every flipped answer moves the one-sided bound by a little and never up
    (it was 0.870 with none wrong and 0.995 with one; then 0.898, 0.916 ... with 1, 2 ... wrong: issue 38.5)."""
    clusters = [q for q in range(20) for _ in range(116)]
    bounds = []
    for flipped in range(12):
        outcomes = [right] * 2320
        for j in range(flipped):
            outcomes[(j % 20) * 116 + j // 20] = not right
        low, high = pooled_accuracy(outcomes, clusters).bounds(0.05)
        bounds.append(low if right else 1 - high)
    steps = np.diff(bounds)
    assert bounds[0] == pytest.approx(0.870, abs=0.01)
    assert (steps <= 1e-12).all() and np.abs(steps).max() < 0.035, bounds
