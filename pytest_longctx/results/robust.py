"""Cluster-robust estimates of a mean over clusters of unequal size, as arrays (one row per sample of a batch).

The scalar estimators in :mod:`pytest_longctx.results.clustered` call these with a batch of one; the seeded
simulation (``benchmarks/sim_family.py``) calls them with a thousand rows at once; the paired difference's rows,
built on the same pieces, are :mod:`~pytest_longctx.results.paired_rows`'s. Three pieces:

* **CR2** (Bell & McCaffrey 2002): the bias-reduced cluster-robust variance. For a mean (an intercept-only
  least-squares fit, one row per trial) the adjustment matrix of cluster g is ``(I - H_gg)^(-1/2)`` with
  ``H_gg = J / N``, whose only eigenvalue other than 0 is ``h_g = n_g / N``; so the adjusted cluster total is the
  raw one times ``(1 - h_g)^(-1/2)`` and ``V = sum_g r_g^2 / (1 - h_g) / N^2`` (``r_g``: the cluster's sum of
  residuals). With equal clusters it is CR1's ``G / (G - 1)`` factor; a cluster holding most trials is no longer
  taken at its (shrunken) face value.
* **Satterthwaite degrees of freedom** for that variance (Bell & McCaffrey; Imbens & Kolesar 2016). The
  formula takes a working model where trials of one cluster correlate with ``rho``: ``df = (tr B)^2 / ||B||_F^2`` with
  ``B_gh = u_g' Omega u_h``. ``u_g = (I - H) w_g``, ``w_g`` the adjusted indicator of cluster g; this reduces to
  ``c_g c_h (delta_gh q_g - h_h q_g - h_g q_h + h_g h_h Q)`` with ``c_g = (1 - h_g)^(-1/2)``,
  ``q_g = n_g (1 - rho) + rho n_g^2`` and ``Q = sum q``: O(G) per row. Equal clusters give ``G - 1``; 400 one-trial
  clusters beside 20 clusters of 116 give about 20, not 419: the degrees of freedom count the clusters that carry
  the weight. The estimators use ``rho = 0`` (independent trials, as clubSandwich does for a least-squares fit):
  the simulation over the family of data models found the ``rho`` a design effect implies too cautious (2-3
  degrees of freedom and 99-100% coverage for 20 items of 200 down to 10 trials), and 0 within the targets.
* **A smoothed design effect**: the CR2 variance over the variance of independent trials, at least 1, and at
  least ``1 + (m - 1) * W / (W + E)``, where ``m = sum n_g^2 / N`` (trials per cluster as a trial sees it),
  ``E`` the minority outcomes (wrong answers near the ceiling, right ones near the floor, discordant pairs for a
  difference) and ``W = PRIOR_WEIGHT``. With no minority outcome it is the worst case (each cluster one unit,
  ``deff = m``), and every further one moves it a step of ``W / (W + E)(W + E + 1)``: one flipped answer among
  thousands moves a bound by a little, not from 0.870 to 0.995. Far from the ceiling the data's own design effect
  exceeds the floor.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from pytest_longctx.results.shape import Array as Array  # re-exported: the estimators' names
from pytest_longctx.results.shape import Shape as Shape
from pytest_longctx.results.shape import t_cdf as t_cdf
from pytest_longctx.results.shape import t_ppf as t_ppf

#: The weight, in minority outcomes, of the worst case the smoothed design effect starts from
#: (set by ``benchmarks/sim_family.py``: coverage at 0.97 over 20 unequal items against continuity at the ceiling).
PRIOR_WEIGHT = 3.0
#: How fast the paired difference's floor gives way to its discordant pairs (they are many even between two runs
#: of one model, and spread over the items).
PAIRED_FLOOR_POWER = 2.0
PAIRED_PRIOR_WEIGHT = 1.0
#: The share of the null-imposed variance increment the paired test adds (1: the whole CR2 variance at the null).
NULL_SHARE = 1.0
#: The paired test's continuity correction, in effective discordant pairs (McNemar's, after Edwards 1948, is half
#: the step of ``c - b``; three eighths of it here): without it the alarm fired 5.1-5.5% of the time at alpha 0.05 in
#: nulls of few discordant pairs or many items (lrt, litm-*); with 0.375 at most 4.7% over 8,000 runs a null, and a
#: 5-point drop confined to docs' ``test_position`` keeps the power the sequential rule needs (0.5: fixed 80.7-81.1%,
#: sequential 79.7-80.1%; ``benchmarks/conformance.py``, ``--target``).
CONTINUITY = 0.375
#: The working correlation of the degrees of freedom, as a share of the one the design effect implies.
WORKING_RHO_SHARE = 0.0


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


def deff_floor(minority: Array, shape: Shape, power: float = 1.0, weight: float | None = None) -> Array:
    """The worst case (``m``) smoothed away by the minority outcomes: ``1 + (m - 1) (W / (W + E))^power``."""
    w = PRIOR_WEIGHT if weight is None else weight
    return np.asarray(1.0 + max(shape.m - 1.0, 0.0) * (w / (w + minority)) ** power)


def measured_deff(v_cluster: Array, v_independent: Array) -> Array:
    """CR2 over independent variance, at least 1 (1 where there is nothing to measure)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(v_independent > 0, v_cluster / np.where(v_independent > 0, v_independent, 1.0), 1.0)
    return np.asarray(np.maximum(np.nan_to_num(ratio, nan=1.0), 1.0))


def smoothed_deff(v_cluster: Array, v_independent: Array, minority: Array, shape: Shape,
                  power: float = 1.0, weight: float | None = None) -> Array:
    """The design effect: CR2 over independent variance, at least 1 and at least the smoothed worst case."""
    return np.asarray(np.maximum(measured_deff(v_cluster, v_independent), deff_floor(minority, shape, power, weight)))


def working_rho(deff: Array, shape: Shape) -> Array:
    """The intra-cluster correlation a design effect implies (``deff = 1 + (m - 1) rho``), in [0, 1]."""
    if shape.m <= 1.0:
        return np.zeros_like(deff)
    return np.asarray(np.clip((deff - 1.0) / (shape.m - 1.0), 0.0, 1.0))


def design_df(deff: Array, shape: Shape) -> Array:
    """The degrees of freedom per row: Satterthwaite's at the working correlation (computed once when it is 0)."""
    if WORKING_RHO_SHARE == 0.0:
        return np.full(np.shape(deff), float(satterthwaite_df(shape, np.zeros(1))[0]))
    return satterthwaite_df(shape, WORKING_RHO_SHARE * working_rho(deff, shape))


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
    """Pooled accuracy per row, and the score test its bounds invert.

    The test of 'accuracy = p0' divides ``p - p0`` by ``sqrt(p0 (1 - p0) deff(p0) / N)``: Wilson's form, with a
    design effect taken where the hypothesis holds. Toward 1/2 the items' spread is held on the logit scale, so
    the excess the data measured grows with ``p0 (1 - p0)`` (``1 + excess * p0 (1 - p0) / (p~ (1 - p~))``,
    ``p~ = (k + 1) / (N + 2)``), up to the worst case ``m`` itself; it never falls below the design effect at
    the estimate. A sample of items that missed the hard ones shows a high accuracy with a small spread; a bound
    that keeps the spread fixed lies above the truth too often (7-8% at 85% with 20 items;
    ``benchmarks/sim_family.py``).
    """

    correct: Array
    accuracy: Array
    deff: Array  # at the estimate
    n_eff: Array
    df: Array
    n: float = 1.0
    excess: Array | None = None  # measured design effect - 1
    floor: Array | None = None
    m: float = 1.0
    sums: Array | None = None  # right answers per cluster (B, G): what the monotone envelope starts from
    shape: Shape | None = None

    def deff_at(self, p0: Array) -> Array:
        if self.excess is None or self.floor is None:
            return self.deff
        k, n = self.correct, self.n
        base = (k + 1) / (n + 2) * (1 - (k + 1) / (n + 2))
        scaled = 1.0 + self.excess * p0 * (1 - p0) / base
        return np.asarray(np.maximum(np.minimum(scaled, max(self.m, 1.0)), self.deff))

    def statistic(self, p0: Array) -> Array:
        """``(p - p0) / se(p0)``; +-inf where p0 is 0 or 1 and the estimate is not."""
        spread = np.sqrt(np.maximum(p0 * (1 - p0) * self.deff_at(p0) / self.n, 0.0))
        with np.errstate(divide="ignore", invalid="ignore"):
            z = (self.accuracy - p0) / spread
        edge = np.where(self.accuracy > p0, np.inf, np.where(self.accuracy < p0, -np.inf, 0.0))
        return np.asarray(np.where(spread > 0, z, edge))

    def p_below(self, value: float | Array) -> Array:
        """One-sided p of 'accuracy >= value' (small when the data show it below): what :meth:`bounds`' upper
        bound inverts. Monotone: the largest p of the records at most as good (:mod:`~.envelope`)."""
        return self._enveloped(lambda rows: rows._p_below(value), self._p_below(value), upper=True)

    def p_above(self, value: float | Array) -> Array:
        """One-sided p of 'accuracy <= value' (small when the data show it above): what the lower bound inverts.
        Monotone: the largest p of the records at least as good."""
        return self._enveloped(lambda rows: rows._p_above(value), self._p_above(value), upper=False)

    def _p_below(self, value: float | Array) -> Array:
        z = self._z(value, np.inf)
        return np.asarray(np.where(np.isfinite(z), t_cdf(np.nan_to_num(z), self.df), np.where(z > 0, 1.0, 0.0)))

    def _p_above(self, value: float | Array) -> Array:
        z = self._z(value, -np.inf)
        return np.asarray(np.where(np.isfinite(z), t_cdf(-np.nan_to_num(z), self.df), np.where(z > 0, 0.0, 1.0)))

    def _z(self, value: float | Array, keep: float) -> Array:
        """The statistic at ``value``; where it points away from what the p tests (``keep``: its sign there), it
        takes the design's worst case (``deff = m``): a p of at least 1/2 that grows as right answers fall
        whatever their spread, so that the envelope's p is monotone there too."""
        v = np.broadcast_to(np.asarray(value, dtype=float), self.accuracy.shape)
        z = self.statistic(v)
        spread = np.sqrt(np.maximum(v * (1 - v) * max(self.m, 1.0) / self.n, 0.0))
        with np.errstate(divide="ignore", invalid="ignore"):
            worst = np.where(spread > 0, (self.accuracy - v) / spread, z)
        return np.asarray(np.where(np.sign(z) == np.sign(keep), worst, z))

    def bounds(self, alpha: float) -> tuple[Array, Array]:
        """One-sided ``1 - alpha`` lower and upper bounds: the values the score test rejects exactly at, taken over
        the records at least (lower) and at most (upper) as good (:mod:`~pytest_longctx.results.envelope`)."""
        return self._monotone(t_ppf(1 - alpha, self.df))

    def interval(self, level: float) -> tuple[Array, Array]:
        """The two-sided ``level`` interval."""
        return self._monotone(t_ppf(1 - (1 - level) / 2, self.df))

    def _enveloped(self, reading: Callable[[PooledRows], Array], own: Array, upper: bool,
                   pick: Callable[..., Any] = np.max) -> Array:
        """``reading`` per row, taken (``pick``: max or min) over the row's envelope and its own value."""
        from pytest_longctx.results.envelope import affordable, envelope_rows

        if self.sums is None or self.shape is None or not affordable(self.shape):
            return own
        out = np.array(own, dtype=float, copy=True)
        for i in range(out.shape[0]):  # the records at least (at most) as good, by total, at their largest variance
            for rows in (pooled_from(b[0], b[1], self.shape) for b in envelope_rows(self.sums[i], self.shape, upper)):
                out[i] = pick([out[i], pick(reading(rows))])
        return out

    def _monotone(self, crit: Array) -> tuple[Array, Array]:
        low, high = self._bounds(crit)
        c = float(np.min(crit))
        return (self._enveloped(lambda rows: rows._bounds(np.full(rows.df.shape, c))[0], low, False, np.min),
                self._enveloped(lambda rows: rows._bounds(np.full(rows.df.shape, c))[1], high, True, np.max))

    def _bounds(self, crit: Array) -> tuple[Array, Array]:
        p = self.accuracy
        lo, hi = np.zeros_like(p), p.copy()  # the statistic falls as p0 rises: bisect each side
        for _ in range(52):
            mid = (lo + hi) / 2
            out = self.statistic(mid) > crit
            lo, hi = np.where(out, mid, lo), np.where(out, hi, mid)
        low = np.where(p <= 0, 0.0, hi)
        lo, hi = p.copy(), np.ones_like(p)
        for _ in range(52):
            mid = (lo + hi) / 2
            out = self.statistic(mid) < -crit
            lo, hi = np.where(out, lo, mid), np.where(out, mid, hi)
        return np.asarray(low), np.asarray(np.where(p >= 1, 1.0, lo))


def pooled_rows(correct_sums: Array, shape: Shape) -> PooledRows:
    """Pooled accuracy from each row's right answers per cluster (``(B, G)``)."""
    sums = np.asarray(correct_sums, dtype=float)
    k = sums.sum(axis=-1)
    return pooled_from(k, cr2_variance(sums - (k / shape.n)[..., None] * shape.sizes, shape), shape, sums)


def pooled_from(k: Array, variance: Array, shape: Shape, sums: Array | None = None) -> PooledRows:
    """Rows of ``k`` right answers whose mean has the CR2 variance ``variance`` (``sums``: the right answers per
    cluster they come from, for the monotone envelope; None: the rows are an envelope's own)."""
    p = k / shape.n
    measured = measured_deff(variance, p * (1 - p) / shape.n)
    floor = deff_floor(np.minimum(k, shape.n - k), shape)
    deff = np.maximum(measured, floor)
    df = design_df(deff, shape)
    return PooledRows(k, p, deff, shape.n / deff, df, shape.n, measured - 1.0, floor, shape.m, sums, shape)
