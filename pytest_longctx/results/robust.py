"""Cluster-robust estimates of a mean over clusters of unequal size, as arrays (one row per sample of a batch).

The scalar estimators in :mod:`pytest_longctx.results.clustered` call these with a batch of one; the seeded
simulation (``benchmarks/sim_family.py``) calls them with a thousand rows at once. Three pieces:

* **CR2** (Bell & McCaffrey 2002): the bias-reduced cluster-robust variance. For a mean (an intercept-only
  least-squares fit, one row per trial) the adjustment matrix of cluster g is ``(I - H_gg)^(-1/2)`` with
  ``H_gg = J / N``, whose only eigenvalue other than 0 is ``h_g = n_g / N``; so the adjusted cluster total is the
  raw one times ``(1 - h_g)^(-1/2)`` and ``V = sum_g r_g^2 / (1 - h_g) / N^2`` (``r_g``: the cluster's sum of
  residuals). With equal clusters it is CR1's ``G / (G - 1)`` factor; a cluster holding most trials is no longer
  taken at its (shrunken) face value.
* **Satterthwaite degrees of freedom** for that variance (Bell & McCaffrey; Imbens & Kolesar 2016) under a
  working model where trials of one cluster correlate with ``rho``: ``df = (tr B)^2 / ||B||_F^2`` with
  ``B_gh = u_g' Omega u_h``. ``u_g = (I - H) w_g``, ``w_g`` the adjusted indicator of cluster g; this reduces to
  ``c_g c_h (delta_gh q_g - h_h q_g - h_g q_h + h_g h_h Q)`` with ``c_g = (1 - h_g)^(-1/2)``,
  ``q_g = n_g (1 - rho) + rho n_g^2`` and ``Q = sum q``: O(G) per row. Equal clusters give ``G - 1``; 400 one-trial
  clusters beside 20 clusters of 116 give about 20, not 419: the degrees of freedom count the clusters that carry
  the weight. The working ``rho`` is the one the design effect implies (``(deff - 1) / (m - 1)``).
* **A smoothed design effect**: the CR2 variance over the variance of independent trials, at least 1, and at
  least ``1 + (m - 1) * W / (W + E)``, where ``m = sum n_g^2 / N`` (trials per cluster as a trial sees it),
  ``E`` the minority outcomes (wrong answers near the ceiling, right ones near the floor, discordant pairs for a
  difference) and ``W = PRIOR_WEIGHT``. With no minority outcome it is the worst case (each cluster one unit,
  ``deff = m``), and every further one moves it a step of ``W / (W + E)(W + E + 1)``: one flipped answer among
  thousands moves a bound by a little, not from 0.870 to 0.995. Far from the ceiling the data's own design effect
  exceeds the floor.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

Array = NDArray[np.float64]

#: The weight, in minority outcomes, of the worst case the smoothed design effect starts from
#: (set by ``benchmarks/sim_family.py``: coverage at 0.97 over 20 unequal items against continuity at the ceiling).
PRIOR_WEIGHT = 3.0


@dataclass(frozen=True)
class Shape:
    """The sizes of a design's clusters and what the estimators need from them alone."""

    sizes: Array  # (G,)
    n: float
    h: Array  # n_g / N
    m: float  # sum n_g^2 / N

    @classmethod
    def of(cls, sizes: NDArray[np.floating] | NDArray[np.integer] | list[int]) -> Shape:
        s = np.asarray(sizes, dtype=float)
        n = float(s.sum())
        return cls(s, n, s / n if n else s, float((s * s).sum() / n) if n else 1.0)

    @property
    def clusters(self) -> int:
        return int(self.sizes.size)


def cr2_variance(residual_sums: Array, shape: Shape) -> Array:
    """CR2 variance of a trial-weighted mean from each row's per-cluster residual sums (``(B, G)`` -> ``(B,)``);
    nan with fewer than two clusters."""
    if shape.clusters < 2 or shape.n == 0:
        return np.full(residual_sums.shape[:-1], np.nan)
    return np.asarray((residual_sums ** 2 / (1.0 - shape.h)).sum(axis=-1) / shape.n ** 2)


def satterthwaite_df(shape: Shape, rho: Array) -> Array:
    """Bell-McCaffrey degrees of freedom of the CR2 variance of a mean, working correlation ``rho`` per row."""
    if shape.clusters < 2:
        return np.ones_like(rho)
    n_g, h = shape.sizes, shape.h
    c = 1.0 / np.sqrt(1.0 - h)
    r = np.asarray(rho, dtype=float)[..., None]
    q = n_g * (1.0 - r) + r * n_g * n_g  # (B, G)
    big_q = q.sum(axis=-1, keepdims=True)
    d = c * c * q
    a, b = c * q, np.broadcast_to(c * h, q.shape)
    diag_l = -2.0 * a * b + big_q * b * b
    trace = (d + diag_l).sum(axis=-1)
    aa, ab, bb = (a * a).sum(-1), (a * b).sum(-1), (b * b).sum(-1)
    qq = big_q[..., 0]
    # ||L||^2 for L = U M U', U = [a b], M = [[0, -1], [-1, Q]]: tr(M G M G) with G = U'U.
    m11, m12, m21, m22 = -ab, -bb, -aa + qq * ab, -ab + qq * bb  # M G
    frob_l = m11 * m11 + 2 * m12 * m21 + m22 * m22
    frob = (d * d).sum(-1) + 2 * (d * diag_l).sum(-1) + frob_l
    with np.errstate(divide="ignore", invalid="ignore"):
        df = trace * trace / frob
    return np.asarray(np.clip(np.nan_to_num(df, nan=1.0), 1.0, shape.clusters - 1.0))


def smoothed_deff(v_cluster: Array, v_independent: Array, minority: Array, shape: Shape) -> Array:
    """The design effect: CR2 over independent variance, at least 1 and at least the smoothed worst case."""
    floor = 1.0 + max(shape.m - 1.0, 0.0) * PRIOR_WEIGHT / (PRIOR_WEIGHT + minority)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(v_independent > 0, v_cluster / np.where(v_independent > 0, v_independent, 1.0), 1.0)
    return np.asarray(np.maximum(np.maximum(np.nan_to_num(ratio, nan=1.0), 1.0), floor))


def working_rho(deff: Array, shape: Shape) -> Array:
    """The intra-cluster correlation a design effect implies (``deff = 1 + (m - 1) rho``), in [0, 1]."""
    if shape.m <= 1.0:
        return np.zeros_like(deff)
    return np.asarray(np.clip((deff - 1.0) / (shape.m - 1.0), 0.0, 1.0))


def t_ppf(q: float | Array, df: Array) -> Array:
    from scipy.stats import t

    return np.asarray(t.ppf(q, df), dtype=float)


def t_cdf(x: Array, df: Array) -> Array:
    from scipy.stats import t

    return np.asarray(t.cdf(x, df), dtype=float)


def wilson(p: Array, n_eff: Array, z: Array) -> tuple[Array, Array]:
    """Wilson's score interval for a proportion ``p`` of ``n_eff`` (effective) trials, critical value ``z``."""
    with np.errstate(divide="ignore", invalid="ignore"):
        denom = 1 + z * z / n_eff
        centre = (p + z * z / (2 * n_eff)) / denom
        half = z * np.sqrt(np.maximum(p * (1 - p), 0.0) / n_eff + z * z / (4 * n_eff * n_eff)) / denom
    low = np.where(p <= 0, 0.0, np.maximum(0.0, centre - half))
    high = np.where(p >= 1, 1.0, np.minimum(1.0, centre + half))
    return np.asarray(np.where(n_eff > 0, low, 0.0)), np.asarray(np.where(n_eff > 0, high, 1.0))


@dataclass(frozen=True)
class PooledRows:
    """Pooled accuracy per row: estimate, design effect, effective trials, degrees of freedom."""

    correct: Array
    accuracy: Array
    deff: Array
    n_eff: Array
    df: Array

    def interval(self, level: float) -> tuple[Array, Array]:
        """The two-sided ``level`` interval."""
        return wilson(self.accuracy, self.n_eff, t_ppf(1 - (1 - level) / 2, self.df))

    def bounds(self, alpha: float) -> tuple[Array, Array]:
        """One-sided ``1 - alpha`` lower and upper bounds."""
        return wilson(self.accuracy, self.n_eff, t_ppf(1 - alpha, self.df))

    def p_below(self, value: float | Array) -> Array:
        """One-sided score p of 'accuracy >= value' (small when the data show it below): the test
        :meth:`bounds`' lower bound inverts."""
        v = np.asarray(value, dtype=float)
        spread = np.sqrt(v * (1 - v) / self.n_eff)
        with np.errstate(divide="ignore", invalid="ignore"):
            z = (self.accuracy - v) / spread
        at_edge = np.where(self.accuracy < v, 0.0, 1.0)
        return np.asarray(np.where(spread > 0, t_cdf(z, self.df), at_edge))


def pooled_rows(correct_sums: Array, shape: Shape) -> PooledRows:
    """Pooled accuracy from each row's right answers per cluster (``(B, G)``)."""
    sums = np.asarray(correct_sums, dtype=float)
    k = sums.sum(axis=-1)
    p = k / shape.n
    v = cr2_variance(sums - p[..., None] * shape.sizes, shape)
    deff = smoothed_deff(v, p * (1 - p) / shape.n, np.minimum(k, shape.n - k), shape)
    df = satterthwaite_df(shape, working_rho(deff, shape))
    return PooledRows(k, p, deff, shape.n / deff, df)


@dataclass(frozen=True)
class PairedRows:
    """Paired difference per row: Agresti-Min's centre and standard error on effective counts, and the rest."""

    regressed: Array
    improved: Array
    diff: Array
    centre: Array
    se: Array
    deff: Array
    df: Array

    def interval(self, level: float) -> tuple[Array, Array]:
        half = t_ppf(1 - (1 - level) / 2, self.df) * self.se
        return np.maximum(-1.0, self.centre - half), np.minimum(1.0, self.centre + half)

    def p_drop_over(self, margin: float) -> Array:
        """One-sided p of 'the drop is at most ``margin``'."""
        return t_cdf((self.centre + margin) / self.se, self.df)

    def drop_lower(self, alpha: float) -> Array:
        """One-sided ``1 - alpha`` lower bound of the drop: the margin :meth:`p_drop_over` rejects exactly at."""
        return np.maximum(-1.0, -self.centre - t_ppf(1 - alpha, self.df) * self.se)


def paired_rows(diff_sums: Array, regressed: Array, improved: Array, shape: Shape) -> PairedRows:
    """Paired differences (now minus before) from each row's per-cluster sums of differences and its counts of
    regressions (right -> wrong) and improvements."""
    d_sums = np.asarray(diff_sums, dtype=float)
    n = shape.n
    reg, imp = np.asarray(regressed, dtype=float), np.asarray(improved, dtype=float)
    diff = (imp - reg) / n
    v = cr2_variance(d_sums - diff[..., None] * shape.sizes, shape)
    deff = smoothed_deff(v, ((reg + imp) / n - diff * diff) / n, reg + imp, shape)
    # Agresti-Min on the effective counts: half a pseudo-pair in each of the four cells.
    b, c, m = reg / deff + 0.5, imp / deff + 0.5, n / deff + 2
    centre = (c - b) / m
    se = np.sqrt(np.maximum((b + c) / m - centre * centre, 0.0) / m)
    df = satterthwaite_df(shape, working_rho(deff, shape))
    return PairedRows(reg, imp, diff, centre, se, deff, df)
