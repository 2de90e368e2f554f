"""Estimates that count independent items, not trials: pooled accuracy and paired differences over clusters.

Trials drawn from one item (a question asked in every cell) share its fate, so they are one unit of evidence
with some extra information, not many. Both estimators here take each trial's outcome and its cluster and:

* measure the design effect ``deff``: the cluster-robust (CR1, Liang-Zeger with the G/(G-1) small-sample factor)
  variance of the mean over the variance the same trials would have were they independent, never below 1
  (this plugin never claims more information than independent trials carry). With no variation to measure
  (every trial right, or no discordant pair), the worst case is taken: each cluster one unit (``deff = n / G``);
* turn the trials into an effective sample of ``n / deff`` (Kish) and build a score-type interval on it:
  Wilson's for a proportion (after Korn & Graubard 1998, effective sample size), Agresti & Min's adjusted Wald
  interval for a paired difference (2005: half a pseudo-pair in each cell of the 2x2 table, which keeps the
  interval honest at zero discordance);
* take critical values from Student's t with ``G - 1`` degrees of freedom, the standard remedy when clusters
  are few (Cameron & Miller 2015, section VI), so twenty questions are treated as twenty, not as 2,300 trials;
* test non-inferiority (a drop shown under a margin) score-style, with the variance where the hypothesis holds
  and a design effect of at least the answers' own (:meth:`PairedDiff.p_drop_under`).

References: E. Miller, "Adding Error Bars to Evals" (2024), sections 2-4; Cameron & Miller, "A Practitioner's
Guide to Cluster-Robust Inference" (J. Human Resources, 2015). Checked against statsmodels' cluster-robust OLS
and by seeded simulation (``benchmarks/sim_gate.py``).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pytest_longctx.results.stats import t_cdf

if TYPE_CHECKING:  # numpy and scipy load when an estimate is first made
    from pytest_longctx.results.paired_rows import PairedRows
    from pytest_longctx.results.robust import PooledRows

LEVEL = 0.95


def cluster_totals(values: Sequence[float], clusters: Sequence[Hashable]) -> tuple[list[float], list[int]]:
    """Per cluster (in the order of their names, so that results do not depend on the trials' order): the sum of
    ``values`` and the number of trials."""
    sums: dict[Hashable, float] = {}
    sizes: dict[Hashable, int] = {}
    for value, cluster in zip(values, clusters, strict=True):
        sums[cluster] = sums.get(cluster, 0.0) + value
        sizes[cluster] = sizes.get(cluster, 0) + 1
    order = sorted(sums, key=str)
    return [sums[c] for c in order], [sizes[c] for c in order]


def cr1_variance(sums: Sequence[float], sizes: Sequence[int], mean: float) -> float:
    """Cluster-robust (CR1) variance of a mean: G/(G-1) * sum_g (S_g - mean * n_g)^2 / N^2 (nan for G < 2)."""
    g, n = len(sums), sum(sizes)
    if g < 2 or n == 0:
        return math.nan
    return g / (g - 1) * sum((s - mean * m) ** 2 for s, m in zip(sums, sizes, strict=True)) / (n * n)


@dataclass(frozen=True)
class Pooled:
    """Pooled accuracy of trials grouped into clusters, with a cluster-aware interval."""

    correct: int
    n: int
    clusters: int
    accuracy: float
    low: float
    high: float
    deff: float
    n_eff: float
    df: float
    level: float = LEVEL
    #: The estimator's row (:class:`~pytest_longctx.results.robust.PooledRows`): the test the bounds invert.
    rows: PooledRows | None = field(default=None, repr=False, compare=False)

    def p_below(self, value: float) -> float:
        """One-sided p-value of 'accuracy >= value' (small when the data show the accuracy is below it)."""
        return 1.0 if self.rows is None else float(self.rows.p_below(value)[0])

    def p_above(self, value: float) -> float:
        """One-sided p-value of 'accuracy <= value' (small when the data show the accuracy is above it)."""
        return 1.0 if self.rows is None else float(self.rows.p_above(value)[0])

    def bounds(self, alpha: float) -> tuple[float, float]:
        """One-sided (1 - alpha) lower and upper confidence bounds (where :meth:`p_above` and :meth:`p_below`
        reach ``alpha``)."""
        if self.rows is None:
            return 0.0, 1.0
        low, high = self.rows.bounds(alpha)
        return float(low[0]), float(high[0])

    def to_json(self) -> dict[str, float | int]:
        return {f: (round(v, 6) if isinstance(v, float) else v) for f in self.__dataclass_fields__ if f != "rows"
                for v in [getattr(self, f)]}


def pooled_accuracy(outcomes: Sequence[bool], clusters: Sequence[Hashable], level: float = LEVEL) -> Pooled:
    """Accuracy of scored trials (True = correct) with a ``level`` interval that counts clusters, not trials."""
    import numpy as np

    from pytest_longctx.results.robust import Shape, pooled_rows

    n = len(outcomes)
    if n == 0:
        return Pooled(0, 0, 0, 0.0, 0.0, 1.0, 1.0, 0.0, math.inf, level)
    sums, sizes = cluster_totals([1.0 if o else 0.0 for o in outcomes], clusters)
    rows = pooled_rows(np.array([sums]), Shape.of(sizes))
    low, high = rows.interval(level)
    return Pooled(int(rows.correct[0]), n, len(sizes), float(rows.accuracy[0]), float(low[0]), float(high[0]),
                  float(rows.deff[0]), float(rows.n_eff[0]), float(rows.df[0]), level, rows)


@dataclass(frozen=True)
class PairedDiff:
    """Accuracy of this run minus the compared run's, over trials paired on items, with clusters counted."""

    pairs: int
    clusters: int
    regressed: int
    improved: int
    diff: float
    low: float
    high: float
    se: float
    deff: float
    df: float
    p_value: float
    #: Agresti-Min's adjusted difference, the centre of the interval and of the tests.
    centre: float
    level: float = LEVEL
    #: The design effect a non-inferiority test assumes: at least the differences' own and the answers' own.
    null_deff: float = 1.0
    #: The estimator's row (:class:`~pytest_longctx.results.paired_rows.PairedRows`): the test the bounds invert.
    rows: PairedRows | None = field(default=None, repr=False, compare=False)

    def p_drop_over(self, margin: float) -> float:
        """One-sided p-value of 'the drop is at most ``margin``' (small when the data show a larger drop)."""
        if self.pairs == 0 or self.rows is None:
            return 1.0
        return float(self.rows.p_drop_over(margin)[0])

    def p_drop_under(self, margin: float) -> float:
        """One-sided p-value of 'the drop is at least ``margin``' (small when the data show a smaller drop).

        The non-inferiority test is score-type: its variance is the one where the hypothesis holds (regressions
        raised to the improvements plus ``margin``), with the design effect ``null_deff``: a drop the data have
        not shown yet would share its items' fate as their answers do. A test with the observed variance passes
        a real drop far too often when items are few and repeat across cells: most samples of 20 questions hold
        none of the few that fall, and then show a small drop with a small variance (``sim_gate.py --shown``).
        Monotone: the largest p of the records at least as good for this run (:func:`~.paired_rows.paired_p_under`).
        """
        if self.pairs == 0:
            return 1.0
        import numpy as np

        from pytest_longctx.results.paired_rows import p_under, paired_p_under

        own = float(p_under(np.array([float(self.regressed)]), np.array([float(self.improved)]), float(self.pairs),
                            np.array([self.null_deff]), np.array([self.df]), margin)[0])
        return own if self.rows is None else paired_p_under(self.rows, margin, own)

    def drop_upper(self, alpha: float) -> float:
        """One-sided (1 - alpha) upper confidence bound of the drop (the compared run's accuracy minus this one's):
        the smallest margin that :meth:`p_drop_under` shows the drop to be under, at ``alpha``."""
        if self.pairs == 0 or self.p_drop_under(1.0) > alpha:
            return 1.0
        low, high = -self.diff, 1.0  # the test never passes at a margin under the observed drop
        for _ in range(50):
            middle = (low + high) / 2
            low, high = (low, middle) if self.p_drop_under(middle) <= alpha else (middle, high)
        return high

    def drop_lower(self, alpha: float) -> float:
        """One-sided (1 - alpha) lower confidence bound of the drop."""
        if self.pairs == 0 or self.rows is None:
            return -1.0
        return float(self.rows.drop_lower(alpha)[0])

    def to_json(self) -> dict[str, float | int]:
        return {f: (round(v, 6) if isinstance(v, float) else v) for f in self.__dataclass_fields__ if f != "rows"
                for v in [getattr(self, f)]}


def paired_difference(now: Sequence[bool], before: Sequence[bool], clusters: Sequence[Hashable],
                      level: float = LEVEL) -> PairedDiff:
    """This run's accuracy minus the compared run's on the same items (``now[i]`` and ``before[i]`` are one pair)."""
    import numpy as np

    from pytest_longctx.results.paired_rows import PairedRecord, Shape, paired_rows

    n = len(now)
    if n == 0:
        return PairedDiff(0, 0, 0, 0, 0.0, -1.0, 1.0, math.inf, 1.0, math.inf, 1.0, 0.0, level)
    d = [float(a) - float(b) for a, b in zip(now, before, strict=True)]
    regressed = sum(1 for x in d if x < 0)
    improved = sum(1 for x in d if x > 0)
    both = sum(1 for a, b in zip(now, before, strict=True) if a and b)
    sums, sizes = cluster_totals(d, clusters)
    shape = Shape.of(sizes)
    before_deff = _outcome_deff(before, clusters)
    record = PairedRecord(np.array(cluster_totals([float(a) for a in now], clusters)[0]),
                          np.array(cluster_totals([float(b) for b in before], clusters)[0]), shape,
                          regressed, improved, both, n - regressed - improved - both, before_deff)
    rows = paired_rows(np.array([sums]), np.array([regressed]), np.array([improved]), shape, record)
    low, high = rows.interval(level)
    centre, se, df = float(rows.centre[0]), float(rows.se[0]), float(rows.df[0])
    z = float(rows.statistic(np.zeros(1))[0])
    p_value = min(1.0, 2 * min(t_cdf(z, df), t_cdf(-z, df)))
    null_deff = max(float(rows.deff[0]), _outcome_deff(now, clusters), before_deff)
    return PairedDiff(n, len(sizes), regressed, improved, float(rows.diff[0]), float(low[0]), float(high[0]), se,
                      float(rows.deff[0]), df, p_value, centre, level, null_deff, rows)


def _outcome_deff(outcomes: Sequence[bool], clusters: Sequence[Hashable]) -> float:
    """The design effect of one run's answers (right or wrong) over its clusters."""
    import numpy as np

    from pytest_longctx.results.robust import Shape, pooled_rows

    sums, sizes = cluster_totals([1.0 if o else 0.0 for o in outcomes], clusters)
    return float(pooled_rows(np.array([sums]), Shape.of(sizes)).deff[0])


def icc(outcomes: Sequence[bool], clusters: Sequence[Hashable]) -> float | None:
    """Intra-cluster correlation of binary outcomes (one-way ANOVA estimator, clipped to [0, 1]).

    None when it cannot be estimated: fewer than two clusters, or no cluster with two trials, or no variation.
    """
    values = [1.0 if o else 0.0 for o in outcomes]
    sums, sizes = cluster_totals(values, clusters)
    g, n = len(sums), len(values)
    if g < 2 or n <= g:
        return None
    p = sum(values) / n
    msb = sum(m * (s / m - p) ** 2 for s, m in zip(sums, sizes, strict=True)) / (g - 1)
    msw = sum(s * (1 - s / m) for s, m in zip(sums, sizes, strict=True)) / (n - g)
    n0 = (n - sum(m * m for m in sizes) / n) / (g - 1)
    denominator = msb + (n0 - 1) * msw
    if denominator <= 0:
        return None
    return min(1.0, max(0.0, (msb - msw) / denominator))


def weighted_cluster_size(sizes: Sequence[int]) -> float:
    """Trials per cluster as a trial sees it (sum n_g^2 / N): the m in the design effect 1 + (m - 1) * rho."""
    n = sum(sizes)
    return sum(m * m for m in sizes) / n if n else 1.0
