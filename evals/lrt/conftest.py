"""Condition axes of the Little Retrieval Test, sized to the model's window."""

from __future__ import annotations

import pytest

from pytest_longctx.context.lrt_conditions import lrt_lines, lrt_shuffles
from pytest_longctx.keys import SETTINGS_KEY


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    window = metafunc.config.stash[SETTINGS_KEY].context_window
    if "lines" in metafunc.fixturenames:
        metafunc.parametrize("lines", lrt_lines(window))
    if "shuffle" in metafunc.fixturenames:
        metafunc.parametrize("shuffle", lrt_shuffles(window))
