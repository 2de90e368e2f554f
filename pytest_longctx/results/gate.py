"""The gate: every threshold checked on the evidence it pools, alarms corrected together, verdicts in words.

See :mod:`pytest_longctx.gate_spec` for the grammar and the readings. Each threshold yields one check (a
``/each`` threshold: one per cell, under it); alarm checks' one-sided p-values are Holm-adjusted across the gate,
so an unchanged model trips any of them at most ``alpha`` of the time.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_longctx.gate_spec import DEFAULT_ALPHA, DEFAULT_EFFECTIVE_ACCURACY, Threshold, unique
from pytest_longctx.results.aggregate import CellKeys
from pytest_longctx.results.clustered import PairedDiff, Pooled, pooled_accuracy
from pytest_longctx.results.compare import Comparison, cell_in
from pytest_longctx.results.decision import GateResult
from pytest_longctx.results.effective import effective_length
from pytest_longctx.results.evidence import LengthAxis
from pytest_longctx.results.stats import holm, mcnemar_drop, t_quantile
from pytest_longctx.results.thresholds import _cell_name, describe_cells
from pytest_longctx.util.words import plural

Cell = dict[str, Any]


@dataclass
class GateInputs:
    """What the gate reads: this run's cells and trials (stamped with clusters), the comparison, the settings."""

    cells: list[Cell]
    trials: Sequence[Mapping[str, Any]]
    comparison: Comparison | None = None
    compared_with: str | None = None
    alpha: float = DEFAULT_ALPHA
    lengths: Mapping[str, LengthAxis] = field(default_factory=dict)
    units: Mapping[str, str] = field(default_factory=dict)
    effective_accuracy: float = DEFAULT_EFFECTIVE_ACCURACY
    seed: int = 0
    samples: int | None = None
    #: the compared run was accepted as partial (--longctx-compare-partial): every verdict says so
    partial: str | None = None
    _by_cell: dict[str, list[Mapping[str, Any]]] | None = field(default=None, repr=False)

    def scored(self, cells: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        """The scored trials of ``cells`` (trials grouped by cell once, on first use)."""
        if self._by_cell is None:
            self._by_cell = {}
            keys = CellKeys()
            for t in self.trials:
                if t["outcome"] != "error":
                    self._by_cell.setdefault(keys(t["experiment"], t["params"]), []).append(t)
        return [t for c in cells for t in self._by_cell.get(c["key"], [])]

    def unit(self, cells: Sequence[Mapping[str, Any]]) -> str:
        units = {self.units.get(c["experiment"], "trial") for c in cells}
        return units.pop() if len(units) == 1 else "item"


def evaluate(thresholds: tuple[Threshold, ...], inputs: GateInputs) -> dict[str, Any]:
    """Check every threshold, correct the alarms together, and return the gate summary for the run record."""
    return decide_checks(thresholds, inputs).to_json()


def decide_checks(thresholds: tuple[Threshold, ...], inputs: GateInputs) -> GateResult:
    """Check every threshold (each spelling once), correct the alarms together: the decided gate."""
    thresholds = unique(thresholds)
    checks: list[dict[str, Any]] = []
    errors: list[str] = []
    for cell in inputs.cells:
        cell["checks"] = []
    for threshold in thresholds:
        check = _check(threshold, inputs)
        checks.append(check)
        if check["verdict"] == "error":
            errors.append(check["words"])
        elif check["verdict"] == "too-few" and not threshold.each:  # a pooled check that checked nothing
            errors.append(f"threshold {threshold.text!r}: {check['words']}")
    _correct_alarms(checks, inputs.alpha)
    for check in checks:
        for cell_check in check.pop("_cells", []):
            cell = cell_check.pop("cell")
            cell["checks"].append({k: v for k, v in cell_check.items() if not k.startswith("_")})
        for key in [k for k in check if k.startswith("_")]:
            del check[key]
    if inputs.compared_with is not None and inputs.cells and inputs.comparison is not None:
        base_keys = {c["key"] for c in inputs.comparison.baseline.get("cells", [])}
        if not any(c["key"] in base_keys for c in inputs.cells):
            errors.append(f"the compared run {inputs.compared_with} shares no cell with this run "
                          f"(it has {len(base_keys)} cells, this run {len(inputs.cells)})")
    if inputs.partial:  # every verdict says the baseline was partial
        for check in checks:
            check["words"] = f"{check.get('words', '')} [{inputs.partial}]"
    return GateResult(tuple(checks), tuple(errors), tuple(t.text for t in thresholds), inputs.alpha,
                      extra={"partial_baseline": inputs.partial} if inputs.partial else {})


def _base(threshold: Threshold, matched: Sequence[Cell]) -> dict[str, Any]:
    return {"threshold": threshold.text, "kind": threshold.kind, "reading": threshold.reading,
            "each": threshold.each, "value": threshold.value, "cells": len(matched), "verdict": "pass",
            "experiments": sorted({str(c["experiment"]) for c in matched}),
            "p": None, "p_adjusted": None, "needs_samples": None, "needs_clusters": None}


def _check(threshold: Threshold, inputs: GateInputs) -> dict[str, Any]:
    matched = [c for c in inputs.cells if threshold.matches(c["experiment"], c["params"])]
    out = _base(threshold, matched)
    quoted = repr(threshold.text)
    if not matched:
        return _error(out, f"threshold {quoted} matches no cell of this run ({describe_cells(inputs.cells)})")
    if threshold.relative and inputs.comparison is None:
        return _error(out, f"threshold {quoted} is relative to an earlier run: pass --longctx-compare PATH")
    scored = inputs.scored(matched)  # every selector's pooled accuracy, and its paired difference when compared
    pooled = pooled_accuracy([t["outcome"] == "correct" for t in scored], [str(t.get("cluster")) for t in scored])
    out["pooled"] = pooled.to_json()
    vs = inputs.comparison.diff(cell_in({c["key"] for c in matched})) if inputs.comparison is not None else None
    if vs is not None:
        out["vs"] = vs.to_json()
    if threshold.each:
        return _each(threshold, matched, inputs, out)
    if threshold.kind == "min-effective-length":
        return _effective(threshold, matched, inputs, out)
    unit = inputs.unit(matched)
    if threshold.kind == "min":
        return _judge_min(threshold, pooled, unit, inputs, out, f"{len(matched)} cell{'s' * (len(matched) != 1)}")
    assert inputs.comparison is not None and vs is not None
    if vs.pairs == 0:
        why = inputs.comparison.pairing.summary()["unpaired_here"]
        reasons = "; ".join(f"{n} {r}" for r, n in why.items()) or "no trials"
        return _error(out, f"threshold {quoted}: no trial of its {len(matched)} cells paired with the compared "
                           f"run ({reasons}): the same seed, protocol and items are needed")
    return _judge_drop(threshold, vs, unit, inputs, out)


def _error(out: dict[str, Any], words: str) -> dict[str, Any]:
    return {**out, "verdict": "error", "words": words}


def _too_few(threshold: Threshold, clusters: int, unit: str, out: dict[str, Any]) -> dict[str, Any] | None:
    need = max(threshold.min_n, 1 if threshold.reading == "point" else 2)
    if clusters >= need:
        return None
    return {**out, "verdict": "too-few", "clusters": clusters,
            "words": f"{clusters} {plural(unit, clusters)} (independent items) < {need}: nothing to decide on"}


def _point(out: dict[str, Any], said: str, ok: bool, relation: tuple[str, str], value: str) -> dict[str, Any]:
    """The ``point`` reading's verdict: the bare estimate against the value (``relation``: as it reads on a pass,
    on a fail), no statistics."""
    return {**out, "verdict": "pass" if ok else "fail", "words": f"{said} {relation[not ok]} {value} (point)"}


def _alarm(out: dict[str, Any], p: float, said: str, claim: str,
           bound: Callable[[float], str] | None = None) -> dict[str, Any]:
    """An ``alarm`` reading's check, decided with the gate's other alarms (:func:`_correct_alarms`): its one-sided
    p, what it says and claims, and (``bound``) the bound its p inverts at a level."""
    out.update(p=p, _said=said, _claim=claim)
    if bound is not None:
        out["_bound"] = bound
    return out


def _needs(clusters: int, factor: float, inputs: GateInputs, out: dict[str, Any]) -> str:
    """How many more independent items (and samples a cell) would show it, if the estimate stays where it is."""
    if not math.isfinite(factor) or factor <= 0:
        return ""
    need = math.ceil(clusters * factor)
    out["needs_clusters"] = need
    if inputs.samples:
        out["needs_samples"] = math.ceil(inputs.samples * factor)
        return f"; about {need:,} independent items (--longctx-samples {out['needs_samples']:,}) would show it"
    return f"; about {need:,} independent items would show it"


def _judge_min(threshold: Threshold, pooled: Pooled, unit: str, inputs: GateInputs, out: dict[str, Any],
               where: str) -> dict[str, Any]:
    alpha, a = inputs.alpha, threshold.value
    out.update(estimate=pooled.accuracy, low=pooled.low, high=pooled.high, clusters=pooled.clusters,
               n=pooled.n, unit=unit)
    if (few := _too_few(threshold, pooled.clusters, unit, out)) is not None:
        return few
    said = (f"pooled accuracy {pooled.accuracy:.3f} over {where}, "
            f"{pooled.clusters:,} {plural(unit, pooled.clusters)}")
    if threshold.reading == "point":
        return _point(out, said, pooled.accuracy >= a, (">=", "<"), f"{a:g}")
    if threshold.reading == "shown":
        low, _ = pooled.bounds(alpha)
        if low >= a:
            return {**out, "words": f"{said}: shown at least {a:g} (lower bound {low:.3f})"}
        needs = ""
        if pooled.accuracy > a:
            var = pooled.accuracy * (1 - pooled.accuracy)
            need_eff = (t_quantile(1 - alpha, pooled.df) ** 2) * var / (pooled.accuracy - a) ** 2
            needs = _needs(pooled.clusters, need_eff / max(pooled.n_eff, 1e-9), inputs, out)
        return {**out, "verdict": "fail", "words": f"{said}: not shown at least {a:g} (lower bound {low:.3f}){needs}"}
    return _alarm(out, pooled.p_below(a), said, f"below {a:g}",
                  lambda level: f"upper bound {pooled.bounds(level)[1]:.3f}")  # what p_below inverts


def _judge_drop(threshold: Threshold, diff: PairedDiff, unit: str, inputs: GateInputs,
                out: dict[str, Any]) -> dict[str, Any]:
    alpha, x = inputs.alpha, threshold.value
    drop = -diff.diff + 0.0  # no "-0.000"
    out.update(estimate=diff.diff, low=diff.low, high=diff.high, clusters=diff.clusters, n=diff.pairs, unit=unit)
    if (few := _too_few(threshold, diff.clusters, unit, out)) is not None:
        return few
    said = (f"drop {drop:+.3f} over {diff.pairs:,} paired trials, {diff.clusters:,} "
            f"{plural(unit, diff.clusters)}")
    if threshold.reading == "point":
        return _point(out, said, drop <= x + 1e-12, ("<=", ">"), f"{x:g}")
    if threshold.reading == "shown":
        upper = diff.drop_upper(alpha)
        if diff.p_drop_under(x) < alpha:
            return {**out, "words": f"{said}: shown below {x:g} (upper bound {upper:+.3f})"}
        needs = ""
        if drop < x:
            needs = _needs(diff.clusters, ((upper - drop) / (x - drop)) ** 2, inputs, out)
        return {**out, "verdict": "fail",
                "words": f"{said}: not shown below {x:g} (upper bound {upper:+.3f}){needs}"}
    return _alarm(out, diff.p_drop_over(x), said, f"larger than {x:g}",
                  lambda level: f"lower bound of the drop {diff.drop_lower(level):+.3f}")  # what p_drop_over inverts


def _effective(threshold: Threshold, matched: Sequence[Cell], inputs: GateInputs,
               out: dict[str, Any]) -> dict[str, Any]:
    quoted = repr(threshold.text)
    axes = {c["experiment"]: inputs.lengths.get(c["experiment"]) for c in matched}
    if None in axes.values() or len({(a.param, a.tokens) for a in axes.values() if a is not None}) != 1:
        return _error(out, f"threshold {quoted}: an effective length needs cells of experiments with one length "
                           f"axis ({', '.join(sorted(e for e, a in axes.items() if a is None)) or 'axes differ'})")
    axis = next(a for a in axes.values() if a is not None)
    seed = zlib.crc32(f"{inputs.seed}|{threshold.text}".encode())
    found = effective_length(inputs.scored(matched), axis, inputs.effective_accuracy, seed)
    if found is None:
        return _error(out, f"threshold {quoted}: none of its cells' scored trials is on the length axis")
    low, high = found.interval()
    t = threshold.value
    out.update(estimate=found.tokens, low=low, high=high, threshold_accuracy=found.threshold, n=sum(
        lv.n for lv in found.levels), unit="tokens")
    if (why := found.undecided(t)) is not None:  # "cannot decide" is no alarm: a gate error with its reason
        return _error(out, f"threshold {quoted}: {why}")
    longest = f" (every tested length passed: at least {found.tokens:,})" if found.at_least else ""
    said = (f"effective length {found.tokens:,} tokens [{low:,}, {high:,}] at accuracy >= {found.threshold}"
            f"{longest}")
    if threshold.reading == "point":
        return _point(out, said, found.tokens >= t, (">=", "<"), f"{t:,.0f}")
    if threshold.reading == "shown":
        bound = found.shown(inputs.alpha)
        ok = bound >= t
        return {**out, "verdict": "pass" if ok else "fail",
                "words": f"{said}: {'shown' if ok else 'not shown'} at least {t:,.0f} (lower bound {bound:,})"}
    return _alarm(out, found.p_below(t), said, f"below {t:,.0f} tokens")


def _each(threshold: Threshold, matched: Sequence[Cell], inputs: GateInputs, out: dict[str, Any]) -> dict[str, Any]:
    """One check per cell; an alarm's cells are Holm-corrected, and the threshold's p is the smallest adjusted."""
    cell_checks = []
    for cell in matched:
        sub = {**_base(threshold, [cell]), "cell": cell}
        unit = inputs.unit([cell])
        if threshold.kind == "min":
            scored = inputs.scored([cell])
            pooled = pooled_accuracy([t["outcome"] == "correct" for t in scored],
                                     [str(t.get("cluster")) for t in scored])
            sub = _judge_min(threshold, pooled, unit, inputs, sub, "1 cell")
        else:
            assert inputs.comparison is not None
            diff = inputs.comparison.diff(cell_in({cell["key"]}))
            if diff.pairs == 0:
                sub = {**sub, "verdict": "too-few", "words": "no trial paired with the compared run"}
            else:
                sub = _judge_drop(threshold, diff, unit, inputs, sub)
                if sub.get("p") is not None and threshold.value == 0:  # exact McNemar for "any drop"
                    sub["p"] = mcnemar_drop(diff.regressed, diff.improved)
        sub["detail"] = _cell_name(cell)
        cell_checks.append(sub)
    tested = [c for c in cell_checks if c.get("p") is not None]
    for check, adjusted in zip(tested, holm([c["p"] for c in tested]), strict=True):
        check["p_holm"] = adjusted
    decided = [c for c in cell_checks if c["verdict"] != "too-few"]
    if not decided:
        return _error({**out, "_cells": cell_checks}, f"threshold {threshold.text!r} checked no cell: each of its "
                      f"{len(matched)} cells has too few independent items or no paired trial (@n={threshold.min_n})")
    out["_cells"] = cell_checks
    out["clusters"] = sum(c.get("clusters", 0) for c in decided)
    if threshold.reading != "alarm":
        failed = [c for c in decided if c["verdict"] == "fail"]
        out["verdict"] = "fail" if failed else "pass"
        out["words"] = (f"{len(failed)} of {len(decided)} cells failed: " + "; ".join(
            f"{c['detail']}: {c['words']}" for c in failed[:3]) if failed else f"all {len(decided)} cells passed")
        return out
    out["p"] = min((c["p_holm"] for c in tested), default=1.0)
    out["_said"] = f"{len(decided)} cells checked one by one (Holm across them)"
    out["_claim"] = "failing in a cell"
    return out


def _level(p: float, adjusted: float, alpha: float, alarms: int) -> float:
    """The one-sided level a check's own p is held to after Holm (alpha over its step's multiplier): the level of
    the bound printed beside it, so that the bound excludes X exactly when the check fails."""
    if alarms <= 1:
        return alpha
    if p > 0 and adjusted < 1.0:
        return alpha * p / adjusted
    return alpha / alarms


def _correct_alarms(checks: list[dict[str, Any]], alpha: float) -> None:
    """Holm across the gate's alarm checks; decide them and word their verdicts."""
    alarms = [c for c in checks if c.get("p") is not None and c["verdict"] == "pass" and "_said" in c]
    for check, adjusted in zip(alarms, holm([c["p"] for c in alarms]), strict=True):
        check["p_adjusted"] = adjusted
        fail = adjusted < alpha
        check["verdict"] = "fail" if fail else "pass"
        many = f", Holm over {len(alarms)} alarms: {adjusted:.3g}" if len(alarms) > 1 else ""
        said, claim = check.pop("_said"), check.pop("_claim")
        if check["each"]:
            scale = adjusted / check["p"] if check["p"] else 1.0
            for cell in check.get("_cells", []):
                if cell.get("p_holm") is not None:
                    cell["p_adjusted"] = min(1.0, cell["p_holm"] * scale)
                    cell["verdict"] = "fail" if cell["p_adjusted"] < alpha else "pass"
                    shown = "shown" if cell["verdict"] == "fail" else "not shown"
                    cell["words"] = (f"{cell.pop('_said', '')}: {shown} {cell.pop('_claim', claim)} "
                                     f"(p={cell['p']:.3g}, adjusted {cell['p_adjusted']:.3g})")
            failed = [c for c in check.get("_cells", []) if c["verdict"] == "fail"]
            check["words"] = (f"{said}: {len(failed)} shown {claim}" + (": " + "; ".join(
                c["detail"] for c in failed[:3]) if failed else "") + f" (smallest p={check['p']:.3g}{many})")
            check["verdict"] = "fail" if failed else "pass"
            continue
        level = _level(check["p"], adjusted, alpha, len(alarms))
        bound = check.pop("_bound", None)
        at = f"; one-sided {1 - level:.4g} {bound(level)}" if bound is not None else ""
        check["level"] = level
        check["words"] = (f"{said}: {'shown' if fail else 'not shown'} {claim} "
                          f"(one-sided p={check['p']:.3g}{many}; alpha {alpha}{at})")
