"""Hook specifications: what an experiment contributes to a run's reports and its end.

The built-in experiments (``pytest_longctx/experiments/*/plugin.py``) implement these exactly as a
user's ``conftest.py`` or plugin would; the core names no experiment. Every hook receives plain data
from the run record (``cells`` and ``trials`` are lists of dicts, see ``results/schema.py``) and
returns plain data, so a hook that fails costs a note in the report, never the run's reports.

Example, in a ``conftest.py``::

    from pytest_longctx import Figure, Section, cell_bars

    def pytest_longctx_report_sections(cells, trials):
        mine = [c for c in cells if c["experiment"] == "passkey"]
        return [Section("passkey", "Pass key retrieval", ("passkey",),
                        figures=[cell_bars(mine, "Accuracy per filler size")])] if mine else []
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pytest_longctx.reporting.sections import Section
    from pytest_longctx.results.evidence import Evidence
    from pytest_longctx.session.defaults import Defaults

Cells = Sequence[Mapping[str, Any]]
Trials = Sequence[Mapping[str, Any]]


def pytest_longctx_tables(cells: Cells, trials: Trials) -> list[dict[str, Any]]:
    """Tables in a source's own layout for the experiments of yours present in ``cells``.

    Each table is plain JSON: ``{"experiment", "title", "columns", "rows", "note"}``; a row's first
    entry is its label, the others a string, ``None`` or ``{"correct": k, "n": n}``. They are stored in
    the record's ``tables`` and shown in the terminal summary and the HTML report. Return ``[]`` when
    none of your experiments ran.
    """
    return []


def pytest_longctx_report_sections(cells: Cells, trials: Trials) -> list[Section]:
    """HTML report sections for your experiments: title, which experiments it holds, figures, order.

    An experiment no section claims gets one of its own with a plain accuracy-per-cell chart.
    """
    return []


def pytest_longctx_defaults(config: pytest.Config) -> list[Defaults]:
    """Your experiments' defaults for this run's model and protocol (``settings(config)``): trials per cell and the
    conditions they pick, e.g. ``Defaults("passkey", samples=10, conditions={"fillers": [10, 100]})`` for a
    model that runs on the CPU (``settings(config).model.profile.runs == "cpu"``).

    ``--longctx-samples`` overrides ``samples``; ``None`` leaves the core's default for the model. The run record
    keeps them under ``settings.defaults``. Called once per process, after every plugin's ``pytest_configure``.
    """
    return []


def pytest_longctx_evidence() -> list[Evidence]:
    """How your experiments' trials group into independent units of evidence, and their context-length axis.

    Trials drawn from one item (a question asked in every cell) share its fate: intervals, paired comparisons
    and the gate count such a cluster once, not once per trial. Return one :class:`~pytest_longctx.Evidence` per
    experiment, e.g. ``Evidence("passkey", cluster="item", unit="key", why="...")`` (the trial's recorded
    ``item``), ``cluster="detail.document"`` (a coarser unit the trial records) or ``cluster="trial"``. An
    experiment that declares nothing has each trial as its own cluster. ``length=LengthAxis("filler")`` names
    the cell parameter that sets the context length, for the effective context length. Called on the
    controller once per run.
    """
    return []


def pytest_longctx_chance(cells: Cells, trials: Trials) -> dict[str, float]:
    """The success rate of guessing, per experiment of yours present in ``cells`` (``{"qa": 0.25}``).

    Where a cell's (or an experiment's) 95% interval contains it, the terminal and the HTML report say that the
    accuracy is indistinguishable from chance, next to the number. Leave out experiments whose answers have no
    fixed guessing rate (free text: only "indistinguishable from 0" is said of them) and controls that are meant
    to sit at chance.
    """
    return {}


def pytest_longctx_summary_lines(record: Mapping[str, Any]) -> list[str]:
    """Extra lines for the terminal summary (each printed after ``longctx ``)."""
    return []


def pytest_longctx_record_settings(config: pytest.Config) -> dict[str, Any]:
    """Your experiment's resolved options, merged into the record's ``settings``."""
    return {}


def pytest_longctx_run_finished(config: pytest.Config, record: dict[str, Any]) -> list[str] | None:
    """The run's record is complete (gated, about to be written): store side results, add settings.

    Called once, on the controller. Return lines to note in the summary (e.g. a file written), or None.
    """
    return None


def pytest_longctx_graders() -> list[str]:
    """Graders the local test server (``pytest_longctx.server``, ``graded:`` responder) loads by name, so it grades
    your experiment's prompts without knowing them: ``"module:factory"``, where ``factory()`` (or
    ``factory(settings)``: the ``graded:`` spec's NAME=VALUE settings, e.g. an answer key's path) returns a function
    ``grade(prompt) -> dict | None``. ``grade`` returns None for a prompt not of yours, else
    ``{"experiment", "item", "right", "wrong"}`` (the reply a right and a wrong model give; ``"graded": False``
    for a prompt always answered right, e.g. a judge's); it raises ValueError for a prompt of yours it cannot read.

    The server runs in another process than pytest's, so it calls this hook of the installed plugins (``pytest11``
    entry points) itself; a ``conftest.py`` grader is named in the spec instead (``graded:...,grader=mod:factory``).
    """
    return []


@pytest.hookspec(firstresult=True)
def pytest_longctx_retriever(config: pytest.Config, name: str) -> Any | None:
    """Your retriever for a retrieval arm that asks for ``name`` (docs: ``--longctx-docs-retriever NAME``).

    Return a callable ``(question, passages, k) -> ids``: ``passages`` are the context's chunks as plain dicts
    ``{"id", "doc", "text"}``, and the ids of the ``k`` best come back, best first (e.g. a query to your Chroma or
    LanceDB collection restricted to those ids). Return None for names that are not yours; the first answer wins.
    Called in every process at configuration (an unanswered name is a usage error) and again when the arm's fixture
    is built; ids that are not among the passages make that trial an error, never a wrong answer.
    """
    return None


def register(pluginmanager: pytest.PytestPluginManager) -> None:
    """Add these specifications once, from ``pytest_addhooks`` of the core plugin and of every experiment plugin.

    An experiment plugin registers them too, so that ``-p no:longctx`` (the core off) leaves its hook
    implementations known rather than failing pytest's check of unknown hooks.
    """
    caller = getattr(pluginmanager.hook, "pytest_longctx_tables", None)
    if caller is None or caller.spec is None:
        pluginmanager.add_hookspecs(sys.modules[__name__])
