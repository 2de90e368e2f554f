"""Pooled bounds monotone by construction, for clusters of any sizes (issue 38.5).

A cluster-robust variance is not monotone in the answers: one more wrong answer in an item far above the rest moves
it toward the mean and can narrow the interval by more than the estimate falls (items of sizes 1 and 4 with 0 and 4
right: the lower bound 0.0157, then 0.0177 with 0 and 3 right). So the lower bound of a record ``x`` (right answers
per cluster) is not its own bound but the smallest bound of every record at least as good, ``min_{y >= x} L(y)``:
the largest lower bound that is monotone and never above the record's own. One more wrong answer only adds records
to that set, so the bound cannot rise; and it is never above the record's own, so its coverage is at least the
record's test's.

The minimum runs over the totals ``k = K..N``. At a total ``k`` the bound falls as the CR2 variance of ``y`` rises
(:func:`~pytest_longctx.results.robust.pooled_rows`: the design effect, its excess and the smoothed floor all grow
with it, the degrees of freedom are the design's), so the worst ``y`` is the one of largest variance. That is a
separable convex maximum under one sum constraint; its linear relaxation (fill clusters whole, best gain per answer
first, the last one in part: a fractional knapsack, equal to the Lagrangian dual) is an upper bound, exact at
``k = K`` (the record itself), computed in ``O(G log G)`` a total and growing when ``x`` falls (a wider box): the
bound at ``k`` taken with it is still monotone. The upper bound is the mirror image (``y <= x``, ``k = 0..K``).

It replaces the ceiling's worst-case chain (every total with the smoothed floor alone): that chain is the set's
records at variance 0, which the relaxation's variance only widens. What the envelope costs in width is measured by
``benchmarks/sim_monotone.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from pytest_longctx.results.shape import Array, Shape, t_cdf, t_ppf


class PairedRows(Protocol):
    """What the envelope reads of :class:`~pytest_longctx.results.robust.PairedRows` (robust builds the rows)."""

    @property
    def record(self) -> object: ...
    @property
    def regressed(self) -> Array: ...
    @property
    def improved(self) -> Array: ...
    @property
    def centre(self) -> Array: ...
    @property
    def df(self) -> Array: ...
    @property
    def deff(self) -> Array: ...

    def own_p_over(self, margin: float) -> Array: ...
    def _edge(self, crit: Array, upper: bool) -> Array: ...
    def like(self, reg: Array, imp: Array, variance: Array, cross: Array, shape: Shape) -> PairedRows: ...
    def pooled_deff(self, k: Array, variance: Array, shape: Shape) -> Array: ...

#: Records with more (totals x clusters) than this take their own bounds: the envelope would cost seconds.
BUDGET = 20_000_000
_BLOCK = 512


def fill_variance(right: Array, shape: Shape, totals: Array) -> Array:
    """Per total ``k`` (each at least ``right.sum()``): an upper bound of the CR2 variance of the mean,
    ``sum_g (y_g - p n_g)^2 / (1 - h_g) / N^2`` with ``p = k / N``, over every ``y`` with ``right <= y <= sizes``
    and ``sum y = k`` (nan with fewer than two clusters, as :func:`~pytest_longctx.results.robust.cr2_variance`)."""
    k = np.asarray(totals, dtype=float)
    if shape.clusters < 2 or shape.n == 0:
        return np.full(k.shape, np.nan)
    centres = (k / shape.n)[:, None] * shape.sizes
    return max_convex(np.asarray(right, dtype=float), shape, centres, k - float(np.sum(right))) / shape.n ** 2


def max_convex(start: Array, shape: Shape, centres: Array, extra: Array) -> Array:
    """Per row: an upper bound of ``sum_g (y_g - c_g)^2 / (1 - h_g)`` over ``start <= y <= sizes`` with
    ``sum (y - start) = extra`` (``centres``: ``c`` per row). No cluster can take more than ``extra``, so each moves
    within ``[start, min(sizes, start + extra)]``; its square lies under its chord there, and the chords' maximum fills
    clusters whole, best gain per answer first, the last in part (a fractional knapsack). A lower start or a larger
    ``extra`` only lengthens the chords: the bound grows as the record gets worse."""
    w = 1.0 / (1.0 - shape.h)
    e = np.asarray(extra, dtype=float)[:, None]
    top = np.minimum(shape.sizes, start + e)
    a = w * (start - centres) ** 2
    gain = w * (top - centres) ** 2 - a
    return np.asarray(a.sum(axis=1) + _greedy(gain, top - start, extra))


def max_linear(start: Array, shape: Shape, coef: Array, extra: Array) -> Array:
    """Per row: the maximum of ``sum_g coef_g y_g`` over ``start <= y <= sizes`` with ``sum (y - start) = extra``."""
    room = np.broadcast_to(shape.sizes - start, (len(extra), len(start)))
    return np.asarray(float(np.dot(coef, start)) + _greedy(coef * room, room, extra))


def _greedy(gain: Array, room: Array, extra: Array) -> Array:
    """The fractional knapsack: ``extra`` units (per row) into clusters of ``room`` units worth ``gain`` whole."""
    ratio = np.where(room > 0, gain / np.where(room > 0, room, 1.0), -np.inf)
    order = np.argsort(-ratio, axis=1, kind="stable")
    r_s = np.take_along_axis(ratio, order, axis=1)
    room_s = np.take_along_axis(np.broadcast_to(room, gain.shape), order, axis=1)
    gain_s = np.take_along_axis(gain, order, axis=1)
    filled = np.cumsum(room_s, axis=1)
    before = filled - room_s
    e = np.asarray(extra, dtype=float)[:, None]
    whole = np.where(filled <= e, gain_s, 0.0).sum(axis=1)
    part = np.where((before < e) & (filled > e), (e - before) * np.where(np.isfinite(r_s), r_s, 0.0), 0.0)
    return np.asarray(whole + part.sum(axis=1))


def envelope_rows(right: Array, shape: Shape, upper: bool) -> list[Array]:
    """The totals and variances the envelope runs over, in blocks: for the lower bound every ``k = K..N`` with the
    variance bound of records at least as good; for the upper bound ``k = 0..K`` with those at most as good (the
    mirror image: wrong answers as right ones). Each block is ``(totals, variances)`` stacked as a ``(2, R)`` array."""
    n = round(shape.n)
    x = shape.sizes - right if upper else np.asarray(right, dtype=float)
    k0 = round(float(x.sum()))
    out = []
    for start in range(k0, n + 1, _BLOCK):
        totals = np.arange(start, min(n + 1, start + _BLOCK), dtype=float)
        v = fill_variance(x, shape, totals)
        out.append(np.stack([n - totals if upper else totals, v]))
    return out


def affordable(shape: Shape) -> bool:
    """Whether the envelope is worth computing: a design with a trial, clusters of more than one trial, within
    :data:`BUDGET`."""
    return shape.n > 0 and shape.clusters >= 2 and shape.n * shape.clusters <= BUDGET


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
        differences, the cross term (:class:`~pytest_longctx.results.robust.PairedRows`) at its most cautious
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
        record._cache[key] = rows.like(reg, imp, variance, cross, record.shape)
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
        now_deff = rows.pooled_deff(totals, fill_variance(record.now, shape, totals), shape)
        record._cache["null"] = np.maximum(np.maximum(env.deff, now_deff), record.before_deff)
    null = record._cache["null"]
    near = p_under(env.regressed, env.improved, shape.n, null, env.df, margin)
    far = p_under(env.regressed, env.improved, shape.n, np.full_like(null, max(shape.m, 1.0)), env.df, margin)
    return float(np.max(np.where(env.regressed - env.improved >= margin * shape.n, far, near)))
