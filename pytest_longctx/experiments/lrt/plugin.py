"""The Little Retrieval Test's pytest plugin (pytest11 entry point ``longctx-lrt``): its tables and figures.

Uses only the plugin's hooks (``pytest_longctx.hookspecs``) and public API, as a user's plugin would.
Imports only pytest and the standard library at module level.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_longctx.reporting.sections import Section

EXPERIMENT = "lrt"
Rows = Sequence[Mapping[str, Any]]


def _mine(rows: Rows) -> list[Mapping[str, Any]]:
    return [r for r in rows if r.get("experiment") == EXPERIMENT]


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
