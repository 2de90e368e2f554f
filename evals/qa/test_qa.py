"""Long-context multiple-choice QA over a Federal Register issue (after Anthropic's long-context study).

Method: for every trial, one question (the same questions in every cell, so cells are paired);
its section placed in a randomized collage of other sections filling ``context_tokens``; the
relevant section appears once, at a token depth; options shuffled A-D. Eight prompt variants:
plain or scratchpad × no examples, 2 unrelated examples, or 2 / 5 examples about other sections
in the same context. Questions the model missed with only the right section (its stored
qa-baseline) are excluded.
"""

from __future__ import annotations

import random

import pytest

from pytest_longctx.qa.flow import ask_mc
from pytest_longctx.qa.mcqa import EXAMPLES, PROMPTS, example_count, shuffle_options

pytestmark = pytest.mark.longctx("qa")


def collage_rng(longctx, context_tokens, where) -> random.Random:
    """Shared by all prompt variants of a cell position, so variants are compared on the same context."""
    return random.Random(f"{longctx.run_seed}|qa-collage|{context_tokens}|{where}|{longctx.sample}")


async def run_trial(longctx, qa, unrelated_examples, context_tokens, where, prompt="plain", examples="none",
                    scoring="generate"):
    question = qa.question(longctx.sample, context_tokens)
    collage = qa.collage(question, context_tokens, where, collage_rng(longctx, context_tokens, where))
    if examples.startswith("context"):
        shots = qa.context_examples(collage, question, example_count(examples), longctx.rng)
    elif examples.startswith("unrelated"):
        shots = [shuffle_options(q, longctx.rng) for q in unrelated_examples[: example_count(examples)]]
    else:
        shots = []
    given, expected = await ask_mc(longctx, question, qa.render(collage), prompt=prompt, examples=shots,
                                   scoring=scoring, detail={
        "depth_requested": where, "depth_achieved": round(collage.depth, 2), "gold_offset": collage.gold_offset,
        "context_tokens_actual": collage.tokens, "sections": len(collage.pieces), "gold_index": collage.gold_index,
        "baseline_excluded": qa.excluded, "fixtures": {"questions": qa.fixture_sha},
    })
    assert given == expected, f"answered {given or 'nothing readable'}, expected {expected}"


@pytest.mark.parametrize("examples", EXAMPLES)
@pytest.mark.parametrize("prompt", PROMPTS)
@pytest.mark.parametrize("position", ["beginning", "middle", "end"])
async def test_qa_position(longctx, longctx_settings, qa, unrelated_examples, context_tokens, position, prompt,
                           examples):
    await run_trial(longctx, qa, unrelated_examples, context_tokens, position, prompt, examples,
                    longctx_settings.scoring)


@pytest.mark.parametrize("depth", [0, 25, 50, 75, 100])
async def test_qa_depth(longctx, longctx_settings, qa, unrelated_examples, context_tokens, depth):
    await run_trial(longctx, qa, unrelated_examples, context_tokens, depth, scoring=longctx_settings.scoring)
