"""Controller side of a crashed xdist worker: the test it was running becomes an ``error`` trial.

xdist replaces a dead worker and reports its running test with a synthetic failed report (``when="???"``)
carrying no user properties. This plugin (registered on the controller only, under xdist) remembers
each trial's identity from its setup report (see :mod:`pytest_longctx.session.identity`) and the reason a node
went down, and attaches an error record to the crash report before the controller aggregates it, so
the cell counts the trial as an error with the crash's reason instead of losing it.

A worker that dies during set-up has sent no identity: the cell is then taken from a sibling trial of
the same cell (same test function and parametrization id, other sample) whose setup was reported; if
no sibling of that test function was seen, it is not known to be a longctx trial and xdist's own
failed report is all there is (the run still fails).
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_longctx.results.aggregate import RECORD_KEY
from pytest_longctx.session.identity import IDENTITY_KEY, error_record, split_nodeid


class CrashRecorder:
    """Hooks that turn xdist's crash reports into error records."""

    def __init__(self) -> None:
        self.identities: dict[str, dict[str, Any]] = {}
        self.cells: dict[tuple[str, str], dict[str, Any]] = {}
        self.down: dict[str, str] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "setup":
            for name, value in report.user_properties:
                if name == IDENTITY_KEY and isinstance(value, dict):
                    self.identities[report.nodeid] = value
                    func, ids, _ = split_nodeid(report.nodeid)
                    self.cells[(func, ids)] = {"experiment": value["experiment"], "params": value["params"],
                                               **({"model": value["model"]} if "model" in value else {})}
                    self.cells.setdefault((func, "\0any"), {"experiment": value["experiment"]})
        elif report.when == "teardown":
            self.identities.pop(report.nodeid, None)

    def pytest_testnodedown(self, node: Any, error: object | None) -> None:
        if error is not None:
            self.down[str(node.gateway.id)] = str(error).strip().split("\n")[0]

    @pytest.hookimpl(tryfirst=True)
    def pytest_handlecrashitem(self, crashitem: str, report: pytest.TestReport, sched: object) -> None:
        identity, source = self._identity(crashitem)
        if identity is None:
            return
        worker = getattr(getattr(report, "node", None), "gateway", None)
        why = self.down.get(str(getattr(worker, "id", "")), "")
        error = f"WorkerCrashed: {report.longrepr}" + (f" ({why})" if why else "")
        record = error_record(crashitem, identity, error, fatal=False, seed=identity.get("seed"))
        record["detail"] = {"crash": True, "identity_from": source}
        report.user_properties = [*report.user_properties, (RECORD_KEY, record)]

    def _identity(self, nodeid: str) -> tuple[dict[str, Any] | None, str]:
        known = self.identities.pop(nodeid, None)
        if known is not None:
            return known, "setup report"
        func, ids, sample = split_nodeid(nodeid)
        sibling = self.cells.get((func, ids))
        if sibling is not None:
            return {**sibling, "sample": sample}, "sibling trial"
        same_test = self.cells.get((func, "\0any"))
        if same_test is not None:  # the cell's params are unknown: its own cell, named by the id
            return {"experiment": same_test["experiment"], "params": {"id": ids}, "sample": sample}, "nodeid"
        return None, ""
