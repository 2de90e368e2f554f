"""The needle experiment's data, overlap, contexts, scoring and server grader, on plain values."""

from __future__ import annotations

import random
import re

import pytest

from pytest_longctx.experiments.needle.__main__ import main
from pytest_longctx.experiments.needle.grader import make_grader
from pytest_longctx.experiments.needle.haystack import Design, build, filler
from pytest_longctx.experiments.needle.overlap import Bm25, content_words, overlaps, stem
from pytest_longctx.experiments.needle.pairs import load_data, mentions
from pytest_longctx.experiments.needle.prompts import ABSTAIN, needle_request, score
from pytest_longctx.server.graded import Graded

DATA = load_data()
GRADER = "pytest_longctx.experiments.needle.grader:make_grader"


def test_at_least_100_pairs_with_unique_ids_and_questions() -> None:
    assert len(DATA.pairs) >= 100
    assert len({p.id for p in DATA.pairs}) == len(DATA.pairs)
    assert len({p.question for p in DATA.pairs}) == len(DATA.pairs)  # the grader finds a pair by its question
    assert len(set(DATA.names)) == len(DATA.names) >= 20


def test_literal_controls_name_the_key_and_needles_do_not() -> None:
    for pair in DATA.pairs:
        assert mentions(pair.literal, (pair.key,)), pair.id
        assert not mentions(pair.needle, (pair.key,)), pair.id
        assert set(content_words(pair.key)) <= set(content_words(pair.hop)), pair.id  # the hop names the key


def test_non_literal_needles_share_no_content_word_with_their_question_and_literal_ones_do() -> None:
    found = overlaps(DATA.pairs)
    non = [o for o in found if o.variant == "nonliteral"]
    lit = [o for o in found if o.variant == "literal"]
    assert all(not o.shared and o.bm25 == 0 for o in non)
    assert all(o.shared and o.bm25 > 0 for o in lit)


def test_overlap_measures_on_known_values() -> None:
    assert stem("sculptures") == "sculptur" and stem("has") == "has" and stem("played") == "play"
    assert content_words("Which character has been to Dresden?") == ["dresden"]
    bm = Bm25(["the cat sat", "a dog ran", "cats and dogs"])
    assert bm.score("cat", "the cat sat") > 0 and bm.score("cat", "a dog ran") == 0


def test_overlap_command_prints_every_pair(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["overlap"]) == 0
    out = capsys.readouterr().out
    assert len(re.findall(r"^\S+-\d{3}\s+(nonliteral|literal)\s", out, re.M)) == 2 * len(DATA.pairs)
    assert f"nonliteral: {len(DATA.pairs)} pairs, mean shared content words 0.00, none shared 100%" in out


def test_overlap_command_bad_folder_is_one_line(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["overlap", "--data", str(tmp_path)]) == 4
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pairs.jsonl" in err


def test_filler_names_no_character_of_the_pool() -> None:
    assert not any(mentions(s, DATA.names) for s in filler().sentences)
    assert sum(len(s.split()) for s in filler().sentences) > 2500


def _context(pair_index: int, variant: str = "nonliteral", **kw: object):
    pair = DATA.pairs[pair_index]
    return pair, build(Design(pair, variant, **kw), filler(), DATA.names, 600, random.Random(7))


def test_variants_and_the_removed_needle_share_one_context() -> None:
    pair, non = _context(3, depth=50, distractors=1)
    _, lit = _context(3, "literal", depth=50, distractors=1)
    _, gone = _context(3, depth=50, distractors=1, answerable=False)
    assert non.target == lit.target == gone.target and non.distractor_names == gone.distractor_names
    assert non.text.replace(pair.sentence("nonliteral", non.target), pair.sentence("literal", lit.target)) == lit.text
    assert pair.sentence("nonliteral", non.target) not in gone.text and gone.needle_at is None


@pytest.mark.parametrize("depth", [0, 50, 100])
def test_the_needle_sits_at_its_depth(depth: int) -> None:
    pair, context = _context(10, depth=depth)
    assert abs(context.depth - depth) < 5
    words_before = len(context.text.split(pair.sentence("nonliteral", context.target))[0].split())
    assert abs(100 * words_before / context.words - depth) < 5


def test_shuffled_haystack_holds_the_same_sentences() -> None:
    _, coherent = _context(5, depth=50)
    _, shuffled = _context(5, depth=50, shuffled=True)
    assert coherent.text != shuffled.text and sorted(coherent.text.split()) == sorted(shuffled.text.split())


def test_scoring_reads_names_and_abstentions() -> None:
    names = DATA.names
    assert score("Yuki", names, "Yuki", (), True)["correct"]
    found = score("I think it is Oskar.", names, "Yuki", ("Oskar",), True)
    assert found["answer_kind"] == "distractor" and found["distractor_index"] == 0 and not found["correct"]
    assert score(ABSTAIN, names, "Yuki", (), False) == {"answer_name": None, "answer_kind": "abstained",
                                                        "correct": True}
    assert score("The text doesn't say.", names, "Yuki", (), False)["correct"]
    assert score("Amara", names, "Yuki", (), False)["answer_kind"] == "other-name"
    assert not score("Dresden", names, "Yuki", (), True)["correct"]


def _prompt(pair_index: int, **kw: object) -> tuple[str, object]:
    pair, context = _context(pair_index, **kw)
    return needle_request(context.text, pair.question).messages[0].content, context


def test_grader_reads_the_right_and_a_wrong_answer_from_the_prompt() -> None:
    grade = make_grader()
    prompt, context = _prompt(0, depth=50)
    found = grade(prompt)
    assert found["item"] == DATA.pairs[0].id and found["right"] == context.target
    assert found["wrong"] in DATA.names and found["wrong"] != context.target
    prompt, context = _prompt(0, depth=50, distractors=4)
    assert grade(prompt)["wrong"] in context.distractor_names
    prompt, _ = _prompt(0, depth=50, answerable=False)
    assert grade(prompt)["right"] == ABSTAIN
    assert grade("Question: unrelated") is None


def test_graded_model_answers_needle_prompts_at_its_accuracy_without_a_server_regex() -> None:
    graded = Graded("accuracy=0.7,seed=3,rho=0", graders=[GRADER])
    right = 0
    for i in range(100):
        prompt, context = _prompt(i, depth=50, distractors=1, answerable=i % 2 == 0)
        body = {"model": "m", "messages": [{"role": "user", "content": prompt}]}
        verdict = graded.verdict(body)
        reply = graded(body)
        answerable = i % 2 == 0
        assert verdict.experiment == "needle" and verdict.item == DATA.pairs[i].id
        assert score(reply, DATA.names, context.target, context.distractor_names, answerable)["correct"] == \
            verdict.right
        if not verdict.right:
            assert reply in context.distractor_names  # the miss named the distractor
        right += verdict.right
    assert 55 <= right <= 85  # 0.7 of 100, within about 3 standard deviations


def test_installed_plugins_hand_the_server_their_graders() -> None:
    from pytest_longctx.server.graders import discover

    assert GRADER in discover()


def test_a_bad_grader_name_is_one_line() -> None:
    with pytest.raises(ValueError, match=r"grader 'no_such\.module:f' cannot be loaded"):
        Graded("accuracy=0.5,grader=no_such.module:f", graders=[])


def test_leaving_out_sentences_by_word_sets_matches_the_whole_word_search() -> None:
    from pytest_longctx.experiments.needle.haystack import Source

    source = Source.of("t", ["We met in New York.", "Newark is not it.", "Yuki came.", "The yukis were odd.",
                             "A quiet day by the river."])
    for avoid in (("New York", "Yuki"), ("river",), ("St. Louis", "york")):
        assert source.without(avoid) == [s for s in source.sentences if not mentions(s, avoid)]


def test_a_grader_factory_that_takes_an_argument_reads_the_spec_settings(tmp_path, monkeypatch) -> None:
    (tmp_path / "mygrader.py").write_text(
        "def make(settings):\n"
        "    def grade(prompt):\n"
        "        if not prompt.startswith('MINE'):\n"
        "            return None\n"
        "        return {'experiment': 'mine', 'item': 'x', 'right': settings['seed'], 'wrong': 'no'}\n"
        "    return grade\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    graded = Graded("accuracy=1,seed=42,grader=mygrader:make", graders=[])
    body = {"model": "m", "messages": [{"role": "user", "content": "MINE: what?"}]}
    assert graded.verdict(body).experiment == "mine" and graded(body) == "42"
