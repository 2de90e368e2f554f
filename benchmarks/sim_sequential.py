"""Seeded simulation of the sequential gate (``--longctx-sequential``) beside the fixed design, with known truth.

The same family of data models as ``sim_gate.py`` (its designs, layout and draws): each experiment's default remote
design, versions of one model and unrelated models, items shared across cells with intra-item correlation ``icc``,
answers flipped at random in each run. Regressions: none, a diffuse 5-point drop (every answer a little likelier
wrong) and a concentrated one (5% / accuracy of the items break whole). Every experiment runs sample by sample, as
the gate orders a run; each of the README recipe's four alarms watches its items' paired drops with the plugin's
own e-processes (``pytest_longctx.results.sequential.simulate``, levels alpha / 4 and 0.10 / 4, looks after every
sample group), and the run stops once all four are settled. The fixed design answers everything and decides with
``paired_difference`` and Holm, as ``sim_gate.py`` does.

Printed per case: how often the recipe fails (sequential / fixed), and the mean and 95th-percentile requests the
sequential run sends before it stops, beside the fixed design's, with dollars at the per-request list prices of
issue #30's plan for anthropic/claude-sonnet-4-5 (lrt $0.160, qa $0.0568, docs $0.010, litm $0.0122 a request).

    python benchmarks/sim_sequential.py              # 1,000 runs a case, a few minutes on 2 cores
    python benchmarks/sim_sequential.py --runs 200   # a quicker look
    python benchmarks/sim_sequential.py --per-alarm  # also the cost with per-alarm stops (the plugin's default)

Every draw comes from ``numpy.random.default_rng(seed)``; the same arguments print the same table.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sim_gate import DESIGNS, RECIPE, Alarms, Layout, draw_pair

from pytest_longctx.results.clustered import paired_difference
from pytest_longctx.results.sequential import levels, simulate
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

    def drops(self, layout: Layout, first: np.ndarray, second: np.ndarray) -> np.ndarray:
        m = self.mask
        diff = np.bincount(layout.cluster[m], weights=first[m].astype(float) - second[m], minlength=layout.clusters)
        size = np.bincount(layout.cluster[m], minlength=layout.clusters)
        return diff[self.order] / size[self.order]


def case(args: argparse.Namespace, agreement: str, shape: str, drop: float) -> dict[str, object]:
    layout = Layout.of(DESIGNS)
    sample = samples_of(DESIGNS)
    alarms = Alarms.of(layout)
    seqs = [ItemOrder(layout, sample, m) for m in alarms.masks]
    a, b = levels(args.alpha, len(RECIPE))
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
    fixed = np.zeros(runs, bool)
    for r in range(runs):
        after = args.accuracy - (drop if shape == "diffuse" else 0.0)
        first, second = draw_pair(rng, layout, args.accuracy, after, args.icc, flip, agreement)
        if shape == "concentrated" and drop:
            broken = rng.random(layout.clusters) < drop / args.accuracy
            second = second & ~broken[layout.cluster]
        for k, s in enumerate(seqs):
            x[k][r] = s.drops(layout, first, second)
        if r < args.fixed_runs:
            ps = [paired_difference(second[m].tolist(), first[m].tolist(), layout.cluster[m].tolist()).p_drop_over(0)
                  for m in alarms.masks]
            fixed[r] = any(p < args.alpha for p in holm(ps))
    fired = np.zeros(runs, bool)
    stop_sample = np.zeros(runs, int)
    alarm_stop = np.zeros((len(seqs), runs), int)
    for k, s in enumerate(seqs):
        items, hit = simulate(x[k], 0.0, args.detect, a, b, s.group)
        fired |= hit
        alarm_stop[k] = np.ceil(items / s.group).astype(int)
        stop_sample = np.maximum(stop_sample, alarm_stop[k])
    requests = trials_before[stop_sample]
    usd = usd_before[stop_sample]
    each_req, each_usd = per_alarm_cost(np.stack(alarms.masks), sample, price, alarm_stop, stop_sample)
    return {"each_req_mean": float(each_req.mean()), "each_req_p95": float(np.percentile(each_req, 95)),
            "each_usd_mean": float(each_usd.mean()), "each_usd_p95": float(np.percentile(each_usd, 95)),
            "agreement": agreement, "shape": shape, "drop": drop, "fails": int(fired.sum()), "runs": runs,
            "fixed_fails": int(fixed[: args.fixed_runs].sum()), "fixed_runs": args.fixed_runs,
            "req_mean": float(requests.mean()), "req_p95": float(np.percentile(requests, 95)),
            "usd_mean": float(usd.mean()), "usd_p95": float(np.percentile(usd, 95)),
            "fixed_req": int(trials_before[-1]), "fixed_usd": float(usd_before[-1])}


def per_alarm_cost(cover: np.ndarray, sample: np.ndarray, price: np.ndarray, alarm_stop: np.ndarray,
                   stop_sample: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Requests and dollars per run with per-alarm stops (``--longctx-sequential-stop alarm``): a trial is sent when
    its sample comes before the stop of some alarm covering it (the last of them to settle); a trial no alarm covers,
    before the whole run's stop. ``cover``: (alarms, trials); ``alarm_stop``: (alarms, runs) samples each alarm took.

    (Prefetch's window ahead of the reported tests is left out, as it is for the whole-run figures.)
    """
    requests = np.zeros(alarm_stop.shape[1])
    usd = np.zeros(alarm_stop.shape[1])
    samples = int(sample.max()) + 1
    for signature in np.unique(cover.T, axis=0):  # trials covered by the same alarms share their stop
        mine = (cover.T == signature).all(axis=1)
        before = np.concatenate([[0], np.cumsum(np.bincount(sample[mine], minlength=samples))])
        usd_before = np.concatenate([[0.0], np.cumsum(np.bincount(sample[mine], weights=price[mine],
                                                                  minlength=samples))])
        stop = alarm_stop[signature].max(axis=0) if signature.any() else stop_sample
        requests += before[stop]
        usd += usd_before[stop]
    return requests, usd


def rate(hits: int, runs: int) -> str:
    low, high = wilson(hits, runs)
    return f"{hits / runs:6.1%} [{low:5.1%}, {high:5.1%}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--fixed-runs", type=int, default=200, help="runs of each case also decided by the fixed "
                        "design's clustered test (slower: ~40 ms a run)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--detect", type=float, default=0.05)
    parser.add_argument("--accuracy", type=float, default=0.85)
    parser.add_argument("--icc", type=float, default=0.5)
    parser.add_argument("--flip", type=float, default=0.02)
    parser.add_argument("--per-alarm", action="store_true", help="also the requests and dollars with per-alarm "
                        "stops (--longctx-sequential-stop alarm): each alarm's trials stop when it settles")
    args = parser.parse_args()
    started = time.perf_counter()
    print(f"sequential gate vs the fixed design: README recipe ({len(RECIPE)} pooled alarms, alpha {args.alpha}), "
          f"accuracy {args.accuracy}, icc {args.icc}, flip {args.flip} (versions), {args.runs} runs a case "
          f"({args.fixed_runs} also decided by the fixed design), seed {args.seed}")
    each = (" per alarm: requests mean / p95 | share | dollars mean / p95 |", "---|---|---|") if args.per_alarm else (
        "", "")
    print("| models | regression | fails: sequential | fails: fixed | requests to a decision: mean / p95 | "
          "fixed | share | dollars: mean / p95 | fixed |" + each[0])
    print("|---|---|---|---|---|---|---|---|---|" + each[1])
    for agreement in ("versions", "independent"):
        for shape, drop in (("none", 0.0), ("diffuse", 0.05), ("concentrated", 0.05), ("diffuse", 0.30)):
            c = case(args, agreement, shape, drop)
            what = "no change" if not drop else f"{shape} {drop:.2f}"
            print(f"| {agreement} | {what} | {rate(c['fails'], c['runs'])} | "  # type: ignore[arg-type]
                  f"{rate(c['fixed_fails'], c['fixed_runs'])} | "  # type: ignore[arg-type]
                  f"{c['req_mean']:,.0f} / {c['req_p95']:,.0f} | {c['fixed_req']:,} | "
                  f"{c['req_mean'] / c['fixed_req']:.2f} | ${c['usd_mean']:,.0f} / ${c['usd_p95']:,.0f} | "
                  f"${c['fixed_usd']:,.0f} |" + (f" {c['each_req_mean']:,.0f} / {c['each_req_p95']:,.0f} | "
                                                  f"{c['each_req_mean'] / c['fixed_req']:.2f} | "
                                                  f"${c['each_usd_mean']:,.0f} / ${c['each_usd_p95']:,.0f} |"
                                                  if args.per_alarm else ""), flush=True)
    print(f"({time.perf_counter() - started:.0f} s; share: mean requests over the fixed design's; "
          "dollars at list prices without caching or batches)")


if __name__ == "__main__":
    main()
