"""Seeded simulation of the sequential gate (``--longctx-sequential``) beside the fixed design, with known truth.

The same family of data models as ``sim_gate.py`` (its designs, layout and draws): each experiment's default remote
design, versions of one model and unrelated models, items shared across cells with intra-item correlation ``icc``,
answers flipped at random in each run. Regressions: none, a diffuse 5-point drop (every answer a little likelier
wrong) and a concentrated one (5% / accuracy of the items break whole). Every experiment runs sample by sample, as
the gate orders a run; each of the README recipe's four alarms watches its items' paired drops with the plugin's
own e-processes (``pytest_longctx.results.eprocess.simulate``, levels alpha / 4 and 0.10 / 4, looks after every
sample group), and the run stops once all four are settled. Each alarm's alpha / 4 is split (``--share``, default
the plugin's ``EPROCESS_SHARE``): that share for the e-process at every look, the rest for a final look at the end
of the design, where the fixed design's own test (``paired_difference``'s rows, its unadjusted one-sided p)
decides an alarm the e-processes did not settle; ``--share 1`` is the rule without a final look. The fixed design
answers everything and decides with ``paired_difference`` and Holm, as ``sim_gate.py`` does.

Printed per case: how often the recipe fails (sequential / fixed), and the mean and 95th-percentile requests the
sequential run sends before it stops, beside the fixed design's, with dollars at the per-request list prices of
issue #30's plan for anthropic/claude-sonnet-4-5 (lrt $0.160, qa $0.0568, docs $0.010, litm $0.0122 a request).

    python benchmarks/sim_sequential.py              # 1,000 runs a case, a few minutes on 2 cores
    python benchmarks/sim_sequential.py --runs 200   # a quicker look

Every draw comes from ``numpy.random.default_rng(seed)``; the same arguments print the same table.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sim_gate import DESIGNS, RECIPE, Alarms, Layout, draw_pair

from pytest_longctx.results.eprocess import EPROCESS_SHARE, levels, simulate, split
from pytest_longctx.results.paired_rows import Shape, paired_rows
from pytest_longctx.results.stats import holm, wilson

#: Dollars a request at list prices (issue #30's plan: qa $134 / 2,360, lrt $64 / 400, litm $57 / 4,680, docs rest)
PRICE = {"lrt": 0.16, "qa": 0.0568, "docs": 0.010, "litm-qa": 0.0122, "litm-kv": 0.0122}


def samples_of(designs: dict[str, tuple]) -> np.ndarray:  # type: ignore[type-arg]
    """Each trial's sample index, in ``Layout.of``'s trial order (sample i asks item i of every cell)."""
    out: list[int] = []
    for blocks in designs.values():
        for block in blocks:
            for _ in range(block.cells):
                out.extend(range(block.items))
    return np.array(out)


class ItemOrder:
    """One alarm's items in run order (by sample, then cluster), its group size and its samples."""

    def __init__(self, layout: Layout, sample: np.ndarray, mask: np.ndarray) -> None:
        clusters = np.unique(layout.cluster[mask])
        first_sample = np.full(layout.clusters, 10**9)
        np.minimum.at(first_sample, layout.cluster[mask], sample[mask])
        self.order = clusters[np.lexsort((clusters, first_sample[clusters]))]
        self.samples = int(sample[mask].max()) + 1
        self.group = max(1, len(self.order) // self.samples)
        self.mask = mask
        self.shape = Shape.of(np.bincount(layout.cluster[mask], minlength=layout.clusters)[self.order])

    def drops(self, layout: Layout, first: np.ndarray, second: np.ndarray) -> np.ndarray:
        m = self.mask
        diff = np.bincount(layout.cluster[m], weights=first[m].astype(float) - second[m], minlength=layout.clusters)
        size = np.bincount(layout.cluster[m], minlength=layout.clusters)
        return np.asarray(diff[self.order] / size[self.order])

    def fixed_p(self, diff_sums: np.ndarray, regressed: np.ndarray, improved: np.ndarray) -> np.ndarray:
        """Per run, the fixed gate's one-sided p of a drop over 0 (``paired_difference``'s rows, vectorised): from
        the runs' per-item sums of (candidate - compared) and their regressed / improved pairs."""
        return np.asarray(paired_rows(diff_sums, regressed, improved, self.shape).p_drop_over(0.0))


def case(args: argparse.Namespace, agreement: str, shape: str, drop: float) -> dict[str, Any]:
    layout = Layout.of(DESIGNS)
    sample = samples_of(DESIGNS)
    alarms = Alarms.of(layout)
    seqs = [ItemOrder(layout, sample, m) for m in alarms.masks]
    a, b = levels(args.alpha, len(RECIPE))
    a1, a2 = split(a, args.share)
    experiments = np.array(layout.experiment)
    price = np.array([PRICE[e] for e in experiments])
    by_sample = np.bincount(sample, minlength=sample.max() + 1)
    cost_by_sample = np.bincount(sample, weights=price, minlength=sample.max() + 1)
    trials_before = np.concatenate([[0], np.cumsum(by_sample)])
    usd_before = np.concatenate([[0.0], np.cumsum(cost_by_sample)])
    rng = np.random.default_rng([args.seed, int(args.icc * 100), agreement == "versions", int(drop * 1000),
                                 shape == "concentrated"])
    flip = args.flip if agreement == "versions" else 0.0
    runs = args.runs
    x = [np.empty((runs, len(s.order))) for s in seqs]
    counts = [np.empty((runs, 2)) for _ in seqs]
    for r in range(runs):
        after = args.accuracy - (drop if shape == "diffuse" else 0.0)
        first, second = draw_pair(rng, layout, args.accuracy, after, args.icc, flip, agreement)
        if shape == "concentrated" and drop:
            broken = rng.random(layout.clusters) < drop / args.accuracy
            second = second & ~broken[layout.cluster]
        for k, s in enumerate(seqs):
            x[k][r] = s.drops(layout, first, second)
            m = s.mask
            counts[k][r] = ((first[m] & ~second[m]).sum(), (~first[m] & second[m]).sum())
    sizes = [s.shape.sizes for s in seqs]
    ps = np.stack([s.fixed_p(-x[k] * sizes[k], counts[k][:, 0], counts[k][:, 1]) for k, s in enumerate(seqs)], 1)
    fixed = np.array([any(p < args.alpha for p in holm(row.tolist())) for row in ps])
    fired = np.zeros(runs, bool)
    stop_sample = np.zeros(runs, int)
    per_alarm: list[tuple[float, float]] = []  # each alarm's fail rate and share decided by the final look
    for k, s in enumerate(seqs):
        items, hit = simulate(x[k], 0.0, args.detect, a1, b, s.group, final_level=a2, final_p=ps[:, k])
        fired |= hit
        stop_sample = np.maximum(stop_sample, np.ceil(items / s.group).astype(int))
        if a2 > 0:  # decided by the final look: the verdict follows its p (always under a2 / never)
            always = simulate(x[k], 0.0, args.detect, a1, b, s.group, final_level=a2, final_p=np.zeros(runs))[1]
            never = simulate(x[k], 0.0, args.detect, a1, b, s.group, final_level=a2, final_p=np.ones(runs))[1]
            per_alarm.append((float(hit.mean()), float((always != never).mean())))
        else:
            per_alarm.append((float(hit.mean()), 0.0))
    requests = trials_before[stop_sample]
    usd = usd_before[stop_sample]
    return {"agreement": agreement, "shape": shape, "drop": drop, "fails": int(fired.sum()), "runs": runs,
            "fixed_fails": int(fixed.sum()), "fixed_runs": runs,
            "req_mean": float(requests.mean()), "req_p95": float(np.percentile(requests, 95)),
            "usd_mean": float(usd.mean()), "usd_p95": float(np.percentile(usd, 95)),
            "fixed_req": int(trials_before[-1]), "fixed_usd": float(usd_before[-1]), "per_alarm": per_alarm}


def rate(hits: int, runs: int) -> str:
    low, high = wilson(hits, runs)
    return f"{hits / runs:6.1%} [{low:5.1%}, {high:5.1%}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--share", type=float, default=EPROCESS_SHARE, help="each alarm's level spent by the "
                        "e-process; the rest is the final fixed-design look's (1: no final look)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--detect", type=float, default=0.05)
    parser.add_argument("--accuracy", type=float, default=0.85)
    parser.add_argument("--icc", type=float, default=0.5)
    parser.add_argument("--flip", type=float, default=0.02)
    args = parser.parse_args()
    started = time.perf_counter()
    print(f"sequential gate vs the fixed design: README recipe ({len(RECIPE)} pooled alarms, alpha {args.alpha}), "
          f"accuracy {args.accuracy}, icc {args.icc}, flip {args.flip} (versions), {args.runs} runs a case, "
          f"e-process share {args.share:g} of each alarm's level, seed {args.seed}")
    print("| models | regression | fails: sequential | fails: fixed | requests to a decision: mean / p95 | "
          "fixed | share | dollars: mean / p95 | fixed |")
    print("|---|---|---|---|---|---|---|---|---|")
    rows = []
    for agreement in ("versions", "independent"):
        for shape, drop in (("none", 0.0), ("diffuse", 0.05), ("concentrated", 0.05), ("diffuse", 0.30)):
            c = case(args, agreement, shape, drop)
            what = "no change" if not drop else f"{shape} {drop:.2f}"
            rows.append((agreement, what, c["per_alarm"]))
            print(f"| {agreement} | {what} | {rate(c['fails'], c['runs'])} | "
                  f"{rate(c['fixed_fails'], c['fixed_runs'])} | "
                  f"{c['req_mean']:,.0f} / {c['req_p95']:,.0f} | {c['fixed_req']:,} | "
                  f"{c['req_mean'] / c['fixed_req']:.2f} | ${c['usd_mean']:,.0f} / ${c['usd_p95']:,.0f} | "
                  f"${c['fixed_usd']:,.0f} |", flush=True)
    print(f"({time.perf_counter() - started:.0f} s; share: mean requests over the fixed design's; "
          "dollars at list prices without caching or batches)")
    names = [t.split(":", 1)[0].removeprefix("experiment=") for t in RECIPE]
    print("\nPer alarm: fails (decided by the final look)")
    print("| models | regression | " + " | ".join(names) + " |")
    print("|---|---|" + "---|" * len(names))
    for agreement, what, per in rows:
        print(f"| {agreement} | {what} | " + " | ".join(f"{f:.1%} ({d:.1%})" for f, d in per) + " |")


if __name__ == "__main__":
    main()
