"""The clustered paired test as arrays (one row per sample of a batch), and its monotone envelope (issue 38.5).

:class:`PairedRows` is a paired difference per row: Agresti-Min's centre and standard error on effective counts,
the CR2 variance with the null imposed and McNemar's continuity correction (the design's pieces, CR2, the degrees of
freedom and the design effects, are :mod:`~pytest_longctx.results.robust`'s). Its p-values and bounds are monotone
by construction, as the pooled ones (:mod:`~pytest_longctx.results.envelope`): each is the largest (or smallest)
over every record at most (or at least) as good for this run, which :class:`PairedRecord` enumerates by their totals
at their largest CR2 variance (the envelope's fractional knapsack). The scalar :class:`~.clustered.PairedDiff` reads
one row; the seeded simulations (``benchmarks/``) read a thousand at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pytest_longctx.results.envelope import BUDGET, affordable, fill_variance, max_convex, max_linear
from pytest_longctx.results.robust import (
    CONTINUITY,
    NULL_SHARE,
    PAIRED_FLOOR_POWER,
    PAIRED_PRIOR_WEIGHT,
    cr2_variance,
    design_df,
    pooled_from,
    smoothed_deff,
)
from pytest_longctx.results.shape import Array, t_cdf, t_ppf
from pytest_longctx.results.shape import Shape as Shape  # re-exported: the design the rows are built on


@dataclass(frozen=True)
class PairedRows:
    """Paired difference per row: Agresti-Min's centre and standard error on effective counts, and the test of
    'difference = d0' that both its bounds and the alarm use.

    The test's variance is the estimate's plus what the CR2 variance gains when the residuals are taken at ``d0``
    instead of at the estimate (the null imposed, as in a wild cluster bootstrap with the null imposed):
    ``((c - d0)^2 sum_g n_g^2 / (1 - h_g) + 2 (c - d0) sum_g r_g n_g / (1 - h_g)) / N^2``. It keeps the alarm
    at its level between two different models of equal accuracy when few items carry the weight (a plain t-test
    fired 6-7% there; ``benchmarks/sim_family.py``), and a test with fewer effective items than its critical value
    squared never rejects: such a run cannot show a drop. The centre's distance from ``d0`` is shortened by half an
    effective discordant pair (:data:`CONTINUITY`), McNemar's continuity correction: the alarm holds its level where
    discordant pairs are few.
    """

    regressed: Array
    improved: Array
    diff: Array
    centre: Array
    se: Array
    deff: Array
    df: Array
    size_term: Array | float = 0.0  # sum n_g^2 / (1 - h_g) / N^2
    cross_term: Array | float = 0.0  # sum r_g n_g / (1 - h_g) / N^2
    #: the continuity correction: :data:`CONTINUITY` effective discordant pairs, on the difference's scale
    correction: Array | float = 0.0
    #: the record the rows come from (one row), for the monotone envelope (:class:`PairedRecord`)
    record: Any = None

    def statistic(self, d0: Array) -> Array:
        raw = self.centre - d0
        delta = np.sign(raw) * np.maximum(np.abs(raw) - self.correction, 0.0)
        extra = NULL_SHARE * np.maximum(delta * delta * self.size_term + 2 * delta * self.cross_term, 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.asarray(delta / np.sqrt(self.se * self.se + extra))

    def p_drop_over(self, margin: float) -> Array:
        """One-sided p of 'the drop is at most ``margin``' (small when the data show a larger drop); with a record,
        the largest over the records at most as good for this run (:func:`paired_p_over`)."""
        return paired_p_over(self, margin)

    def own_p_over(self, margin: float) -> Array:
        return t_cdf(self.statistic(np.full_like(self.centre, -margin)), self.df)

    def _edge(self, crit: Array, upper: bool) -> Array:
        """The difference the test rejects exactly at, above the centre (``upper``) or below it."""
        inside, outside = self.centre.copy(), np.full_like(self.centre, 1.0 if upper else -1.0)
        for _ in range(52):
            mid = (inside + outside) / 2
            z = self.statistic(mid)
            out = z < -crit if upper else z > crit
            inside, outside = np.where(out, inside, mid), np.where(out, mid, outside)
        reached = (self.statistic(np.full_like(self.centre, 1.0 if upper else -1.0)) < -crit) if upper else (
            self.statistic(np.full_like(self.centre, -1.0)) > crit)
        return np.asarray(np.where(reached, outside, 1.0 if upper else -1.0))

    def interval(self, level: float) -> tuple[Array, Array]:
        """The two-sided ``level`` interval (with a record: monotone, see :func:`paired_edge`)."""
        q = 1 - (1 - level) / 2
        return paired_edge(self, q, upper=False), paired_edge(self, q, upper=True)

    def drop_lower(self, alpha: float) -> Array:
        """One-sided ``1 - alpha`` lower bound of the drop: the margin :meth:`p_drop_over` reaches ``alpha`` at."""
        return np.asarray(-paired_edge(self, 1 - alpha, upper=True))


def paired_rows(diff_sums: Array, regressed: Array, improved: Array, shape: Shape,
                record: Any = None) -> PairedRows:
    """Paired differences (now minus before) from each row's per-cluster sums of differences and its counts of
    regressions (right -> wrong) and improvements (``record``: a single row's
    :class:`PairedRecord`, for the monotone envelope)."""
    d_sums = np.asarray(diff_sums, dtype=float)
    n = shape.n
    reg, imp = np.asarray(regressed, dtype=float), np.asarray(improved, dtype=float)
    residuals = d_sums - ((imp - reg) / n)[..., None] * shape.sizes
    with np.errstate(divide="ignore", invalid="ignore"):  # one cluster: no cross term (see paired_from)
        cross = (residuals * shape.sizes / (1.0 - shape.h)).sum(axis=-1) / n ** 2
    return paired_from(reg, imp, cr2_variance(residuals, shape), cross, shape, record)


def paired_from(reg: Array, imp: Array, variance: Array, cross: Array, shape: Shape,
                record: Any = None) -> PairedRows:
    """Rows of ``reg`` regressed and ``imp`` improved pairs whose differences have the CR2 variance ``variance``
    and the cross term ``cross`` (``sum_g r_g n_g / (1 - h_g) / N^2``)."""
    n = shape.n
    diff = (imp - reg) / n
    deff = smoothed_deff(variance, ((reg + imp) / n - diff * diff) / n, reg + imp, shape, PAIRED_FLOOR_POWER,
                         PAIRED_PRIOR_WEIGHT)
    # Agresti-Min on the effective counts: half a pseudo-pair in each of the four cells.
    b, c, m = reg / deff + 0.5, imp / deff + 0.5, n / deff + 2
    centre = (c - b) / m
    se = np.sqrt(np.maximum((b + c) / m - centre * centre, 0.0) / m)
    df = design_df(deff, shape)
    if shape.clusters < 2:
        return PairedRows(reg, imp, diff, centre, se, deff, df, correction=CONTINUITY / m)
    size_term = float((shape.sizes ** 2 / (1.0 - shape.h)).sum() / n ** 2)
    return PairedRows(reg, imp, diff, centre, se, deff, df, size_term, cross, CONTINUITY / m, record)


@dataclass(frozen=True)
class PairedRecord:
    """What a paired difference's envelope starts from: right answers per cluster of both runs, and the pairs'
    counts (regressed, improved, right in both, wrong in both)."""

    now: Array
    before: Array
    shape: Shape
    regressed: int
    improved: int
    both_right: int
    both_wrong: int
    #: the compared run's design effect (what a non-inferiority test's variance takes at least)
    before_deff: float = 1.0
    _cache: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)

    def affordable(self, worse: bool) -> bool:
        k = float(self.now.sum())
        span = k if worse else self.shape.n - k
        pairs = self.improved if worse else self.regressed
        return affordable(self.shape) and (span + 1) * (pairs + 1) <= BUDGET // 20

    def rows(self, worse: bool) -> tuple[Array, Array, Array, Array, Array]:
        """:meth:`_rows`, computed once."""
        if worse not in self._cache:
            self._cache[worse] = self._rows(worse)
        return self._cache[worse]  # type: ignore[no-any-return]

    def _rows(self, worse: bool) -> tuple[Array, Array, Array, Array, Array]:
        """The envelope's rows: every record at most (``worse``) or at least as good for this run, by its totals
        (right answers and regressions); per row its regressed and improved pairs, the largest CR2 variance of the
        differences, the cross term (:class:`PairedRows`) at its most cautious
        (smallest for ``worse``: the test of a drop; largest otherwise), and the right answers this run has."""
        sizes, n = self.shape.sizes, self.shape.n
        w = 1.0 / (1.0 - self.shape.h)
        k, b = float(self.now.sum()), float(self.before.sum())
        deltas = np.arange(0.0, (k if worse else n - k) + 1)
        totals = k - deltas if worse else k + deltas
        diff = ((totals - b) / n)[:, None]
        if worse:  # this run's wrong answers grow from n - now
            start, centres = sizes - self.now, sizes - self.before - diff * sizes
        else:
            start, centres = self.now, self.before + diff * sizes
        variance = max_convex(start, self.shape, centres, deltas) / n ** 2
        reach = max_linear(start, self.shape, sizes * w, deltas) - (centres * sizes * w).sum(axis=1)
        cross = (-reach if worse else reach) / n ** 2
        spare = self.improved if worse else self.both_wrong  # pairs a step may move the other way
        steps = self.both_right if worse else self.regressed
        low, high = np.maximum(0.0, deltas - spare), np.minimum(deltas, steps)
        count = np.maximum(high - low + 1, 0).astype(int)
        at = np.repeat(np.arange(len(deltas)), count)
        j = low[at] + np.arange(len(at)) - np.repeat(np.cumsum(count) - count, count)
        d = deltas[at]
        reg = self.regressed + j if worse else self.regressed - j
        imp = self.improved - (d - j) if worse else self.improved + d - j
        return reg, imp, variance[at], cross[at], totals[at]


def _rows(rows: PairedRows, worse: bool) -> PairedRows | None:
    """The envelope's rows of a one-row :class:`PairedRows` with a record (None: none, or too costly)."""
    record = rows.record
    if not isinstance(record, PairedRecord) or not record.affordable(worse):
        return None
    key = ("rows", worse)
    if key not in record._cache:
        reg, imp, variance, cross, _ = record.rows(worse)
        record._cache[key] = paired_from(reg, imp, variance, cross, record.shape)
    return record._cache[key]  # type: ignore[no-any-return]


def paired_p_over(rows: PairedRows, margin: float) -> Array:
    """The p of 'the drop is at most ``margin``', monotone: the largest over every record at most as good for this
    run, each at its largest variance and its most cautious cross term. Where a record shows no drop beyond the
    margin (a p of at least 1/2) it is taken at the design's worst case (no spread measured: Agresti-Min on the
    counts, design effect ``m``), so that it only grows as answers turn right there too."""
    env = _rows(rows, worse=True)
    if env is None:
        return rows.own_p_over(margin)
    assert isinstance(rows.record, PairedRecord)
    own = env.own_p_over(margin)
    m, n = max(rows.record.shape.m, 1.0), rows.record.shape.n
    b, c, eff = env.regressed / m + 0.5, env.improved / m + 0.5, n / m + 2
    centre = (c - b) / eff + margin
    se = np.sqrt(np.maximum((b + c) / eff - ((c - b) / eff) ** 2, 0.0) / eff)
    with np.errstate(divide="ignore", invalid="ignore"):
        far = t_cdf(np.maximum(centre - 0.5 / eff, 0.0) / se, env.df)
    return np.asarray([np.max(np.where(env.centre + margin > 0, np.nan_to_num(far, nan=0.5), own))])


def paired_edge(rows: PairedRows, q: float, upper: bool) -> Array:
    """The ``q`` one-sided bound of the difference, monotone: the upper bound the largest over the records at most
    as good for this run, the lower bound the smallest over those at least as good."""
    own = rows._edge(t_ppf(q, rows.df), upper)
    env = _rows(rows, worse=upper)
    if env is None:
        return own
    edges = env._edge(np.full_like(env.df, float(t_ppf(q, env.df[:1])[0])), upper)  # one df: the design's
    return np.asarray([max(own[0], edges.max()) if upper else min(own[0], edges.min())])


def p_under(reg: Array, imp: Array, n: float, null_deff: Array, df: Array, margin: float) -> Array:
    """The non-inferiority p of 'the drop is at least ``margin``' (:meth:`~.clustered.PairedDiff.p_drop_under`)."""
    drop = (reg - imp) / n
    regressed = np.maximum(reg / n, imp / n + margin)
    variance = np.maximum(2 * regressed - margin - margin * margin, 0.0) * null_deff / n
    with np.errstate(divide="ignore", invalid="ignore"):
        z = (drop - margin) / np.sqrt(variance)
    return np.asarray(np.where(variance > 0, t_cdf(np.nan_to_num(z), df), np.where(drop < margin, 0.0, 1.0)))


def paired_p_under(rows: PairedRows, margin: float, own: float) -> float:
    """:func:`p_under` monotone: the largest over the records at least as good for this run, each with its
    largest design effects (the differences', this run's answers' at that total, the compared run's). Where a
    record shows a drop of at least the margin (a p of at least 1/2) the design's worst case ``m`` is taken."""
    record, env = rows.record, _rows(rows, worse=False)
    if env is None or not isinstance(record, PairedRecord):
        return own
    shape = record.shape
    if "null" not in record._cache:
        totals = record.rows(False)[4]
        now_deff = pooled_from(totals, fill_variance(record.now, shape, totals), shape).deff
        record._cache["null"] = np.maximum(np.maximum(env.deff, now_deff), record.before_deff)
    null = record._cache["null"]
    near = p_under(env.regressed, env.improved, shape.n, null, env.df, margin)
    far = p_under(env.regressed, env.improved, shape.n, np.full_like(null, max(shape.m, 1.0)), env.df, margin)
    return float(np.max(np.where(env.regressed - env.improved >= margin * shape.n, far, near)))
