"""Seeded simulation of the default remote designs: does each experiment's pooled alarm see a 5-point drop?

For each design (today's full-factorial one and the new default), two runs (the compared one and the candidate)
are drawn with known truth, and the experiment's pooled alarm of the CI recipe (``experiment=X:max-drop=0``,
docs/ci-gating.md) decides with the plugin's own statistics: ``paired_difference`` (clustered on items) and its
one-sided p of a drop, at the recipe's worst-case level (alpha 0.05 / 4 alarms, Holm's first step). Each
alarm's false alarms at that level bound the recipe's together (4 x 1.25% = 5%).

The truth, per trial (the model of ``benchmarks/sim_gate.py``): a uniform ``U`` decides whether a model is right
(``U < accuracy``); with probability ``sqrt(icc)`` a trial uses its item's shared ``U``, so two trials of one item
agree with correlation ``icc`` (items of unequal difficulty). "versions" of one model share every ``U`` and each
run flips 2% of its answers at random; "unrelated" models draw their own. Three candidates:

* no change (false alarms);
* diffuse: every answer a little likelier wrong (accuracy 5 points lower);
* concentrated: items worth 5 points break entirely (a share 0.05 / accuracy of the items, about 6%, drawn at
  random, wrong in every cell they are asked in).

The designs are the ones the plugin builds: qa's block design comes from ``experiments.qa.design.block_design``
(every question fitting every size; the real corpus lets 280 of the 395 questions fit 2,000 tokens, which changes
which block a question joins, not the shape), litm's from ``experiments.litm.design.block_design`` (the recipe's
``litm-*`` alarm pools litm-qa and litm-kv: rows for both together and for litm-qa alone), docs' from
``experiments.docs.design.block_design``. Requests and list-price dollars come from the plans
(``pytest evals/<qa|litm|docs> --longctx-plan --longctx-model anthropic/claude-sonnet-4-5`` with
``--longctx-<qa|litm|docs>-design full`` for the old designs), and scale with the trials for the rows derived from
them (said in the table). The "plan" column is ``results/power.py``'s figure with the disagreements of two runs as
correlated within an item as the answers (``diff_icc = icc``: this simulation's data model), not the plan's
stated default of 0.05.

    python benchmarks/sim_designs.py --only "new default"     # the new defaults, 1,000 runs a case (~20 min)
    python benchmarks/sim_designs.py --runs 200               # every design, a quicker look

Every draw comes from ``numpy.random.default_rng(seed)``; the same arguments print the same table.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pytest_longctx.experiments.docs.design import block_design as docs_design
from pytest_longctx.experiments.litm.design import block_design as litm_design
from pytest_longctx.experiments.litm.plan import QA_POSITIONS
from pytest_longctx.experiments.qa.design import SIZES_PER_DEPTH_BLOCK, VARIANTS_PER_BLOCK, block_design
from pytest_longctx.experiments.qa.mcqa import EXAMPLES, PROMPTS
from pytest_longctx.results.clustered import paired_difference
from pytest_longctx.results.power import Assumptions, Design, detectable_drop, samples_for

ALPHA = 0.05 / 4  # the recipe's worst-case level for one of its four alarms
SIZES = (2_000, 8_000, 70_000, 95_000)  # a 200K-window model's qa sizes on the 2024-02-12 issue


@dataclass(frozen=True)
class Layout:
    """One design: per trial, its item (cluster); and what a run of it costs."""

    name: str
    cluster: np.ndarray
    requests: int
    dollars: float  # list price, with the prompt cache the run uses (the plan's estimate)
    note: str = ""

    @property
    def items(self) -> int:
        return int(self.cluster.max()) + 1

    @property
    def trials(self) -> int:
        return len(self.cluster)


def full(name: str, cells: int, items: int, requests: int, dollars: float, note: str = "") -> Layout:
    """Every item in every cell."""
    return Layout(name, np.tile(np.arange(items), cells), requests, dollars, note)


def qa_blocks(per_cell: int, dollars: float, kv: int = VARIANTS_PER_BLOCK, ks: int = SIZES_PER_DEPTH_BLOCK,
              name: str = "qa blocks (new default)") -> Layout:
    """qa's default remote design (``--longctx-qa-design blocks``), built by the plugin's own function."""
    variants = [f"{p}/{e}" for p in PROMPTS for e in EXAMPLES]
    order = [f"q{i:03d}" for i in range(395)]
    design = block_design(order, lambda q, s: True, variants, SIZES, SIZES, per_cell, variants_per_block=kv,
                          sizes_per_depth_block=ks)
    ids = {q: i for i, q in enumerate(sorted({q for qs in design.cells.values() for q in qs}))}
    clusters: list[int] = []
    for (kind, _, _), questions in sorted(design.cells.items()):
        for q in questions:
            clusters += [ids[q]] * (3 if kind == "position" else 5)  # every position, or every depth
    return Layout(name, np.array(clusters), len(clusters) + 40, dollars,
                  f"{len(ids)} questions: {kv} variants x 3 positions at one size, or {ks} size(s) x 5 depths")


def litm_qa_blocks(per_cell: int, dollars: float, k: int = 1, name: str = "litm-qa blocks (new default)",
                   kv: bool = False) -> Layout:
    """litm-qa's default remote design (``--longctx-litm-design blocks``), built by the plugin's own function: the
    paper's 10/20/30 documents at their positions and the two baselines, ``per_cell`` questions a cell; with ``kv``
    also litm-kv's 9 cells (its rows are of one key count each: 180 x 4 + 180 x 5), the recipe's ``litm-*`` alarm."""
    design = litm_design(list(range(2655)), list(QA_POSITIONS), per_cell, counts_per_block=k)
    clusters: list[int] = []
    for n, questions in design.blocks.items():
        for q in questions:
            clusters += [q] * len(QA_POSITIONS[n])  # every gold position of its number of documents
    clusters += [q for q in design.baselines for _ in range(2)]  # closed-book and oracle
    ids = {q: i for i, q in enumerate(sorted(set(clusters)))}
    cluster = [ids[q] for q in clusters]
    if kv:
        cluster += _kv(len(ids), per_cell)
    trials = len(cluster)
    note = (f"{len(ids)} questions, each at {k} number(s) of documents at every gold position; "
            f"{len(design.baselines)} of them in the baselines" + ("; + litm-kv today" if kv else ""))
    return Layout(name, np.array(cluster), trials, dollars, note)


def _kv(first: int, rows: int) -> list[int]:
    """litm-kv's trials: ``rows`` rows of the 75-key file at 4 positions, of the 140-key file at 5."""
    return ([first + r for r in range(rows) for _ in range(4)]
            + [first + rows + r for r in range(rows) for _ in range(5)])


def docs_blocks(items: int, dollars: float, name: str = "docs blocks (new default, 140 items)") -> Layout:
    """docs' default remote design (``--longctx-docs-design blocks``), built by the plugin's own function: every
    item at the 5 depths, and at the design's share of the 5 sizes in both arms."""
    design = docs_design(items, [0, 25, 50, 75, 100])
    clusters = [i for i in range(items) for _ in range(5)]
    clusters += [i for asked in design.sizes.values() for i in asked for _ in range(2)]
    return Layout(name, np.array(clusters), len(clusters), dollars,
                  f"{items} items: 5 depths + {design.fractions_per_item} of 5 sizes x 2 arms "
                  f"({design.per_size_cell()} a size cell)")


def latent(rng: np.random.Generator, cluster: np.ndarray, items: int, icc: float) -> np.ndarray:
    shared = rng.random(items)[cluster]
    return np.where(rng.random(len(cluster)) < math.sqrt(icc), shared, rng.random(len(cluster)))


def draw(rng: np.random.Generator, layout: Layout, accuracy: float, icc: float, agreement: str, shape: str,
         drop: float = 0.05, flip: float = 0.02) -> tuple[np.ndarray, np.ndarray]:
    """Outcomes (True = right) of the compared run and the candidate."""
    c, g = layout.cluster, layout.items
    u = latent(rng, c, g, icc)
    before = u < accuracy
    after_u = u if agreement == "versions" else latent(rng, c, g, icc)
    after = after_u < (accuracy - drop if shape == "diffuse" else accuracy)
    if agreement == "versions":
        before ^= latent(rng, c, g, icc) < flip
        after ^= latent(rng, c, g, icc) < flip
    if shape == "concentrated":
        broken = rng.random(g) < drop / accuracy
        after &= ~broken[c]
    return before, after


def alarm(layout: Layout, before: np.ndarray, after: np.ndarray) -> bool:
    """The pooled alarm ``experiment=X:max-drop=0`` at the recipe's worst-case level, as the gate computes it."""
    d = paired_difference(after.tolist(), before.tolist(), layout.cluster.tolist())
    return d.p_drop_over(0.0) < ALPHA


def rate(rng: np.random.Generator, layout: Layout, runs: int, accuracy: float, icc: float, agreement: str,
         shape: str) -> float:
    return sum(alarm(layout, *draw(rng, layout, accuracy, icc, agreement, shape)) for _ in range(runs)) / runs


def plan_drop(layout: Layout, icc: float) -> float | None:
    """The plan's figure (``results/power.py``) for this design: smallest drop seen with 80% power, with the
    disagreements of two runs as correlated within an item as the answers (this simulation's data model: a run's
    2% flips follow the item's shared uniform)."""
    _, counts = np.unique(layout.cluster, return_counts=True)
    design = Design(layout.trials, layout.items, float((counts ** 2).sum() / counts.sum()))
    return detectable_drop(design, ALPHA, Assumptions(icc=icc, diff_icc=icc))


def equal_power(layout: Layout, cells: int, per_cell: int, icc: float) -> int | None:
    """Today's full design: the items a cell would need (``--longctx-samples``) for a 5-point drop at 80% power."""
    _, counts = np.unique(layout.cluster, return_counts=True)
    design = Design(layout.trials, layout.items, float((counts ** 2).sum() / counts.sum()))
    return samples_for(0.05, design, per_cell, ALPHA, Assumptions(icc=icc, diff_icc=icc))


CASES = (("versions", 0.5), ("versions", 0.9), ("unrelated", 0.5))


def table(layouts: Sequence[Layout], runs: int, seed: int, accuracy: float) -> None:
    print(f"pooled alarm at one-sided alpha {ALPHA} (0.05 / 4 alarms), {runs} seeded runs a case, "
          f"baseline {accuracy:.0%}; power at a 5-point drop")
    print("| design | items | trials | requests | $ list | case | false alarms | diffuse | concentrated | plan |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for k, layout in enumerate(layouts):
        for j, (agreement, icc) in enumerate(CASES):
            rng = np.random.default_rng([seed, k, j])
            cells = [rate(rng, layout, runs, accuracy, icc, agreement, shape)
                     for shape in ("none", "diffuse", "concentrated")]
            drop = plan_drop(layout, icc)
            print(f"| {layout.name} | {layout.items:,} | {layout.trials:,} | {layout.requests:,} | "
                  f"{layout.dollars:,.0f} | {agreement}, icc {icc} | {cells[0]:.1%} | {cells[1]:.1%} | "
                  f"{cells[2]:.1%} | {'-' if drop is None else f'{drop:.3f}'} |", flush=True)
    for layout in layouts:
        if layout.note:
            print(f"{layout.name}: {layout.note}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=20261127)
    parser.add_argument("--accuracy", type=float, default=0.85)
    parser.add_argument("--only", default="", help="comma-separated design names to run (substring match)")
    args = parser.parse_args()
    # Requests and dollars: the plans for anthropic/claude-sonnet-4-5 (list prices, with the prompt cache).
    qa_today = full("qa full (today)", 116, 20, 2_360, QA_FULL_USD, "20 questions in all 116 cells")
    need = equal_power(qa_today, 116, 20, 0.5)
    layouts = [qa_today, qa_blocks(20, QA_BLOCKS_USD),
               qa_blocks(20, QA_BLOCKS4_USD, 4, 2, "qa blocks, 4 variants (alternative)")]
    if need is not None:
        layouts.append(full(f"qa full at {need} a cell", 116, need, 116 * need + 40, QA_FULL_USD * need / 20,
                            "today's design with the questions a cell the plan says a 5-point drop needs "
                            "(icc 0.5; dollars scaled from today's plan)"))
    layouts += [
        full("docs (today, 20 items)", 15, 20, 300, DOCS_USD, "5 depths + 5 sizes x 2 arms"),
        full("docs full (today, 140 items)", 15, 140, 2_100, DOCS140_USD,
             "the shipped folder's 14 documents x 10 reviewed items, every item in every cell (judge calls not "
             "counted)"),
        docs_blocks(140, DOCS_BLOCKS_USD),
        *(docs_blocks(n, DOCS_BLOCKS_USD * n / 140, f"docs blocks at {n} items") for n in (200, 240, 260)),
        Layout(
            "litm (qa + kv) full (today)", np.concatenate([np.tile(np.arange(180), 17), np.array(_kv(180, 180))]),
            4_680, LITM_USD, "the recipe's litm-* alarm: 180 questions in all 17 QA cells, 360 key-value rows"),
        litm_qa_blocks(180, LITM_USD, name="litm (qa + kv) blocks (new default)", kv=True),
        litm_qa_blocks(180, LITM_QA_USD),
        litm_qa_blocks(120, LITM_QA_USD * 2 / 3, name="litm-qa blocks at 120 a cell (alternative)"),
        litm_qa_blocks(180, LITM_QA_USD, k=2, name="litm-qa blocks, 2 counts a question (alternative)"),
        Layout(
            "litm-kv (today)", np.array(_kv(0, 180)), 1_620, LITM_USD - LITM_QA_USD,
            "each row asked at every key position of its one key count"),
        full("litm-qa (today)", 17, 180, 3_060, LITM_QA_USD),
        Layout("litm-qa, 360 questions x 8.5 cells", np.concatenate(
            [np.tile(np.arange(180), 9), np.tile(np.arange(180, 360), 8)]), 3_060, LITM_QA_USD,
               "the same trials on twice the questions (each in about half the cells)"),
        Layout("litm-qa, 240 questions x 8.5 cells", np.concatenate(
            [np.tile(np.arange(120), 9), np.tile(np.arange(120, 240), 8)]), 2_040, LITM_QA_USD * 2 / 3,
               "two thirds of today's trials on 240 questions (dollars scaled with the trials)"),
        full("lrt (today)", 1, 400, 400, LRT_USD, "every file its own item"),
    ]
    if args.only:
        wanted = [w.strip() for w in args.only.split(",") if w.strip()]
        layouts = [x for x in layouts if any(w in x.name for w in wanted)]
    table(layouts, args.runs, args.seed, args.accuracy)


#: List-price dollars of one candidate run (anthropic/claude-sonnet-4-5), from the plans and issue #30.
QA_FULL_USD = 134.10
QA_BLOCKS_USD = 195.41
QA_BLOCKS4_USD = 170.14
DOCS_USD = 2.73
DOCS140_USD = 19.07
DOCS_BLOCKS_USD = 14.35
LITM_USD = 57.37  # litm-qa and litm-kv, the same for the full and the block design (the cells keep their trials)
LITM_QA_USD = 37.0
LRT_USD = 64.0

if __name__ == "__main__":
    main()
