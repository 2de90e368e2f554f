"""Long-context multiple-choice QA over a Federal Register issue (after Anthropic's long-context study).

Method: for every trial, one question (the same questions in every cell, so cells are paired; a remote model's
default ``--longctx-qa-design blocks`` asks each question in a balanced subset of cells instead: three prompt
variants at one size at every position, or two sizes at every depth, so many more questions share the trials);
its section placed in a randomized collage of other sections filling ``context_tokens`` (the context
holds that many tokens, within 2% or 250, never more); the relevant section appears once; options
shuffled A-D. Eight prompt variants: plain or scratchpad × no examples, the two general-knowledge
examples, or 2 / 5 examples about other sections in the same context. Questions the model missed with
only the right section (its stored qa-baseline) are excluded. ``--longctx-protocol source`` sends the
study's own prompts and places the section as the study did (chunk index 20 for "middle").
"""

from __future__ import annotations

import random

import pytest

from pytest_longctx.experiments.qa.flow import ask_mc
from pytest_longctx.experiments.qa.mcqa import example_count, shuffle_options

pytestmark = pytest.mark.longctx("qa")


def collage_seed(longctx, context_tokens, where, key) -> str:
    """Shared by all prompt variants of a cell position, so variants are compared on the same context; keyed by
    the question (not the sample index), so two models that ask one question build the same context."""
    return f"{longctx.run_seed}|qa-collage|{context_tokens}|{where}|{key}"


async def run_trial(longctx, settings, qa, qa_plan, general_examples, context_tokens, where, prompt="plain",
                    examples="none", design=None, kind="position"):
    context_key = None
    if design is not None:  # an incomplete block design: this cell asks its own questions
        question = qa.design_draw(design, (kind, f"{prompt}/{examples}", context_tokens), longctx.sample)
        if isinstance(question, str):
            pytest.skip(question)
        key = question.id
        context_key = question.section_id  # one context per section: its questions share the prompt-cache prefix
    elif settings.samples_all:
        question = qa.question_at(longctx.sample)
        if question is None:
            pytest.skip("no eligible question left for this sample")
        if not qa.fits(question, context_tokens):
            pytest.skip(f"no {context_tokens}-token context can be filled around {question.id}'s section")
        key = question.id
    else:
        question, key = qa.draw(longctx.sample, context_tokens)
    longctx.record(item=question.id)  # before asking: also on an errored or planned trial
    rng = random.Random(f"{longctx.run_seed}|qa-shots|{key}|{context_tokens}|{where}|{prompt}|{examples}")
    built = qa.build(question, context_tokens, where, collage_seed(longctx, context_tokens, where, context_key or key))
    collage = built.collage
    if examples.startswith("context"):
        shots = qa.context_examples(collage, question, example_count(examples), rng)
    elif examples.startswith("general"):
        shots = [shuffle_options(q, rng) for q in general_examples[: example_count(examples)]]
    else:
        shots = []
    given, expected = await ask_mc(longctx, question, built.text, prompt=prompt, examples=shots, key=key,
                                   scoring=qa_plan.scoring, protocol=settings.protocol, variant=examples, detail={
        "depth_requested": where, "depth_achieved": round(collage.depth, 2), "gold_offset": collage.start,
        "context_tokens_label": context_tokens, "context_tokens_actual": built.tokens,
        "sections": len(collage.units), "gold_index": collage.gold_index,
        "distractor_issues": len({p.id.split(":")[0] for p in collage.units if ":" in p.id}),
        "baseline_excluded": qa.excluded, "baseline_file": qa.baseline_file,
        "size_note": qa_plan.size_note, "fixtures": {"questions": qa.fixture_sha},
    })
    assert given == expected, f"answered {given or 'nothing readable'}, expected {expected}"


@pytest.mark.parametrize("position", ["beginning", "middle", "end"])
async def test_qa_position(longctx, longctx_settings, qa, qa_plan, qa_design, general_examples, context_tokens,
                           position, prompt, examples):
    await run_trial(longctx, longctx_settings, qa, qa_plan, general_examples, context_tokens, position, prompt,
                    examples, qa_design)


async def test_qa_depth(longctx, longctx_settings, qa, qa_plan, qa_design, general_examples, context_tokens, depth):
    await run_trial(longctx, longctx_settings, qa, qa_plan, general_examples, context_tokens, depth,
                    design=qa_design, kind="depth")
