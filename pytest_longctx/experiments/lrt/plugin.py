"""The Little Retrieval Test's pytest plugin (pytest11 entry point ``longctx-lrt``): the experiment declared once
(``--longctx-lrt-lines``, record settings, defaults), its tables, figures and grader, through the public API and the
plugin's hooks only, as a user's plugin would."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pytest_longctx import Experiment
from pytest_longctx.experiments.lrt.conditions import lrt_defaults
from pytest_longctx.experiments.lrt.options import OPTIONS, resolve

if TYPE_CHECKING:
    from pytest_longctx.hookspecs import Cells, Trials
    from pytest_longctx.reporting.sections import Section

#: The experiment declared once: its option (--longctx-lrt-lines), its record settings and defaults.
LRT = Experiment("lrt", OPTIONS, resolve, defaults=lrt_defaults)
lrt_options = LRT.options
pytest_addhooks = LRT.register  # the declaration's hooks (it is a plugin object) and the hook specifications


def pytest_longctx_evidence() -> list[Any]:
    """Each trial draws its own file, so each trial is one unit of evidence; its item names the file."""
    from pytest_longctx import Evidence, LengthAxis

    return [Evidence(LRT.name, "item", "file",
                     "each trial draws its own file (values, order, asked line, instruction place) from its own "
                     "seed, and nothing repeats across cells: every trial is one independent unit; the item is the "
                     "file's digest, so two runs with the same seed and protocol pair file by file",
                     LengthAxis("lines", tokens="context_tokens"))]


@LRT.own
def pytest_longctx_chance(cells: Cells, trials: Trials) -> dict[str, float]:
    """A guessed register value is right 1 time in the size of the value range (90,000; source: 10,000)."""
    from pytest_longctx.experiments.lrt.report import chance, protocol_of

    return {LRT.name: chance(protocol_of(trials))}


@LRT.own
def pytest_longctx_tables(cells: Cells, trials: Trials) -> list[dict[str, Any]]:
    """Accuracy vs number of lines per shuffle mode, in the README's layout, and where the misses came from."""
    from pytest_longctx.experiments.lrt.report import lrt_tables

    return lrt_tables(cells, trials)


@LRT.own
def pytest_longctx_report_sections(cells: Cells, trials: Trials) -> list[Section]:
    from pytest_longctx.experiments.lrt.report import lrt_figures
    from pytest_longctx.reporting.sections import Section

    return [Section(LRT.name, "Line retrieval (lrt)", (LRT.name,), lrt_figures(cells, trials), order=30)]


def pytest_longctx_graders() -> list[str]:
    """The local test server's grader of this experiment's prompts."""
    return ["pytest_longctx.experiments.lrt.grader:make_grader"]
