"""Condition axes of the Little Retrieval Test: sizes and shuffle modes for the model, the protocol
(--longctx-protocol) and --longctx-lrt-lines (trials per cell: the plugin's pytest_longctx_defaults)."""

from __future__ import annotations

import warnings

import pytest

from pytest_longctx import settings
from pytest_longctx.experiments.lrt.conditions import LrtSizeWarning, lrt_plan
from pytest_longctx.experiments.lrt.plugin import lrt_options


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "lines" not in metafunc.fixturenames:
        return
    plan = lrt_plan(settings(metafunc.config), lrt_options(metafunc.config))
    if plan.note:
        warnings.warn(LrtSizeWarning(plan.note), stacklevel=1)
    metafunc.parametrize("lines", plan.lines)
    if "shuffle" in metafunc.fixturenames:
        metafunc.parametrize("shuffle", plan.shuffles)
