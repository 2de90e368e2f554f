"""Deterministic scorers: SQuAD normalization, exact match, token F1, best-subspan match."""

from __future__ import annotations

import pytest

from pytest_longctx.experiments.docs.scorers import (
    exact_match,
    first_line,
    normalize_answer,
    score,
    subspan_match,
    token_f1,
)


def test_normalize_answer_is_squad_normalization() -> None:
    assert normalize_answer("  The Hollis  Trophy! ") == "hollis trophy"
    assert normalize_answer("A brass ship's bell.") == "brass ships bell"
    assert normalize_answer("1,500 litres") == "1500 litres"
    assert normalize_answer("“Old Maud”—") == "old maud"


def test_first_line_skips_blank_lines() -> None:
    assert first_line("\n\n  Old Maud \nbecause the text says so") == "Old Maud"
    assert first_line("") == ""


@pytest.mark.parametrize("prediction, gold, em, subspan", [
    ("Old Maud", "Old Maud", True, True),
    ("old maud.", "Old Maud", True, True),
    ("The starter is called Old Maud.", "Old Maud", False, True),
    ("Old Maud\nThe other starter is Young Jim", "Old Maud", True, True),
    ("It is not said.\nOld Maud", "Old Maud", False, False),  # only the first line counts
    ("120 minutes", "12", False, False),  # word-aligned: 12 does not match 120
    ("12 minutes", "12", False, True),
    ("", "12", False, False),
    ("1500 litres", "1,500 litres", True, True),
])
def test_exact_and_subspan(prediction: str, gold: str, em: bool, subspan: bool) -> None:
    assert exact_match(prediction, [gold]) is em
    assert subspan_match(prediction, [gold]) is subspan


def test_token_f1() -> None:
    assert token_f1("Josiah Penhallow", ["Josiah Penhallow"]) == 1.0
    assert token_f1("Arthur Penhallow", ["Josiah Penhallow"]) == 0.5
    # precision 2/5 ("miller josiah penhallow of cornwall"), recall 2/2
    assert token_f1("the miller Josiah Penhallow of Cornwall", ["Josiah Penhallow"]) == pytest.approx(2 * 0.4 / 1.4)
    assert token_f1("nothing", ["Josiah Penhallow"]) == 0.0
    assert token_f1("", [""]) == 1.0


def test_aliases_take_the_best_gold() -> None:
    assert subspan_match("about 1.5 thousand liters", ["1,500 litres", "1.5 thousand liters"])
    assert score("1500 L", ["1,500 litres", "1500 L"]).em


def test_scores_correct_per_scorer() -> None:
    s = score("The starter is Old Maud", ["Old Maud"])
    assert (s.correct("subspan"), s.correct("em"), s.correct("f1")) == (True, False, True)
    assert s.f1 == pytest.approx(0.6667, abs=1e-4)
