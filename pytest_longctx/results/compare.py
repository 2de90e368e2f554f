"""Comparison with an earlier run record: per-cell differences and paired McNemar tests."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_longctx.results.aggregate import trial_key
from pytest_longctx.results.schema import SCHEMA, load_record
from pytest_longctx.results.stats import mcnemar_exact

__all__ = ["SCHEMA", "baselines_by_key", "compare", "load_record"]


def compare(cells: list[dict[str, Any]], trials: list[dict[str, Any]], baseline: Mapping[str, Any],
            alpha: float = 0.05) -> dict[str, Any]:
    """Attach ``compare`` to each cell that the baseline also has; return a summary.

    Trials are paired by cell and sample index, and only when both runs asked the same item
    (same ``item`` id and expected answer), so a paired test never mixes different questions.
    """
    base_cells = {c["key"]: c for c in baseline.get("cells", [])}
    base_trials = {trial_key(t): t for t in baseline.get("trials", [])}
    same_seed = baseline.get("settings", {}).get("seed") is not None
    flagged = 0
    for cell in cells:
        base = base_cells.get(cell["key"])
        if base is None or not base["n"]:
            continue  # no baseline cell, or one without scored trials (its accuracy is no number to compare)
        regressed = improved = paired = 0
        for trial in trials:
            if trial["experiment"] != cell["experiment"] or trial["params"] != cell["params"]:
                continue
            other = base_trials.get(trial_key(trial))
            if other is None or "error" in (trial["outcome"], other["outcome"]):
                continue
            if (other.get("item"), other.get("expected")) != (trial.get("item"), trial.get("expected")):
                continue
            paired += 1
            was, now = other["outcome"] == "correct", trial["outcome"] == "correct"
            regressed += was and not now
            improved += now and not was
        p = mcnemar_exact(regressed, improved) if paired else None
        diff = cell["accuracy"] - float(base["accuracy"])
        significant = p is not None and p < alpha and diff < 0
        flagged += significant
        cell["compare"] = {
            "baseline_accuracy": base["accuracy"], "baseline_n": base["n"], "diff": diff, "paired": paired,
            "regressed": regressed, "improved": improved, "p_value": p, "significant_drop": significant,
        }
    return {
        "baseline_model": baseline.get("settings", {}).get("model"),
        "baseline_seed": baseline.get("settings", {}).get("seed"),
        "baseline_started": baseline.get("settings", {}).get("started"),
        "same_seed": same_seed,
        "alpha": alpha,
        "significant_drops": flagged,
        "cells_compared": sum(1 for c in cells if "compare" in c),
    }


def baselines_by_key(baseline: Mapping[str, Any] | None) -> dict[str, Mapping[str, Any]]:
    """The compared run's cells by key (empty without a compared run)."""
    return {c["key"]: c for c in baseline.get("cells", [])} if baseline else {}
