"""A design's shape (its clusters' sizes) and Student's t, which every clustered bound and test reads."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

Array = NDArray[np.float64]


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


def t_ppf(q: float | Array, df: Array) -> Array:
    """The ``q`` quantile at ``df`` degrees of freedom (scipy's, imported when first used)."""
    from scipy.stats import t

    return np.asarray(t.ppf(q, df), dtype=float)


def t_cdf(x: Array | Any, df: Array) -> Array:
    """The distribution function at ``x``, ``df`` degrees of freedom."""
    from scipy.stats import t

    return np.asarray(t.cdf(x, df), dtype=float)
