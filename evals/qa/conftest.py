"""Fixtures and condition axes of the multiple-choice QA experiment (Federal Register)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_longctx import ModelClient, Settings, samples_for, set_cell_samples, settings
from pytest_longctx.experiments.qa.cells import QaPlan, get_plan, load_issues, question_file
from pytest_longctx.experiments.qa.design import BlockDesign
from pytest_longctx.experiments.qa.experiment import QaData
from pytest_longctx.experiments.qa.plugin import qa_options
from pytest_longctx.experiments.qa.questions import load_questions

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def _plan(config: pytest.Config) -> QaPlan:
    return get_plan(config, settings(config), FIXTURES)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if metafunc.definition.get_closest_marker("longctx") is None:
        return
    plan = _plan(metafunc.config)
    name = metafunc.definition.name
    if "context_tokens" in metafunc.fixturenames:
        sizes = plan.depth_sizes if name.endswith("depth") else plan.sizes
        metafunc.parametrize("context_tokens", sizes, ids=[f"{s}tok" for s in sizes])
    if "prompt" in metafunc.fixturenames:
        metafunc.parametrize("prompt", plan.prompts)
    if "examples" in metafunc.fixturenames:
        metafunc.parametrize("examples", plan.examples)
    if "depth" in metafunc.fixturenames:
        metafunc.parametrize("depth", plan.depths)
    n = plan.qa_samples if name.startswith("test_qa") else plan.control_samples
    if plan.blocked and name.startswith("test_qa"):
        n = 1  # one skipped item per cell, whose reason says what to run first
    if n is not None:
        set_cell_samples(metafunc, n)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Drop the depth sweep where the plan has none; mark qa cells that wait for a complete baseline."""
    here = Path(__file__).parent
    ours = {path for path in {i.path for i in items} if Path(path).parent == here}  # a few files, thousands of items
    mine = [i for i in items if i.path in ours and i.get_closest_marker("longctx")]
    if not mine:
        return
    plan = _plan(config)
    if not plan.depths:
        drop = [i for i in mine if getattr(i, "originalname", "") == "test_qa_depth"]
        if drop:
            config.hook.pytest_deselected(items=drop)
            dropped = set(map(id, drop))
            items[:] = [i for i in items if id(i) not in dropped]
    if plan.blocked:
        for item in mine:
            if getattr(item, "originalname", "").startswith("test_qa"):
                item.add_marker(pytest.mark.skip(reason=plan.blocked))


@pytest.fixture(scope="session")
def qa_plan(pytestconfig: pytest.Config) -> QaPlan:
    """Sizes, trials per cell and variants of this run (decided at collection)."""
    return _plan(pytestconfig)


@pytest.fixture(scope="session")
def qa(pytestconfig: pytest.Config, longctx_settings: Settings, longctx_client: ModelClient) -> QaData:
    """The issue's sections (sized with the model's tokenizer), the question set and the question pool."""
    s = longctx_settings
    options = qa_options(pytestconfig)
    issue, *extra = load_issues(s, options)
    questions = load_questions(question_file(FIXTURES, options))
    backend = longctx_client.backend
    return QaData.load(issue, questions, backend.count_tokens, backend.tokenizer, s.cache_dir, s.seed, s.model.spec,
                       protocol=s.protocol, extra=extra)


@pytest.fixture(scope="session")
def qa_design(pytestconfig: pytest.Config, qa: QaData, qa_plan: QaPlan) -> BlockDesign | None:
    """Which qa cells ask which questions (``--longctx-qa-design blocks``), else None: every question everywhere."""
    if qa_plan.design != "blocks":
        return None
    variants = [f"{p}/{e}" for p in qa_plan.prompts for e in qa_plan.examples]
    depth_sizes = qa_plan.depth_sizes if qa_plan.depths else ()
    return qa.design(settings(pytestconfig).seed, variants, qa_plan.sizes, depth_sizes,
                     qa_plan.qa_samples or samples_for(pytestconfig, "qa"))


@pytest.fixture(scope="session")
def general_examples() -> list:
    """The two general-knowledge examples of the ``general-2`` variant (the study's own two)."""
    return load_questions(FIXTURES / "qa" / "general_examples.jsonl")
