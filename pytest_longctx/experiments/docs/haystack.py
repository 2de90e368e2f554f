"""Contexts of whole documents: the answer document once, among distractor documents.

Built with the core haystack builder (:mod:`pytest_longctx.context.haystack`, which defines size, start and
depth): each document is one unit, its rendered block counted once per session, and blocks are joined by a
blank line whose tokens count between them. The answer document can only sit at a document boundary, so
the achieved depth is the boundary nearest the requested one: off by at most half of the largest
distractor block plus a separator, in tokens.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from pytest_longctx.context import haystack
from pytest_longctx.context.haystack import Haystack, Unit

SEPARATOR = "\n\n"


def render_block(name: str, text: str) -> str:
    """A document as it appears in a context (position-free, so its token count is fixed)."""
    return f"[Document: {name}]\n{text}"


@dataclass(frozen=True)
class Stack(Haystack):
    """A context of documents (unit ids are document names), and the size asked for, when there was one."""

    target: int | None = None

    @property
    def docs(self) -> tuple[str, ...]:
        return tuple(u.id for u in self.units)

    @property
    def answer_doc(self) -> str:
        return self.gold.id

    def detail(self) -> dict[str, object]:
        """What a trial records about its context."""
        out: dict[str, object] = {"answer_doc": self.answer_doc, "depth_actual": round(self.depth, 2),
                                  "context_tokens": self.tokens, "n_docs": len(self.units),
                                  "answer_position": self.gold_index}
        if self.target is not None:
            out["target_tokens"] = self.target
        return out


def _stack(built: Haystack, target: int | None = None) -> Stack:
    return Stack(built.units, built.gold_index, built.separator, target)


def at_depth(answer: Unit, pool: Sequence[Unit], sep: int, budget: int, depth: float,
             reorder: random.Random | None = None) -> Stack:
    """Distractors taken from ``pool`` in order while they fit beside the answer in ``budget`` (then shuffled
    with ``reorder``, if given), the answer at the boundary nearest ``depth`` percent."""
    distractors = haystack.fill(answer, pool, budget, separator=sep)
    if reorder is not None:
        reorder.shuffle(distractors)
    return _stack(haystack.at_depth(answer, distractors, depth, sep))


def of_size(answer: Unit, pool: Sequence[Unit], sep: int, target: int, rng: random.Random) -> Stack:
    """The answer alone, plus distractors up to ``target`` tokens; the answer at a random boundary.

    A target smaller than the answer document gives the answer document alone.
    """
    distractors = haystack.fill(answer, pool, max(target, answer.tokens), separator=sep)
    return _stack(haystack.place(answer, distractors, rng.randrange(len(distractors) + 1), sep), target)


def render(stack: Haystack) -> str:
    """The context text: each document's block, in order, separated by blank lines."""
    return haystack.render(stack, SEPARATOR)
