"""The core haystack builder: never over budget, gold exactly once, depth within one unit, same seed same context."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_longctx.context.haystack import Haystack, Unit, at_depth, fill, nearest_index, place, render, starts

sizes = st.lists(st.integers(min_value=1, max_value=800), min_size=0, max_size=40)
separators = st.integers(min_value=0, max_value=5)
depths = st.one_of(st.sampled_from([0, 25, 50, 75, 100]), st.floats(min_value=0, max_value=100))


def units(tokens: list[int]) -> list[Unit]:
    return [Unit(f"u{i}", f"text {i}", n) for i, n in enumerate(tokens)]


def used(gold: Unit, chosen: list[Unit], sep: int) -> int:
    return gold.tokens + sum(sep + u.tokens for u in chosen)


@settings(max_examples=300, deadline=None)
@given(sizes=sizes, gold=st.integers(1, 800), sep=separators, budget=st.integers(1, 20_000), seed=st.integers(0, 99),
       within=st.one_of(st.none(), st.integers(0, 500)))
def test_fill_never_exceeds_the_budget(sizes: list[int], gold: int, sep: int, budget: int, seed: int,
                                       within: int | None) -> None:
    g = Unit("gold", "g", gold)
    if gold > budget:
        with pytest.raises(ValueError, match="more than the budget"):
            fill(g, units(sizes), budget, separator=sep)
        return
    chosen = fill(g, units(sizes), budget, separator=sep, rng=random.Random(seed), within=within)
    assert used(g, chosen, sep) <= budget
    assert len({u.id for u in chosen}) == len(chosen) and "gold" not in {u.id for u in chosen}
    assert place(g, chosen, 0, sep).tokens == used(g, chosen, sep)
    if within is None:  # first fit: whatever was passed over still does not fit
        assert all(used(g, chosen, sep) + sep + u.tokens > budget for u in units(sizes) if u not in chosen)


@settings(max_examples=300, deadline=None)
@given(sizes=sizes, gold=st.integers(1, 800), sep=separators, depth=depths)
def test_gold_once_at_the_nearest_boundary(sizes: list[int], gold: int, sep: int, depth: float) -> None:
    fillers = units(sizes)
    stack = at_depth(Unit("gold", "g", gold), fillers, depth, sep)
    assert stack.ids().count("gold") == 1 and len(stack.units) == len(fillers) + 1
    assert list(stack.fillers) == fillers  # fillers keep their order
    bounds = starts(fillers, sep)
    target = bounds[-1] * depth / 100
    assert stack.start == bounds[stack.gold_index]
    assert abs(stack.start - target) == min(abs(b - target) for b in bounds)
    # within one unit: at most half of the largest filler plus a separator from the requested depth
    assert abs(stack.start - target) <= (max(sizes, default=0) + sep) / 2
    haystack = stack.tokens - gold
    assert haystack == bounds[-1]
    assert stack.depth == (100.0 * stack.start / haystack if haystack else 0.0)
    if depth == 0 or not fillers:
        assert stack.gold_index == 0
    if depth == 100:
        assert stack.gold_index == len(fillers)


@settings(max_examples=200, deadline=None)
@given(sizes=st.lists(st.integers(1, 800), min_size=1, max_size=40), gold=st.integers(1, 800),
       sep=st.integers(1, 5), depth=depths)
def test_a_separator_folded_into_each_unit_gives_the_same_depth(sizes: list[int], gold: int, sep: int,
                                                                 depth: float) -> None:
    """Counting each unit with the separator after it (``separator=0``) moves no boundary: same starts and
    depth; only the size counts one separator more than the text holds."""
    exact = at_depth(Unit("gold", "g", gold), units(sizes), depth, sep)
    folded = at_depth(Unit("gold", "g", gold + sep), [Unit(u.id, u.text, u.tokens + sep) for u in units(sizes)],
                      depth, 0)
    assert (folded.gold_index, folded.start, folded.depth) == (exact.gold_index, exact.start, exact.depth)
    assert folded.tokens == exact.tokens + sep


@given(seed=st.integers(0, 10_000))
def test_same_seed_same_context(seed: int) -> None:
    pool = units([random.Random(i).randint(20, 400) for i in range(60)])
    gold = Unit("gold", "g", 150)

    def build(s: int) -> Haystack:
        return at_depth(gold, fill(gold, pool, 5000, separator=1, rng=random.Random(s), within=100), 50, 1)

    assert build(seed) == build(seed)


def test_another_seed_draws_other_fillers() -> None:
    pool = units([random.Random(i).randint(20, 400) for i in range(60)])
    gold = Unit("gold", "g", 150)
    drawn = {tuple(u.id for u in fill(gold, pool, 5000, rng=random.Random(s))) for s in range(10)}
    assert len(drawn) == 10


def test_depth_is_a_share_of_the_tokens_outside_the_gold_unit() -> None:
    # 100 + 300 tokens of fillers, separators of 2: the haystack holds 100 + 300 + 2 * 2 = 404 tokens
    stack = place(Unit("g", "gold", 50), units([100, 300]), 1, separator=2)
    assert stack.ids() == ["u0", "g", "u1"]
    assert stack.tokens == 100 + 2 + 50 + 2 + 300
    assert stack.start == 102
    assert stack.depth == pytest.approx(100 * 102 / 404)
    assert place(Unit("g", "gold", 50), units([100, 300]), 2, separator=2).depth == 100.0
    assert place(Unit("g", "gold", 50), [], 0, separator=2).depth == 0.0


def test_ties_go_to_the_earlier_boundary() -> None:
    assert nearest_index(units([10, 10]), 25) == 0  # target 5: boundaries 0 and 10 are equally near
    assert nearest_index(units([10, 10]), 75) == 1


def test_top_up_swaps_to_within_the_tolerance() -> None:
    pool = [Unit("a", "", 60), Unit("b", "", 60), Unit("c", "", 75)]
    gold = Unit("g", "", 10)
    assert [u.id for u in fill(gold, pool, 150)] == ["a", "b"]  # 130 of 150: c (75) does not fit
    swapped = fill(gold, pool, 150, within=5)
    assert [u.id for u in swapped] == ["c", "b"]  # a out, c in: 145, within 5 of the budget
    assert fill(gold, pool, 150, within=20) == fill(gold, pool, 150)  # already within 20


def test_bad_depth_and_index_are_errors() -> None:
    with pytest.raises(ValueError, match="between 0 and 100"):
        at_depth(Unit("g", "", 1), units([5]), 101)
    with pytest.raises(ValueError, match=r"outside 0\.\.1"):
        place(Unit("g", "", 1), units([5]), 2)


def test_render_joins_each_units_text() -> None:
    stack = place(Unit("g", "gold", 1), units([1, 1]), 1)
    assert render(stack, " | ") == "text 0 | gold | text 1"
    assert render(stack, "\n", lambda u: u.id) == "u0\ng\nu1"
