"""Cells of the needle experiment: the length grid (NoLiMa), distractors x coherence (Context Rot) and abstention,
for the model's window and the --longctx-needle-* options (pytest_longctx/experiments/needle/conditions.py)."""

from __future__ import annotations

import random
import warnings

import pytest

from pytest_longctx import Settings, samples_for, set_cell_samples, settings
from pytest_longctx.experiments.needle.conditions import DISTRACTORS, NeedlePlan, NeedleSizeWarning
from pytest_longctx.experiments.needle.haystack import HAYSTACKS, Source, load_source
from pytest_longctx.experiments.needle.pairs import VARIANTS, NeedleData, Pair, load_data
from pytest_longctx.experiments.needle.plugin import needle_options, plan_of


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    config = metafunc.config
    names = metafunc.fixturenames
    if "study" not in names:
        return
    plan = plan_of(config)
    if plan.note:
        warnings.warn(NeedleSizeWarning(plan.note), stacklevel=1)
    study = metafunc.function.__name__.removeprefix("test_needle_")
    given = settings(config).samples_given
    if study == "length":
        metafunc.parametrize("variant", VARIANTS)
        metafunc.parametrize("tokens", plan.lengths)
        metafunc.parametrize("depth", plan.depths)
    elif study == "distractors":
        metafunc.parametrize("distractors", DISTRACTORS)
        metafunc.parametrize("haystack", HAYSTACKS)
    else:
        metafunc.parametrize("answerable", ["yes", "no"])
        metafunc.parametrize("tokens", plan.abstention_lengths)
    if settings(config).samples_all:  # --longctx-samples all: every pair in every cell
        set_cell_samples(metafunc, len(load_data().pairs))
    elif study != "length" and not given:
        set_cell_samples(metafunc, plan.study_samples)
    metafunc.parametrize("study", [study])


@pytest.fixture(scope="session")
def needle_data() -> NeedleData:
    return load_data()


@pytest.fixture(scope="session")
def needle_source(pytestconfig: pytest.Config, longctx_settings: Settings) -> Source:
    """The haystack sentences, read once per process."""
    return load_source(needle_options(pytestconfig).haystack, longctx_settings)


@pytest.fixture(scope="session")
def needle_plan(pytestconfig: pytest.Config) -> NeedlePlan:
    return plan_of(pytestconfig)


@pytest.fixture(scope="session")
def needle_order(longctx_settings: Settings, needle_data: NeedleData) -> list[Pair]:
    """The pairs in the run's seeded order (every cell asks from it)."""
    order = list(needle_data.pairs)
    random.Random(f"needle-order-{longctx_settings.seed}").shuffle(order)
    return order


@pytest.fixture
def needle_samples(pytestconfig: pytest.Config, needle_plan: NeedlePlan, needle_data: NeedleData, study: str) -> int:
    """Trials a cell of this study asks (a length cell's depth takes the next this many pairs of the order)."""
    if settings(pytestconfig).samples_all:
        return len(needle_data.pairs)
    if study == "length" or settings(pytestconfig).samples_given:
        return samples_for(pytestconfig, "needle")
    return needle_plan.study_samples
