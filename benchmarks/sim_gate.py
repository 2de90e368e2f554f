"""Seeded simulation of the CI gate: false alarms and power of the README recipe, with known truth.

Two runs (the compared one and the candidate) are drawn at each experiment's default remote design: its cells,
its items, and which items repeat across cells (qa asks 20 questions in each of its 116 cells; an LRT trial is its
own item). Every decision uses the plugin's own statistics: per alarm of the README recipe, the pooled paired
difference (``paired_difference``, clustered on items) and its one-sided p of a drop, then Holm across the alarms,
as ``evaluate`` decides them. The first ``--check`` runs of every case (20 by default) also go the whole way a
run's finish goes: records of trials with clusters, ``compare`` (pairing on items), then ``evaluate`` on the
recipe's thresholds; the table says how many of those decisions agreed (the whole path takes ~1 s a gate run, too
slow for 24,000 of them on 2 cores). Nothing here re-implements a test.

The model of the truth, per trial: a uniform ``U`` decides whether a model is right (``U < accuracy``). With
probability ``sqrt(icc)`` the trial uses its item's shared ``U``, otherwise its own, so two trials of one item
agree with correlation ``icc``. Versions of one model ("versions") share every ``U`` (an item's difficulty is kept:
the 80% model's right answers are a subset of the 85% model's) and each run flips ``flip`` of its answers at
random (the flips clustered the same way); unrelated models ("independent") draw their own ``U``.

    python benchmarks/sim_gate.py                 # ~20 min on 2 cores: 1,000 runs a case
    python benchmarks/sim_gate.py --runs 200      # a quicker look
    python benchmarks/sim_gate.py --mde --runs 400   # also: the simulated 80%-power drop against the plan's
    python benchmarks/sim_gate.py --skip-recipe --shown   # non-inferiority: passes at the margin, and its power

Every draw comes from ``numpy.random.default_rng(seed)``; the same arguments print the same table.
"""

from __future__ import annotations

import argparse
import fnmatch
import math
import multiprocessing
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pytest_longctx.gate_spec import parse_threshold
from pytest_longctx.results.aggregate import Aggregator
from pytest_longctx.results.clustered import paired_difference, pooled_accuracy
from pytest_longctx.results.compare import compare
from pytest_longctx.results.gate import GateInputs, evaluate
from pytest_longctx.results.power import Assumptions, Design, detectable_drop
from pytest_longctx.results.stats import holm, wilson

#: The README's CI recipe (docs/ci-gating.md): one pooled regression alarm per experiment.
RECIPE = ("experiment=lrt:max-drop=0", "experiment=qa:max-drop=0", "experiment=docs:max-drop=0",
          "experiment=litm-*:max-drop=0")


@dataclass(frozen=True)
class Block:
    """``cells`` cells that each ask the same ``items`` items (``shared``), or each its own items."""

    cells: int
    items: int
    shared: bool = True


#: Each experiment's default design for a remote model (`pytest evals --collect-only --longctx-model anthropic/...`).
DESIGNS: dict[str, tuple[Block, ...]] = {
    "lrt": (Block(20, 20, shared=False),),          # 4 sizes x 5 shuffles, 20 files each, every file its own
    "qa": (Block(116, 20),),                        # 96 position x variant cells + 20 depth cells, 20 questions
    "docs": (Block(15, 20),),                       # 5 depths + 5 sizes x 2 arms, 20 QA items
    "litm-qa": (Block(17, 180),),                   # 10/20/30 documents x gold positions + 2 baselines, 180 questions
    "litm-kv": (Block(4, 180), Block(5, 180)),      # 75 keys x 4 positions, 140 keys x 5 (their own rows)
}


@dataclass
class Layout:
    """Per trial: its experiment, cell and cluster."""

    experiment: list[str]
    cell: np.ndarray
    cluster: np.ndarray

    @classmethod
    def of(cls, designs: dict[str, tuple[Block, ...]]) -> Layout:
        experiment: list[str] = []
        cells: list[int] = []
        clusters: list[int] = []
        cell_id = cluster_id = 0
        for name, blocks in designs.items():
            for block in blocks:
                for c in range(block.cells):
                    for i in range(block.items):
                        experiment.append(name)
                        cells.append(cell_id + c)
                        clusters.append(cluster_id + (i if block.shared else c * block.items + i))
                cell_id += block.cells
                cluster_id += block.items * (1 if block.shared else block.cells)
        return cls(experiment, np.array(cells), np.array(clusters))

    @property
    def clusters(self) -> int:
        return int(self.cluster.max()) + 1


def _latent(rng: np.random.Generator, layout: Layout, icc: float) -> np.ndarray:
    """Uniforms that two trials of one cluster share with correlation ``icc``."""
    shared = rng.random(layout.clusters)[layout.cluster]
    own = rng.random(len(layout.cluster))
    return np.where(rng.random(len(layout.cluster)) < math.sqrt(icc), shared, own)


def draw_pair(rng: np.random.Generator, layout: Layout, before: float, after: float, icc: float, flip: float,
              agreement: str) -> tuple[np.ndarray, np.ndarray]:
    """Outcomes (True = right) of the compared run and the candidate."""
    u = _latent(rng, layout, icc)
    first = u < before
    second = (u if agreement == "versions" else _latent(rng, layout, icc)) < after
    if flip:
        first ^= _latent(rng, layout, icc) < flip
        second ^= _latent(rng, layout, icc) < flip
    return first, second


def record(layout: Layout, outcomes: np.ndarray) -> dict[str, object]:
    """A run record as the plugin builds it (cells from the Aggregator; trials stamped with clusters)."""
    agg = Aggregator()
    right = outcomes.tolist()
    for i, (experiment, cell, cluster) in enumerate(zip(layout.experiment, layout.cell.tolist(),
                                                        layout.cluster.tolist(), strict=True)):
        item = f"{experiment}-{cluster}"
        agg.add({"nodeid": f"n{i}", "experiment": experiment, "params": {"cell": cell}, "sample": i,
                 "item": item, "cluster": item, "outcome": "correct" if right[i] else "incorrect"})
    return {"schema": "pytest-longctx/run", "version": 2, "settings": {"seed": 0, "model": "sim"},
            "cells": agg.cells(), "trials": agg.trials}


def gate_run(layout: Layout, first: np.ndarray, second: np.ndarray, thresholds: Sequence[str],
             alpha: float) -> dict[str, object]:
    base, now = record(layout, first), record(layout, second)
    comparison, _ = compare(now["cells"], now["trials"], base, now["settings"], alpha)  # type: ignore[arg-type]
    return evaluate(tuple(parse_threshold(t) for t in thresholds),
                    GateInputs(now["cells"], now["trials"], comparison, "base.json", alpha))  # type: ignore[arg-type]


def rate_text(hits: int, runs: int) -> str:
    low, high = wilson(hits, runs)
    return f"{hits / runs:6.1%} [{low:5.1%}, {high:5.1%}]"


@dataclass(frozen=True)
class Alarms:
    """The recipe's pooled alarms as arrays: each alarm's trials (its selector's experiments)."""

    masks: tuple[np.ndarray, ...]

    @classmethod
    def of(cls, layout: Layout) -> Alarms:
        experiments = np.array(layout.experiment)
        selectors = [t.split(":", 1)[0].removeprefix("experiment=") for t in RECIPE]
        return cls(tuple(np.array([fnmatch.fnmatchcase(e, s) for e in experiments]) for s in selectors))


def fast_gate(alarms: Alarms, clusters: np.ndarray, first: np.ndarray, second: np.ndarray,
              alpha: float) -> tuple[bool, bool]:
    """(the recipe fails, the LRT alarm fails): what ``evaluate`` decides for the recipe's pooled alarms, from the
    same functions (``paired_difference``'s one-sided p of a drop over 0 per alarm, Holm across them), without
    building records. ``recipe_case`` checks it against the whole path on the first runs of every case."""
    ps = [paired_difference(second[m].tolist(), first[m].tolist(), clusters[m].tolist()).p_drop_over(0.0)
          for m in alarms.masks]
    adjusted = holm(ps)
    return any(p < alpha for p in adjusted), adjusted[0] < alpha


def recipe_case(args: argparse.Namespace, agreement: str, icc: float) -> tuple[str, float, int, int, int, int, int,
                                                                             int]:
    """One row of the recipe table: false alarms (clustered and naive) and power, over ``args.runs`` runs; and of
    the first ``args.check`` runs, how many the whole path (records, ``compare``, ``evaluate``) decided alike."""
    layout = Layout.of(DESIGNS)
    naive_layout = Layout(layout.experiment, layout.cell, np.arange(len(layout.cluster)))
    alarms_of = Alarms.of(layout)
    rng = np.random.default_rng([args.seed, int(icc * 100), agreement == "versions"])
    flip = args.flip if agreement == "versions" else 0.0
    alarms = naive = caught = lrt = checked = agreed = 0
    for run in range(args.runs):
        first, second = draw_pair(rng, layout, args.accuracy, args.accuracy, icc, flip, agreement)
        clustered, _ = fast_gate(alarms_of, layout.cluster, first, second, args.alpha)
        counted, _ = fast_gate(alarms_of, naive_layout.cluster, first, second, args.alpha)
        alarms += clustered
        naive += counted
        worse_first, worse = draw_pair(rng, layout, args.accuracy, args.accuracy - 0.05, icc, flip, agreement)
        fail, lrt_fail = fast_gate(alarms_of, layout.cluster, worse_first, worse, args.alpha)
        caught += fail
        lrt += lrt_fail
        if run < args.check:  # the same decisions through the plugin's whole path
            result = gate_run(layout, worse_first, worse, RECIPE, args.alpha)
            checked += 3
            agreed += ((gate_run(layout, first, second, RECIPE, args.alpha)["status"] == "fail") == clustered)
            agreed += ((gate_run(naive_layout, first, second, RECIPE, args.alpha)["status"] == "fail") == counted)
            agreed += ((result["status"] == "fail") == fail
                       and (result["checks"][0]["verdict"] == "fail") == lrt_fail)  # type: ignore[index]
    return agreement, icc, alarms, naive, caught, lrt, checked, agreed


def recipe_table(args: argparse.Namespace) -> None:
    print(f"README recipe ({len(RECIPE)} pooled alarms, alpha {args.alpha}, Holm across them): "
          f"{args.runs} seeded runs a case; baseline {args.accuracy:.0%}, flip {args.flip:.0%} a run (versions)")
    print("  rate [95% Wilson interval]; 'lrt' = the LRT alarm itself; 'naive' = the same recipe counting every "
          "trial as its own item")
    print(f"  {'agreement':11} {'icc':>4}  {'false alarm (no change)':26} {'naive false alarm':26} "
          f"{'power, -5 pts (recipe)':26} {'power, -5 pts (lrt)':26}")
    cases = [(args, agreement, icc) for agreement in ("versions", "independent") for icc in args.icc]
    checked = agreed = 0
    with multiprocessing.Pool(args.processes) as pool:
        for agreement, icc, alarms, naive, caught, lrt, c, a in pool.starmap(recipe_case, cases):
            checked, agreed = checked + c, agreed + a
            print(f"  {agreement:11} {icc:4.1f}  {rate_text(alarms, args.runs):26} {rate_text(naive, args.runs):26} "
                  f"{rate_text(caught, args.runs):26} {rate_text(lrt, args.runs):26}", flush=True)
    print(f"  the whole path (run records, compare, evaluate) decided {agreed} of {checked} checked gate runs alike "
          f"(the first {args.check} runs of every case)" + ("" if agreed == checked else ": MISMATCH"))


def mde_table(args: argparse.Namespace) -> None:
    """Per experiment alone: the drop its pooled alarm catches 80% of the time, simulated, against the plan's."""
    print(f"\nSmallest drop caught 80% of the time, one pooled alarm per experiment at alpha {args.alpha} "
          f"({args.runs} runs a drop; versions, flip {args.flip:.0%}, baseline {args.accuracy:.0%})")
    print(f"  {'experiment':10} {'icc':>4} {'trials':>6} {'items':>5}  {'simulated':>9}  {'plan':>6}  plan/sim")
    drops = np.round(np.arange(0.01, 0.41, 0.01), 3)
    for name, blocks in DESIGNS.items():
        layout = Layout.of({name: blocks})
        for icc in args.mde_icc:
            rng = np.random.default_rng([args.seed, 7, int(icc * 100), len(name)])
            powers = []
            for drop in drops:
                hits = 0
                for _ in range(args.runs):
                    first, second = draw_pair(rng, layout, args.accuracy, args.accuracy - drop, icc, args.flip,
                                              "versions")
                    diff = paired_difference(second.tolist(), first.tolist(), layout.cluster.tolist())
                    hits += diff.p_drop_over(0.0) < args.alpha  # the gate's pooled alarm, on its own
                powers.append(hits / args.runs)
                if hits / args.runs >= 0.9:
                    break
            simulated = _crossing(drops[:len(powers)], powers, 0.8)
            design = Design.of([str(c) for c in layout.cluster.tolist()])
            # the flips (and the drop) share an item's fate as its answers do: the differences' correlation is icc
            plan = detectable_drop(design, args.alpha, Assumptions(args.accuracy, 2 * args.flip * (1 - args.flip), icc,
                                                                   diff_icc=icc))
            ratio = f"{plan / simulated:8.2f}" if plan and simulated else "       -"
            print(f"  {name:10} {icc:4.1f} {design.trials:6d} {design.clusters:5d}  "
                  f"{_fmt(simulated):>9}  {_fmt(plan):>6}  {ratio}", flush=True)


def shown_table(args: argparse.Namespace) -> None:
    """Non-inferiority (``max-drop=X/shown``) per experiment alone: how often it passes a candidate whose drop is
    exactly X (at most alpha, or the reading lets regressions through) and an unchanged one (its power)."""
    margin = args.margin
    print(f"\nNon-inferiority, one 'experiment=NAME:max-drop={margin:g}/shown' at alpha {args.alpha} ({args.runs} runs "
          f"a case; versions, flip {args.flip:.0%}, baseline {args.accuracy:.0%})")
    print(f"  {'experiment':10} {'icc':>4} {'items':>5}  {'passes a drop of ' + format(margin, 'g'):26} "
          f"{'passes no change':26} {'alarm max-drop=' + format(margin, 'g') + ' at it':26} "
          f"{'min=' + format(args.accuracy, 'g') + '/shown at ' + format(args.accuracy, 'g'):26}")
    # Flips shrink a drop by (1 - 2 flip): draw the candidate lower so the drop the runs show is exactly the margin.
    boundary = args.accuracy - margin / (1 - 2 * args.flip)
    checked = agreed = 0
    for name, blocks in DESIGNS.items():
        layout = Layout.of({name: blocks})
        clusters = layout.cluster.tolist()
        threshold = f"experiment={name}:max-drop={margin:g}/shown"
        for icc in args.mde_icc:
            rng = np.random.default_rng([args.seed, 11, int(icc * 100), len(name)])
            passed = {"boundary": 0, "unchanged": 0}
            alarms = minimum = 0
            for run in range(args.runs):
                for case, after in (("boundary", boundary), ("unchanged", args.accuracy)):
                    first, second = draw_pair(rng, layout, args.accuracy, after, icc, args.flip, "versions")
                    diff = paired_difference(second.tolist(), first.tolist(), clusters)
                    ok = diff.p_drop_under(margin) < args.alpha  # what evaluate's 'shown' reading decides
                    passed[case] += ok
                    if case == "boundary":  # the alarm reading at the same margin: a drop of X is no alarm
                        alarms += diff.p_drop_over(margin) < args.alpha
                    if run < args.check:
                        checked += 1
                        agreed += (gate_run(layout, first, second, (threshold,), args.alpha)["status"] == "pass") == ok
                # min=A/shown for a model exactly at A (no flips): passes at most alpha of the time, or it is wrong
                at = (_latent(rng, layout, icc) < args.accuracy).tolist()
                minimum += pooled_accuracy(at, clusters).bounds(args.alpha)[0] >= args.accuracy
            print(f"  {name:10} {icc:4.1f} {layout.clusters:5d}  {rate_text(passed['boundary'], args.runs):26} "
                  f"{rate_text(passed['unchanged'], args.runs):26} {rate_text(alarms, args.runs):26} "
                  f"{rate_text(minimum, args.runs):26}", flush=True)
    print(f"  the whole path (run records, compare, evaluate) decided {agreed} of {checked} checked gate runs alike"
          + ("" if agreed == checked else ": MISMATCH"))


def _crossing(drops: np.ndarray, powers: list[float], target: float) -> float | None:
    """The drop at which the power curve first reaches ``target`` (linear between the two drops around it)."""
    for i, power in enumerate(powers):
        if power >= target:
            if i == 0:
                return float(drops[0])
            d0, d1, p0 = float(drops[i - 1]), float(drops[i]), powers[i - 1]
            return d0 + (d1 - d0) * (target - p0) / (power - p0)
    return None


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1000, help="simulated runs a case (default 1000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--accuracy", type=float, default=0.85, help="the compared run's accuracy (default 0.85)")
    parser.add_argument("--flip", type=float, default=0.02, help="answers a run flips at random (default 0.02)")
    parser.add_argument("--icc", type=float, nargs="+", default=[0.0, 0.3, 0.6, 0.9])
    parser.add_argument("--mde", action="store_true", help="also simulate each experiment's 80%%-power drop")
    parser.add_argument("--mde-icc", type=float, nargs="+", default=[0.0, 0.6])
    parser.add_argument("--shown", action="store_true", help="also simulate the non-inferiority reading")
    parser.add_argument("--margin", type=float, default=0.05, help="its max-drop margin (default 0.05)")
    parser.add_argument("--skip-recipe", action="store_true")
    parser.add_argument("--check", type=int, default=20,
                        help="runs a case also decided through the whole path, records and all (default 20)")
    parser.add_argument("--processes", type=int, default=2, help="cases run in parallel (default 2)")
    args = parser.parse_args()
    start = time.perf_counter()
    if not args.skip_recipe:
        recipe_table(args)
    if args.mde:
        mde_table(args)
    if args.shown:
        shown_table(args)
    print(f"\n{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
