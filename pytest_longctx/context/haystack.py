"""One haystack builder for every experiment: fill a token budget, place the gold unit at a depth or an index.

A context is a sequence of *units* (sections, documents, chunks: any text with a token count made once)
joined by a separator of ``separator`` tokens. The builder never tokenizes; every figure below is computed
from the units' counts.

Definitions (the only ones; experiments record these figures, not their own):

* **Size**: ``sum(u.tokens for u in units) + separator * (len(units) - 1)``.
* **Start** of the gold unit at index ``g``: the tokens before its first token,
  ``sum(u.tokens + separator for u in units[:g])``.
* **Haystack**: every token of the context outside the gold unit, ``size - gold.tokens`` (the fillers and all
  separators).
* **Depth**: the share of the haystack that comes before the gold unit, in percent:
  ``100 * start / (size - gold.tokens)`` (0 when the gold unit is alone). 0 = the gold unit first, 100 = last,
  50 = half of the other tokens before it, whatever the sizes of the units.

The gold unit can only start at a unit boundary, so :func:`at_depth` picks the boundary whose start is nearest
the requested depth's share of the haystack (ties: the earlier boundary). The achieved depth then misses the
request by at most half of the largest filler plus one separator, in tokens. :func:`place` puts the gold unit
at an *index* instead (``index`` fillers before it), for protocols that define positions by count.

A unit's count may include the separator that follows it (then pass ``separator=0``): starts and depths are
the same either way, and the size counts that one separator more than the joined text holds.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

#: Swaps :func:`fill` tries at most while topping a context up to within its tolerance.
MAX_SWAPS = 64


@dataclass(frozen=True)
class Unit:
    """One piece of a context: an id unique in its pool, its text, and its token count (made once)."""

    id: str
    text: str
    tokens: int


@dataclass(frozen=True)
class Haystack:
    """The units of one context in order, which one is gold, and the separator's tokens."""

    units: tuple[Unit, ...]
    gold_index: int
    separator: int = 0

    @property
    def gold(self) -> Unit:
        return self.units[self.gold_index]

    @property
    def fillers(self) -> tuple[Unit, ...]:
        """Every unit but the gold one, in context order."""
        return self.units[:self.gold_index] + self.units[self.gold_index + 1:]

    @property
    def tokens(self) -> int:
        """The size: all units plus the separators between them."""
        return sum(u.tokens for u in self.units) + self.separator * max(len(self.units) - 1, 0)

    @property
    def start(self) -> int:
        """Tokens before the gold unit's first token."""
        return sum(u.tokens + self.separator for u in self.units[:self.gold_index])

    @property
    def depth(self) -> float:
        """Share of the haystack (all tokens outside the gold unit) before the gold unit, in percent."""
        haystack = self.tokens - self.gold.tokens
        return 100.0 * self.start / haystack if haystack > 0 else 0.0

    def ids(self) -> list[str]:
        return [u.id for u in self.units]


def fill(gold: Unit, pool: Sequence[Unit], budget: int, *, separator: int = 0, rng: random.Random | None = None,
         within: int | None = None) -> list[Unit]:
    """Fillers for a context of at most ``budget`` tokens around ``gold`` (never over budget).

    The pool, less ``gold``, is shuffled with ``rng`` when one is given, then taken in order: each unit is kept
    while it still fits (one that does not is passed over; later, smaller ones may still fit). With ``within``,
    while the context is more than ``within`` tokens short of the budget, the one swap (a kept unit out, a
    larger passed-over one in) that closes most of the gap without going over is made, up to ``MAX_SWAPS``.

    Raises:
        ValueError: ``gold`` alone is over the budget.
    """
    if gold.tokens > budget:
        raise ValueError(f"gold unit {gold.id} has {gold.tokens} tokens, more than the budget {budget}")
    candidates = [u for u in pool if u.id != gold.id]
    if rng is not None:
        rng.shuffle(candidates)
    used = gold.tokens
    chosen: list[Unit] = []
    rest: list[Unit] = []
    for unit in candidates:
        if used + separator + unit.tokens <= budget:
            chosen.append(unit)
            used += separator + unit.tokens
        else:
            rest.append(unit)
    for _ in range(MAX_SWAPS if within is not None else 0):
        gap = budget - used
        if within is None or gap <= within or not rest:
            break
        best: tuple[int, int, int] | None = None
        for i, out in enumerate(chosen):
            for j, into in enumerate(rest):
                gain = into.tokens - out.tokens
                if 0 < gain <= gap and (best is None or gain > best[0]):
                    best = (gain, i, j)
        if best is None:
            break
        gain, i, j = best
        chosen[i], rest[j] = rest[j], chosen[i]
        used += gain
    return chosen


def starts(fillers: Sequence[Unit], separator: int = 0) -> list[int]:
    """The gold unit's start when placed before filler ``i``, for ``i = 0 .. len(fillers)``."""
    out = [0]
    for unit in fillers:
        out.append(out[-1] + unit.tokens + separator)
    return out


def nearest_index(fillers: Sequence[Unit], depth: float, separator: int = 0) -> int:
    """The boundary whose start is nearest ``depth`` percent of the haystack (ties: the earlier one).

    Raises:
        ValueError: ``depth`` is outside 0..100.
    """
    if not 0 <= depth <= 100:
        raise ValueError(f"depth must be between 0 and 100, got {depth!r}")
    bounds = starts(fillers, separator)
    target = bounds[-1] * depth / 100
    return min(range(len(bounds)), key=lambda i: (abs(bounds[i] - target), i))


def place(gold: Unit, fillers: Sequence[Unit], index: int, separator: int = 0) -> Haystack:
    """``gold`` after the first ``index`` fillers (0 = first, ``len(fillers)`` = last)."""
    if not 0 <= index <= len(fillers):
        raise ValueError(f"gold index {index} is outside 0..{len(fillers)}")
    return Haystack((*fillers[:index], gold, *fillers[index:]), index, separator)


def at_depth(gold: Unit, fillers: Sequence[Unit], depth: float, separator: int = 0) -> Haystack:
    """``gold`` at the boundary nearest ``depth`` percent of the haystack (see the module's definitions)."""
    return place(gold, fillers, nearest_index(fillers, depth, separator), separator)


def render(haystack: Haystack, separator: str, text: Callable[[Unit], str] | None = None) -> str:
    """The context text: each unit's ``text`` (default: the unit's own) joined by ``separator``."""
    return separator.join(text(u) if text is not None else u.text for u in haystack.units)
