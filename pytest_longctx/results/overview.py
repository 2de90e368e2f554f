"""Per experiment, what a run shows: pooled accuracy counted by clusters, effective context length, the paired
difference from a compared run, and the smallest drop the run could have detected."""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_longctx.results.clustered import icc, pooled_accuracy
from pytest_longctx.results.compare import Comparison, experiment_is
from pytest_longctx.results.effective import effective_length
from pytest_longctx.results.evidence import DEFAULT, Evidence
from pytest_longctx.results.power import (
    POWER,
    Assumptions,
    Design,
    assumptions_from,
    concentrated,
    detectable_drop,
    gate_level,
)

Trials = Sequence[Mapping[str, Any]]


def effective_lengths(trials: Trials, declared: Mapping[str, Evidence], threshold: float,
                      seed: int) -> dict[str, dict[str, Any]]:
    """The effective length of every experiment with a length axis that has scored trials on it."""
    out = {}
    for experiment in sorted({t["experiment"] for t in trials}):
        axis = declared.get(experiment, DEFAULT).length
        if axis is None:
            continue
        mine = [t for t in trials if t["experiment"] == experiment]
        found = effective_length(mine, axis, threshold, zlib.crc32(f"{seed}|effective|{experiment}".encode()))
        if found is not None:
            out[experiment] = found.to_json()
    return out


def overview(trials: Trials, declared: Mapping[str, Evidence], *, comparison: Comparison | None,
             alpha: float, thresholds: Sequence[Any] = ()) -> dict[str, dict[str, Any]]:
    """Per experiment: pooled accuracy with its interval, and what the run could have detected."""
    level, level_text = gate_level(alpha, thresholds)
    out: dict[str, dict[str, Any]] = {}
    for experiment in sorted({t["experiment"] for t in trials}):
        scored = [t for t in trials if t["experiment"] == experiment and t["outcome"] != "error"]
        unit = declared.get(experiment, DEFAULT).unit
        outcomes = [t["outcome"] == "correct" for t in scored]
        clusters = [str(t.get("cluster")) for t in scored]
        pooled = pooled_accuracy(outcomes, clusters)
        entry: dict[str, Any] = {"unit": unit, "pooled": pooled.to_json(), "errors": sum(
            1 for t in trials if t["experiment"] == experiment and t["outcome"] == "error")}
        if comparison is not None:
            diff = comparison.diff(experiment_is(experiment))
            if diff.pairs:
                entry["vs"] = diff.to_json()
        design = Design.of(clusters)
        assumptions = _design_assumptions(comparison, experiment, outcomes, clusters)
        drop = detectable_drop(design, level, assumptions)
        entry["detectable"] = {"drop": None if drop is None else round(drop, 4), "power": POWER,
                               "concentrated": concentrated(design, level, assumptions),
                               "clusters": design.clusters, "alpha": round(level, 6), "alpha_text": level_text,
                               "assumptions": assumptions.to_json()}
        out[experiment] = entry
    return out


def _design_assumptions(comparison: Comparison | None, experiment: str, outcomes: Sequence[bool],
                        clusters: Sequence[str]) -> Assumptions:
    """What the design detects rests on the baseline, never on the candidate's difference: the compared run's
    accuracy and correlation (and its own comparison's discordance, else the stated default); without a compared
    run, this run as the baseline of the next."""
    if comparison is not None:
        return assumptions_from(comparison.baseline, experiment)
    base = Assumptions()
    if not outcomes:
        return base
    measured = icc(outcomes, clusters)
    said = ["accuracy from this run (as the baseline of the next)",
            f"intra-item correlation {measured:.2f} from this run" if measured is not None
            else f"intra-item correlation {base.icc} (stated default)",
            f"discordance {base.discordance} (intra-item correlation {base.diff_icc}; stated default: two runs of an "
            f"unchanged model disagree on {base.discordance:.0%} of answers)"]
    accuracy = max(min(sum(outcomes) / len(outcomes), 0.999), 0.001)
    return Assumptions(accuracy, base.discordance, measured if measured is not None else base.icc, "; ".join(said),
                       base.diff_icc)
