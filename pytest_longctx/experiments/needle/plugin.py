"""The needle experiment's pytest plugin (pytest11 entry point ``longctx-needle``): options, defaults, evidence,
tables, report section, summary lines and its grader for the local test server.

Uses only the plugin's hooks (``pytest_longctx.hookspecs``) and public API, as a user's plugin would.
At module level it imports only pytest, the standard library and its declaration (name, options, defaults).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pytest

from pytest_longctx import Experiment
from pytest_longctx.experiments.needle.options import OPTIONS, NeedleOptions, resolve

if TYPE_CHECKING:
    from pytest_longctx import Defaults, Settings
    from pytest_longctx.experiments.needle.conditions import NeedlePlan
    from pytest_longctx.reporting.sections import Section

EXPERIMENT = "needle"
Rows = list[Mapping[str, Any]]


def defaults(options: NeedleOptions, settings: Settings) -> list[Defaults]:
    """A length cell's trials and the lengths, depths and study cells this run picks."""
    from pytest_longctx import Defaults
    from pytest_longctx.experiments.needle.conditions import needle_plan

    plan = needle_plan(settings, options)
    return [Defaults(EXPERIMENT, plan.samples, {"lengths": list(plan.lengths), "depths": list(plan.depths),
                                                "distractor_length": plan.distractor_length,
                                                "abstention_lengths": list(plan.abstention_lengths)},
                     "a length cell's trials; a distractor or abstention cell asks "
                     f"{plan.study_samples}")]


#: The experiment declared once: its options (--longctx-needle-*), its record settings and defaults.
NEEDLE = Experiment(EXPERIMENT, OPTIONS, resolve, defaults=defaults)
needle_options = NEEDLE.options


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    NEEDLE.register(pluginmanager)


def plan_of(config: pytest.Config) -> NeedlePlan:
    """The run's plan: lengths, depths, samples, study cells."""
    from pytest_longctx import settings
    from pytest_longctx.experiments.needle.conditions import needle_plan

    return needle_plan(settings(config), needle_options(config))


def pytest_longctx_evidence() -> list[Any]:
    from pytest_longctx import Evidence, LengthAxis

    return [Evidence(EXPERIMENT, "item", "pair",
                     "every cell asks pairs of one fixed, seeded order: a pair's literal and non-literal needles, its "
                     "context with and without the needle, and its trials at other lengths share its fate",
                     LengthAxis("tokens", tokens="context_tokens", where={"variant": "nonliteral", "depth": "*"}))]


def pytest_longctx_graders() -> list[str]:
    return ["pytest_longctx.experiments.needle.grader:make_grader"]


@NEEDLE.own
def pytest_longctx_tables(cells: Rows, trials: Rows) -> list[dict[str, Any]]:
    from pytest_longctx.experiments.needle.report import needle_tables

    return needle_tables(cells, trials)


@NEEDLE.own
def pytest_longctx_report_sections(cells: Rows, trials: Rows) -> list[Section]:
    from pytest_longctx.experiments.needle.report import needle_figures
    from pytest_longctx.reporting.sections import Section

    return [Section(EXPERIMENT, "Non-literal needles, distractors and abstention (needle)", (EXPERIMENT,),
                    needle_figures(cells), order=45)]


def pytest_longctx_summary_lines(record: Mapping[str, Any]) -> list[str]:
    from pytest_longctx.experiments.needle.report import summary_lines

    return summary_lines(record)
