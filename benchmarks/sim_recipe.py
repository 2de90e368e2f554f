"""Seeded simulation of the whole CI recipe at the new remote defaults, sequential and fixed, with known truth.

Issue #30's figure of merit: does every experiment's pooled alarm of the README recipe (docs/ci-gating.md: one
``experiment=X:max-drop=0`` alarm each for lrt, qa, docs and litm-*) see a 5-point regression, diffuse or
concentrated, and what does a candidate run cost until the gate has decided, beside today's full-factorial design?

The designs are the plugin's remote defaults for anthropic/claude-sonnet-4-5, built with the experiments' own design
functions (qa's, litm's and docs' ``block_design``; lrt's 20 cells of 20 files), and the run order is
``--longctx-sequential``'s: sample group by sample group (sample i of every cell, then i + 1). Per alarm an item is
fed once all its trials have answered (the sample group of its last trial), as its summed paired drop with its trial
count (``session/sequential_gate.py``), and the plugin's own rule decides (``results/eprocess.simulate`` with the
looks of the run's sample groups): the e-process at ``EPROCESS_SHARE`` (0.15) of the alarm's level at every look,
clearing at 0.10 / 4 (held back while the fixed test on the items fed fails at the final look's level), and for
an alarm still open at the end of the design the final fixed-design look at the rest of its level with the fixed
gate's own one-sided p (``results/paired_rows.paired_rows``, what ``paired_difference`` computes, over every run). The
fixed design answers everything and decides the four alarms with the same p's and Holm, as ``evaluate`` does.
Costs, per run:

* **alarm stops** (``--longctx-sequential-stop alarm``, the default): an alarm's trials stop once it is settled;
  prefetch has started the next ``AHEAD`` sample groups by then (paid for); list prices;
* **batch rounds** (``--longctx-batch``): the same stops, rounded up to the end of their round (the sample groups
  holding 1/8, 1/4, 1/2, all of the requests, ``dispatch/batch_rounds.round_ends``), at batched prices;
* **run stop** (``--longctx-sequential-stop run``): every trial before the last alarm's stop.

The family of data models (``benchmarks/sim_gate.py``'s truth, per trial a uniform ``U`` shared within an item
with correlation ``icc``): versions of one model (shared ``U``, 2% of answers flipped a run) and unrelated models
(their own ``U``), baselines of 50%, 85% and 97% right (the ceiling), items of unequal sizes as the designs make
them (one trial an LRT file, 9 or 10 a qa question, 5 to 9 a docs item, 2 to 7 a litm question or row).
Regressions, every experiment at once: none; diffuse 5 points (every answer likelier wrong); concentrated 5 points
(a share 0.05 / accuracy of the items wrong in every cell they are asked in); a 30-point collapse.

Dollars: list prices for claude-sonnet-4-5 with the prompt cache the run uses, per request from each experiment's
plan (``PRICE_NEW``: ``pytest evals/<x> --longctx-plan --longctx-model anthropic/claude-sonnet-4-5``); batched
prices are the plan's batched share of list. "today at equal power" is today's full-factorial design grown (1.25x
steps of ``--longctx-samples``) until each alarm sees a 5-point drop, diffuse and concentrated, 80% of the time at
the recipe's level (versions, 85%, icc 0.5), found by simulation (a t-test on the items' mean drops, the clustered
test's statistic with equal item sizes), at today's per-request prices.

    python benchmarks/sim_recipe.py               # 1,000 runs a case, a few minutes on 2 cores
    python benchmarks/sim_recipe.py --runs 200 --power-runs 100   # a quicker look
    python benchmarks/sim_recipe.py --spread      # sample groups by each experiment's share (not the plugin's order)

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

from pytest_longctx.dispatch.batch_rounds import round_ends
from pytest_longctx.experiments.docs.design import block_design as docs_design
from pytest_longctx.experiments.litm.design import block_design as litm_design
from pytest_longctx.experiments.litm.plan import QA_POSITIONS
from pytest_longctx.experiments.qa.design import block_design
from pytest_longctx.experiments.qa.mcqa import EXAMPLES, PROMPTS
from pytest_longctx.results.eprocess import EPROCESS_SHARE, levels, simulate, split
from pytest_longctx.results.paired_rows import Shape, paired_rows
from pytest_longctx.results.stats import holm, wilson

RECIPE = ("lrt", "qa", "docs", "litm-*")
ALPHA = 0.05
DETECT = 0.05
#: Sample groups the prefetch dispatcher may have started beyond the one just looked at (its allowance: the
#: reported tests plus twice the largest sample group): paid for at a stop.
AHEAD = 2
#: Batched over list dollars: the plan's estimate for the new defaults with the 1-hour prompt cache
#: ($219.26 of $335.67).
BATCH_SHARE = 219.26 / 335.67
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


def litm_blocks(usd: float, per_cell: int = 180) -> list[Part]:
    """litm's remote default (``--longctx-litm-design blocks``) from the plugin's own ``block_design``: each
    question at one number of documents, every gold position; the baselines; litm-kv's rows as today."""
    design = litm_design(list(range(2655)), list(QA_POSITIONS), per_cell)
    cells = [(list(qs), len(QA_POSITIONS[n])) for n, qs in sorted(design.blocks.items())]
    cells += [(list(design.baselines), 2)]  # closed-book and oracle
    return [blocks("litm-qa", cells, usd), *litm_kv(usd, per_cell)]


def litm_kv(usd: float, rows: int = 180) -> list[Part]:
    """litm-kv: ``rows`` rows of the 75-key file at 4 positions, of the 140-key file at 5 (their own rows)."""
    return [full("litm-kv", 4, rows, usd),
            Part("litm-kv", np.tile(np.arange(rows, 2 * rows), 5), np.tile(np.arange(rows), 5), usd)]


def docs_blocks(usd: float, items: int = 140) -> Part:
    """docs' remote default (``--longctx-docs-design blocks``) from the plugin's own ``block_design``: every item
    at the 5 depths (sample i asks item i), and at its share of the 5 sizes in both arms."""
    design = docs_design(items, [0, 25, 50, 75, 100])
    cells = [(list(range(items)), 5)] + [(list(asked), 2) for _, asked in sorted(design.sizes.items())]
    return blocks("docs", cells, usd)


#: List dollars a request (claude-sonnet-4-5, with the prompt cache): issue #30's plan and the new designs' plans.
PRICE_TODAY = {"lrt": 64.0 / 400, "qa": 134.10 / 2_360, "docs": 2.73 / 300, "litm-qa": 0.0122, "litm-kv": 0.0122}
PRICE_NEW = {"lrt": 64.0 / 400, "qa": 195.41 / 2_360, "docs": 14.35 / 1_260, "litm-qa": 57.37 / 4_680,
             "litm-kv": 57.37 / 4_680}


def today() -> list[Part]:
    """The remote defaults before issue #30 (7,780 requests, $258 list)."""
    p = PRICE_TODAY
    return [full("lrt", 20, 20, p["lrt"], own=True), full("qa", 116, 20, p["qa"]), full("docs", 15, 20, p["docs"]),
            full("litm-qa", 17, 180, p["litm-qa"]), *litm_kv(p["litm-kv"])]


def new_defaults() -> list[Part]:
    """The remote defaults of issue #30."""
    p = PRICE_NEW
    return [full("lrt", 20, 20, p["lrt"], own=True), qa_blocks(20, p["qa"]), docs_blocks(p["docs"]),
            *litm_blocks(p["litm-qa"])]


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

    @property
    def last(self) -> int:
        """The number of sample groups."""
        return int(self.sample.max()) + 1

    @classmethod
    def of(cls, parts: list[Part], spread: bool = False) -> Run:
        """``spread``: sample groups by the share of each experiment's samples (every experiment's i-th of n at
        group (i + 1/2) / n of the longest), instead of by sample index."""
        longest = max(int(p.sample.max()) + 1 for p in parts)
        alarm, item, sample, usd, experiment = [], [], [], [], []
        offset = 0
        offsets: dict[str, int] = {}
        for part in parts:
            k = next(i for i, s in enumerate(RECIPE) if fnmatch.fnmatchcase(part.experiment, s))
            base = offsets.setdefault(part.experiment, offset)
            alarm.append(np.full(part.trials, k))
            item.append(part.item + base)
            n = int(part.sample.max()) + 1
            sample.append(((part.sample + 0.5) * longest / n).astype(int) if spread else part.sample)
            usd.append(np.full(part.trials, part.usd))
            experiment += [part.experiment] * part.trials
            offset = max(offset, base + int(part.item.max()) + 1)
        return cls(np.concatenate(alarm), np.concatenate(item), np.concatenate(sample), np.concatenate(usd), offset,
                   np.array(experiment))


@dataclass
class Watch:
    """One alarm in run order: its items in the order they complete (the sample group of their last trial), their
    sizes, and its looks (``session/sequential_gate.py`` feeds an item once all its trials have answered)."""

    mask: np.ndarray  # the alarm's trials
    order: np.ndarray  # items in feeding order
    sizes: np.ndarray  # their trials, in feeding order
    looks: np.ndarray  # items fed after each sample group
    samples: np.ndarray  # the sample group of each look
    items: np.ndarray  # the alarm's items, sorted (the fixed design's clusters)
    shape: Shape  # their sizes over the whole design

    @classmethod
    def of(cls, run: Run, k: int) -> Watch:
        mask = run.alarm == k
        last = np.full(run.items, -1)
        np.maximum.at(last, run.item[mask], run.sample[mask])
        items = np.unique(run.item[mask])
        order = items[np.lexsort((items, last[items]))]
        samples, counts = np.unique(last[order], return_counts=True)
        sizes = np.bincount(run.item[mask], minlength=run.items)
        return cls(mask, order, sizes[order], np.cumsum(counts), samples, items, Shape.of(sizes[items]))

    def drops(self, run: Run, before: np.ndarray, after: np.ndarray) -> np.ndarray:
        """Each item's summed paired drop, in feeding order."""
        m = self.mask
        diff = np.bincount(run.item[m], weights=before[m].astype(float) - after[m], minlength=run.items)
        out: np.ndarray = diff[self.order]
        return out

    def moved(self, run: Run, before: np.ndarray, after: np.ndarray) -> np.ndarray:
        """Each item's pairs right -> wrong and wrong -> right (2, items), in feeding order: what a clear's fixed
        test on the items fed needs."""
        m = self.mask
        d = before[m].astype(float) - after[m]
        return np.stack([np.bincount(run.item[m], weights=w, minlength=run.items)[self.order]
                         for w in (d > 0, d < 0)])

    def paired(self, run: Run, before: np.ndarray, after: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The whole design's per-item sums of (now - before) and the counts right -> wrong, wrong -> right."""
        m = self.mask
        d = after[m].astype(float) - before[m]
        sums = np.bincount(run.item[m], weights=d, minlength=run.items)[self.items]
        return sums, np.array([(d < 0).sum(), (d > 0).sum()], dtype=float)


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
    """Per run: each alarm fired (sequential; fixed design with Holm), and requests and dollars sent under the
    stopping rules: the whole run's stop, per-alarm stops, and per-alarm stops in Message Batches rounds."""

    fired: np.ndarray
    fixed: np.ndarray
    final: np.ndarray  # the alarm was decided by the final fixed-design look
    requests_run: np.ndarray
    usd_run: np.ndarray
    requests_alarm: np.ndarray
    usd_alarm: np.ndarray
    requests_batch: np.ndarray
    usd_batch: np.ndarray


def run_case(design: Run, watches: list[Watch], case: Case, runs: int, seed: int,
             share: float = EPROCESS_SHARE) -> Outcome:
    """``runs`` seeded runs of ``case``: the sequential rule per alarm (e-process, final look) and the fixed design."""
    rng = np.random.default_rng([seed, int(case.accuracy * 100), int(case.icc * 10), case.agreement == "versions",
                                 int(case.drop * 100), case.shape == "concentrated"])
    a, b = levels(ALPHA, len(RECIPE))
    a1, a2 = split(a, share)
    x = [np.empty((runs, len(w.order))) for w in watches]
    counts = [np.empty((2, runs, len(w.order))) for w in watches]
    sums = [np.empty((runs, len(w.items))) for w in watches]
    moved = [np.empty((runs, 2)) for _ in watches]
    for r in range(runs):
        before, after = draw(rng, design, case.accuracy, case.icc, case.agreement, case.shape, case.drop)
        for k, w in enumerate(watches):
            x[k][r] = w.drops(design, before, after)
            counts[k][:, r] = w.moved(design, before, after)
            sums[k][r], moved[k][r] = w.paired(design, before, after)
    p = np.stack([paired_rows(sums[k], moved[k][:, 0], moved[k][:, 1], w.shape).p_drop_over(0.0)
                  for k, w in enumerate(watches)], axis=1)
    fixed = np.array([holm(row.tolist()) for row in p]) < ALPHA
    fired = np.zeros((runs, len(RECIPE)), bool)
    final = np.zeros((runs, len(RECIPE)), bool)
    stop = np.zeros((runs, len(RECIPE)), int)  # the sample group after the alarm's deciding look
    for k, w in enumerate(watches):
        items, hit = simulate(x[k], 0.0, DETECT, a1, b, final_level=a2, final_p=p[:, k], looks=w.looks,
                              sizes=w.sizes, counts=counts[k])
        _, by_e = simulate(x[k], 0.0, DETECT, a1, b, final_level=a2, final_p=np.ones(runs), looks=w.looks,
                           sizes=w.sizes, counts=counts[k])
        fired[:, k] = hit
        last = w.samples[np.searchsorted(w.looks, items)] + 1
        final[:, k] = hit & ~by_e
        stop[:, k] = np.where(items == len(w.order), design.last, last)
    groups = design.last
    ends = np.array(round_ends(np.bincount(design.sample, minlength=groups).tolist()))
    batch_stop = ends[np.minimum(np.searchsorted(ends, stop), len(ends) - 1)]
    ahead = np.minimum(stop + AHEAD, groups)  # prefetch ran ahead of the look
    sent_run = design.sample[None, :] < ahead.max(axis=1)[:, None]
    sent_alarm = design.sample[None, :] < ahead[:, design.alarm]
    sent_batch = design.sample[None, :] < batch_stop[:, design.alarm]
    return Outcome(fired, fixed, final, sent_run.sum(axis=1), sent_run @ design.usd, sent_alarm.sum(axis=1),
                   sent_alarm @ design.usd, sent_batch.sum(axis=1), sent_batch @ design.usd * BATCH_SHARE)


def rate(hits: int, n: int) -> str:
    low, high = wilson(hits, n)
    return f"{hits / n:.1%} [{low:.1%}, {high:.1%}]"


def today_at(samples: dict[str, int]) -> list[Part]:
    """Today's full designs with ``samples`` items a cell per alarm (lrt: files a cell; litm: questions and rows)."""
    p, n = PRICE_TODAY, samples
    return [full("lrt", 20, n["lrt"], p["lrt"], own=True), full("qa", 116, n["qa"], p["qa"]),
            full("docs", 15, n["docs"], p["docs"]), full("litm-qa", 17, n["litm-*"], p["litm-qa"]),
            *litm_kv(p["litm-kv"], n["litm-*"])]


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


def mean_p95(v: np.ndarray, money: bool = False) -> str:
    f = "${:,.0f}" if money else "{:,.0f}"
    return f"{f.format(v.mean())} / {f.format(np.percentile(v, 95))}"


CASES = [Case(ag, acc, icc, shape, drop)
         for ag, acc, icc in (("versions", 0.85, 0.5), ("versions", 0.85, 0.9), ("versions", 0.5, 0.5),
                              ("versions", 0.97, 0.5), ("unrelated", 0.85, 0.5), ("unrelated", 0.97, 0.5))
         for shape, drop in (("none", 0.0), ("diffuse", 0.05), ("concentrated", 0.05), ("diffuse", 0.30))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=20261127)
    parser.add_argument("--power-runs", type=int, default=300, help="runs a size in the search for today's design "
                        "at equal power")
    parser.add_argument("--spread", action="store_true", help="sample groups by the share of each experiment's "
                        "samples")
    parser.add_argument("--only", default="", help="cases whose label holds this text")
    parser.add_argument("--share", type=float, default=EPROCESS_SHARE, help="each alarm's level spent by the "
                        f"e-process (default the plugin's {EPROCESS_SHARE:g}); the rest is the final look's")
    args = parser.parse_args()
    started = time.perf_counter()
    now, old = Run.of(new_defaults(), spread=args.spread), Run.of(today())
    watches = [Watch.of(now, k) for k in range(len(RECIPE))]
    need, said = equal_power(args.power_runs, args.seed)
    eq = Run.of(today_at(need))
    eq_requests = len(eq.item)
    print(f"new defaults: {len(now.item):,} requests, ${now.usd.sum():,.0f} list; today's: {len(old.item):,} "
          f"requests, ${old.usd.sum():,.0f} list; today's at equal power (80% at 5 points diffuse and concentrated, "
          f"versions, 85%, icc 0.5; {args.power_runs} runs a size): {eq_requests:,} requests, ${eq.usd.sum():,.0f}: "
          + "; ".join(said))
    for k, w in enumerate(watches):
        print(f"  {RECIPE[k]}: {len(w.order)} items, {int(w.mask.sum()):,} trials, {len(w.looks)} looks")
    print(f"\n{args.runs} runs a case; per alarm: fails sequential / fixed (final: the share the final look decided); "
          "requests and $ to a decision with per-alarm stops (prefetch, list prices), in batch rounds (batched "
          "prices), and with the whole run's stop; 'of eq.': mean requests over today's design at equal power")
    print("| models, baseline, icc | regression | recipe fails: sequential | fixed | "
          + " | ".join(f"{a}: seq / fixed (final)" for a in RECIPE)
          + " | requests: mean / p95 | of eq. | $ list: mean / p95 | $ batch rounds: mean / p95 | run stop: requests |")
    print("|" + "---|" * (9 + len(RECIPE)))
    for case in CASES:
        if args.only not in case.label:
            continue
        out = run_case(now, watches, case, args.runs, args.seed, args.share)
        fired, fixed = out.fired, out.fixed
        per = " | ".join(f"{fired[:, k].mean():.0%} / {fixed[:, k].mean():.0%} ({out.final[:, k].mean():.0%})"
                         for k in range(len(RECIPE)))
        print(f"| {case.label} | {rate(int(fired.any(axis=1).sum()), args.runs)} | "
              f"{rate(int(fixed.any(axis=1).sum()), args.runs)} | {per} | {mean_p95(out.requests_alarm)} | "
              f"{out.requests_alarm.mean() / eq_requests:.2f} | {mean_p95(out.usd_alarm, True)} | "
              f"{mean_p95(out.usd_batch, True)} | {out.requests_run.mean():,.0f} |", flush=True)
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
