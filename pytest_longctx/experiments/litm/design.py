"""litm-qa's block design: many questions, each asked at one number of documents at every gold position.

A remote model's default litm run (``--longctx-litm-design blocks``) spends its trials on questions rather than on
cells. Every cell keeps its trials (``per_cell``, as in the full design), but a question is no longer asked in every
cell:

* **position blocks**: a question is asked at ``counts_per_block`` of the numbers of documents (one by default), at
  every gold position of each: the position contrast (the paper's U curve) stays paired within the question. With
  more than one count a block, which counts go together is balanced (each pair about equally often), so the
  document-count contrast is paired too;
* **baselines**: closed-book and oracle ask ``per_cell`` of those questions, taken in turn from every block, so
  each baseline is paired with every position cell on a share of its questions.

Questions come in the run's seeded order (``data.sample_order``), each in one block; when the file has fewer
questions than the blocks need, later passes give a question a further count (never one it has). The design
depends on that order, the counts, ``per_cell`` and the block shape only, so every xdist worker (and every model
run with the same seed) builds the same one. litm-kv needs none: a row of one key count's file is asked at every
key position of that count only (the two files hold different rows), so its trials already spread over 360 rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: Numbers of documents a question is asked at in the default block design.
COUNTS_PER_BLOCK = 1
#: The design's name for the closed-book and oracle cells (documents 0 and 1).
BASELINE_COUNTS = (0, 1)


@dataclass(frozen=True)
class LitmDesign:
    """Which question (an index into the question file) sample i of each number of documents asks."""

    blocks: Mapping[int, tuple[int, ...]]
    baselines: tuple[int, ...]
    per_cell: int
    counts_per_block: int

    def question(self, documents: int, sample: int) -> int | None:
        """The question of sample ``sample`` at ``documents`` (0 and 1: the baselines); None past the cell's end."""
        asked = self.baselines if documents in BASELINE_COUNTS else self.blocks.get(documents, ())
        return asked[sample] if sample < len(asked) else None

    def items(self) -> int:
        return len({q for qs in self.blocks.values() for q in qs} | set(self.baselines))

    def to_json(self) -> dict[str, Any]:
        return {"kind": "position blocks", "per_cell": self.per_cell, "items": self.items(),
                "counts_per_block": self.counts_per_block}


def block_design(order: Sequence[int], counts: Sequence[int], per_cell: int, *,
                 counts_per_block: int = COUNTS_PER_BLOCK, baselines: bool = True) -> LitmDesign:
    """The design over questions in ``order`` for the numbers of documents ``counts`` (baselines 0 and 1 left out
    of them), ``per_cell`` questions a count."""
    from pytest_longctx.util.blocks import balanced_blocks

    counts = sorted({n for n in counts if n not in BASELINE_COUNTS})
    k = max(1, min(counts_per_block, len(counts)))
    blocks, placed = balanced_blocks(order, counts, per_cell, k)
    chosen_baselines = tuple(placed[:per_cell]) if baselines else ()
    return LitmDesign({n: tuple(qs) for n, qs in blocks.items()}, chosen_baselines, per_cell, k)
