"""Fixtures and condition axes of the docs experiment: the user's documents, their reviewed
questions, token counts; depths, context fractions and trials per cell for the model and protocol."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_longctx import ModelClient, Settings, UsageError, samples_for, set_cell_samples, settings
from pytest_longctx.experiments.docs import knobs
from pytest_longctx.experiments.docs.conditions import docs_plan
from pytest_longctx.experiments.docs.design import DocsDesign, block_design
from pytest_longctx.experiments.docs.experiment import DocsExperiment
from pytest_longctx.experiments.docs.plugin import docs_options, retriever

KNOBS = {"answer_doc": knobs.ANSWER_DOC, "distractors": knobs.DISTRACTOR_COUNTS, "question_form": knobs.QUESTION_FORMS}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if not {"depth", "context_fraction", *KNOBS} & set(metafunc.fixturenames):
        return
    plan = docs_plan(settings(metafunc.config), docs_options(metafunc.config))
    knob = next((name for name in KNOBS if name in metafunc.fixturenames), None)
    if knob is not None:  # a knob condition: every cell asks the same eligible items
        metafunc.parametrize(knob, KNOBS[knob])
        eligible = {"answer_doc": plan.items or 0, "distractors": plan.distractor_items,
                    "question_form": plan.paraphrase_items}[knob]
        set_cell_samples(metafunc, plan.knob_cell(samples_for(metafunc.config, "docs"), eligible))
        return
    if "depth" in metafunc.fixturenames:
        metafunc.parametrize("depth", plan.depths)
    resolved = samples_for(metafunc.config, "docs")
    if "context_fraction" in metafunc.fixturenames:
        metafunc.parametrize("context_fraction", plan.fractions)
        metafunc.parametrize("arm", plan.arms)
        set_cell_samples(metafunc, plan.per_size_cell(resolved))  # fewer under the block design
    else:
        set_cell_samples(metafunc, plan.per_cell(resolved))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Drop the knob conditions where the plan has none (a CPU model, the source protocol) or the folder has no item
    for them (no distractors, no usable paraphrase)."""
    here = Path(__file__).parent
    mine = [i for i in items if Path(i.path).parent == here and getattr(i, "originalname", "") in KNOB_TESTS]
    if not mine:
        return
    plan = docs_plan(settings(config), docs_options(config))
    keep = {"test_unanswerable": plan.knobs and bool(plan.items), "test_distractors": plan.knobs and bool(
        plan.distractor_items), "test_low_overlap": plan.knobs and bool(plan.paraphrase_items)}
    drop = [i for i in mine if not keep[getattr(i, "originalname", "")]]
    if drop:
        config.hook.pytest_deselected(items=drop)
        dropped = set(map(id, drop))
        items[:] = [i for i in items if id(i) not in dropped]


KNOB_TESTS = ("test_unanswerable", "test_distractors", "test_low_overlap")


@pytest.fixture(scope="session")
def docs(pytestconfig: pytest.Config, longctx_settings: Settings, longctx_client: ModelClient) -> DocsExperiment:
    """--longctx-docs (default fixtures/docs) with its QA file, counted with the model's tokenizer."""
    s, o = longctx_settings, docs_options(pytestconfig)
    folder = o.folder_or_default(s)
    if not folder.is_dir():
        raise UsageError(f"{folder} not found; pass --longctx-docs DIR (a folder of .txt/.md documents)")
    label = folder.relative_to(s.rootdir).as_posix() if folder.is_relative_to(s.rootdir) else str(folder)
    return DocsExperiment.load(folder, count_tokens=longctx_client.backend.count_tokens, budget=o.context,
                               review=o.review, scorer=o.scorer, use_judge=o.judge, label=label,
                               protocol=s.protocol, seed=s.seed, retriever=retriever(pytestconfig, o.retriever))


@pytest.fixture(scope="session")
def docs_design(pytestconfig: pytest.Config) -> DocsDesign | None:
    """Which item each size cell's samples ask (``--longctx-docs-design blocks``), else None: sample i asks item i
    in every cell."""
    plan = docs_plan(settings(pytestconfig), docs_options(pytestconfig))
    if plan.design != "blocks":
        return None
    return block_design(plan.per_cell(samples_for(pytestconfig, "docs")), plan.fractions)
