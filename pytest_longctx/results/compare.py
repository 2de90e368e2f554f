"""Comparison with an earlier run record: trials paired on items, pooled paired differences counted by cluster,
and per-cell one-sided exact McNemar tests of a drop (the test a ``max-drop=0/each`` check uses) with Holm's
correction across an experiment's cells."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_longctx.results.aggregate import cell_key
from pytest_longctx.results.clustered import PairedDiff, paired_difference
from pytest_longctx.results.pairing import Pairing, pair_runs
from pytest_longctx.results.schema import SCHEMA, SCHEMA_VERSION, load_record
from pytest_longctx.results.stats import holm, mcnemar_drop

__all__ = ["SCHEMA", "Comparison", "baselines_by_key", "cell_in", "compare", "experiment_is", "load_record"]

Match = Callable[[str, Mapping[str, Any]], bool]


def experiment_is(name: str) -> Match:
    """A match for every cell of experiment ``name``."""
    return lambda experiment, _params: experiment == name


def cell_in(keys: set[str]) -> Match:
    """A match for the cells whose keys are in ``keys``."""
    return lambda experiment, params: cell_key(experiment, params) in keys


@dataclass
class Comparison:
    """This run against a compared one: the pairing, and paired differences for any set of cells."""

    baseline: Mapping[str, Any]
    pairing: Pairing
    alpha: float

    def diff(self, match: Match) -> PairedDiff:
        """The pooled paired difference (this run minus the compared one) over the cells ``match`` accepts."""
        accepted: dict[str, bool] = {}
        pairs = []
        for key, a, b in self.pairing.pairs:
            if key not in accepted:  # asked once a cell, not once a pair
                accepted[key] = match(a["experiment"], a["params"])
            if accepted[key]:
                pairs.append((a, b))
        return paired_difference([a["outcome"] == "correct" for a, _ in pairs],
                                 [b["outcome"] == "correct" for _, b in pairs],
                                 [str(a.get("cluster") or b.get("cluster")) for a, b in pairs])


def compare(cells: list[dict[str, Any]], trials: Sequence[Mapping[str, Any]], baseline: Mapping[str, Any],
            settings: Mapping[str, Any] | None = None, alpha: float = 0.05) -> tuple[Comparison, dict[str, Any]]:
    """Pair this run's trials with ``baseline``'s, attach ``compare`` to every cell both runs have, and return the
    comparison and its summary for the record (per experiment: the pooled paired difference with its interval)."""
    legacy = int(baseline.get("version", SCHEMA_VERSION)) < 2
    comparison = Comparison(baseline, pair_runs(trials, baseline.get("trials", []), by_item=not legacy), alpha)
    base_cells = baselines_by_key(baseline)
    per_cell: dict[str, list[tuple[Mapping[str, Any], Mapping[str, Any]]]] = {}
    for key, a, b in comparison.pairing.pairs:
        per_cell.setdefault(key, []).append((a, b))
    compared = []
    for cell in cells:
        base = base_cells.get(cell["key"])
        if base is None or not base["n"]:
            continue  # no baseline cell, or one without scored trials (its accuracy is no number to compare)
        pairs = per_cell.get(cell["key"], [])
        regressed = sum(1 for a, b in pairs if b["outcome"] == "correct" and a["outcome"] != "correct")
        improved = sum(1 for a, b in pairs if a["outcome"] == "correct" and b["outcome"] != "correct")
        cell["compare"] = {
            "baseline_accuracy": base["accuracy"], "baseline_n": base["n"],
            "diff": cell["accuracy"] - float(base["accuracy"]), "paired": len(pairs),
            "regressed": regressed, "improved": improved,
            "p_value": mcnemar_drop(regressed, improved) if pairs else None,  # one-sided: a drop
        }
        compared.append(cell)
    flagged = _holm_per_experiment(compared, alpha)
    experiments = {}
    for experiment in sorted({c["experiment"] for c in compared}):
        diff = comparison.diff(experiment_is(experiment))
        experiments[experiment] = {**diff.to_json(), "cells": sum(1 for c in compared if c["experiment"] == experiment)}
    base_settings = baseline.get("settings", {})
    seed = (settings or {}).get("seed")
    return comparison, {
        "baseline_model": base_settings.get("model"),
        "baseline_seed": base_settings.get("seed"),
        "baseline_started": base_settings.get("started"),
        "baseline_version": int(baseline.get("version", SCHEMA_VERSION)),
        "same_seed": seed is not None and base_settings.get("seed") == seed,
        "alpha": alpha,
        "pairing": comparison.pairing.summary(),
        "experiments": experiments,
        "significant_drops": flagged,
        "cells_compared": len(compared),
        "legacy_note": (f"the compared run is a schema-{baseline.get('version')} record: its trials carry no cluster "
                        "(each counts alone) and pair by sample index where both runs asked the same item"
                        if legacy else None),
    }


def _holm_per_experiment(cells: list[dict[str, Any]], alpha: float) -> int:
    """Holm-adjust the cells' one-sided McNemar p-values within each experiment; flag adjusted drops; return how
    many."""
    flagged = 0
    for experiment in sorted({c["experiment"] for c in cells}):
        tested = [c for c in cells if c["experiment"] == experiment and c["compare"]["p_value"] is not None]
        for cell, adjusted in zip(tested, holm([c["compare"]["p_value"] for c in tested]), strict=True):
            cell["compare"]["p_holm"] = adjusted
        for cell in (c for c in cells if c["experiment"] == experiment):
            cmp = cell["compare"]
            cmp.setdefault("p_holm", None)
            cmp["significant_drop"] = cmp["p_holm"] is not None and cmp["p_holm"] < alpha and cmp["diff"] < 0
            flagged += cmp["significant_drop"]
    return flagged


def baselines_by_key(baseline: Mapping[str, Any] | None) -> dict[str, Mapping[str, Any]]:
    """The compared run's cells by key (empty without a compared run)."""
    return {c["key"]: c for c in baseline.get("cells", [])} if baseline else {}
