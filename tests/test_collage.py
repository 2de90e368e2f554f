"""The randomized collage: relevant section exactly once, at the requested token depth, within budget."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from pytest_longctx.context.haystack import Unit, at_depth
from pytest_longctx.corpus.tokens import TiktokenCounter
from pytest_longctx.experiments.qa.collage import build_collage, depth_of, render
from pytest_longctx.experiments.qa.experiment import QaData
from pytest_longctx.experiments.qa.federal_register import load_issue
from pytest_longctx.experiments.qa.questions import load_questions
from tests.corpus_data import QUESTIONS, assert_collages_within, assert_examples_in_context


def pieces(n: int, rng: random.Random) -> list[Unit]:
    return [Unit(f"p{i:03d}", f"text {i}", rng.randint(50, 500)) for i in range(n)]


@pytest.mark.parametrize("seed", range(30))
@pytest.mark.parametrize("position", ["beginning", "middle", "end", 0, 25, 50, 75, 100])
def test_gold_once_within_budget_at_depth(seed: int, position: str | int) -> None:
    rng = random.Random(seed)
    all_pieces = pieces(60, rng)
    gold, others = all_pieces[0], all_pieces[1:]
    budget = rng.randint(1500, 8000)
    collage = build_collage(gold, others, budget, position, random.Random(seed))
    assert collage.ids().count(gold.id) == 1
    assert collage.tokens <= budget
    assert collage.tokens == sum(p.tokens for p in collage.units)
    fillers = [p for p in collage.units if p.id != gold.id]
    target = depth_of(position) / 100 * sum(p.tokens for p in fillers)
    # within one section's granularity of the requested depth
    assert abs(collage.start - target) <= max(p.tokens for p in fillers)
    if depth_of(position) == 0:
        assert collage.gold_index == 0
    if depth_of(position) == 100:
        assert collage.gold_index == len(collage.units) - 1


def test_middle_is_token_depth_not_chunk_index() -> None:
    big = [Unit(f"b{i}", "x", 1000) for i in range(3)]
    small = [Unit(f"s{i}", "x", 10) for i in range(30)]
    gold = Unit("gold", "g", 100)
    collage = at_depth(gold, big + small, 50)
    # the fillers hold 3300 tokens; the middle is at 1650, i.e. after the second big section
    assert collage.start in (1000, 2000)
    assert collage.gold_index in (1, 2)


def test_budget_smaller_than_gold_is_an_error() -> None:
    with pytest.raises(ValueError, match="more than the budget"):
        build_collage(Unit("g", "x", 900), [], 500, "middle", random.Random(0))


def test_same_seed_same_collage() -> None:
    ps = pieces(40, random.Random(1))
    a = build_collage(ps[0], ps[1:], 4000, 50, random.Random(7))
    b = build_collage(ps[0], ps[1:], 4000, 50, random.Random(7))
    assert a == b


@pytest.fixture(scope="module")
def qa(tmp_path_factory: pytest.TempPathFactory, fr_xml: Path) -> QaData:
    counter = TiktokenCounter()
    tmp = tmp_path_factory.mktemp("qa")
    issue = load_issue(fr_xml, "2024-02-12", counter, tmp)
    return QaData.load(issue, load_questions(QUESTIONS), counter.count, counter.name, tmp, 0, "fake/perfect")


@pytest.mark.parametrize("budget", [2000, 8000, 32000])
def test_real_context_token_count_stays_within_budget(qa: QaData, budget: int) -> None:
    assert_collages_within(qa, budget)


def test_context_examples_come_from_sections_in_the_context(qa: QaData) -> None:
    assert_examples_in_context(qa, 8000, 5)


def test_render_separates_sections_clearly() -> None:
    ps = [Unit("a", "alpha", 5), Unit("b", "beta", 5)]
    collage = build_collage(ps[0], ps[1:], 100, "end", random.Random(0))
    assert render(collage) == "<section>\nbeta\n</section>\n\n<section>\nalpha\n</section>"
