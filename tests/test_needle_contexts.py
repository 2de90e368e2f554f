"""Properties of the needle experiment's contexts, on any pair, depth, distractor count, shuffle and seed."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_longctx.experiments.needle.haystack import Design, build, filler
from pytest_longctx.experiments.needle.pairs import load_data, mentions

DATA = load_data()
SOURCE = filler()
LONGEST = max(len(s.split()) for s in SOURCE.sentences)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, len(DATA.pairs) - 1), st.integers(0, 100), st.sampled_from([0, 1, 4]), st.booleans(),
       st.integers(0, 2**32), st.integers(50, 3000))
def test_variants_and_absence_change_the_needle_sentence_only(index: int, depth: int, distractors: int,
                                                              shuffled: bool, seed: int, words: int) -> None:
    pair = DATA.pairs[index]

    def make(variant: str, answerable: bool = True):
        design = Design(pair, variant, depth, distractors, shuffled, answerable)
        return build(design, SOURCE, DATA.names, words, random.Random(seed))

    non, lit, gone = make("nonliteral"), make("literal"), make("nonliteral", False)
    needle, literal = pair.sentence("nonliteral", non.target), pair.sentence("literal", non.target)
    assert non.text.count(needle) == 1 and lit.text.count(literal) == 1 and needle not in gone.text
    assert non.text.replace(needle, literal) == lit.text
    assert gone.text in (non.text.replace(needle + " ", ""), non.text.replace(" " + needle, ""))
    assert len(set(non.distractor_names)) == distractors and non.target not in non.distractor_names
    assert sum(mentions(non.text, (n,)) for n in non.distractor_names) == distractors
    assert abs(non.depth - depth) <= 100 * LONGEST / max(non.words, 1) + 0.1  # within one sentence of the ask


def test_a_rendered_needle_prompt_for_a_fixed_seed(snapshot) -> None:  # type: ignore[no-untyped-def]
    """A change of the template, the filler, the pairs or the draws shows up as a reviewed snapshot diff
    (update with --snapshot-update)."""
    from pytest_longctx.experiments.needle.prompts import needle_request

    pair = DATA.pairs[0]
    context = build(Design(pair, "nonliteral", 50, 1), SOURCE, DATA.names, 120, random.Random(0))
    request = needle_request(context.text, pair.question)
    assert request.template == "needle-question@1"
    assert request.messages[0].content == snapshot
