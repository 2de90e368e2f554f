"""Counting long texts in remembered pieces gives exactly tiktoken's count of the whole text.

The counter cuts a text after every blank line that a non-space character follows and sums the pieces' counts
(``corpus/tokens.py`` says why no pre-token of cl100k_base crosses such a cut). Checked here against full
encodings: on generated texts made of the characters that matter at a cut, and on every context a small qa plan
builds from the real corpus, under both protocols.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_longctx.corpus import tokens
from pytest_longctx.corpus.tokens import TiktokenCounter, pieces

#: Characters and runs that decide where cl100k_base's pre-tokens end: newlines and other spaces (Unicode ones
#: too, and the separators Python calls spaces but the pattern does not), letters, digits, punctuation,
#: contractions, a special token's text.
ATOMS = ["\n", "\n\n", "\n\n\n\n", "\r\n", "\r", " ", "  ", "\t", "\f", "\v", "\x85", "\xa0", "\u2028", "\u3000",
         "\x1c", "\x1f", "a", "Bc", "é", "日本", "😀", "1", "234", "5678", ".", "]", ">", "</section>", "'s", "'",
         "'LL", "-", "—", "<|endoftext|>"]


def full_count(text: str) -> int:
    return len(TiktokenCounter().encode(text))


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(ATOMS), max_size=60))
def test_pieces_sum_to_the_full_encoding(atoms: list[str]) -> None:
    text = "".join(atoms)
    assert "".join(pieces(text)) == text
    counter = TiktokenCounter()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tokens, "PIECEWISE_FROM", 0)  # cut even short texts
        assert counter.count(text) == full_count(text)
        assert counter.count(text) == full_count(text)  # again, from remembered pieces


def test_a_cut_falls_after_a_blank_line_before_a_non_space() -> None:
    assert list(pieces("a\n\nb\n\n c\n\n\n\nd")) == ["a\n\n", "b\n\n c\n\n\n\n", "d"]
    assert list(pieces("no blank line")) == ["no blank line"]


def test_remembered_pieces_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tokens, "PIECEWISE_FROM", 0)
    monkeypatch.setattr(tokens, "MEMO_CHARS", 100)
    counter = TiktokenCounter()
    rng = random.Random(0)
    for _ in range(50):
        text = "\n\n".join(f"paragraph {rng.random()} " * 3 for _ in range(5))
        assert counter.count(text) == full_count(text)
        assert counter._memo_chars <= 100


@pytest.fixture(scope="module")
def qa_data(fr_xml: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    from pytest_longctx.experiments.qa.experiment import QaData
    from pytest_longctx.experiments.qa.federal_register import load_issue
    from pytest_longctx.experiments.qa.questions import load_questions
    from tests.corpus_data import FR_DATE, QUESTIONS

    cache = tmp_path_factory.mktemp("cache")
    counter = TiktokenCounter()
    issue = load_issue(fr_xml, FR_DATE, counter, cache / "corpora")
    questions = load_questions(QUESTIONS)
    return {protocol: QaData.load(issue, questions, counter.count, counter.name, cache, 0, "fake/perfect",
                                  use_baseline=False, protocol=protocol) for protocol in ("source", "longctx")}


@pytest.mark.parametrize("protocol", ["source", "longctx"])
def test_every_context_of_a_plan_counts_as_its_full_encoding(qa_data: dict[str, object], protocol: str) -> None:
    """The contexts of ``--longctx-samples 4`` at the source study's sizes (both protocols), counted from pieces
    by one counter (so later contexts reuse earlier ones' pieces), each equal to its full encoding."""
    from pytest_longctx.experiments.qa.experiment import QaData

    qa = qa_data[protocol]
    assert isinstance(qa, QaData)
    counter = TiktokenCounter()
    checked = 0
    for sample, question in enumerate(qa.pool[:4]):
        for budget in (70_000, 95_000):
            for position in ("beginning", "middle", "end"):
                text = qa.render(qa.collage(question, budget, position, random.Random(f"{sample}|{position}")))
                assert counter.count(text) == full_count(text)
                checked += 1
    assert checked == 24 and counter._pieces  # pieces were remembered and reused
