"""The run controller, a plugin object registered on the controller only (never on an xdist worker): the collected
cells checked, every report counted, the run finished (record, gate, reports) and summarized."""

from __future__ import annotations

import pytest

from pytest_longctx.backends import model_note
from pytest_longctx.corpus.missing import merge_missing
from pytest_longctx.errors import UsageError
from pytest_longctx.reporting.errors import is_longctx
from pytest_longctx.reporting.terminal import write_summary
from pytest_longctx.results.aggregate import records_of
from pytest_longctx.run_settings import Settings
from pytest_longctx.session.keys import RUN_KEY, SETTINGS_KEY, RunState
from pytest_longctx.session.outcomes import PLAN_KEY, USAGE_KEY
from pytest_longctx.session.preflight import check_baseline_cells, check_selectors
from pytest_longctx.session.run import finish_run
from pytest_longctx.session.stopping import budget_stop, check_maxfail, request_stop, settle


class RunController:
    """Controller-only hooks: the collected cells checked, aggregation, the finish (record, gate, reports), the
    summary. Its typed state is ``config.stash[RUN_KEY]`` (:class:`~pytest_longctx.session.keys.RunState`)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.settings: Settings = config.stash[SETTINGS_KEY]
        self.session: pytest.Session | None = None
        self.finished = False

    @property
    def state(self) -> RunState:
        return self.config.stash[RUN_KEY]

    @pytest.hookimpl(tryfirst=True)  # pytest prints header lines in reverse call order: these come last
    def pytest_report_header(self) -> list[str]:
        """Which model runs, what it is, and what its SDK would otherwise repeat on every request."""
        s = self.settings
        lines = []
        roles = [("model", s.model)] if not s.several else [
            ("reference" if m == s.model else "model", m) for m in s.models]
        for role, spec in (*roles, ("judge", s.judge)):
            if role == "judge" and spec == s.model:
                continue
            note = model_note(spec)
            lines.append(f"longctx {role}: {spec.spec}" + (f": {note}" if note else ""))
        return lines

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """Threshold selectors are checked against the collected cells first (before the sequential gate counts
        the sample groups and the services start), so a selector that can match nothing is a usage error before
        any request is sent. Under xdist the controller does not collect: there the gate reports the same problem
        at the end (a gate error, exit 11). The longctx trials are counted for the progress line."""
        self.state.collected = sum(1 for item in session.items if item.get_closest_marker("longctx"))
        if not self.state.collected:
            return
        try:
            check_selectors(self.settings, session.items)
            refused = check_baseline_cells(self.settings, session.items, self.state.baseline)
        except UsageError as exc:
            raise pytest.UsageError(str(exc)) from None
        if refused is not None:  # before any service starts: nothing is sent
            raise pytest.UsageError(refused)

    def _usage_error(self, message: str) -> None:
        """Bad input found while collecting or in a fixture: nothing more is sent (prefetch cancelled, workers told
        through the stop file), and the session ends as a usage error: pytest prints the line once, exit 4."""
        self.state.usage_error = message
        request_stop(self.config, f"usage error: {message}")
        raise pytest.UsageError(message)

    @pytest.hookimpl(tryfirst=True)
    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        """Before the terminal lists it as a collection error: bad input stops the session (pytest prints it once).
        An experiment skipped for want of its data is noted once (every xdist worker reports it)."""
        message = getattr(report, "longctx_usage_error", None)
        if message is not None:
            self._usage_error(str(message))
        missing = getattr(report, "longctx_data_missing", None)
        if isinstance(missing, dict):
            merge_missing(self.state.missing_data, missing)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Runs for every report, including those xdist replays from workers (the sequential gate looks after it,
        the progress line last: :class:`ControllerLast`)."""
        state = self.state
        usage_error = next((str(v) for k, v in report.user_properties if k == USAGE_KEY), None)
        if usage_error is not None and state.usage_error is None:
            self._usage_error(usage_error)
        for record in records_of(report.user_properties):
            state.aggregator.add(record)
            state.display.outcome(str(record["outcome"]))
            if record.get("fatal") and state.stop_reason is None:
                request_stop(self.config, record["error"])
                if self.session is not None:
                    self.session.shouldstop = record["error"]
        if report.failed and self.session is not None and self.session.shouldfail:
            check_maxfail(self.session)  # -x / --maxfail: stop prefetch now, not when the interpreter exits
        for key, value in report.user_properties:
            if key == PLAN_KEY and isinstance(value, dict):
                state.plan.add(value)
                model = (value.get("trial") or {}).get("model")  # several models: the design is each model's
                if model in (None, self.settings.model.spec):
                    state.plan_evidence.add(value)
        if self.settings.budget is not None:
            budget_stop(self.config)  # --longctx-budget: the ledger refused a request, the run stops

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self.finished = True
        state = self.state
        state.display.close(state, self.settings, state.collected)
        settle(session)  # a stopped run: prefetch cancelled and joined, why in the record, exit 2
        if state.usage_error is not None:
            return  # bad input, not a result: nothing written, the previous record and history stay as they were
        finish_run(session)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.state.usage_error is not None:
            report = self.settings.report_dir / "longctx.json"
            terminalreporter.write_line(f"longctx: usage error, no run record written ({report} left as it was)")
            return
        try:
            write_summary(terminalreporter, self.state, self.settings)
        except Exception as exc:  # never raise from the summary: the record is already written
            terminalreporter.write_line(f"longctx: could not print the summary: {type(exc).__name__}: {exc}",
                                        red=True)

    def pytest_unconfigure(self) -> None:
        """Interrupted or stopped while the session started (xdist plans the run, and sends batches, there): pytest
        then skips its ``pytest_sessionfinish`` and summary, so the stopped run is recorded and summarized here
        (before the model services stop: registered after them, this runs first)."""
        session = self.session
        if session is None or self.finished:
            return
        if session.exitstatus != pytest.ExitCode.INTERRUPTED and self.state.stop_reason is None:
            return
        self.pytest_sessionfinish(session)
        terminalreporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if terminalreporter is not None:
            self.pytest_terminal_summary(terminalreporter)


class ControllerLast:
    """The run controller's hooks that run after every other plugin's."""

    def __init__(self, controller: RunController) -> None:
        self.controller = controller

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """One progress line for the whole run, once the controller and the sequential gate have counted it."""
        settled = report.when == "call" or (report.when == "setup" and not report.passed)  # the trial's outcome
        if settled and is_longctx(report):
            state = self.controller.state  # of the longctx trials collected, not every test (session.testscollected)
            state.display.item_finished(state, self.controller.settings, state.collected)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """A usage error a fixture found exits 4. Last, after plugins that OR exit codes (syrupy: 4 | 2 would be 6)."""
        state = session.config.stash[RUN_KEY]
        if state.usage_error is not None:
            session.exitstatus = pytest.ExitCode.USAGE_ERROR
        elif state.stop_reason is not None and session.exitstatus in (0, 1):
            session.exitstatus = pytest.ExitCode.INTERRUPTED  # pytest ends -x "failed" (without xdist): it was stopped
