"""The Little Retrieval Test's pytest plugin (pytest11 entry point ``longctx-lrt``): its tables and figures.

Uses only the plugin's hooks (``pytest_longctx.hookspecs``) and public API, as a user's plugin would.
At module level it imports only pytest, the standard library and its declaration (name, options, defaults).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pytest

from pytest_longctx import Experiment
from pytest_longctx.experiments.lrt.options import OPTIONS, LrtOptions, resolve

if TYPE_CHECKING:
    from pytest_longctx import Defaults, Settings
    from pytest_longctx.reporting.sections import Section

EXPERIMENT = "lrt"
Rows = list[Mapping[str, Any]]


def defaults(options: LrtOptions, settings: Settings) -> list[Defaults]:
    """Trials per cell (the source's 50; 10 on a CPU model) and the sizes and shuffles this run picks."""
    from pytest_longctx import Defaults
    from pytest_longctx.experiments.lrt.conditions import lrt_plan

    plan = lrt_plan(settings, options)
    return [Defaults(EXPERIMENT, plan.samples, {"lines": plan.lines, "shuffles": plan.shuffles})]


#: The experiment declared once: its option (--longctx-lrt-lines), its record settings and defaults.
LRT = Experiment(EXPERIMENT, OPTIONS, resolve, defaults=defaults)
lrt_options = LRT.options


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    LRT.register(pluginmanager)


def pytest_longctx_evidence() -> list[Any]:
    """Each trial draws its own file, so each trial is one unit of evidence; its item names the file."""
    from pytest_longctx import Evidence, LengthAxis

    return [Evidence(EXPERIMENT, "item", "file",
                     "each trial draws its own file (values, order, asked line, instruction place) from its own "
                     "seed, and nothing repeats across cells: every trial is one independent unit; the item is the "
                     "file's digest, so two runs with the same seed and protocol pair file by file",
                     LengthAxis("lines", tokens="context_tokens"))]


@LRT.own
def pytest_longctx_chance(cells: Rows, trials: Rows) -> dict[str, float]:
    """A guessed register value is right 1 time in the size of the value range (90,000; source: 10,000)."""
    from pytest_longctx.experiments.lrt.report import chance, protocol_of

    return {EXPERIMENT: chance(protocol_of(trials))}


@LRT.own
def pytest_longctx_tables(cells: Rows, trials: Rows) -> list[dict[str, Any]]:
    """Accuracy vs number of lines per shuffle mode, in the README's layout, and where the misses came from."""
    from pytest_longctx.experiments.lrt.report import lrt_tables

    return lrt_tables(cells, trials)


@LRT.own
def pytest_longctx_report_sections(cells: Rows, trials: Rows) -> list[Section]:
    from pytest_longctx.experiments.lrt.report import lrt_figures
    from pytest_longctx.reporting.sections import Section

    return [Section(EXPERIMENT, "Line retrieval (lrt)", (EXPERIMENT,), lrt_figures(cells, trials), order=30)]


def pytest_longctx_graders() -> list[str]:
    """The local test server's grader of this experiment's prompts."""
    return ["pytest_longctx.experiments.lrt.grader:make_grader"]
