"""Controls for the QA experiment: the right section alone (baseline) and a wrong section (chance).

The baseline's per-question outcomes are stored per model (and protocol) and exclude missed questions
from later ``qa`` runs; with ``--longctx-samples all`` it asks every question, as the study did. The
wrong-section control should sit near chance (25%), showing that the questions need the document.
Under ``--longctx-protocol source`` both use the study's one-section prompt (In [13]).
"""

from __future__ import annotations

import pytest

from pytest_longctx.experiments.qa.flow import ask_mc


def control_question(longctx, settings, qa, qa_plan):
    """Sample i asks the i-th question of the seeded pool (every question with ``all``; otherwise only those
    whose section fits the largest qa context, so the baseline covers the questions the qa cells ask)."""
    pool = qa.full_pool(longctx.run_seed)
    if not settings.samples_all:
        fits = [q for q in pool if qa.pieces[q.section_id].tokens <= max(qa_plan.sizes)]
        pool = fits or pool
    return pool[longctx.sample % len(pool)]


def section_context(qa, section_id: str, protocol: str) -> str:
    text = qa.pieces[section_id].text
    return text if protocol == "source" else f"<section>\n{text.strip()}\n</section>"


@pytest.mark.longctx("qa-baseline")
async def test_right_section(longctx, longctx_settings, qa, qa_plan):
    s = longctx_settings
    question = control_question(longctx, s, qa, qa_plan)
    given, expected = await ask_mc(longctx, question, section_context(qa, question.section_id, s.protocol),
                                   detail={"section_shown": question.section_id}, scoring=qa_plan.scoring,
                                   protocol=s.protocol)
    assert given == expected, f"answered {given or 'nothing readable'}, expected {expected}"


@pytest.mark.longctx("qa-control")
async def test_wrong_section(longctx, longctx_settings, qa, qa_plan):
    s = longctx_settings
    question = control_question(longctx, s, qa, qa_plan)
    others = sorted(k for k in qa.pieces if k != question.section_id)
    if not s.samples_all:  # as short as the sections the qa cells ask about
        others = [k for k in others if qa.pieces[k].tokens <= max(qa_plan.sizes)] or others
    other = longctx.rng.choice(others)
    given, expected = await ask_mc(longctx, question, section_context(qa, other, s.protocol),
                                   detail={"section_shown": other}, scoring=qa_plan.scoring, protocol=s.protocol)
    assert given == expected, f"answered {given or 'nothing readable'}, expected {expected}"
