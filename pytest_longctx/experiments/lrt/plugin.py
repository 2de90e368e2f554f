"""The Little Retrieval Test's pytest plugin (pytest11 entry point ``longctx-lrt``): its tables and figures.

Uses only the plugin's hooks (``pytest_longctx.hookspecs``) and public API, as a user's plugin would.
Imports only pytest and the standard library at module level.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pytest_longctx.experiments.lrt.options import LrtOptions
    from pytest_longctx.reporting.sections import Section

EXPERIMENT = "lrt"
OPTIONS_KEY = pytest.StashKey["LrtOptions"]()
Rows = Sequence[Mapping[str, Any]]


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from pytest_longctx.hookspecs import register

    register(pluginmanager)


def pytest_addoption(parser: pytest.Parser) -> None:
    from pytest_longctx import add_options
    from pytest_longctx.experiments.lrt.options import OPTIONS

    add_options(parser, OPTIONS)


def pytest_configure(config: pytest.Config) -> None:
    """Resolve the options once, after the core's settings; a bad value is a usage error (one line)."""
    from pytest_longctx import active, resolve_options
    from pytest_longctx.experiments.lrt.options import OPTIONS, resolve

    if active(config):  # not under -p no:longctx
        config.stash[OPTIONS_KEY] = resolve_options(config, OPTIONS, resolve)


def lrt_options(config: pytest.Config) -> LrtOptions:
    """The run's resolved lrt options."""
    return config.stash[OPTIONS_KEY]


def pytest_longctx_record_settings(config: pytest.Config) -> dict[str, Any]:
    return lrt_options(config).to_json()


def pytest_longctx_defaults(config: pytest.Config) -> list[Any]:
    """Trials per cell (the source's 50; 10 on a CPU model) and the sizes and shuffles this run picks."""
    from pytest_longctx import Defaults, settings
    from pytest_longctx.experiments.lrt.conditions import lrt_plan

    plan = lrt_plan(settings(config), lrt_options(config))
    return [Defaults(EXPERIMENT, plan.samples, {"lines": plan.lines, "shuffles": plan.shuffles})]


def pytest_longctx_evidence() -> list[Any]:
    """Each trial draws its own file, so each trial is one unit of evidence; its item names the file."""
    from pytest_longctx import Evidence, LengthAxis

    return [Evidence(EXPERIMENT, "item", "file",
                     "each trial draws its own file (values, order, asked line, instruction place) from its own "
                     "seed, and nothing repeats across cells: every trial is one independent unit; the item is the "
                     "file's digest, so two runs with the same seed and protocol pair file by file",
                     LengthAxis("lines", tokens="context_tokens"))]


def _mine(rows: Rows) -> list[Mapping[str, Any]]:
    return [r for r in rows if r.get("experiment") == EXPERIMENT]


def pytest_longctx_chance(cells: Rows, trials: Rows) -> dict[str, float]:
    """A guessed register value is right 1 time in the size of the value range (90,000; source: 10,000)."""
    if not _mine(cells):
        return {}
    from pytest_longctx.experiments.lrt.report import chance, protocol_of

    return {EXPERIMENT: chance(protocol_of(_mine(trials)))}


def pytest_longctx_tables(cells: Rows, trials: Rows) -> list[dict[str, Any]]:
    """Accuracy vs number of lines per shuffle mode, in the README's layout, and where the misses came from."""
    if not _mine(cells):
        return []
    from pytest_longctx.experiments.lrt.report import lrt_tables

    return lrt_tables(_mine(cells), _mine(trials))


def pytest_longctx_report_sections(cells: Rows, trials: Rows) -> list[Section]:
    if not _mine(cells):
        return []
    from pytest_longctx.experiments.lrt.report import lrt_figures
    from pytest_longctx.reporting.sections import Section

    return [Section(EXPERIMENT, "Line retrieval (lrt)", (EXPERIMENT,), lrt_figures(_mine(cells), _mine(trials)),
                    order=30)]


def pytest_longctx_graders() -> list[str]:
    """The local test server's grader of this experiment's prompts."""
    return ["pytest_longctx.experiments.lrt.grader:make_grader"]
