"""Power before paying: the smallest drop a run detects, and the samples a given drop needs.

The gate's paired test of a drop D over N paired trials in G clusters (items) has a variance of about
``deff * (delta0 + D - D^2) / N``: ``delta0`` is the share of pairs an unchanged model's two runs disagree on,
a drop adds D more discordant pairs, and the design effect ``deff = 1 + (m - 1) * icc`` counts how much trials
of one item repeat each other (``m``: trials per item as a trial sees it, ``sum n_g^2 / N``). The drop detected
with probability ``power`` at one-sided level ``alpha`` solves
``D = t(1 - alpha) * sqrt(deff * delta0 / N) + t(power) * sqrt(deff * (delta0 + D - D^2) / N)`` with G - 1
degrees of freedom (Miller 2024, section 5; the same model the seeded simulation in ``benchmarks/sim_gate.py``
draws from, which checks it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from pytest_longctx.results.clustered import cluster_totals, icc, pooled_accuracy, weighted_cluster_size
from pytest_longctx.results.stats import t_quantile

POWER = 0.8


@dataclass(frozen=True)
class Assumptions:
    """What a power statement assumes; ``source`` says where each number came from."""

    accuracy: float = 0.85
    discordance: float = 0.04
    icc: float = 0.5
    source: str = ("stated defaults: 85% right, two runs of an unchanged model disagree on 4% of items, "
                   "intra-item correlation 0.5")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Design:
    """The shape of a run's evidence for one experiment (or one threshold's cells)."""

    trials: int
    clusters: int
    per_cluster: float  # sum n_g^2 / N

    @classmethod
    def of(cls, clusters: Sequence[str]) -> Design:
        _, sizes = cluster_totals([0.0] * len(clusters), clusters)
        return cls(len(clusters), len(sizes), weighted_cluster_size(sizes))

    def deff(self, rho: float) -> float:
        return 1.0 + max(self.per_cluster - 1.0, 0.0) * rho


def _required_n(drop: float, design: Design, alpha: float, power: float, a: Assumptions, df: float) -> float:
    """Paired trials needed for ``drop`` at this design's shape (its clusters scaled with its trials)."""
    deff = design.deff(a.icc)
    spread = (t_quantile(1 - alpha, df) * math.sqrt(deff * a.discordance)
              + t_quantile(power, df) * math.sqrt(deff * max(a.discordance + drop - drop * drop, 1e-12)))
    return (spread / drop) ** 2


def detectable_drop(design: Design, alpha: float, a: Assumptions, power: float = POWER) -> float | None:
    """The smallest drop detected with ``power`` at one-sided ``alpha`` (None: not even a drop to zero)."""
    if design.trials == 0 or design.clusters < 2:
        return None
    df = float(design.clusters - 1)
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


def samples_for(drop: float, design: Design, samples: int, alpha: float, a: Assumptions,
                power: float = POWER, most: int = 1_000_000) -> int | None:
    """The smallest ``--longctx-samples`` that detects ``drop``, the design's trials and clusters growing with it
    (None: the drop is impossible or needs more than ``most``)."""
    if design.trials == 0 or drop <= 0 or drop > a.accuracy or samples < 1:
        return None

    def enough(s: int) -> bool:
        scale = s / samples
        df = max(design.clusters * scale - 1, 1.0)
        return _required_n(drop, design, alpha, power, a, df) <= design.trials * scale

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
    said = [f"accuracy {accuracy:.3f} from the compared run"]
    said.append(f"intra-item correlation {rho:.2f} from it" if rho is not None
                else f"intra-item correlation {defaults.icc} (default: not measurable there)")
    said.append(f"discordance {discordance:.3f} from its own comparison" if discordance is not None
                else f"discordance {defaults.discordance} (default: the compared run was not compared itself)")
    return Assumptions(accuracy, discordance if discordance is not None else defaults.discordance,
                       rho if rho is not None else defaults.icc, "; ".join(said))
