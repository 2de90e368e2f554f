"""Seeded simulation of the gate's statistics over a family of data models, with known truth (issue #29).

The model, per trial on the logit scale: ``mu + item + prompt + model-by-item``. Items are drawn afresh every run
(the estimand is the pooled accuracy of the population of items, trials weighted as the design weights them);
the prompt effect belongs to the cell and is fixed for a design; the model-by-item deviation is shared by two runs
of one model ("versions": the same model asked twice) and drawn afresh for "different" models of equal accuracy.
``mu`` is solved so that the design's expected accuracy is exactly the target (0.5, 0.85, 0.97).

Designs (trials of an item spread over the cells in turn):

* ``equal``: 20 items x 20 cells, one trial each;
* ``rank``: 20 items, item r asked ``round(200 / r)`` times (200 down to 10);
* ``few``: 8 items of 200, 100, 50, 25, 15, 10, 7 and 5 trials;
* ``star``: a ``*`` threshold pooling 400 one-trial items (lrt) with 20 items asked in 116 cells (qa).

Every estimate comes from the plugin's own functions (:mod:`pytest_longctx.results.robust`, which
``pooled_accuracy`` and ``paired_difference`` call with a batch of one) on 1,000 runs at once; the first
``--check`` runs of the first cases also go the whole way (run records, ``compare``, ``evaluate``) and must decide
alike. The power table draws regressions of two shapes for versions of one model: diffuse (every answer's logit
lowered by the same amount) and concentrated (B of the items wrong in every trial), finds the drop the pooled
alarm catches 80% of the time, and sets it beside the plan's (``results/power.py``) computed from the design and
what a baseline measures (its accuracy and intra-item correlation, the discordance of two unchanged runs and its
design effect).

    python benchmarks/sim_family.py              # 1,000 runs a case
    python benchmarks/sim_family.py --runs 200   # a quicker look

Every draw comes from ``numpy.random.default_rng(seed)``; the same arguments print the same table.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import brentq
from scipy.special import expit

from pytest_longctx.gate_spec import parse_threshold
from pytest_longctx.results.aggregate import Aggregator
from pytest_longctx.results.compare import compare
from pytest_longctx.results.gate import GateInputs, evaluate
from pytest_longctx.results.paired_rows import PairedRows, paired_rows
from pytest_longctx.results.power import Assumptions, Design, concentrated, detectable_drop
from pytest_longctx.results.robust import PooledRows, Shape, pooled_rows, working_rho
from pytest_longctx.results.stats import wilson

SIGMA_ITEM, SIGMA_PROMPT, SIGMA_MODEL = 1.2, 0.3, 0.6
ALPHA = 0.05
NODES, WEIGHTS = np.polynomial.hermite_e.hermegauss(80)
WEIGHTS = WEIGHTS / WEIGHTS.sum()


@dataclass(frozen=True)
class Layout:
    """Per trial (grouped by item): its item and its cell; the cells' prompt effects."""

    name: str
    item: np.ndarray
    cell: np.ndarray
    prompt: np.ndarray  # per cell
    sizes: np.ndarray   # per item

    @classmethod
    def of(cls, name: str, sizes: list[int], cells: list[int], seed: int) -> Layout:
        """``sizes[g]`` trials of item g over ``cells[g]`` cells (a block of items shares its cells)."""
        items: list[int] = []
        cell_of: list[int] = []
        offsets: dict[int, int] = {}
        for g, (n, c) in enumerate(zip(sizes, cells, strict=True)):
            base = offsets.setdefault(c, len(offsets) * 1000)
            items += [g] * n
            cell_of += [base + t % c for t in range(n)]
        _, cell_index = np.unique(cell_of, return_inverse=True)
        prompt = np.random.default_rng([seed, 99]).normal(0, SIGMA_PROMPT, cell_index.max() + 1)
        return cls(name, np.array(items), cell_index, prompt, np.array(sizes))

    @property
    def shape(self) -> Shape:
        return Shape.of(self.sizes)

    @property
    def starts(self) -> np.ndarray:
        return np.concatenate([[0], np.cumsum(self.sizes)[:-1]])

    def accuracy(self, mu: float, shift: float = 0.0) -> float:
        """Expected accuracy over the design at intercept ``mu`` (every logit lowered by ``shift``)."""
        spread = np.hypot(SIGMA_ITEM, SIGMA_MODEL)
        per_cell = expit(mu - shift + self.prompt[:, None] + spread * NODES[None, :]) @ WEIGHTS
        return float(per_cell[self.cell].mean())

    def mu_for(self, target: float) -> float:
        return float(brentq(lambda m: self.accuracy(m) - target, -15, 15))


def designs(seed: int) -> list[Layout]:
    rank = [round(200 / r) for r in range(1, 21)]
    few = [200, 100, 50, 25, 15, 10, 7, 5]
    return [Layout.of("equal", [20] * 20, [20] * 20, seed), Layout.of("rank", rank, [20] * 20, seed),
            Layout.of("few", few, [20] * 8, seed),
            Layout.of("star", [1] * 400 + [116] * 20, [20] * 400 + [116] * 20, seed)]


def draw(rng: np.random.Generator, layout: Layout, mu: float, runs: int, agreement: str, shift: float = 0.0,
         broken: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Outcomes (runs x trials) of the compared run and the candidate."""
    g = layout.sizes.size
    item = rng.normal(0, SIGMA_ITEM, (runs, g))
    model = rng.normal(0, SIGMA_MODEL, (runs, g))
    other = model if agreement == "versions" else rng.normal(0, SIGMA_MODEL, (runs, g))
    base = mu + layout.prompt[layout.cell][None, :]
    before = rng.random((runs, layout.item.size)) < expit(base + (item + model)[:, layout.item])
    p_after = expit(base - shift + (item + other)[:, layout.item])
    if broken:
        gone = np.argsort(rng.random((runs, g)), axis=1)[:, :broken]
        mask = np.zeros((runs, g), bool)
        np.put_along_axis(mask, gone, True, axis=1)
        p_after = np.where(mask[:, layout.item], 0.0, p_after)
    return before, rng.random((runs, layout.item.size)) < p_after


def estimates(layout: Layout, before: np.ndarray, after: np.ndarray) -> tuple[PooledRows, PooledRows, PairedRows]:
    """The plugin's estimators on every run at once: the candidate's and the baseline's pooled accuracy, and the
    paired difference."""
    starts, shape = layout.starts, layout.shape
    d = after.astype(float) - before.astype(float)
    paired = paired_rows(np.add.reduceat(d, starts, axis=1), (d < 0).sum(1), (d > 0).sum(1), shape)
    return (pooled_rows(np.add.reduceat(after.astype(float), starts, axis=1), shape),
            pooled_rows(np.add.reduceat(before.astype(float), starts, axis=1), shape), paired)


def rate(hits: np.ndarray) -> tuple[float, float, float]:
    k, n = int(hits.sum()), hits.size
    low, high = wilson(k, n)
    return k / n, low, high


def record(layout: Layout, outcomes: np.ndarray) -> dict[str, Any]:
    """A run record as the plugin builds it (cells from the Aggregator; trials stamped with clusters)."""
    agg = Aggregator()
    for i, (item, cell, right) in enumerate(zip(layout.item.tolist(), layout.cell.tolist(), outcomes.tolist(),
                                                strict=True)):
        agg.add({"nodeid": f"n{i}", "experiment": "sim", "params": {"cell": cell}, "sample": i, "item": f"i{item}",
                 "cluster": f"i{item}", "outcome": "correct" if right else "incorrect"})
    return {"schema": "pytest-longctx/run", "version": 2, "settings": {"seed": 0, "model": "sim"},
            "cells": agg.cells(), "trials": agg.trials}


def whole_path(layout: Layout, before: np.ndarray, after: np.ndarray, threshold: str) -> bool:
    """Does the gate fail on ``threshold``, decided through records, ``compare`` and ``evaluate``?"""
    base, now = record(layout, before), record(layout, after)
    comparison, _ = compare(now["cells"], now["trials"], base, now["settings"], ALPHA)
    gate = evaluate((parse_threshold(threshold),), GateInputs(now["cells"], now["trials"], comparison, "b.json", ALPHA))
    return bool(gate["status"] == "fail")


def fmt(r: tuple[float, float, float], mark: bool) -> str:
    return f"{r[0]:6.1%} [{r[1]:5.1%},{r[2]:5.1%}]{'!' if mark else ' '}"


def coverage_table(args: argparse.Namespace, layouts: list[Layout]) -> dict[tuple[str, float], Assumptions]:
    """No change: coverage, one-sided misses and alarms; returns what a baseline measures, per design/accuracy."""
    print(f"No change ({args.runs} seeded runs a case; '!' marks a missed target: 95% intervals cover 93-97%, "
          "one-sided 95% bounds miss <= 5.5%, alarms at alpha 0.05 fire <= 5% with the Wilson upper end <= 6%)")
    print(f"  {'design':6} {'acc':>4} {'agreement':9} {'df':>5}  {'pooled 95% covers':22} {'lower bound above':22} "
          f"{'upper bound below':22} {'paired 95% covers 0':22} {'alarm max-drop=0':22}")
    measured: dict[tuple[str, float], Assumptions] = {}
    checked = agreed = 0
    for li, layout in enumerate(layouts):
        for acc in args.accuracy:
            mu = layout.mu_for(acc)
            for agreement in ("versions", "different"):
                rng = np.random.default_rng([args.seed, li, int(acc * 100), agreement == "versions"])
                before, after = draw(rng, layout, mu, args.runs, agreement)
                now, base, paired = estimates(layout, before, after)
                low, high = now.interval(0.95)
                lower, upper = now.bounds(ALPHA)
                plow, phigh = paired.interval(0.95)
                alarm = paired.p_drop_over(0.0) < ALPHA
                cover, above, below = rate((low <= acc) & (acc <= high)), rate(lower > acc), rate(upper < acc)
                pcover, fired = rate((plow <= 0) & (0 <= phigh)), rate(alarm)
                print(f"  {layout.name:6} {acc:4.2f} {agreement:9} {np.median(now.df):5.1f}  "
                      f"{fmt(cover, not 0.93 <= cover[0] <= 0.97)} {fmt(above, above[0] > 0.055)} "
                      f"{fmt(below, below[0] > 0.055)} {fmt(pcover, not 0.93 <= pcover[0] <= 0.97)} "
                      f"{fmt(fired, fired[0] > 0.05 or fired[2] > 0.06)}", flush=True)
                if agreement == "versions":
                    m = layout.shape.m
                    disc = (paired.regressed + paired.improved) / layout.shape.n
                    measured[(layout.name, acc)] = Assumptions(
                        acc, float(disc.mean()), float(working_rho(base.deff, layout.shape).mean()), "measured",
                        float(np.clip((paired.deff.mean() - 1) / (m - 1), 0, 1)) if m > 1 else 0.0)
                for run in range(args.check if li < 2 else 0):
                    checked += 2
                    agreed += whole_path(layout, before[run], after[run], "*:max-drop=0") == bool(alarm[run])
                    shown = f"*:min={acc}/shown"
                    agreed += whole_path(layout, before[run], after[run], shown) == (not lower[run] >= acc)
    print(f"  the whole path (run records, compare, evaluate) decided {agreed} of {checked} checked gate runs alike"
          + ("" if agreed == checked else ": MISMATCH"))
    return measured


def _crossing(xs: list[float], powers: list[float], target: float = 0.8) -> float | None:
    for i, p in enumerate(powers):
        if p >= target:
            if i == 0:
                return xs[0]
            return xs[i - 1] + (xs[i] - xs[i - 1]) * (target - powers[i - 1]) / (p - powers[i - 1])
    return None


def power_table(args: argparse.Namespace, layouts: list[Layout], measured: dict[tuple[str, float], Assumptions]
                ) -> None:
    print(f"\nThe drop the pooled alarm (alpha {ALPHA}, one-sided) catches 80% of the time, simulated, against the "
          f"plan's from the design and the baseline's measurements ({args.power_runs} runs a point; versions)")
    print(f"  {'design':6} {'acc':>4}  {'diffuse: sim':>12} {'plan':>6} {'ratio':>6}  "
          f"{'concentrated: sim items':>23} {'plan':>5} {'sim drop':>8} {'plan drop':>9} {'ratio':>6}")
    for li, layout in enumerate(layouts):
        design = Design.of_sizes(layout.sizes.tolist())
        g = layout.sizes.size
        for acc in args.accuracy:
            mu = layout.mu_for(acc)
            a = measured[(layout.name, acc)]
            rng = np.random.default_rng([args.seed, 5, li, int(acc * 100)])
            drops, powers = [], []
            for shift in np.arange(0.05, 4.0, 0.05):
                before, after = draw(rng, layout, mu, args.power_runs, "versions", shift=float(shift))
                drops.append(acc - layout.accuracy(mu, float(shift)))
                powers.append(float((estimates(layout, before, after)[2].p_drop_over(0.0) < ALPHA).mean()))
                if powers[-1] >= 0.9 or drops[-1] > acc - 0.01:
                    break
            sim = _crossing(drops, powers)
            plan = detectable_drop(design, ALPHA, a)
            items, item_powers = [], []
            for broken in range(1, g + 1):
                before, after = draw(rng, layout, mu, args.power_runs, "versions", broken=broken)
                items.append(float(broken))
                item_powers.append(float((estimates(layout, before, after)[2].p_drop_over(0.0) < ALPHA).mean()))
                if item_powers[-1] >= 0.9:
                    break
            sim_items = _crossing(items, item_powers)
            found = concentrated(design, ALPHA, a)
            plan_items = found["share"] * g if found else None
            # broken items drop their own expected accuracy: about the design's, share x accuracy in all
            sim_drop = sim_items / g * acc if sim_items else None
            plan_drop = found["drop"] if found else None
            print(f"  {layout.name:6} {acc:4.2f}  {_f(sim):>12} {_f(plan):>6} {_ratio(plan, sim):>6}  "
                  f"{_f(sim_items, 1):>23} {_f(plan_items, 1):>5} {_f(sim_drop):>8} {_f(plan_drop):>9} "
                  f"{_ratio(plan_drop, sim_drop):>6}", flush=True)


def _f(x: float | None, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _ratio(plan: float | None, sim: float | None) -> str:
    if not plan or not sim:
        return "-"
    r = plan / sim
    return f"{r:.2f}" + ("!" if not 1 / 1.3 <= r <= 1.3 else " ")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1000, help="runs a no-change case (default 1000)")
    parser.add_argument("--power-runs", type=int, default=1000, help="runs a point of a power curve (default 1000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--accuracy", type=float, nargs="+", default=[0.5, 0.85, 0.97])
    parser.add_argument("--check", type=int, default=5, help="runs a case (of the first two designs) also decided "
                        "through the whole path (default 5)")
    parser.add_argument("--skip-power", action="store_true")
    args = parser.parse_args()
    start = time.perf_counter()
    layouts = designs(args.seed)
    measured = coverage_table(args, layouts)
    if not args.skip_power:
        power_table(args, layouts, measured)
    print(f"\n{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
