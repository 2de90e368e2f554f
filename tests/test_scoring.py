"""Multiple-choice answer extraction: tags first, lenient for small models, None when unreadable."""

from __future__ import annotations

import pytest

from pytest_longctx.experiments.qa.scoring import extract_choice


@pytest.mark.parametrize(("text", "letter"), [
    ("<answer>B</answer>", "B"),
    ("<answer> (c) </answer>", "C"),
    ("<scratchpad>A. quote</scratchpad>\n<answer>D</answer>", "D"),
    ("<answer>A</answer> ... on reflection <answer>C</answer>", "C"),
    ("<answer>D", "D"),
    ("B. The Federal Aviation Administration", "B"),
    ("B", "B"),
    ("(A) because", "A"),
    ("**C**", "C"),
    ("The answer is D.", "D"),
    ("Answer: B", "B"),
    ("I pick option C", "C"),
])
def test_readable_answers(text: str, letter: str) -> None:
    assert extract_choice(text) == letter


@pytest.mark.parametrize("text", ["", "I am not sure.", "The answer is a good question", "A or B"])
def test_unreadable_answers_are_none(text: str) -> None:
    assert extract_choice(text) is None


def test_option_text_match_as_last_resort() -> None:
    options = ["Cast iron girders", "Concrete", "Oak timber", "Steel"]
    assert extract_choice("It was oak timber.", options) == "C"
    assert extract_choice("concrete or steel", options) is None
