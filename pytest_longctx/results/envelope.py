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
``benchmarks/sim_monotone.py``. The paired difference's envelope (records enumerated by their counts of pairs, on
:func:`max_convex` and :func:`max_linear`) is :mod:`~pytest_longctx.results.paired_rows`'s.
"""

from __future__ import annotations

import numpy as np

from pytest_longctx.results.shape import Array, Shape

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
