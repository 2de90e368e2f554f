"""The needle experiment's pytest plugin (pytest11 entry point ``longctx-needle``): options, defaults, evidence,
tables, report section, summary lines and its grader for the local test server.

Uses only the plugin's hooks (``pytest_longctx.hookspecs``) and public API, as a user's plugin would.
Imports only pytest and the standard library at module level.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pytest_longctx.experiments.needle.conditions import NeedlePlan
    from pytest_longctx.experiments.needle.options import NeedleOptions
    from pytest_longctx.reporting.sections import Section

EXPERIMENT = "needle"
OPTIONS_KEY = pytest.StashKey["NeedleOptions"]()
Rows = Sequence[Mapping[str, Any]]


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from pytest_longctx.hookspecs import register

    register(pluginmanager)


def pytest_addoption(parser: pytest.Parser) -> None:
    from pytest_longctx import add_options
    from pytest_longctx.experiments.needle.options import OPTIONS

    add_options(parser, OPTIONS)


def pytest_configure(config: pytest.Config) -> None:
    from pytest_longctx import active, resolve_options
    from pytest_longctx.experiments.needle.options import OPTIONS, resolve

    if active(config):
        config.stash[OPTIONS_KEY] = resolve_options(config, OPTIONS, resolve)


def needle_options(config: pytest.Config) -> NeedleOptions:
    return config.stash[OPTIONS_KEY]


def plan_of(config: pytest.Config) -> NeedlePlan:
    from pytest_longctx import settings
    from pytest_longctx.experiments.needle.conditions import needle_plan

    return needle_plan(settings(config), needle_options(config))


def pytest_longctx_record_settings(config: pytest.Config) -> dict[str, Any]:
    return needle_options(config).to_json()


def pytest_longctx_defaults(config: pytest.Config) -> list[Any]:
    from pytest_longctx import Defaults

    plan = plan_of(config)
    return [Defaults(EXPERIMENT, plan.samples, {"lengths": list(plan.lengths), "depths": list(plan.depths),
                                                "distractor_length": plan.distractor_length,
                                                "abstention_lengths": list(plan.abstention_lengths)},
                     "a length cell's trials; a distractor or abstention cell asks "
                     f"{plan.study_samples}")]


def pytest_longctx_evidence() -> list[Any]:
    from pytest_longctx import Evidence, LengthAxis

    return [Evidence(EXPERIMENT, "item", "pair",
                     "every cell asks pairs of one fixed, seeded order: a pair's literal and non-literal needles, its "
                     "context with and without the needle, and its trials at other lengths share its fate",
                     LengthAxis("tokens", tokens="context_tokens", where={"variant": "nonliteral", "depth": "*"}))]


def pytest_longctx_graders() -> list[str]:
    return ["pytest_longctx.experiments.needle.grader:make_grader"]


def _mine(rows: Rows) -> list[Mapping[str, Any]]:
    return [r for r in rows if r.get("experiment") == EXPERIMENT]


def pytest_longctx_tables(cells: Rows, trials: Rows) -> list[dict[str, Any]]:
    if not _mine(cells):
        return []
    from pytest_longctx.experiments.needle.report import needle_tables

    return needle_tables(_mine(cells), _mine(trials))


def pytest_longctx_report_sections(cells: Rows, trials: Rows) -> list[Section]:
    if not _mine(cells):
        return []
    from pytest_longctx.experiments.needle.report import needle_figures
    from pytest_longctx.reporting.sections import Section

    return [Section(EXPERIMENT, "Non-literal needles, distractors and abstention (needle)", (EXPERIMENT,),
                    needle_figures(_mine(cells)), order=45)]


def pytest_longctx_summary_lines(record: Mapping[str, Any]) -> list[str]:
    from pytest_longctx.experiments.needle.report import summary_lines

    return summary_lines(record)
