"""Power before paying: what a planned run's design detects, per experiment and per drop threshold.

The formulas (the smallest diffuse drop, the share of broken items, the samples a drop needs, which world an
agreement describes) are :mod:`pytest_longctx.results.power_model`'s, re-exported here; this module holds what a
plan states from them: :class:`PlanEvidence` (what the plan would ask, per cell and item), :func:`plan_power` (its
statements, labelled with the world they describe) and :func:`items_power` (what a folder of items detects).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_longctx.results.aggregate import cell_key
from pytest_longctx.results.compare import experiment_is
from pytest_longctx.results.power_model import POWER as POWER
from pytest_longctx.results.power_model import Assumptions as Assumptions
from pytest_longctx.results.power_model import Design as Design
from pytest_longctx.results.power_model import assumptions_from as assumptions_from
from pytest_longctx.results.power_model import concentrated as concentrated
from pytest_longctx.results.power_model import detectable_drop as detectable_drop
from pytest_longctx.results.power_model import detectable_share as detectable_share
from pytest_longctx.results.power_model import family as family
from pytest_longctx.results.power_model import gate_level as gate_level
from pytest_longctx.results.power_model import samples_for as samples_for
from pytest_longctx.results.power_model import unrelated as unrelated


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
        return Design.of_sizes(sizes)

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


@dataclass(frozen=True)
class _Statements:
    """How :func:`plan_power` states one design: at the gate's ``level``, for ``detect`` at ``cost``, and for
    unrelated models too when the candidate is of another family (``other``)."""

    level: float
    baseline: Mapping[str, Any] | None
    detect: float | None
    cost: Callable[[int, int], float]
    other: bool

    def statement(self, design: Design, assumptions: Assumptions, tokens: tuple[int, int] | None, samples: int
                  ) -> dict[str, Any]:
        drop = detectable_drop(design, self.level, assumptions)
        out: dict[str, Any] = {"trials": design.trials, "clusters": design.clusters, "samples": samples,
                               "drop": None if drop is None else round(drop, 4),
                               "concentrated": concentrated(design, self.level, assumptions)}
        if self.detect is not None and samples:
            need = samples_for(self.detect, design, samples, self.level, assumptions)
            out["detect"] = {"drop": self.detect, "samples": need}
            if need is not None and tokens is not None:
                out["detect"]["cost_usd"] = round(self.cost(*tokens) * need / samples, 2)
        return out

    def world(self, name: str | None) -> str:
        shown = name and (((self.baseline or {}).get("comparison") or {}).get("experiments") or {}).get(name, {})
        return ("versions of one model: the agreement the compared run shows" if shown and shown.get("pairs")
                else "versions of one model: the default agreement")

    def both(self, design: Design, a: Assumptions, tokens: tuple[int, int] | None, samples: int,
             name: str | None) -> dict[str, Any]:
        out = {**self.statement(design, a, tokens, samples), "world": self.world(name)}
        if self.other:
            far = unrelated(a)
            out["unrelated"] = {**self.statement(design, far, tokens, samples), "assumptions": far.to_json()}
        return out


def plan_power(evidence: PlanEvidence, declared: Mapping[str, Any], thresholds: Sequence[Any], alpha: float,
               baseline: Mapping[str, Any] | None, detect: float | None,
               cost: Callable[[int, int], float], candidate: str | None = None) -> dict[str, Any]:
    """The power statements of a plan: per experiment and per drop threshold, the smallest diffuse drop detected
    with 80% power at the gate's level, and the smallest share of items breaking (concentrated) that is; with
    ``detect``, the ``--longctx-samples`` and the cost that drop needs.

    ``declared``: the experiments' :class:`~pytest_longctx.results.evidence.Evidence`; ``baseline``: the compared
    run's record (its accuracy and intra-item correlation replace the stated defaults); ``cost(input, output)``:
    USD at list prices for the model under test; ``candidate``: its spec. Each statement says the agreement it
    assumes (``world``); when ``candidate`` is of another :func:`family` than the compared run's model, each also
    holds ``unrelated``: the same statement for unrelated models.
    """
    level, level_text = gate_level(alpha, thresholds)
    compared = str(((baseline or {}).get("settings") or {}).get("model") or "")
    other = bool(candidate and compared and family(candidate) != family(compared))
    said = _Statements(level, baseline, detect, cost, other)

    def by_item(experiment: str) -> bool:
        found = declared.get(experiment)
        return found is not None and getattr(found, "cluster", "trial") != "trial"

    experiments = {}
    for name in evidence.experiments:
        assumptions = assumptions_from(baseline, name)
        design = evidence.design(experiment_is(name), by_item)
        experiments[name] = {**said.both(design, assumptions, evidence.tokens(name), evidence.samples(name), name),
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
        by_threshold.append({"threshold": t.text,
                             **said.both(design, assumptions, None, most, names[0] if len(names) == 1 else None)})
    return {"power": POWER, "alpha": round(level, 6), "alpha_text": level_text, "candidate": candidate,
            "compared_model": compared or None, "other_family": other,
            "experiments": experiments, "thresholds": by_threshold}


def items_power(items: int, per_item: int, alpha: float, assumptions: Mapping[str, Any] | None = None,
                drop: float = 0.05, power: float = POWER, most: int = 20_000) -> dict[str, Any]:
    """What ``items`` items asked ``per_item`` times each detect (diffuse and concentrated), and how many such items
    a ``drop`` of either shape needs (None: more than ``most``). For an experiment whose items are limited (a
    folder of reviewed items): ``assumptions`` is an :class:`Assumptions`' JSON (the stated defaults when None)."""
    a = Assumptions(**dict(assumptions)) if assumptions else Assumptions()

    def design(g: int) -> Design:
        return Design.of_sizes([max(per_item, 1)] * g)

    def enough(g: int) -> bool:
        d = design(g)
        diffuse = detectable_drop(d, alpha, a, power)
        share = detectable_share(d, alpha, a, power)
        return diffuse is not None and diffuse <= drop and share is not None and share * a.accuracy <= drop

    need: int | None = None
    if enough(most):
        low, high = 1, most
        while high - low > 1:
            mid = (low + high) // 2
            low, high = (low, mid) if enough(mid) else (mid, high)
        need = high
    here = design(items) if items >= 2 else None
    diffuse = detectable_drop(here, alpha, a, power) if here else None
    return {"items": items, "per_item": per_item, "alpha": alpha, "power": power,
            "diffuse": None if diffuse is None else round(diffuse, 4),
            "concentrated": concentrated(here, alpha, a, power) if here else None,
            "detect": drop, "items_needed": need, "assumptions": a.source}
