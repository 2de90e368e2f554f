"""qa's incomplete block design: many questions, each asked in a balanced subset of the cells.

A remote model's default qa run spends its trials on questions rather than on cells. Every cell keeps its
trials (``per_cell`` distinct questions, as before), but a question is no longer asked in every cell:

* **position blocks**: a question is asked at one context size, in ``variants_per_block`` of the eight prompt
  variants, at every position (beginning / middle / end). The variants of a block share one context per
  position (a prompt-cache prefix), so the position contrast and the variant contrast within the block are
  paired within the question; which variants go together is chosen for balance (each cell filled to
  ``per_cell``, each pair of variants together about equally often: a balanced incomplete block design,
  built greedily);
* **depth blocks**: a further question is asked at ``sizes_per_depth_block`` of the depth sizes, at every
  depth (0-100%), so the depth contrast and the size contrast are paired within it (pairs of sizes balanced).

Questions come in the seeded pool order (the whole validated set), each used in one block; a question goes
only where its section fits. The design depends on the question order, the sizes, the variants and
``per_cell`` only, so every xdist worker (and every model with the same seed) builds the same one.

**Sections together** (``section_of``, what a run uses): the questions of one section come one after another (the
sections in the order the seeded pool first names them) and go to the same size (and, in depth blocks, the same
sizes). qa builds a context per section, size and position (``evals/qa/test_qa.py``), so one context serves every
variant of every question of its section at that position: five questions x three variants, not three variants, on
one prompt-cache prefix, asked at neighbouring sample indexes (while the cached prefix lives). Each question keeps
its block (three variants at every position), so the trials per question, the questions and the power stay.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: The default block shape of a remote qa run: three variants at one size (x 3 positions: 9 trials an item) and
#: two depth sizes (x 5 depths: 10 trials an item).
VARIANTS_PER_BLOCK = 3
SIZES_PER_DEPTH_BLOCK = 2

#: A cell of the design: ("position", "plain/none", 8000) or ("depth", "plain/none", 8000) (all positions or depths
#: of that variant and size ask the same questions).
Cell = tuple[str, str, int]


@dataclass(frozen=True)
class BlockDesign:
    """Which questions each cell asks (in order: sample i asks the i-th), and the block shape."""

    cells: Mapping[Cell, tuple[str, ...]]
    per_cell: int
    variants_per_block: int
    sizes_per_depth_block: int

    def questions(self, cell: Cell) -> tuple[str, ...]:
        return self.cells.get(cell, ())

    def items(self) -> int:
        return len({q for qs in self.cells.values() for q in qs})

    def short_cells(self) -> list[Cell]:
        """Cells with fewer questions than ``per_cell`` (too few questions fit): they ask some again."""
        return sorted(c for c, qs in self.cells.items() if len(qs) < self.per_cell)

    def to_json(self) -> dict[str, Any]:
        return {"kind": "incomplete blocks", "per_cell": self.per_cell, "items": self.items(),
                "variants_per_block": self.variants_per_block, "sizes_per_depth_block": self.sizes_per_depth_block,
                "short_cells": [list(c) for c in self.short_cells()]}


def _pick(candidates: Sequence[Any], k: int, fill: Callable[[Any], int], together: Counter[tuple[Any, Any]],
          ) -> list[Any]:
    """``k`` of ``candidates``, one at a time: the least filled, then the one least often paired with those
    already picked, then the first in the given order (deterministic)."""
    chosen: list[Any] = []
    left = list(candidates)
    for _ in range(min(k, len(left))):
        best = min(range(len(left)), key=lambda i: (fill(left[i]), sum(together[tuple(sorted((left[i], c)))]
                                                                         for c in chosen), i))
        chosen.append(left.pop(best))
    return chosen


def _pair_up(chosen: Sequence[Any], together: Counter[tuple[Any, Any]]) -> None:
    for i, a in enumerate(chosen):
        for b in chosen[i + 1:]:
            together[tuple(sorted((a, b)))] += 1


def block_design(order: Sequence[str], fits: Callable[[str, int], bool], variants: Sequence[str],
                 sizes: Sequence[int], depth_sizes: Sequence[int], per_cell: int, *,
                 variants_per_block: int = VARIANTS_PER_BLOCK,
                 sizes_per_depth_block: int = SIZES_PER_DEPTH_BLOCK,
                 section_of: Callable[[str], str] | None = None) -> BlockDesign:
    """The design for questions in ``order`` (question ids; ``fits(id, size)``: its section fits that size);
    ``section_of``: a question's section, to keep a section's questions together (one context, module docstring)."""
    cells: dict[Cell, list[str]] = {("position", v, s): [] for s in sizes for v in variants}
    cells.update({("depth", "plain/none", s): [] for s in depth_sizes})
    kv = max(1, min(variants_per_block, len(variants)))
    ks = max(1, min(sizes_per_depth_block, len(depth_sizes)))
    section = section_of or (lambda qid: qid)
    order = by_section(order, section) if section_of is not None else list(order)
    rest = _assign_positions(order, fits, variants, sizes, per_cell, kv, cells, section)
    _assign_depths(rest, fits, depth_sizes, per_cell, ks, cells, section)
    return BlockDesign({c: tuple(qs) for c, qs in cells.items()}, per_cell, kv, ks)


def by_section(order: Sequence[str], section_of: Callable[[str], str]) -> list[str]:
    """``order`` with each section's questions together: sections in the order of their first question, the
    questions of a section in their own order (stable, so the seeded order still decides)."""
    first: dict[str, int] = {}
    for i, qid in enumerate(order):
        first.setdefault(section_of(qid), i)
    return sorted(order, key=lambda qid: first[section_of(qid)])


def _assign_positions(order: Sequence[str], fits: Callable[[str, int], bool], variants: Sequence[str],
                      sizes: Sequence[int], per_cell: int, kv: int, cells: dict[Cell, list[str]],
                      section: Callable[[str], str]) -> list[str]:
    """Position blocks, question by question; returns the questions left for the depth blocks."""
    together: Counter[tuple[Any, Any]] = Counter()
    rest: list[str] = []
    size_of: dict[str, int] = {}  # a section's size: its later questions join it while it is open
    for qid in order:
        open_sizes = [s for s in sizes if any(len(cells["position", v, s]) < per_cell for v in variants)]
        if not open_sizes:
            rest.append(qid)
            continue
        fitting = [s for s in open_sizes if fits(qid, s)]
        if not fitting:
            rest.append(qid)
            continue
        # the section's size while open, else the size whose cells are least filled (then the smaller: fewer
        # sections fit it)
        size = size_of.get(section(qid), 0)
        if size not in fitting:
            size = min(fitting, key=lambda s: (sum(len(cells["position", v, s]) for v in variants), s))
            size_of[section(qid)] = size
        open_variants = [v for v in variants if len(cells["position", v, size]) < per_cell]
        at_size = {v: len(cells["position", v, size]) for v in open_variants}
        chosen = _pick(open_variants, kv, at_size.__getitem__, together)
        _pair_up(chosen, together)
        for v in chosen:
            cells["position", v, size].append(qid)
    return rest


def _assign_depths(order: Sequence[str], fits: Callable[[str, int], bool], depth_sizes: Sequence[int],
                   per_cell: int, ks: int, cells: dict[Cell, list[str]], section: Callable[[str], str]) -> None:
    together: Counter[tuple[Any, Any]] = Counter()
    sizes_of: dict[str, list[int]] = {}  # a section's sizes: its later questions join them while they are open
    for qid in order:
        open_sizes = [s for s in depth_sizes if len(cells["depth", "plain/none", s]) < per_cell and fits(qid, s)]
        if not any(len(cells["depth", "plain/none", s]) < per_cell for s in depth_sizes):
            return
        if not open_sizes:
            continue
        chosen = sizes_of.get(section(qid), [])
        if len(chosen) < min(ks, len(open_sizes)) or any(s not in open_sizes for s in chosen):
            chosen = _pick(open_sizes, ks, lambda s: len(cells["depth", "plain/none", s]), together)
            sizes_of[section(qid)] = chosen
        _pair_up(chosen, together)
        for s in chosen:
            cells["depth", "plain/none", s].append(qid)
