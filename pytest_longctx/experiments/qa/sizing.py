"""Honest context sizes for the qa experiment: a cell's label is what its contexts hold.

A context of label ``L`` holds between ``L - tolerance(L)`` and ``L`` tokens (tolerance: 2% of ``L``, at
least 250 tokens). A size the corpus cannot fill is not generated, and the run says so in one line.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

from pytest_longctx.context.haystack import Unit, fill

#: Share of the label a context may fall short of it, and the floor of that allowance in tokens.
SHORTFALL = 0.02
MIN_SHORTFALL = 250


def tolerance(label: int) -> int:
    """Tokens a context of ``label`` may fall short of it."""
    return max(math.ceil(SHORTFALL * label), MIN_SHORTFALL)


def fill_close(gold: Unit, others: Sequence[Unit], budget: int, rng: random.Random) -> list[Unit]:
    """Shuffled others that fit beside ``gold`` in ``budget``, topped up by swaps to within tolerance.

    First fit over a seeded shuffle, then, while the gap exceeds the tolerance, the one swap (a chosen
    piece out, a larger unchosen one in) that closes most of the gap without going over (the core
    builder's :func:`~pytest_longctx.context.haystack.fill`). Never over budget.
    """
    return fill(gold, others, budget, rng=rng, within=tolerance(budget))


def capacity(pieces: Sequence[Unit]) -> int:
    """The largest context the pieces can fill: all of them."""
    return sum(p.tokens for p in pieces)


def choose_sizes(requested: Sequence[int], cap: int, *, source: str, explicit: bool) -> tuple[list[int], str | None]:
    """Sizes the corpus can fill, and one line naming those it cannot (None when all fit).

    ``explicit``: the sizes were asked for (``--longctx-context-sizes``), so a dropped one is worth a note
    even when defaults would have been capped silently.
    """
    kept = [s for s in requested if s <= cap]
    dropped = [s for s in requested if s > cap]
    if not dropped:
        return kept, None
    what = ", ".join(f"{s:,}" for s in dropped)
    line = (f"qa sizes not generated: {what} tokens ({'asked for' if explicit else 'default'}) exceed the "
            f"{cap:,} tokens the corpus ({source}) fills; add issues with --longctx-fr-date DATE,DATE")
    return kept, line
