"""Pass-rate statistics: Wilson intervals and the exact McNemar test. No printing, no I/O."""

from __future__ import annotations

import math

Z95 = 1.959963984540054


def wilson(correct: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for ``correct`` successes out of ``n`` (0..1 bounds; (0, 1) when n = 0)."""
    if n <= 0:
        return 0.0, 1.0
    p = correct / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
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
    """Exact McNemar p-value from the discordant pair counts (b = right→wrong, c = wrong→right)."""
    return binom_two_sided(min(regressed, improved), regressed + improved)
