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

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from pytest_longctx.results.robust import Array, Shape

#: Records with more (totals x clusters) than this take their own bounds: the envelope would cost seconds.
BUDGET = 20_000_000
_BLOCK = 512


def fill_variance(right: Array, shape: Shape, totals: Array) -> Array:
    """Per total ``k`` (each at least ``right.sum()``): an upper bound of the CR2 variance of the mean,
    ``sum_g (y_g - p n_g)^2 / (1 - h_g) / N^2`` with ``p = k / N``, over every ``y`` with ``right <= y <= sizes``
    and ``sum y = k`` (nan with fewer than two clusters, as :func:`~pytest_longctx.results.robust.cr2_variance`)."""
    n_g, n = shape.sizes, shape.n
    k = np.asarray(totals, dtype=float)
    if shape.clusters < 2 or n == 0:
        return np.full(k.shape, np.nan)
    w = 1.0 / (1.0 - shape.h)
    p = (k / n)[:, None]
    a = w * (right - p * n_g) ** 2  # each cluster as it is ...
    gain = w * ((n_g - p * n_g) ** 2) - a  # ... and what filling it up adds
    room = n_g - right
    ratio = np.where(room > 0, gain / np.where(room > 0, room, 1.0), -np.inf)
    order = np.argsort(-ratio, axis=1, kind="stable")
    r_s, room_s, gain_s = (np.take_along_axis(x, order, axis=1) for x in (ratio, np.broadcast_to(room, a.shape),
                                                                          gain))
    filled = np.cumsum(room_s, axis=1)
    before = filled - room_s
    extra = (k - right.sum())[:, None]
    whole = np.where(filled <= extra, gain_s, 0.0).sum(axis=1)
    part = np.where((before < extra) & (filled > extra), (extra - before) * np.where(np.isfinite(r_s), r_s, 0.0),
                    0.0).sum(axis=1)
    return np.asarray((a.sum(axis=1) + whole + part) / (n * n))


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
