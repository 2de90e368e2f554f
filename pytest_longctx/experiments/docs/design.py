"""docs' block design: every item at every depth, and at a balanced subset of the context sizes in both arms.

A folder holds a fixed number of reviewed items, so the full design (every item in all 15 cells) cannot buy more
items, only more trials of the same ones, which add little: an item's trials share its fate. A remote model's
default (``--longctx-docs-design blocks``) asks each item

* at every answer depth (the depth cells keep every item: the depth contrast is paired within all of them), and
* at ``fractions_per_item`` of the five context sizes, in both arms (long context and RAG): the arm contrast is
  paired within every item at each of its sizes, and the size contrast within items on balanced pairs of sizes
  (:mod:`pytest_longctx.util.blocks`).

``fractions_per_item`` keeps every size cell at :data:`SIZE_CELL_FLOOR` items at least (all of them when the folder
has fewer, so a small folder keeps the full design): two of five for the shipped folder's 140 items (56 a size
cell, 9 trials an item instead of 15: 1,260 requests instead of 2,100). Sample i of a size cell asks the i-th item
its size was given, from the run's seeded item order, so every xdist worker builds the same design.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_longctx.util.blocks import balanced_blocks

#: Items a size cell keeps at least under the block design (every item when there are fewer).
SIZE_CELL_FLOOR = 50


def fractions_per_item(items: int, fractions: int) -> int:
    """Sizes an item is asked at: the fewest (at least two, so sizes pair within items) that fill every size cell
    to :data:`SIZE_CELL_FLOOR` items, or to every item."""
    if items <= 0 or fractions <= 2:
        return max(fractions, 1)
    need = math.ceil(fractions * min(SIZE_CELL_FLOOR, items) / items)
    return max(2, min(need, fractions))


def size_cell_items(items: int, fractions: int) -> int:
    """Items (trials) of each size cell under the block design."""
    return min(items, math.ceil(items * fractions_per_item(items, fractions) / max(fractions, 1)))


@dataclass(frozen=True)
class DocsDesign:
    """Which item (its index in the run's seeded item order) sample i of each context size asks."""

    sizes: Mapping[int, tuple[int, ...]]
    items: int
    fractions_per_item: int

    def sample(self, fraction: int, sample: int) -> int | None:
        """The item order index of ``sample`` at ``fraction``; None past the cell's end."""
        asked = self.sizes.get(fraction, ())
        return asked[sample] if sample < len(asked) else None

    def per_size_cell(self) -> int:
        return max((len(v) for v in self.sizes.values()), default=0)

    def to_json(self) -> dict[str, Any]:
        return {"kind": "size blocks", "items": self.items, "fractions_per_item": self.fractions_per_item,
                "per_size_cell": self.per_size_cell()}


def block_design(items: int, fractions: Sequence[int]) -> DocsDesign:
    """The design for the first ``items`` of the seeded item order over the context sizes ``fractions``."""
    k = fractions_per_item(items, len(fractions))
    sizes, _ = balanced_blocks(list(range(items)), list(fractions), size_cell_items(items, len(fractions)), k)
    return DocsDesign({f: tuple(v) for f, v in sizes.items()}, items, k)
