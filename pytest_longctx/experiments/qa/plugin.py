"""The qa experiment's pytest plugin (pytest11 entry point ``longctx-qa``): its report parts and its end of run.

Uses only the plugin's hooks (``pytest_longctx.hookspecs``) and public API, as a user's plugin would.
At module level it imports only pytest, the standard library and its declaration (name, options, defaults).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pytest

from pytest_longctx import Experiment
from pytest_longctx.experiments.qa.conditions import qa_defaults
from pytest_longctx.experiments.qa.options import OPTIONS, resolve

if TYPE_CHECKING:
    from pytest_longctx.reporting.sections import Section

EXPERIMENT = "qa"
CONTROLS = ("qa-baseline", "qa-control")
Cells = Sequence[Mapping[str, Any]]


#: The experiment declared once: its options (issue dates, scoring, context sizes, design), record settings and
#: defaults, for qa and its controls.
QA = Experiment(EXPERIMENT, OPTIONS, resolve, defaults=qa_defaults, experiments=(EXPERIMENT, *CONTROLS))
qa_options = QA.options
pytest_addhooks = QA.register  # the declaration's hooks (it is a plugin object) and the hook specifications


def _only(rows: Cells, names: Sequence[str]) -> list[Mapping[str, Any]]:
    return [r for r in rows if r.get("experiment") in names]


def pytest_longctx_evidence() -> list[Any]:
    """One question is asked in every cell of qa (and in its controls): the question is the unit of evidence."""
    from pytest_longctx import Evidence, LengthAxis

    why = ("one question is asked in every prompt variant, position, depth and size it is given (all of them, or a "
           "block of them under --longctx-qa-design blocks) and in the controls, and shares its fate there")
    return [Evidence("qa", "item", "question", why, LengthAxis("context_tokens", tokens="context_tokens_actual")),
            Evidence("qa-baseline", "item", "question", why), Evidence("qa-control", "item", "question", why)]


def pytest_longctx_chance(cells: Cells, trials: Cells) -> dict[str, float]:
    """Four options: a guess is right 1 time in 4. Not the wrong-section control, which is meant to sit there."""
    from pytest_longctx.experiments.qa.report import CHANCE

    return {name: CHANCE for name in ("qa", "qa-baseline") if _only(cells, [name])}


def pytest_longctx_tables(cells: Cells, trials: Cells) -> list[dict[str, Any]]:
    """The study's accuracy table and the size table (qa cells only)."""
    mine = _only(cells, (EXPERIMENT,))
    if not mine:
        return []
    from pytest_longctx.experiments.qa.report import qa_tables

    return qa_tables(mine, _only(trials, (EXPERIMENT,)))


def pytest_longctx_report_sections(cells: Cells, trials: Cells) -> list[Section]:
    """"QA over long contexts" first, then the controls (right section vs wrong section), chance marked."""
    from pytest_longctx.experiments.qa.report import CHANCE_REF, qa_figures
    from pytest_longctx.reporting.figures import cell_bars
    from pytest_longctx.reporting.sections import Section

    out = []
    if _only(cells, (EXPERIMENT,)):
        out.append(Section(EXPERIMENT, "QA over long contexts", (EXPERIMENT,),
                           qa_figures(_only(cells, (EXPERIMENT,)), _only(trials, (EXPERIMENT,))), order=10))
    controls = _only(cells, CONTROLS)
    if controls:
        out.append(Section("controls", "Controls (qa-baseline, qa-control)", CONTROLS,
                           [cell_bars(controls, "Controls: with the source (baseline) vs without it (control)",
                                      color_key="experiment", ref=CHANCE_REF)], order=20))
    return out


def pytest_longctx_run_finished(config: pytest.Config, record: dict[str, Any]) -> list[str] | None:
    """Store this run's right-section baseline results per model, for later runs' filtering."""
    from pathlib import Path

    from pytest_longctx import settings
    from pytest_longctx.experiments.qa.baseline import update_from_record

    try:
        stored = update_from_record(record, Path(settings(config).cache_dir))
    except Exception as exc:  # a side result; the run record matters more
        return [f"could not store the qa-baseline results: {exc}"]
    if stored is not None:
        record["settings"]["qa_baseline_file"] = str(stored)
    return None


def pytest_longctx_graders() -> list[str]:
    """The local test server's grader of this experiment's prompts."""
    return ["pytest_longctx.experiments.qa.grader:make_grader"]
