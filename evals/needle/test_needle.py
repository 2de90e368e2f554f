"""Non-literal needles (after NoLiMa), distractors and coherence (after Context Rot), and abstention.

Method: a character's name is stated by one needle sentence inside a haystack of prose; the question names the
needle's fact only through one hop of common knowledge (non-literal: "lives next to the Semperoper" / "has been to
Dresden?") or in its own words (literal control). The answer is the name, or, where the needle was removed, the
fixed abstention phrase. Pairs, names and distractors: fixtures/needle (written for this project, SOURCE.md);
haystack: the Federal Register issue when present, else the shipped filler. See pytest_longctx/experiments/needle/.
"""

from __future__ import annotations

import pytest

from pytest_longctx.experiments.needle.conditions import item_index
from pytest_longctx.experiments.needle.haystack import Design, context_seed, fill
from pytest_longctx.experiments.needle.prompts import ABSTAIN, needle_request, overhead, score

pytestmark = pytest.mark.longctx("needle")


async def _ask(longctx, data, source, pair, design, tokens, seed) -> None:
    """Build the context, ask, score; the record says what was answered and where everything sat."""
    over = overhead(longctx.count_tokens, pair.question)
    context, hay_tokens = fill(design, source, data.names, seed, tokens, longctx.count_tokens, over)
    request = needle_request(context.text, pair.question)
    expected = context.target if design.answerable else ABSTAIN
    longctx.record(item=pair.id, template=request.template)
    wrong = context.distractor_names or tuple(n for n in data.names[:3] if n != context.target)
    longctx.expect(expected, wrong=wrong)
    answer = await longctx.ask(request)
    scored = score(answer, data.names, context.target, context.distractor_names, design.answerable)
    kinds = dict(zip(context.distractor_names, context.distractor_kinds, strict=True))
    longctx.record(expected=expected, answer=scored["answer_name"] or answer.strip()[:80],
                   context_tokens=hay_tokens + over, depth_achieved=context.depth, haystack_source=context.source,
                   distractor_names=list(context.distractor_names), answer_kind=scored["answer_kind"],
                   answered_distractor=kinds.get(str(scored["answer_name"])), category=pair.category,
                   answerable=design.answerable)
    assert scored["correct"], f"{pair.id}: expected {expected}, answered {answer.strip()[:80]!r}"


async def test_needle_length(longctx, study, needle_data, needle_source, needle_order, needle_plan,
                             needle_samples, variant, tokens, depth) -> None:
    block = needle_plan.depths.index(depth)
    pair = needle_order[item_index(longctx.sample, block, needle_samples, len(needle_order))]
    seed = context_seed(longctx.run_seed, "length", pair.id, tokens, depth)
    await _ask(longctx, needle_data, needle_source, pair, Design(pair, variant, depth), tokens, seed)


async def test_needle_distractors(longctx, study, needle_data, needle_source, needle_order, needle_plan,
                                  distractors, haystack) -> None:
    pair = needle_order[item_index(longctx.sample, 0, 0, len(needle_order))]
    tokens = needle_plan.distractor_length
    seed = context_seed(longctx.run_seed, "distractors", pair.id, tokens, distractors, haystack)
    design = Design(pair, "nonliteral", 50, distractors, haystack == "shuffled")
    await _ask(longctx, needle_data, needle_source, pair, design, tokens, seed)


async def test_needle_abstention(longctx, study, needle_data, needle_source, needle_order, answerable,
                                 tokens) -> None:
    pair = needle_order[item_index(longctx.sample, 0, 0, len(needle_order))]
    seed = context_seed(longctx.run_seed, "abstention", pair.id, tokens)
    design = Design(pair, "nonliteral", 50, answerable=answerable == "yes")
    await _ask(longctx, needle_data, needle_source, pair, design, tokens, seed)
