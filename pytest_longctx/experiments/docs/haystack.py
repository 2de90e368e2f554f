"""Contexts of whole documents: the answer document once, among distractor documents.

Sizes and depths are measured in tokens from per-document counts made once per session (a
document's rendered block, plus one separator between blocks). The answer document can only sit
at a document boundary, so the achieved depth is the boundary nearest the requested token depth:
off by at most half of the largest distractor block (plus a separator).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

SEPARATOR = "\n\n"


def render_block(name: str, text: str) -> str:
    """A document as it appears in a context (position-free, so its token count is fixed)."""
    return f"[Document: {name}]\n{text}"


@dataclass(frozen=True)
class Haystack:
    """The documents of one context, in order, and where the answer document sits."""

    docs: tuple[str, ...]
    answer_index: int
    tokens: int
    answer_start: int
    answer_tokens: int
    #: The size asked for (context-size experiment), when there was one.
    target: int | None = None

    @property
    def answer_doc(self) -> str:
        return self.docs[self.answer_index]

    @property
    def depth(self) -> float:
        """Tokens before the answer document as % of all tokens not in it (0 = first, 100 = last)."""
        rest = self.tokens - self.answer_tokens
        return round(100 * self.answer_start / rest, 2) if rest > 0 else 0.0

    def detail(self) -> dict[str, object]:
        out: dict[str, object] = {"answer_doc": self.answer_doc, "depth_actual": self.depth,
                                  "context_tokens": self.tokens, "n_docs": len(self.docs),
                                  "answer_position": self.answer_index}
        if self.target is not None:
            out["target_tokens"] = self.target
        return out


def fill(answer: str, pool: Sequence[str], counts: Mapping[str, int], budget: int, sep: int) -> list[str]:
    """Distractors taken from ``pool`` in order while they fit beside the answer in ``budget`` tokens.

    A distractor that does not fit is passed over and later, smaller ones may still fit.
    """
    total = counts[answer]
    chosen: list[str] = []
    for name in pool:
        if name != answer and total + sep + counts[name] <= budget:
            chosen.append(name)
            total += sep + counts[name]
    return chosen


def boundary_starts(distractors: Sequence[str], counts: Mapping[str, int], sep: int) -> list[int]:
    """Tokens before the answer document when it is inserted before distractor i (i = 0..n)."""
    starts = [0]
    for name in distractors:
        starts.append(starts[-1] + counts[name] + sep)
    return starts


def place(answer: str, distractors: Sequence[str], counts: Mapping[str, int], sep: int, index: int) -> Haystack:
    """Insert the answer document before distractor ``index`` (``len(distractors)`` = last)."""
    order = (*distractors[:index], answer, *distractors[index:])
    tokens = sum(counts[name] for name in order) + sep * (len(order) - 1)
    return Haystack(docs=order, answer_index=index, tokens=tokens,
                    answer_start=boundary_starts(distractors, counts, sep)[index], answer_tokens=counts[answer])


def nearest_boundary(distractors: Sequence[str], counts: Mapping[str, int], sep: int, depth: float) -> int:
    """The boundary whose token depth is nearest ``depth`` percent (ties: the earlier one)."""
    starts = boundary_starts(distractors, counts, sep)
    target = depth / 100 * starts[-1]
    return min(range(len(starts)), key=lambda i: (abs(starts[i] - target), i))


def at_depth(answer: str, pool: Sequence[str], counts: Mapping[str, int], sep: int, budget: int,
             depth: float, reorder: random.Random | None = None) -> Haystack:
    """Fill ``budget`` with distractors from ``pool`` (then shuffled with ``reorder``, if given) and put the
    answer at ``depth`` percent."""
    distractors = fill(answer, pool, counts, budget, sep)
    if reorder is not None:
        reorder.shuffle(distractors)
    return place(answer, distractors, counts, sep, nearest_boundary(distractors, counts, sep, depth))


def of_size(answer: str, pool: Sequence[str], counts: Mapping[str, int], sep: int, target: int,
            rng: random.Random) -> Haystack:
    """The answer alone, plus distractors up to ``target`` tokens; the answer at a random boundary.

    A target smaller than the answer document gives the answer document alone.
    """
    distractors = fill(answer, pool, counts, max(target, counts[answer]), sep)
    return replace(place(answer, distractors, counts, sep, rng.randrange(len(distractors) + 1)), target=target)


def render(haystack: Haystack, blocks: Mapping[str, str]) -> str:
    """The context text: each document's block, in order, separated by blank lines."""
    return SEPARATOR.join(blocks[name] for name in haystack.docs)
