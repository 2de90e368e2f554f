"""Whole-document contexts: the answer document once, at the requested token depth or size."""

from __future__ import annotations

import random

import pytest

from pytest_longctx.context.haystack import Unit, fill, starts
from pytest_longctx.experiments.docs.haystack import SEPARATOR, at_depth, of_size, render, render_block

SIZES = [120, 340, 90, 410, 250, 60, 180, 300, 75, 220]
UNITS = {f"d{i}.md": Unit(f"d{i}.md", render_block(f"d{i}.md", f"text of d{i}.md"), n) for i, n in enumerate(SIZES)}
SEP = 2


def pool(answer: str, seed: int) -> list[Unit]:
    names = sorted(n for n in UNITS if n != answer)
    random.Random(seed).shuffle(names)
    return [UNITS[n] for n in names]


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("depth", [0, 25, 50, 75, 100])
def test_answer_once_at_the_nearest_boundary(depth: int, seed: int) -> None:
    answer = f"d{seed % len(SIZES)}.md"
    stack = at_depth(UNITS[answer], pool(answer, seed), SEP, budget=10_000, depth=depth)
    assert stack.docs.count(answer) == 1 and len(set(stack.docs)) == len(stack.docs)
    assert stack.answer_doc == answer
    distractors = list(stack.fillers)
    bounds = starts(distractors, SEP)
    target = depth / 100 * bounds[-1]
    # Within one document's granularity: no boundary is nearer, and the miss is at most half a document.
    assert abs(stack.start - target) == min(abs(s - target) for s in bounds)
    assert abs(stack.start - target) <= max(d.tokens for d in distractors) / 2 + SEP
    assert abs(stack.depth - depth) <= 100 * (max(SIZES) / 2 + SEP) / bounds[-1]
    if depth in (0, 100):
        assert stack.depth == depth
    assert stack.tokens == sum(UNITS[d].tokens for d in stack.docs) + SEP * (len(stack.docs) - 1)
    assert stack.detail() == {"answer_doc": answer, "depth_actual": round(stack.depth, 2),
                              "context_tokens": stack.tokens, "n_docs": len(SIZES), "answer_position":
                              stack.gold_index}


def test_rendered_context_holds_the_answer_block_exactly_once() -> None:
    stack = at_depth(UNITS["d3.md"], pool("d3.md", 1), SEP, budget=10_000, depth=50)
    text = render(stack)
    assert text.count(UNITS["d3.md"].text) == 1
    assert text.split(SEPARATOR)[stack.gold_index] == UNITS["d3.md"].text


def test_fill_respects_the_budget_and_skips_what_does_not_fit() -> None:
    order = [UNITS[n] for n in ("d3.md", "d1.md", "d5.md", "d2.md")]
    chosen = fill(UNITS["d0.md"], order, 120 + 2 + 340 + 2 + 60, separator=SEP)
    assert [u.id for u in chosen] == ["d1.md", "d5.md"]  # d3 (410) never fits; d2 (90) no longer fits
    stack = at_depth(UNITS["d0.md"], pool("d0.md", 3), SEP, budget=700, depth=50)
    assert stack.tokens <= 700


@pytest.mark.parametrize("fraction", [0, 25, 50, 75, 100])
def test_of_size_grows_from_the_answer_alone(fraction: int) -> None:
    whole = sum(SIZES) + SEP * (len(SIZES) - 1)
    stack = of_size(UNITS["d4.md"], pool("d4.md", 0), SEP, round(fraction / 100 * whole), random.Random(fraction))
    assert stack.docs.count("d4.md") == 1
    assert stack.detail()["target_tokens"] == round(fraction / 100 * whole)
    if fraction == 0:
        assert stack.docs == ("d4.md",) and stack.depth == 0.0
    else:
        assert stack.tokens <= max(fraction / 100 * whole, UNITS["d4.md"].tokens)
    if fraction == 100:
        assert stack.tokens == whole
