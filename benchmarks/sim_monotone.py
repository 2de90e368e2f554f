"""What monotone-by-construction bounds cost, and the fixed paired test's level: seeded simulation (issue 38.5, 38.10).

Four tables, each before / after:

1. **Pooled one-sided lower bounds** (alpha 0.05) over items of unequal sizes: the record's own bound ("own") and the
   monotone envelope (``results/envelope.py``, what the gate reads): coverage (the share of runs whose bound is at
   most the true pooled accuracy) and the mean width (estimate minus bound). Designs: 30 items of Zipf sizes
   (``round(60 / k)``), 20 items of 3-120 trials, 12 items of 1-8 trials; data models: beta items (mean 0.85,
   intra-item correlation 0.3), bimodal items (three quarters at 0.97, a quarter at 0.49), near the ceiling (beta,
   mean 0.97) and the middle (beta, mean 0.6).
2. **Paired readings** on the same designs: the ``max-drop=0`` alarm's false alarms with no change (candidate and
   compared run drawn alike, a tenth of the answers re-drawn) and with an unrelated candidate of equal accuracy,
   the two-sided 95% interval's coverage of 0 and its width; own test against the envelope.
3. **The effective length's ``/shown`` lower bound** (``EffectiveLength.shown``; before: the bootstrap's alpha
   quantile): the share of runs where it lies above the true effective length, on ``sim_effective.py``'s designs
   with every length at 0.86 and the bar 0.85 (true effective length: the longest), and with the longest length
   at 0.80 (true: the one before it).
4. **The fixed paired test's level and power** on ``conformance.py``'s designs and data models, without and with
   McNemar's continuity correction (``robust.CONTINUITY``): false alarms in its nulls (Wilson upper end, target at
   most 1.2 alpha = 6%) and power where a drop is real.

    python benchmarks/sim_monotone.py                  # a few minutes on one core
    python benchmarks/sim_monotone.py --runs 300 --only 1,2

Every draw comes from ``numpy.random.default_rng(seed)``; the same arguments print the same table.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from dataclasses import replace
from pathlib import Path
from types import ModuleType

import numpy as np

from pytest_longctx.gate_spec import DEFAULT_EFFECTIVE_ACCURACY as DEFAULT_THRESHOLD
from pytest_longctx.results import robust
from pytest_longctx.results.clustered import paired_difference
from pytest_longctx.results.effective import EffectiveLength, Level, _longest, level_rows
from pytest_longctx.results.paired_rows import paired_rows
from pytest_longctx.results.robust import Shape, pooled_rows
from pytest_longctx.results.stats import wilson

ALPHA = 0.05
HERE = Path(__file__).resolve().parent


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"longctx_{name}", HERE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def designs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    return {"30 Zipf items": np.maximum(1, np.round(60 / np.arange(1, 31))).astype(int),
            "20 items of 3-120": rng.integers(3, 121, 20), "12 items of 1-8": rng.integers(1, 9, 12)}


def propensities(rng: np.random.Generator, model: str, runs: int, items: int) -> tuple[np.ndarray, float]:
    """(runs, items) chance of a right answer per item, and the true pooled accuracy."""
    if model == "bimodal":
        return np.where(rng.random((runs, items)) < 0.75, 0.97, 0.49), 0.75 * 0.97 + 0.25 * 0.49
    mean = {"beta": 0.85, "ceiling": 0.97, "middle": 0.6}[model]
    ab = (1 - 0.3) / 0.3
    return rng.beta(mean * ab, (1 - mean) * ab, size=(runs, items)), mean


def pooled_table(runs: int, seed: int) -> None:
    print(f"\n1. pooled one-sided lower bounds at alpha {ALPHA}, {runs} runs a case: coverage [Wilson 95%] / "
          "mean width")
    print("| design | model | own: coverage | own: width | monotone: coverage | monotone: width | extra width |")
    print("|---|---|---|---|---|---|---|")
    for name, sizes in designs().items():
        shape = Shape.of(sizes)
        for model in ("beta", "bimodal", "ceiling", "middle"):
            rng = np.random.default_rng([seed, len(sizes), len(model)])
            p, truth = propensities(rng, model, runs, len(sizes))
            right = rng.binomial(sizes[None, :], p).astype(float)
            rows = pooled_rows(right, shape)
            env = rows.bounds(ALPHA)[0]
            own = replace(rows, sums=None).bounds(ALPHA)[0]
            print(f"| {name} | {model} | {_cover(own <= truth)} | {np.mean(rows.accuracy - own):.4f} | "
                  f"{_cover(env <= truth)} | {np.mean(rows.accuracy - env):.4f} | {np.mean(own - env):.4f} |",
                  flush=True)


def _cover(hits: np.ndarray) -> str:
    low, high = wilson(int(hits.sum()), len(hits))
    return f"{hits.mean():.1%} [{low:.1%}, {high:.1%}]"


def paired_table(runs: int, seed: int) -> None:
    print(f"\n2. paired readings, {runs} runs a case (one record at a time, as the gate): max-drop=0 false alarms at "
          f"alpha {ALPHA} / two-sided 95% coverage of 0 / mean width")
    print("| design | model | candidate | own: alarms | own: coverage | own: width | monotone: alarms "
          "| monotone: coverage | monotone: width |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, sizes in designs().items():
        clusters = np.repeat(np.arange(len(sizes)), sizes)
        for model in ("beta", "bimodal"):
            for candidate in ("re-drawn 10%", "unrelated"):
                rng = np.random.default_rng([seed, len(sizes), len(model), len(candidate)])
                p, _ = propensities(rng, model, runs, len(sizes))
                u = rng.random((runs, len(clusters)))
                share = 0.1 if candidate.startswith("re") else 1.0
                v = np.where(rng.random(u.shape) < share, rng.random(u.shape), u)
                before, after = u < p[:, clusters], v < p[:, clusters]
                cells: dict[str, list[np.ndarray]] = {"own": [], "monotone": []}
                for r in range(runs):
                    d = paired_difference(after[r].tolist(), before[r].tolist(), clusters.tolist())
                    own_rows = replace(d.rows, record=None)
                    low, high = own_rows.interval(0.95)
                    cells["own"].append(np.array([own_rows.p_drop_over(0.0)[0] < ALPHA, low[0] <= 0 <= high[0],
                                                  high[0] - low[0]]))
                    cells["monotone"].append(np.array([d.p_drop_over(0.0) < ALPHA, d.low <= 0 <= d.high,
                                                       d.high - d.low]))
                out = [f"| {name} | {model} | {candidate}"]
                for key in ("own", "monotone"):
                    a = np.array(cells[key])
                    out.append(f"{_cover(a[:, 0] > 0)} | {_cover(a[:, 1] > 0)} | {a[:, 2].mean():.4f}")
                print(" | ".join(out) + " |", flush=True)


def _header(title: str, columns: list[str]) -> None:
    print(f"\n{title}\n| " + " | ".join(columns) + " |\n|" + "---|" * len(columns))


def effective_table(runs: int, seed: int) -> None:
    sim = _load("sim_effective")
    _header(f"3. effective length /shown at alpha {ALPHA}, bar {DEFAULT_THRESHOLD}, {runs} runs a case: the share "
            "of runs whose lower bound lies above the true effective length (nominal at most 5%)",
            ["design", "icc", "truth", "bootstrap quantile (200 replicates)", "per-length bounds (now)"])
    for lay in sim.layouts():
        n_l = len(lay.tokens)
        for icc in (0.3, 0.8):
            for label, acc, true_len in (("every length 0.86", np.full(n_l, 0.86), lay.tokens[-1]),
                                         ("the longest 0.80", np.r_[np.full(n_l - 1, 0.86), 0.80],
                                          lay.tokens[-2])):
                rng = np.random.default_rng([seed, len(lay.asked), int(icc * 10), len(label)])
                right = sim.draw(rng, lay, runs, acc, icc)
                old, new = [], []
                for r in range(runs):
                    boot_rng = np.random.default_rng([seed, r])
                    g = len(lay.asked)
                    weights = boot_rng.multinomial(g, np.full(g, 1 / g), size=200)
                    with np.errstate(invalid="ignore", divide="ignore"):
                        boot = np.nan_to_num((weights @ right[r]) / (weights @ lay.asked), nan=-1.0)
                    levels = tuple(Level(int(t), int(t), 0.0, 0, 0) for t in lay.tokens)
                    found = EffectiveLength(DEFAULT_THRESHOLD, 0, levels, tuple(
                        int(b) for b in _longest(boot, lay.tokens, DEFAULT_THRESHOLD)), "length")
                    old.append(found.quantile(ALPHA) > true_len)
                    now = replace(found, level_rows=level_rows(right[r], lay.asked))
                    new.append(now.shown(ALPHA) > true_len)
                print(f"| {lay.name} | {icc} | {label} | {_cover(np.array(old))} | {_cover(np.array(new))} |",
                      flush=True)


def level_table(runs: int, seed: int) -> None:
    conf = _load("conformance")
    _header(f"4. the fixed paired test (max-drop=0 at alpha {ALPHA}), {runs} runs a case: without / with the "
            "continuity correction; nulls: false alarms [Wilson upper end]; otherwise power",
            ["design", "shape", "model", "without", "with", "check"])
    for name, make in conf.DESIGNS.items():
        d = make()
        for case in conf.cases(d):
            if not (case.null or case.shape in ("diffuse", "a few items broken") or "positions" in case.shape):
                continue
            rng = np.random.default_rng([seed, len(d.item), conf.zlib_id(case.shape + case.model)])
            before, after = conf.draw(rng, d, runs, case.model, case.delta(d), case.broken)
            diff = before.astype(float) - after
            summed = np.stack([np.bincount(d.item, weights=row, minlength=d.items) for row in diff])
            shape = Shape.of(np.bincount(d.item, minlength=d.items))
            rows = paired_rows(-summed, (diff > 0).sum(1).astype(float), (diff < 0).sum(1).astype(float),
                                      shape)
            out = []
            for correction in (0.0, robust.CONTINUITY):
                hits = replace(rows, correction=correction / (shape.n / rows.deff + 2)).p_drop_over(0.0) < ALPHA
                upper = wilson(int(hits.sum()), runs)[1]
                out.append((hits.mean(), upper))
            text = [f"{r:.1%} [{u:.1%}]" if case.null else f"{r:.1%}" for r, u in out]
            check = ("ok" if out[1][1] <= 1.2 * ALPHA else "LIBERAL") if case.null else f"{out[1][0] - out[0][0]:+.1%}"
            print(f"| {name} | {case.shape} | {case.model} | {text[0]} | {text[1]} | {check} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=1000, help="runs a case (tables 2 and 3: a fifth of it)")
    parser.add_argument("--seed", type=int, default=20261128)
    parser.add_argument("--only", default="1,2,3,4", help="the tables to print, e.g. 1,4")
    args = parser.parse_args()
    started = time.perf_counter()
    tables = {"1": lambda: pooled_table(args.runs, args.seed),
              "2": lambda: paired_table(args.runs // 5, args.seed),
              "3": lambda: effective_table(args.runs // 5, args.seed),
              "4": lambda: level_table(2 * args.runs, args.seed)}
    for key in args.only.split(","):
        tables[key.strip()]()
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
