"""Controls for the QA experiment: the right section alone (baseline) and a wrong section (chance).

The baseline's per-question outcomes are stored per model and exclude missed questions from
later ``qa`` runs; the wrong-section control should sit near chance (25%), showing that the
questions need the document.
"""

from __future__ import annotations

import pytest

from pytest_longctx.qa.flow import ask_mc


@pytest.mark.longctx("qa-baseline")
async def test_right_section(longctx, longctx_settings, qa):
    question = qa.full_pool(longctx.run_seed)[longctx.sample % len(qa.questions)]
    context = f"<section>\n{qa.pieces[question.section_id].text.strip()}\n</section>"
    given, expected = await ask_mc(longctx, question, context, detail={"section_shown": question.section_id},
                                   scoring=longctx_settings.scoring)
    assert given == expected, f"answered {given or 'nothing readable'}, expected {expected}"


@pytest.mark.longctx("qa-control")
async def test_wrong_section(longctx, longctx_settings, qa):
    question = qa.full_pool(longctx.run_seed)[longctx.sample % len(qa.questions)]
    other = longctx.rng.choice(sorted(k for k in qa.pieces if k != question.section_id))
    context = f"<section>\n{qa.pieces[other].text.strip()}\n</section>"
    given, expected = await ask_mc(longctx, question, context, detail={"section_shown": other},
                                   scoring=longctx_settings.scoring)
    assert given == expected, f"answered {given or 'nothing readable'}, expected {expected}"
