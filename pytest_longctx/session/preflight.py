"""Checks of the gate's inputs before any request is sent: the compared run, the report dir, the selectors.

A problem found here is a one-line usage error (exit 4) that costs nothing: no trial has run, the
previous run record and the cache are untouched. What can only be known at the end (e.g. selectors
under xdist, whose controller does not collect) is checked again by the gate, which fails closed.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_longctx.errors import UsageError
from pytest_longctx.results.aggregate import cell_key
from pytest_longctx.results.baseline import baseline_problems, refusal
from pytest_longctx.results.schema import load_record
from pytest_longctx.results.thresholds import describe_cells, unmatched
from pytest_longctx.run_settings import Settings
from pytest_longctx.session.identity import trial_identity
from pytest_longctx.util.fsutil import folder_problem


def check_gate_inputs(settings: Settings) -> dict[str, Any] | None:
    """Validate the gate's options at start-up; return the compared run record (None without one).

    Raises UsageError naming the option: a relative threshold without ``--longctx-compare``, a compare
    file that is not a valid run record, a report dir that cannot be written.
    """
    relative = [t.text for t in settings.thresholds if t.kind == "max-drop"]
    if relative and settings.compare is None and not settings.plan and not settings.several:  # several: the reference
        raise UsageError(f"--longctx-threshold: {relative[0]!r} is relative to an earlier run; "
                         "pass --longctx-compare PATH (that run's longctx.json)")
    baseline = None
    if settings.compare is not None:
        baseline = load_record(settings.compare, flag="--longctx-compare")
        refused = refusal(settings.compare, baseline_problems(baseline, seed=settings.seed, protocol=settings.protocol),
                          partial_ok=settings.compare_partial)
        if refused is not None:
            raise UsageError(refused)

    problem = folder_problem(settings.report_dir)
    if problem is not None:
        raise UsageError(f"--longctx-report-dir: {settings.report_dir} {problem}; pass a writable folder")
    return baseline


def collected_cells(items: list[pytest.Item]) -> list[dict[str, Any]]:
    """The condition cells (experiment and params) that the collected longctx items will fill."""
    seen: dict[str, dict[str, Any]] = {}
    for item in items:
        if item.get_closest_marker("longctx") is None:
            continue
        identity = trial_identity(item)
        experiment, params = identity["experiment"], identity["params"]
        seen.setdefault(cell_key(experiment, params), {"experiment": experiment, "params": params})
    return list(seen.values())


def check_selectors(settings: Settings, items: list[pytest.Item]) -> None:
    """After collection (without xdist): a threshold whose selector matches no collected cell is a usage error."""
    if not settings.thresholds:
        return
    cells = collected_cells(items)
    if not cells:
        return  # no longctx test selected: pytest reports that itself (exit 5) or the run is not an eval

    missing = unmatched(settings.thresholds, cells)
    if missing:
        raise UsageError(f"--longctx-threshold: {missing[0].text!r} matches none of the collected cells "
                         f"({describe_cells(cells)}); fix its selector or select the tests it names")


def check_baseline_cells(settings: Settings, items: list[pytest.Item],
                         baseline: dict[str, Any] | None = None) -> str | None:
    """After collection: the refusal of a compared run that lacks some of the collected cells (None: it has them
    all, or there is no compared run, or --longctx-compare-partial accepts it). Workers read the record here."""
    if settings.compare is None:
        return None
    cells = collected_cells(items)
    if not cells:
        return None

    if baseline is None:
        baseline = load_record(settings.compare, flag="--longctx-compare")
    problems = [p for p in baseline_problems(baseline, seed=None, protocol=None, cells=cells) if p.kind == "cells"]
    return refusal(settings.compare, problems, partial_ok=settings.compare_partial)


class WorkerCheck:
    """On an xdist worker (the controller does not collect there): the compared run checked against this worker's
    own items. When it is refused, its longctx tests end as that usage error before their first request, unsent,
    and the controller stops the session (exit 4)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.refused: str | None = None

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        try:
            self.refused = check_baseline_cells(self.settings, session.items)
        except UsageError as exc:
            self.refused = str(exc)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        if self.refused is not None and item.get_closest_marker("longctx") is not None:
            raise UsageError(self.refused)
