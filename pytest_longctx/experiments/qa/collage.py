"""The "randomized collage": a relevant section among shuffled others, up to a token budget.

Fixes three flaws of the original study: the relevant section appears exactly once (the
original duplicated it in the "beginning" case), "middle" is a token depth of 50% (not chunk
index 20), and every choice comes from a seeded ``random.Random``.

Token counts come from per-section counts computed once; the context is never re-tokenized.
Depth d places the relevant section's first token at the section boundary nearest to d% of the
tokens of the other sections (0 = first, 100 = last).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

#: Named positions of the original study, as token depths.
POSITIONS = {"beginning": 0, "middle": 50, "end": 100}
SEPARATOR = "\n\n"


@dataclass(frozen=True)
class Piece:
    """A document with its precomputed token count (including its wrapper)."""

    id: str
    text: str
    tokens: int


@dataclass(frozen=True)
class Collage:
    """The chosen pieces in order, where the relevant one sits, and the token figures."""

    pieces: tuple[Piece, ...]
    gold_index: int
    tokens: int
    gold_offset: int

    @property
    def gold(self) -> Piece:
        return self.pieces[self.gold_index]

    @property
    def depth(self) -> float:
        """Achieved depth: the relevant piece's start as % of the other pieces' tokens."""
        others = self.tokens - self.gold.tokens
        return 100.0 * self.gold_offset / others if others > 0 else 0.0

    def ids(self) -> list[str]:
        return [p.id for p in self.pieces]


def depth_of(position: str | int | float) -> float:
    """``beginning``/``middle``/``end`` or a number 0..100 → a depth in percent."""
    if isinstance(position, str) and position in POSITIONS:
        return float(POSITIONS[position])
    depth = float(position)
    if not 0 <= depth <= 100:
        raise ValueError(f"depth must be between 0 and 100, got {position!r}")
    return depth


def fill(gold: Piece, others: Sequence[Piece], budget: int, rng: random.Random) -> list[Piece]:
    """Shuffle ``others`` and keep each that still fits (``gold`` counted first); never over budget."""
    if gold.tokens > budget:
        raise ValueError(f"relevant piece {gold.id} has {gold.tokens} tokens, more than the budget {budget}")
    pool = [p for p in others if p.id != gold.id]
    rng.shuffle(pool)
    used = gold.tokens
    chosen = []
    for piece in pool:
        if used + piece.tokens <= budget:
            chosen.append(piece)
            used += piece.tokens
    return chosen


def place(gold: Piece, fillers: Sequence[Piece], depth: float) -> Collage:
    """Insert ``gold`` at the boundary whose token offset is nearest to ``depth``% of the fillers."""
    total = sum(p.tokens for p in fillers)
    target = total * depth / 100.0
    offsets = [0]
    for p in fillers:
        offsets.append(offsets[-1] + p.tokens)
    index = min(range(len(offsets)), key=lambda i: (abs(offsets[i] - target), i))
    pieces = (*fillers[:index], gold, *fillers[index:])
    return Collage(pieces=tuple(pieces), gold_index=index, tokens=total + gold.tokens, gold_offset=offsets[index])


def build_collage(gold: Piece, others: Sequence[Piece], budget: int, position: str | float,
                  rng: random.Random) -> Collage:
    """The full recipe: fill to the budget from shuffled others, then place the relevant piece."""
    return place(gold, fill(gold, others, budget, rng), depth_of(position))


def render(collage: Collage, wrap: str = "<section>\n{text}\n</section>") -> str:
    """The context text: each piece wrapped and separated by a blank line."""
    return SEPARATOR.join(wrap.format(text=p.text.strip("\n"), id=p.id) for p in collage.pieces)
