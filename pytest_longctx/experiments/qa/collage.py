"""The "randomized collage": a relevant section among shuffled others, up to a token budget.

Built with the core haystack builder (:mod:`pytest_longctx.context.haystack`, which defines size, start and
depth). Fixes three flaws of the original study: the relevant section appears exactly once (the original
duplicated it in the "beginning" case), "middle" is a token depth of 50% (not chunk index 20; the ``source``
protocol keeps the index, see :mod:`.source`), and every choice comes from a seeded ``random.Random``.

Each section's count includes the separator that follows it (the cached per-section counts), so the
builder is given ``separator=0``; the context is never re-tokenized to build it.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from pytest_longctx.context.haystack import Haystack, Unit, at_depth, fill
from pytest_longctx.context.haystack import render as join

#: Named positions of the original study, as token depths.
POSITIONS = {"beginning": 0, "middle": 50, "end": 100}
SEPARATOR = "\n\n"
WRAP = "<section>\n{text}\n</section>"


def depth_of(position: str | int | float) -> float:
    """``beginning``/``middle``/``end`` or a number 0..100 → a depth in percent."""
    if isinstance(position, str) and position in POSITIONS:
        return float(POSITIONS[position])
    depth = float(position)
    if not 0 <= depth <= 100:
        raise ValueError(f"depth must be between 0 and 100, got {position!r}")
    return depth


def build_collage(gold: Unit, others: Sequence[Unit], budget: int, position: str | float,
                  rng: random.Random) -> Haystack:
    """The plain recipe: fill the budget from ``others`` shuffled by ``rng`` (first fit), then place ``gold``
    at the depth of ``position``."""
    return at_depth(gold, fill(gold, others, budget, rng=rng), depth_of(position))


def render(collage: Haystack, wrap: str = WRAP) -> str:
    """The context text: each section wrapped and separated by a blank line."""
    return join(collage, SEPARATOR, lambda u: wrap.format(text=u.text.strip("\n"), id=u.id))
