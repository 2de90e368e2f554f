"""The power of a design: the smallest drop a run detects, and the samples a given drop needs.

Both come from the design (trials per item, as a trial sees them) and the baseline (its accuracy, and the
discordance of two unchanged runs where one was measured), never from the candidate's observed difference. Two
shapes of regression:

* **diffuse** (every answer a little likelier wrong): the gate's paired test of a drop D over N paired trials has a
  variance of about ``deff_d * (delta0 + D - D^2) / N``; ``delta0`` is the share of pairs two runs of an unchanged
  model disagree on, a drop adds D more discordant pairs, and ``deff_d = 1 + (m - 1) * rho_d`` is the design effect
  of the *differences* (how much one item's disagreements repeat across its trials: measured from the baseline's
  own comparison, else the stated default), not the answers'. The test divides the drop by its estimated error (a
  Wald test), so the drop detected with probability ``power`` at one-sided ``alpha`` solves
  ``D = (t(1 - alpha) + t(power)) * sqrt(deff_d * (delta0 + D - D^2) / N)``, with the Satterthwaite degrees of
  freedom of the design (:mod:`pytest_longctx.results.robust`).
* **concentrated** (a share s of the items break: right -> wrong in every cell they are asked in): the pooled drop
  is about ``s * accuracy``, carried by ``s * G'`` of the design's ``G' = N / m`` effective items. The same t-test
  sees a mean of ``s * a`` against a between-item spread of ``s (1 - s) a^2 + s v + (1 - s) delta0 deff_d / m``
  (``v = rho p (1 - p)``: how the broken items' own accuracy varied), so it detects the share whose noncentral t
  clears the one-sided critical value with ``power``.

Which world a plan describes (issue 38.7): the agreement above is that of *versions of one model* (the compared
run's own comparison, else the stated default: they disagree on few answers). A candidate of another family
(:func:`family`) answers nearly independently given each item's difficulty, the data model of
:func:`~pytest_longctx.results.eprocess.draw_drops` at its largest discordance: two such runs disagree on
``2 a (1 - a) (1 - rho)`` of the answers, with no item-level correlation of the differences (:func:`unrelated`),
so the drop it lets the gate see is larger; the plan then states both, labelled.

Checked by seeded simulation over a family of data models (``benchmarks/sim_family.py``, and for the remote
defaults ``benchmarks/sim_gate.py --mde``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from pytest_longctx.results.clustered import cluster_totals, icc, pooled_accuracy, weighted_cluster_size
from pytest_longctx.results.stats import t_quantile

POWER = 0.8
#: The share of the paired test's null-imposed variance a power statement counts (see :attr:`Design.null_term`).
NULL_SHARE = 0.25


@dataclass(frozen=True)
class Assumptions:
    """What a power statement assumes; ``source`` says where each number came from. ``icc``: the answers'
    intra-item correlation; ``diff_icc``: the paired differences' (two unchanged runs)."""

    accuracy: float = 0.85
    discordance: float = 0.04
    icc: float = 0.5
    source: str = ("stated defaults: 85% right, two runs of an unchanged model disagree on 4% of answers "
                   "(intra-item correlation of the disagreements 0.05), intra-item correlation of the answers 0.5")
    diff_icc: float = 0.05

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def family(spec: str) -> str:
    """A model's family from its spec: the name's words without version numbers or dates
    (``anthropic/claude-sonnet-4-5-20250929`` -> ``claude-sonnet``); versions of one model share it."""
    name = str(spec).rsplit("/", 1)[-1].lower()
    words = [w for w in re.split(r"[-_.:@ ]+", name) if w and not w[0].isdigit() and w not in ("latest", "preview")]
    return "-".join(words) or name


def unrelated(a: Assumptions) -> Assumptions:
    """The same accuracy and answers' correlation for two *unrelated* models: answers independent given each item's
    difficulty (a propensity with mean ``accuracy`` and intra-item correlation ``icc``), so they disagree on
    ``2 a (1 - a) (1 - icc)`` of the answers (never fewer than ``a.discordance``) and their differences carry no
    item-level correlation."""
    disc = max(2 * a.accuracy * (1 - a.accuracy) * (1 - a.icc), a.discordance)
    return Assumptions(a.accuracy, disc, a.icc,
                       f"unrelated models: answers independent given each item's difficulty, so two runs disagree "
                       f"on {disc:.3f} of answers (2a(1-a)(1-icc); intra-item correlation of the disagreements 0) "
                       f"at accuracy {a.accuracy:.3f} and intra-item correlation {a.icc:.2f}", 0.0)


@dataclass(frozen=True)
class Design:
    """The shape of a run's evidence for one experiment (or one threshold's cells)."""

    trials: int
    clusters: int
    per_cluster: float  # sum n_g^2 / N
    sizes: tuple[int, ...] = ()

    @classmethod
    def of(cls, clusters: Sequence[str]) -> Design:
        _, sizes = cluster_totals([0.0] * len(clusters), clusters)
        return cls.of_sizes(sizes)

    @classmethod
    def of_sizes(cls, sizes: Sequence[int]) -> Design:
        return cls(sum(sizes), len(sizes), weighted_cluster_size(sizes) if sizes else 1.0, tuple(sizes))

    def deff(self, rho: float) -> float:
        return 1.0 + max(self.per_cluster - 1.0, 0.0) * rho

    def df(self, rho: float) -> float:
        """The Satterthwaite degrees of freedom of the gate's test at working correlation ``rho`` (at most
        G - 1, and the effective items less one when the sizes are not known)."""
        if not self.sizes:
            return max(min(float(self.clusters), self.effective_items) - 1.0, 1.0)
        import numpy as np

        from pytest_longctx.results.robust import Shape, satterthwaite_df

        return float(satterthwaite_df(Shape.of(list(self.sizes)), np.array([rho]))[0])

    @property
    def null_term(self) -> float:
        """``NULL_SHARE * sum_g n_g^2 / (1 - h_g) / N^2``: what the paired test's variance gains per squared
        difference when it takes the residuals at the null (the whole of it is about ``1 / G'``, and the test never
        rejects when ``t^2`` times it reaches 1). Under a drop the residuals at the null are partly the drop's own
        spread, which the other terms count already: ``benchmarks/sim_family.py`` found a quarter of it right (the
        whole made the plan 1.3-1.6 times too cautious, none of it too bold with few items)."""
        if not self.sizes or self.trials == 0:
            return NULL_SHARE / max(self.effective_items - 1.0, 1.0)
        n = float(self.trials)
        if len(self.sizes) < 2:
            return 1.0
        return NULL_SHARE * sum(m * m / (1.0 - m / n) for m in self.sizes) / (n * n)

    @property
    def effective_items(self) -> float:
        """``N / m``: the items the design counts as if all were of one size."""
        return self.trials / max(self.per_cluster, 1.0)


def gate_level(alpha: float, thresholds: Sequence[Any]) -> tuple[float, str]:
    """The one-sided level a single alarm is tested at in the worst case (Holm's first step), and how it is said."""
    alarms = sum(1 for t in thresholds if getattr(t, "reading", "alarm") == "alarm")
    if alarms <= 1:
        return alpha, f"alpha {alpha}"
    return alpha / alarms, f"alpha {alpha} / {alarms} alarms"


def _required_n(drop: float, design: Design, alpha: float, power: float, a: Assumptions, df: float,
                scale_trials: float | None = None) -> float:
    """Paired trials needed for a diffuse ``drop`` at this design's shape (its clusters scaled with its trials).

    The gate's test divides the observed difference by its *estimated* standard error, which under a drop D is
    the one of ``delta0 + D - D^2`` discordance plus the null's share (``D^2`` times the design's null term): both
    quantiles multiply that one error. ``scale_trials``: the trials of a design scaled from this one.
    """
    if drop <= 0:
        return math.inf  # no drop to detect (a compared run at 0% accuracy has none to lose): no design detects it
    scale_trials = float(design.trials) if scale_trials is None else scale_trials
    deff = design.deff(a.diff_icc)
    quantiles = t_quantile(1 - alpha, df) + t_quantile(power, df)
    room = 1.0 - quantiles * quantiles * design.null_term * design.trials / max(scale_trials, 1.0)
    if room <= 0:
        return math.inf  # too few effective items: the test at the null never rejects
    return quantiles * quantiles * deff * max(a.discordance + drop - drop * drop, 1e-12) / (drop * drop * room)


def detectable_drop(design: Design, alpha: float, a: Assumptions, power: float = POWER) -> float | None:
    """The smallest diffuse drop detected with ``power`` at one-sided ``alpha`` (None: not even a drop to zero)."""
    if design.trials == 0 or design.clusters < 2:
        return None
    df = design.df(a.diff_icc)
    low, high = 1e-6, a.accuracy
    if _required_n(high, design, alpha, power, a, df) > design.trials:
        return None
    for _ in range(60):  # the trials a drop needs fall as the drop grows: bisect
        mid = (low + high) / 2
        if _required_n(mid, design, alpha, power, a, df) > design.trials:
            low = mid
        else:
            high = mid
    return high


def concentrated_power(share: float, design: Design, alpha: float, a: Assumptions) -> float:
    """The power of the gate's pooled alarm when ``share`` of the items break (right -> wrong wherever asked)."""
    from scipy.stats import nct

    g = design.effective_items
    if g < 2 or share <= 0:
        return 0.0
    m = max(design.per_cluster, 1.0)
    acc = a.accuracy
    noise = a.discordance * design.deff(a.diff_icc) / m  # an unbroken item's mean difference varies this much
    spread = share * (1 - share) * acc * acc + share * a.icc * acc * (1 - acc) + (1 - share) * noise
    if spread <= 0:
        return 1.0
    df = design.df(a.diff_icc)
    ncp = share * acc / math.sqrt(spread / g + (share * acc) ** 2 * design.null_term)
    return float(nct.sf(t_quantile(1 - alpha, df), df, ncp))


def detectable_share(design: Design, alpha: float, a: Assumptions, power: float = POWER) -> float | None:
    """The smallest share of broken items detected with ``power`` (None: not even with every item broken)."""
    if design.trials == 0 or design.clusters < 2 or concentrated_power(1.0, design, alpha, a) < power:
        return None
    low, high = 0.0, 1.0
    for _ in range(40):
        mid = (low + high) / 2
        low, high = (mid, high) if concentrated_power(mid, design, alpha, a) < power else (low, mid)
    return high


def concentrated(design: Design, alpha: float, a: Assumptions, power: float = POWER) -> dict[str, Any] | None:
    """The concentrated statement: the share of items that must break, in items of the design, and the pooled
    drop it makes."""
    share = detectable_share(design, alpha, a, power)
    if share is None:
        return None
    return {"share": round(share, 4), "items": math.ceil(share * design.clusters - 1e-9),
            "drop": round(share * a.accuracy, 4)}


def samples_for(drop: float, design: Design, samples: int, alpha: float, a: Assumptions,
                power: float = POWER, most: int = 1_000_000) -> int | None:
    """The smallest ``--longctx-samples`` that detects ``drop``, the design's trials and clusters growing with it
    (None: the drop is impossible or needs more than ``most``)."""
    if design.trials == 0 or drop <= 0 or drop > a.accuracy or samples < 1:
        return None

    base_df = design.df(a.diff_icc)

    def enough(s: int) -> bool:
        scale = s / samples
        df = max((base_df + 1) * scale - 1, 1.0)
        return _required_n(drop, design, alpha, power, a, df, design.trials * scale) <= design.trials * scale

    if not enough(most):
        return None
    low, high = 0, most  # enough(high) holds; enough only gets easier with more samples
    while high - low > 1:
        mid = (low + high) // 2
        if enough(mid):
            high = mid
        else:
            low = mid
    return high


def assumptions_from(record: Mapping[str, Any] | None, experiment: str, defaults: Assumptions = Assumptions(),
                     ) -> Assumptions:
    """Accuracy and intra-item correlation from a compared run's trials of ``experiment``, and discordance from
    its own comparison when it was compared; stated defaults for the rest."""
    if not record:
        return defaults
    trials = [t for t in record.get("trials", []) if t.get("experiment") == experiment and t["outcome"] != "error"]
    if not trials:
        return defaults
    outcomes = [t["outcome"] == "correct" for t in trials]
    clusters = [str(t.get("cluster")) for t in trials]
    accuracy = pooled_accuracy(outcomes, clusters).accuracy
    rho = icc(outcomes, clusters)
    prior = ((record.get("comparison") or {}).get("experiments") or {}).get(experiment) or {}
    pairs = int(prior.get("pairs") or 0)
    discordance = (prior["regressed"] + prior["improved"]) / pairs if pairs else None
    m = Design.of(clusters).per_cluster
    diff_icc = (min(max((float(prior["deff"]) - 1) / (m - 1), 0.0), 1.0)
                if pairs and prior.get("deff") is not None and m > 1 else None)
    said = [f"accuracy {accuracy:.3f} from the compared run"]
    said.append(f"intra-item correlation {rho:.2f} from it" if rho is not None
                else f"intra-item correlation {defaults.icc} (default: not measurable there)")
    said.append(f"discordance {discordance:.3f} (intra-item correlation {diff_icc if diff_icc is not None else 0:.2f})"
                " from its own comparison" if discordance is not None
                else f"discordance {defaults.discordance} (intra-item correlation {defaults.diff_icc}; default: the "
                     "compared run was not compared itself)")
    return Assumptions(accuracy, discordance if discordance is not None else defaults.discordance,
                       rho if rho is not None else defaults.icc, "; ".join(said),
                       diff_icc if diff_icc is not None else defaults.diff_icc)
