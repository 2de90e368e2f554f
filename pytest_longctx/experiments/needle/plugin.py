"""The needle experiment's pytest plugin (pytest11 entry point ``longctx-needle``): the experiment declared once
(``--longctx-needle-*``, record settings, defaults), its evidence, tables, report section, summary lines and its
grader for the local test server; public API and hooks only, as a user's plugin would."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pytest

from pytest_longctx import Experiment
from pytest_longctx.experiments.needle.conditions import NeedlePlan, needle_defaults, needle_plan
from pytest_longctx.experiments.needle.options import OPTIONS, resolve

if TYPE_CHECKING:
    from pytest_longctx.hookspecs import Cells, Trials
    from pytest_longctx.reporting.sections import Section

#: The experiment declared once: its options (--longctx-needle-*), its record settings and defaults.
NEEDLE = Experiment("needle", OPTIONS, resolve, defaults=needle_defaults)
needle_options = NEEDLE.options
pytest_addhooks = NEEDLE.register  # the declaration's hooks (it is a plugin object) and the hook specifications


def plan_of(config: pytest.Config) -> NeedlePlan:
    """The run's plan: lengths, depths, samples, study cells."""
    from pytest_longctx import settings

    return needle_plan(settings(config), needle_options(config))


def pytest_longctx_evidence() -> list[Any]:
    from pytest_longctx import Evidence, LengthAxis

    return [Evidence(NEEDLE.name, "item", "pair",
                     "every cell asks pairs of one fixed, seeded order: a pair's literal and non-literal needles, its "
                     "context with and without the needle, and its trials at other lengths share its fate",
                     LengthAxis("tokens", tokens="context_tokens", where={"variant": "nonliteral", "depth": "*"}))]


def pytest_longctx_graders() -> list[str]:
    return ["pytest_longctx.experiments.needle.grader:make_grader"]


@NEEDLE.own
def pytest_longctx_tables(cells: Cells, trials: Trials) -> list[dict[str, Any]]:
    from pytest_longctx.experiments.needle.report import needle_tables

    return needle_tables(cells, trials)


@NEEDLE.own
def pytest_longctx_report_sections(cells: Cells, trials: Trials) -> list[Section]:
    from pytest_longctx.experiments.needle.report import needle_figures
    from pytest_longctx.reporting.sections import Section

    return [Section(NEEDLE.name, "Non-literal needles, distractors and abstention (needle)", (NEEDLE.name,),
                    needle_figures(cells), order=45)]


def pytest_longctx_summary_lines(record: Mapping[str, Any]) -> list[str]:
    from pytest_longctx.experiments.needle.report import summary_lines

    return summary_lines(record)
