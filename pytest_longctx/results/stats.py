"""Pass-rate statistics on plain values: Wilson intervals, exact McNemar tests, Holm's correction,
Student-t quantiles. No printing, no I/O; scipy is imported only by the functions that need it."""

from __future__ import annotations

import math
from collections.abc import Sequence

Z95 = 1.959963984540054


def wilson(correct: float, n: float, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for ``correct`` successes out of ``n`` (0..1 bounds; (0, 1) when n = 0).

    ``correct`` and ``n`` may be fractional: an effective count (a clustered sample's ``n / deff``).
    """
    if n <= 0:
        return 0.0, 1.0
    p = correct / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(max(0.0, p * (1 - p)) / n + z * z / (4 * n * n)) / denom
    # At 0 or n successes the bound is exactly 0 or 1 (the subtraction leaves rounding noise such as 5.6e-17).
    low = 0.0 if correct <= 0 else max(0.0, centre - half)
    high = 1.0 if correct >= n else min(1.0, centre + half)
    return low, high


def binom_two_sided(k: int, n: int) -> float:
    """Exact two-sided binomial p-value for k successes in n trials at p = 0.5."""
    if n <= 0:
        return 1.0
    k = min(k, n - k)
    tail: float = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * tail)


def mcnemar_exact(regressed: int, improved: int) -> float:
    """Exact two-sided McNemar p-value from the discordant pair counts (b = right→wrong, c = wrong→right)."""
    return binom_two_sided(min(regressed, improved), regressed + improved)


def mcnemar_drop(regressed: int, improved: int) -> float:
    """Exact one-sided McNemar p-value for a drop: P(at least ``regressed`` of the discordant pairs went
    right→wrong) when either direction is equally likely (scipy's exact binomial test)."""
    if regressed + improved == 0:
        return 1.0
    from scipy.stats import binomtest

    return float(binomtest(regressed, regressed + improved, 0.5, alternative="greater").pvalue)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (family-wise error control), in the input's order."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted = [1.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


def t_quantile(q: float, df: float) -> float:
    """The ``q`` quantile of Student's t with ``df`` degrees of freedom (the normal's when df is infinite)."""
    from scipy.stats import norm, t

    return float(norm.ppf(q) if math.isinf(df) else t.ppf(q, df))


def t_cdf(x: float, df: float) -> float:
    """P(T <= x) for Student's t with ``df`` degrees of freedom (the normal's when df is infinite)."""
    from scipy.stats import norm, t

    if math.isinf(x):
        return 1.0 if x > 0 else 0.0
    return float(norm.cdf(x) if math.isinf(df) else t.cdf(x, df))
