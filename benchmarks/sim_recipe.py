"""Seeded simulation of the whole CI recipe at the new remote defaults, sequential and fixed, with known truth.

Issue #30's figure of merit: does every experiment's pooled alarm of the README recipe (docs/ci-gating.md: one
``experiment=X:max-drop=0`` alarm each for lrt, qa, docs and litm-*) see a 5-point regression, diffuse or
concentrated, and what does a candidate run cost until the gate has decided, beside today's full-factorial design?

The designs are the plugin's remote defaults for anthropic/claude-sonnet-4-5 (``DESIGNS``), built with the
experiments' own design functions where they have one, and the run order is ``--longctx-sequential``'s: sample
group by sample group (sample i of every cell, then i + 1). Per alarm, an item's drop is fed once, from the first
sample group that holds it (``session/sequential.py``), and each alarm is watched by the plugin's own rule
(``results/sequential.simulate`` with the looks of the sample groups). Two stopping rules are costed:

* **run**: the run stops once every alarm is settled (every trial of an earlier sample group is paid for);
* **alarm**: each alarm's trials stop once that alarm is settled (``--longctx-sequential`` with per-alarm stops).

The fixed design answers everything and decides each alarm with ``paired_difference``'s one-sided p of a drop and
Holm across the four, as ``evaluate`` does.

The family of data models (``benchmarks/sim_gate.py``'s truth, per trial a uniform ``U`` shared within an item
with correlation ``icc``): versions of one model (shared ``U``, 2% of answers flipped a run) and unrelated models
(their own ``U``), baselines of 50%, 85% and 97% right (the ceiling), items of unequal sizes as the designs make
them (one trial an LRT file, 9 or 10 a qa question, 5 to 15 a docs item, 8 to 9 a litm question). Regressions,
every experiment at once: none; diffuse 5 points (every answer likelier wrong); concentrated 5 points (a share
0.05 / accuracy of the items wrong in every cell they are asked in); a 30-point collapse.

Dollars are list prices for claude-sonnet-4-5 with the prompt cache the run uses, per request from each
experiment's plan (``PRICE``; ``pytest evals/<x> --longctx-plan --longctx-model anthropic/claude-sonnet-4-5``);
"batched" halves them (Message Batches). "today at equal power" is today's full-factorial design with the
samples a cell that ``results/power.samples_for`` says a 5-point drop needs at 80% power (icc 0.5, the recipe's
level), costed at today's per-request prices.

    python benchmarks/sim_recipe.py               # 1,000 runs a case (200 also decided by the fixed design)
    python benchmarks/sim_recipe.py --runs 200 --fixed-runs 50   # a quicker look

Every draw comes from ``numpy.random.default_rng(seed)``; the same arguments print the same table.
"""

from __future__ import annotations

import argparse
import fnmatch
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pytest_longctx.experiments.qa.design import block_design
from pytest_longctx.experiments.qa.mcqa import EXAMPLES, PROMPTS
from pytest_longctx.results.clustered import paired_difference
from pytest_longctx.results.sequential import levels, simulate
from pytest_longctx.results.stats import holm, wilson

RECIPE = ("lrt", "qa", "docs", "litm-*")
ALPHA = 0.05
DETECT = 0.05
#: qa's sizes for a 200K-window model on the shipped issue (as ``sim_designs.py``).
QA_SIZES = (2_000, 8_000, 70_000, 95_000)


@dataclass(frozen=True)
class Part:
    """One experiment's trials in a design: per trial its item (local id) and sample index; list $ a request."""

    experiment: str
    item: np.ndarray
    sample: np.ndarray
    usd: float  # list price of one request, prompt cache as the run uses it

    @property
    def trials(self) -> int:
        return len(self.item)


def full(experiment: str, cells: int, items: int, usd: float, own: bool = False) -> Part:
    """Every item in every cell (``own``: each cell its own items, as lrt's files)."""
    sample = np.tile(np.arange(items), cells)
    item = np.arange(cells * items) if own else sample.copy()
    return Part(experiment, item, sample, usd)


def blocks(experiment: str, cells: list[tuple[list[int], int]], usd: float) -> Part:
    """Cells as ``(questions in order, trials per question)``: sample i asks the i-th question, ``mult`` times."""
    item: list[int] = []
    sample: list[int] = []
    for questions, mult in cells:
        for i, q in enumerate(questions):
            item += [q] * mult
            sample += [i] * mult
    return Part(experiment, np.array(item), np.array(sample), usd)


def qa_blocks(per_cell: int, usd: float) -> Part:
    """qa's remote default (``--longctx-qa-design blocks``), from the plugin's own ``block_design``."""
    variants = [f"{p}/{e}" for p in PROMPTS for e in EXAMPLES]
    order = [f"q{i:03d}" for i in range(395)]
    design = block_design(order, lambda q, s: True, variants, QA_SIZES, QA_SIZES, per_cell)
    ids = {q: i for i, q in enumerate(order)}
    return blocks("qa", [([ids[q] for q in qs], 3 if kind == "position" else 5)
                         for (kind, _, _), qs in sorted(design.cells.items())], usd)


def half_cells(experiment: str, questions: int, cells: int, usd: float) -> Part:
    """Each question in one of two balanced halves of the cells (litm's blocks as ``sim_designs.py`` measured)."""
    first = list(range(questions // 2))
    second = list(range(questions // 2, questions))
    return blocks(experiment, [(first, 1)] * math.ceil(cells / 2) + [(second, 1)] * (cells // 2), usd)


#: List dollars a request (claude-sonnet-4-5, with the prompt cache): issue #30's plan and the new designs' plans.
PRICE_TODAY = {"lrt": 64.0 / 400, "qa": 134.10 / 2_360, "docs": 2.73 / 300, "litm-qa": 0.0122, "litm-kv": 0.0122}
PRICE_NEW = {"lrt": 64.0 / 400, "qa": 195.41 / 2_360, "docs": 19.08 / 2_100, "litm-qa": 0.0122, "litm-kv": 0.0122}


def today() -> list[Part]:
    """The remote defaults before issue #30 (7,780 requests, $258 list)."""
    p = PRICE_TODAY
    return [full("lrt", 20, 20, p["lrt"], own=True), full("qa", 116, 20, p["qa"]), full("docs", 15, 20, p["docs"]),
            full("litm-qa", 17, 180, p["litm-qa"]), full("litm-kv", 4, 180, p["litm-kv"]),
            Part("litm-kv", np.tile(np.arange(180, 360), 5), np.tile(np.arange(180), 5), p["litm-kv"])]


def new_defaults() -> list[Part]:
    """The remote defaults of issue #30."""
    p = PRICE_NEW
    return [full("lrt", 20, 20, p["lrt"], own=True), qa_blocks(20, p["qa"]), full("docs", 15, 140, p["docs"]),
            half_cells("litm-qa", 240, 17, p["litm-qa"]), full("litm-kv", 4, 180, p["litm-kv"]),
            Part("litm-kv", np.tile(np.arange(180, 360), 5), np.tile(np.arange(180), 5), p["litm-kv"])]


DESIGNS: dict[str, Callable[[], list[Part]]] = {"today": today, "new": new_defaults}


@dataclass
class Run:
    """A whole design flattened: per trial its alarm, global item, sample and price."""

    alarm: np.ndarray
    item: np.ndarray
    sample: np.ndarray
    usd: np.ndarray
    items: int
    experiment: np.ndarray

    @classmethod
    def of(cls, parts: list[Part]) -> Run:
        alarm, item, sample, usd, experiment = [], [], [], [], []
        offset = 0
        offsets: dict[str, int] = {}
        for part in parts:
            k = next(i for i, s in enumerate(RECIPE) if fnmatch.fnmatchcase(part.experiment, s))
            base = offsets.setdefault(part.experiment, offset)
            alarm.append(np.full(part.trials, k))
            item.append(part.item + base)
            sample.append(part.sample)
            usd.append(np.full(part.trials, part.usd))
            experiment += [part.experiment] * part.trials
            offset = max(offset, base + int(part.item.max()) + 1)
        return cls(np.concatenate(alarm), np.concatenate(item), np.concatenate(sample), np.concatenate(usd), offset,
                   np.array(experiment))


@dataclass
class Watch:
    """One alarm in run order: its items by first sample, the trials that feed each, and its looks."""

    mask: np.ndarray  # the alarm's trials
    feeds: np.ndarray  # the alarm's trials whose sample is their item's first
    order: np.ndarray  # items in feeding order
    looks: np.ndarray  # items fed after each sample group
    samples: np.ndarray  # the sample group of each look

    @classmethod
    def of(cls, run: Run, k: int) -> Watch:
        mask = run.alarm == k
        first = np.full(run.items, np.iinfo(np.int64).max)
        np.minimum.at(first, run.item[mask], run.sample[mask])
        feeds = mask & (run.sample == first[run.item])
        items = np.unique(run.item[mask])
        order = items[np.lexsort((items, first[items]))]
        samples, counts = np.unique(first[order], return_counts=True)
        return cls(mask, feeds, order, np.cumsum(counts), samples)

    def drops(self, run: Run, before: np.ndarray, after: np.ndarray) -> np.ndarray:
        m = self.feeds
        diff = np.bincount(run.item[m], weights=before[m].astype(float) - after[m], minlength=run.items)
        size = np.bincount(run.item[m], minlength=run.items)
        out: np.ndarray = diff[self.order] / size[self.order]
        return out


def draw(rng: np.random.Generator, run: Run, accuracy: float, icc: float, agreement: str, shape: str, drop: float,
         flip: float = 0.02) -> tuple[np.ndarray, np.ndarray]:
    """Outcomes (True = right) of the compared run and the candidate (``sim_designs.py``'s truth)."""
    c, g = run.item, run.items

    def latent() -> np.ndarray:
        return np.where(rng.random(len(c)) < math.sqrt(icc), rng.random(g)[c], rng.random(len(c)))

    u = latent()
    before = u < accuracy
    after = (u if agreement == "versions" else latent()) < (accuracy - drop if shape == "diffuse" else accuracy)
    if agreement == "versions":
        before ^= latent() < flip
        after ^= latent() < flip
    if shape == "concentrated" and drop:
        after &= ~(rng.random(g) < drop / accuracy)[c]
    return before, after


@dataclass(frozen=True)
class Case:
    agreement: str
    accuracy: float
    icc: float
    shape: str
    drop: float

    @property
    def label(self) -> str:
        what = "no change" if not self.drop else f"{self.shape} {self.drop:.2f}"
        return f"{self.agreement}, {self.accuracy:.0%}, icc {self.icc} | {what}"


@dataclass
class Outcome:
    """Per run: each alarm fired (sequential; fixed on the first runs), and requests and dollars sent under the
    two stopping rules."""

    fired: np.ndarray
    fixed: np.ndarray
    requests_run: np.ndarray
    usd_run: np.ndarray
    requests_alarm: np.ndarray
    usd_alarm: np.ndarray


def run_case(design: Run, watches: list[Watch], case: Case, runs: int, fixed_runs: int, seed: int) -> Outcome:
    """``runs`` seeded runs: per alarm fired (sequential, fixed at Holm), stop samples, requests and dollars."""
    rng = np.random.default_rng([seed, int(case.accuracy * 100), int(case.icc * 10), case.agreement == "versions",
                                 int(case.drop * 100), case.shape == "concentrated"])
    a, b = levels(ALPHA, len(RECIPE))
    x = [np.empty((runs, len(w.order))) for w in watches]
    fixed = np.zeros((fixed_runs, len(RECIPE)), bool)
    for r in range(runs):
        before, after = draw(rng, design, case.accuracy, case.icc, case.agreement, case.shape, case.drop)
        for k, w in enumerate(watches):
            x[k][r] = w.drops(design, before, after)
        if r < fixed_runs:
            ps = [paired_difference(after[w.mask].tolist(), before[w.mask].tolist(),
                                    design.item[w.mask].tolist()).p_drop_over(0.0) for w in watches]
            fixed[r] = np.array(holm(ps)) < ALPHA
    fired = np.zeros((runs, len(RECIPE)), bool)
    stop = np.zeros((runs, len(RECIPE)), int)  # the first sample group not needed by the alarm
    for k, w in enumerate(watches):
        items, hit = simulate(x[k], 0.0, DETECT, a, b, looks=w.looks)
        fired[:, k] = hit
        stop[:, k] = w.samples[np.searchsorted(w.looks, items)] + 1
    sent_run = design.sample[None, :] < stop.max(axis=1)[:, None]
    sent_alarm = design.sample[None, :] < stop[:, design.alarm]
    return Outcome(fired, fixed, sent_run.sum(axis=1), sent_run @ design.usd, sent_alarm.sum(axis=1),
                   sent_alarm @ design.usd)


def rate(hits: int, n: int) -> str:
    low, high = wilson(hits, n)
    return f"{hits / n:.1%} [{low:.1%}, {high:.1%}]"


def today_at(samples: dict[str, int]) -> list[Part]:
    """Today's full designs with ``samples`` items a cell per alarm (lrt: files a cell; litm: questions and rows)."""
    p, n = PRICE_TODAY, samples
    return [full("lrt", 20, n["lrt"], p["lrt"], own=True), full("qa", 116, n["qa"], p["qa"]),
            full("docs", 15, n["docs"], p["docs"]), full("litm-qa", 17, n["litm-*"], p["litm-qa"]),
            full("litm-kv", 4, n["litm-*"], p["litm-kv"]),
            Part("litm-kv", np.tile(np.arange(n["litm-*"], 2 * n["litm-*"]), 5), np.tile(np.arange(n["litm-*"]), 5),
                 p["litm-kv"])]


TODAY_SAMPLES = {"lrt": 20, "qa": 20, "docs": 20, "litm-*": 180}


def t_power(run: Run, k: int, case: Case, runs: int, seed: int) -> float:
    """Power of alarm ``k`` at the recipe's worst-case level by a one-sample t-test on the items' mean drops
    (with equal item sizes the clustered paired test's statistic; fast enough to search today's design's size)."""
    from scipy import stats

    rng = np.random.default_rng([seed, k, int(case.drop * 100), case.shape == "concentrated"])
    mask = run.alarm == k
    items = np.unique(run.item[mask])
    hits = 0
    for _ in range(runs):
        before, after = draw(rng, run, case.accuracy, case.icc, case.agreement, case.shape, case.drop)
        d = np.bincount(run.item[mask], weights=before[mask].astype(float) - after[mask], minlength=run.items)
        n = np.bincount(run.item[mask], minlength=run.items)
        m = d[items] / n[items]
        se = m.std(ddof=1) / math.sqrt(len(m))
        hits += se > 0 and stats.t.sf(m.mean() / se, len(m) - 1) < ALPHA / len(RECIPE)
    return hits / runs


def equal_power(runs: int, seed: int) -> tuple[dict[str, int], list[str]]:
    """Today's items a cell per alarm for 80% power at a 5-point drop, diffuse and concentrated (versions, 85%,
    icc 0.5), searched in steps of 1.25x from today's."""
    need = dict(TODAY_SAMPLES)
    said = []
    for k, alarm in enumerate(RECIPE):
        while True:
            run = Run.of(today_at(need))
            powers = [t_power(run, k, Case("versions", 0.85, 0.5, shape, 0.05), runs, seed)
                      for shape in ("diffuse", "concentrated")]
            if min(powers) >= 0.8:
                said.append(f"{alarm} {need[alarm]} a cell ({powers[0]:.0%} diffuse, {powers[1]:.0%} concentrated)")
                break
            need[alarm] = math.ceil(need[alarm] * 1.25)
    return need, said


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--fixed-runs", type=int, default=200)
    parser.add_argument("--seed", type=int, default=20261127)
    parser.add_argument("--power-runs", type=int, default=300, help="runs a size in the search for today's design "
                        "at equal power")
    args = parser.parse_args()
    started = time.perf_counter()
    now, old = Run.of(new_defaults()), Run.of(today())
    watches = [Watch.of(now, k) for k in range(len(RECIPE))]
    old_requests, old_usd = len(old.item), float(old.usd.sum())
    need, said = equal_power(args.power_runs, args.seed)
    eq = Run.of(today_at(need))
    print(f"new defaults: {len(now.item):,} requests, ${now.usd.sum():,.0f} list; today's: {old_requests:,} "
          f"requests, ${old_usd:,.0f}; today's at equal power (80% at 5 points diffuse and concentrated, versions, "
          f"85%, icc 0.5; {args.power_runs} runs a size): {len(eq.item):,} requests, ${eq.usd.sum():,.0f}: "
          + "; ".join(said))
    for k, w in enumerate(watches):
        print(f"  {RECIPE[k]}: {len(w.order)} items, {int(w.mask.sum()):,} trials, {len(w.looks)} looks")
    cases = [Case(ag, acc, icc, shape, drop)
             for ag, acc, icc in (("versions", 0.85, 0.5), ("versions", 0.85, 0.9), ("versions", 0.5, 0.5),
                                  ("versions", 0.97, 0.5), ("unrelated", 0.85, 0.5), ("unrelated", 0.97, 0.5))
             for shape, drop in (("none", 0.0), ("diffuse", 0.05), ("concentrated", 0.05), ("diffuse", 0.30))]
    print("\n| models, baseline, icc | regression | recipe fails: sequential | fixed | "
          + " | ".join(f"{a}: seq / fixed" for a in RECIPE)
          + " | requests, run stop: mean / p95 | alarm stop: mean / p95 | $ run stop: mean / p95 | "
            "$ alarm stop: mean / p95 |")
    print("|" + "---|" * (8 + len(RECIPE)))
    for case in cases:
        out = run_case(now, watches, case, args.runs, args.fixed_runs, args.seed)
        fired, fixed = out.fired, out.fixed
        per = " | ".join(f"{fired[:, k].mean():.0%} / {fixed[:, k].mean():.0%}" for k in range(len(RECIPE)))

        def mp(v: np.ndarray, money: bool = False) -> str:
            f = "${:,.0f}" if money else "{:,.0f}"
            return f"{f.format(v.mean())} / {f.format(np.percentile(v, 95))}"

        print(f"| {case.label} | {rate(int(fired.any(axis=1).sum()), args.runs)} | "
              f"{rate(int(fixed.any(axis=1).sum()), args.fixed_runs)} | {per} | {mp(out.requests_run)} | "
              f"{mp(out.requests_alarm)} | {mp(out.usd_run, True)} | {mp(out.usd_alarm, True)} |", flush=True)
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
