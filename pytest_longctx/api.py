"""Helpers an experiment (a test file, a ``conftest.py`` or a plugin) uses instead of the plugin's internals."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_longctx.session.options import Settings


def settings(config: pytest.Config) -> Settings:
    """The run's resolved settings (model, seed, samples, data dir, cache dir, protocol, ...), read-only.

    Available from ``pytest_configure`` on (the plugin resolves them first), on the controller and on
    every xdist worker alike.
    """
    from pytest_longctx.session.keys import SETTINGS_KEY

    return config.stash[SETTINGS_KEY]


def set_cell_samples(metafunc: pytest.Metafunc, count: int) -> None:
    """In ``pytest_generate_tests``: this test's cells have ``count`` trials each, instead of --longctx-samples.

    For an experiment whose source fixes its own count (e.g. 50 per cell) or that means "every item" by
    ``--longctx-samples all``. Call it before the plugin parametrizes the sample index (any
    ``pytest_generate_tests`` in a test module or ``conftest.py`` runs first).
    """
    from pytest_longctx.session.keys import CELL_SAMPLES_KEY

    if count < 1:
        raise ValueError(f"set_cell_samples: count must be at least 1, got {count}")
    metafunc.definition.stash[CELL_SAMPLES_KEY] = count
