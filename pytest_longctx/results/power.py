"""Power before paying: the smallest drop a run detects, and the samples a given drop needs.

The gate's paired test of a drop D over N paired trials in G clusters (items) has a variance of about
``deff * (delta0 + D - D^2) / N``: ``delta0`` is the share of pairs an unchanged model's two runs disagree on,
a drop adds D more discordant pairs, and the design effect ``deff = 1 + (m - 1) * icc`` counts how much trials
of one item repeat each other (``m``: trials per item as a trial sees it, ``sum n_g^2 / N``). The test divides
the observed drop by its estimated standard error (a Wald test), so the drop detected with probability
``power`` at one-sided level ``alpha`` solves
``D = (t(1 - alpha) + t(power)) * sqrt(deff * (delta0 + D - D^2) / N)`` with G - 1 degrees of freedom
(Miller 2024, section 5; the model the seeded simulation in ``benchmarks/sim_gate.py`` draws from, which checks it).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from pytest_longctx.results.aggregate import cell_key
from pytest_longctx.results.clustered import cluster_totals, icc, pooled_accuracy, weighted_cluster_size
from pytest_longctx.results.compare import experiment_is
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


def gate_level(alpha: float, thresholds: Sequence[Any]) -> tuple[float, str]:
    """The one-sided level a single alarm is tested at in the worst case (Holm's first step), and how it is said."""
    alarms = sum(1 for t in thresholds if getattr(t, "reading", "alarm") == "alarm")
    if alarms <= 1:
        return alpha, f"alpha {alpha}"
    return alpha / alarms, f"alpha {alpha} / {alarms} alarms"


def _required_n(drop: float, design: Design, alpha: float, power: float, a: Assumptions, df: float) -> float:
    """Paired trials needed for ``drop`` at this design's shape (its clusters scaled with its trials).

    The gate's test divides the observed difference by its *estimated* standard error, which under a drop D is
    the one of ``delta0 + D - D^2`` discordance: a Wald test, so both quantiles multiply that one error.
    """
    deff = design.deff(a.icc)
    spread = (t_quantile(1 - alpha, df) + t_quantile(power, df)) * math.sqrt(
        deff * max(a.discordance + drop - drop * drop, 1e-12))
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


class PlanEvidence:
    """What a planned run would ask, for power statements: per cell, how many trials ask each item.

    Fed with the plan's entries (each carries its trial's ``experiment``, ``params`` and ``item``) as they arrive;
    holds one counter per cell, not the entries.
    """

    def __init__(self) -> None:
        self._cells: dict[str, tuple[str, dict[str, Any], Counter[str]]] = {}
        self._tokens: dict[str, list[int]] = {}

    def add(self, entry: Mapping[str, Any]) -> None:
        trial = entry.get("trial")
        if not isinstance(trial, Mapping):
            return
        experiment, params = str(trial["experiment"]), dict(trial.get("params") or {})
        key = cell_key(experiment, params)
        cell = self._cells.setdefault(key, (experiment, params, Counter()))
        item = trial.get("item")
        cell[2][f"item:{item}" if item is not None else f"trial:{trial.get('nodeid')}#{trial.get('sample')}"] += 1
        tokens = self._tokens.setdefault(experiment, [0, 0])
        if not entry.get("cached"):
            tokens[0] += int(entry.get("input_tokens") or 0)
            tokens[1] += int(entry.get("max_tokens") or 0)

    def design(self, accept: Callable[[str, Mapping[str, Any]], bool], by_item: Callable[[str], bool]) -> Design:
        """The design of the cells ``accept`` takes. ``by_item(experiment)``: trials that ask one item are one
        cluster (a coarser declared unit, ``detail.<key>``, is approximated by the item); otherwise each trial is."""
        clusters: Counter[str] = Counter()
        alone = 0
        for experiment, params, items in self._cells.values():
            if not accept(experiment, params):
                continue
            for item, n in items.items():
                if by_item(experiment):
                    clusters[item] += n
                else:
                    alone += n
        sizes = [*clusters.values(), *([1] * alone)]
        return Design(sum(sizes), len(sizes), weighted_cluster_size(sizes) if sizes else 1.0)

    @property
    def experiments(self) -> list[str]:
        return sorted({experiment for experiment, _, _ in self._cells.values()})

    def samples(self, experiment: str) -> int:
        """Trials per cell of ``experiment`` (its largest cell): the ``--longctx-samples`` it was planned with."""
        return max((sum(items.values()) for e, _, items in self._cells.values() if e == experiment), default=0)

    def experiments_matching(self, accept: Callable[[str, Mapping[str, Any]], bool]) -> list[str]:
        return sorted({experiment for experiment, params, _ in self._cells.values() if accept(experiment, params)})

    def tokens(self, experiment: str) -> tuple[int, int]:
        """Uncached input tokens and the most output tokens the experiment's planned requests would use."""
        found = self._tokens.get(experiment, [0, 0])
        return found[0], found[1]


def plan_power(evidence: PlanEvidence, declared: Mapping[str, Any], thresholds: Sequence[Any], alpha: float,
               baseline: Mapping[str, Any] | None, detect: float | None,
               cost: Callable[[int, int], float]) -> dict[str, Any]:
    """The power statements of a plan: per experiment and per drop threshold, the smallest uniform drop detected
    with 80% power at the gate's level; with ``detect``, the ``--longctx-samples`` and the cost that drop needs.

    ``declared``: the experiments' :class:`~pytest_longctx.results.evidence.Evidence`; ``baseline``: the compared
    run's record (its accuracy and intra-item correlation replace the stated defaults); ``cost(input, output)``:
    USD at list prices for the model under test.
    """
    level, level_text = gate_level(alpha, thresholds)

    def by_item(experiment: str) -> bool:
        found = declared.get(experiment)
        return found is not None and getattr(found, "cluster", "trial") != "trial"

    def statement(design: Design, assumptions: Assumptions, tokens: tuple[int, int] | None, samples: int
                  ) -> dict[str, Any]:
        drop = detectable_drop(design, level, assumptions)
        out: dict[str, Any] = {"trials": design.trials, "clusters": design.clusters, "samples": samples,
                               "drop": None if drop is None else round(drop, 4)}
        if detect is not None and samples:
            need = samples_for(detect, design, samples, level, assumptions)
            out["detect"] = {"drop": detect, "samples": need}
            if need is not None and tokens is not None:
                out["detect"]["cost_usd"] = round(cost(*tokens) * need / samples, 2)
        return out

    experiments = {}
    for name in evidence.experiments:
        assumptions = assumptions_from(baseline, name)
        design = evidence.design(experiment_is(name), by_item)
        experiments[name] = {**statement(design, assumptions, evidence.tokens(name), evidence.samples(name)),
                             "assumptions": assumptions.to_json()}
    by_threshold = []
    for t in thresholds:
        if getattr(t, "kind", "") == "min-effective-length" or getattr(t, "each", False):
            continue  # an effective length and per-cell checks have no pooled drop to state
        design = evidence.design(t.matches, by_item)
        if design.trials == 0:
            continue
        names = evidence.experiments_matching(t.matches)
        assumptions = assumptions_from(baseline, names[0]) if len(names) == 1 else Assumptions()
        most = max(evidence.samples(n) for n in names)
        by_threshold.append({"threshold": t.text, **statement(design, assumptions, None, most)})
    return {"power": POWER, "alpha": round(level, 6), "alpha_text": level_text,
            "experiments": experiments, "thresholds": by_threshold}
