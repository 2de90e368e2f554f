"""Turning a test's result into a trial outcome: correct, incorrect (data) or error (infrastructure)."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_longctx.corpus.missing import DataMissing, is_selected
from pytest_longctx.dispatch.skips import AlarmsSettled, Planned, RunStopped
from pytest_longctx.errors import FatalBackendError, LongctxError, UsageError
from pytest_longctx.reporting.errors import TRIAL_PROPERTY
from pytest_longctx.results.aggregate import RECORD_KEY, records_of
from pytest_longctx.session.identity import IDENTITY_KEY, error_record, trial_identity
from pytest_longctx.session.keys import EMITTED_KEY, TRIAL_KEY
from pytest_longctx.session.trial import Trial

PLAN_KEY = "longctx_plan"
#: User property carrying a usage error that a fixture or test raised (its one-line message).
USAGE_KEY = "longctx_usage_error"
#: User property of a trial skipped because every sequential alarm covering it was settled: those alarms' texts.
SETTLED_KEY = "longctx_alarms_settled"
#: User property of a trial skipped because the run stopped (budget, Ctrl-C, a fatal error): its answer never came.
STOPPED_KEY = "longctx_run_stopped"


def classify(item: pytest.Item, call: pytest.CallInfo[None], report: pytest.TestReport) -> None:
    """Rewrite ``report`` for a longctx trial and attach its record as a user property.

    * passed → ``correct``.
    * AssertionError raised by the test body after it asked the model → ``incorrect``: the report
      becomes passed (a wrong answer does not fail the run) and shows as ``incorrect``.
    * Anything else (backend error after retries, bad fixture, bug, an assert before any answer)
      → ``error``: the report stays failed and the trial is never counted as wrong.
    * Plan mode: the test ends skipped and carries the request it would have sent.
    """
    trial = item.stash.get(TRIAL_KEY, None)
    excinfo = call.excinfo
    longctx = trial is not None or item.get_closest_marker("longctx") is not None
    if longctx:
        report.user_properties.append((TRIAL_PROPERTY, True))  # what is_longctx reads (not the keywords)
        if excinfo is not None and isinstance(excinfo.value, RunStopped):
            report.user_properties.append((STOPPED_KEY, str(excinfo.value)))
    if report.failed and excinfo is not None and isinstance(excinfo.value, UsageError) and longctx:
        _usage_error(item, report, excinfo.value)
        return
    if report.when == "setup" and longctx:
        if report.failed:
            # A fixture failed, before or after ``longctx`` was set up: an error of the cell, never a wrong answer.
            _emit(item, report, _setup_error_record(item, call, None if trial is None else trial.seed))
            _shorten(call, report)
        else:
            # For the controller, in case this worker dies while the test runs (a fresh list: item's stays as is).
            identity = {**trial_identity(item), "seed": None if trial is None else trial.seed}
            report.user_properties = [*report.user_properties, (IDENTITY_KEY, identity)]
        return
    if trial is None or report.when != "call" or item.stash.get(EMITTED_KEY, False):
        return
    if excinfo is not None and isinstance(excinfo.value, AlarmsSettled):  # a skip, no record: counted per alarm
        report.user_properties.append((SETTLED_KEY, list(excinfo.value.thresholds)))
        item.stash[EMITTED_KEY] = True
        return
    if excinfo is not None and isinstance(excinfo.value, Planned):
        _planned(item, report, trial, excinfo.value)
        return
    record = _call_record(item, call, report, trial)
    if record is not None:
        _emit(item, report, record)


def _usage_error(item: pytest.Item, report: pytest.TestReport, error: UsageError) -> None:
    """Bad input found by a fixture or the test (docs folder, QA file, corpus): no trial record (it is not a
    result); the controller stops the session as a usage error on this report (``session/controller.py``)."""
    message = str(error).split("\n")[0][:1000]
    report.user_properties.append((USAGE_KEY, message))
    report.longrepr = f"UsageError: {message}"
    item.stash[EMITTED_KEY] = True
    if hasattr(item.config, "workerinput") and not item.session.shouldstop:
        item.session.shouldstop = "usage error"  # this worker runs nothing more


def _planned(item: pytest.Item, report: pytest.TestReport, trial: Trial, planned: Planned) -> None:
    """Plan mode: the test ends skipped and carries the request it would have sent."""
    report.outcome = "skipped"
    report.longrepr = (str(item.path), item.location[1] or 0, "longctx plan: request recorded, not sent")
    identity = {"experiment": trial.experiment, "params": trial.params, "item": trial.item, "sample": trial.sample,
                "nodeid": trial.nodeid,  # what the trial asks: the plan's power statements count items
                **({"model": trial.model_key} if trial.model_key is not None else {})}
    judge = "longctx_judge" in getattr(item, "fixturenames", ())  # the plan counts a judge call for it
    report.user_properties.append((PLAN_KEY, {**planned.entry, "trial": identity, "judge": judge}))
    item.stash[EMITTED_KEY] = True
    del item.stash[TRIAL_KEY]  # done with: a plan of 19,750 trials need not keep each one's RNG and oracle


def _call_record(item: pytest.Item, call: pytest.CallInfo[None], report: pytest.TestReport,
                 trial: Trial) -> dict[str, Any] | None:
    """The trial's record after its call: correct, incorrect (a failed assert after an answer) or error."""
    excinfo = call.excinfo
    if excinfo is not None and excinfo.type is AssertionError and trial.completions:
        reason = str(excinfo.value).split("\n")[0][:500] or "assertion failed"
        record = trial.to_record("incorrect", reason=reason)
        report.outcome = "passed"
        report.longrepr = None
        return record
    if report.passed:
        return trial.to_record("correct")
    if report.failed and excinfo is not None:
        record = trial.to_record("error", error=f"{excinfo.typename}: {excinfo.value}".split("\n")[0][:1000])
        record["fatal"] = isinstance(excinfo.value, (FatalBackendError, UsageError))
        _shorten(call, report)
        if record["fatal"]:
            item.session.shouldstop = str(excinfo.value)
        return record
    return None


def status_of(report: pytest.TestReport) -> tuple[str, str, str]:
    """A longctx trial's category, letter and word: ``incorrect``, ``error``, ``planned``, ``usage error``, else
    pytest's own."""
    keys = {name for name, _ in report.user_properties}
    if USAGE_KEY in keys:
        return "usage error", "U", "USAGE ERROR"  # its own category: shown once, by the stop line
    if PLAN_KEY in keys:
        return "planned", "p", "PLANNED"
    if report.when == "call":
        for record in records_of(report.user_properties):
            if record["outcome"] == "incorrect":
                return "incorrect", "i", "INCORRECT"
            if record["outcome"] == "error":
                return "error", "E", "ERROR"
        return {"passed": ("passed", ".", "PASSED"), "skipped": ("skipped", "s", "SKIPPED")}.get(
            report.outcome, ("failed", "F", "FAILED"))
    if report.failed:
        return "error", "E", "ERROR"
    return ("skipped", "s", "SKIPPED") if report.skipped else ("", "", "")


def mark_collect_report(collector: pytest.Collector, report: pytest.CollectReport) -> None:
    """A usage error while collecting (e.g. an experiment's corpus is missing) is marked on its report, which
    xdist carries to the controller; the controller then stops the session as a usage error (exit 4, one line).
    An experiment skipped for want of its data, when selected, carries its one summary line."""
    call = getattr(report, "call", None)
    excinfo = getattr(call, "excinfo", None)
    if report.failed and excinfo is not None:
        if isinstance(excinfo.value, (UsageError, pytest.UsageError)):
            message = str(excinfo.value).split("\n")[0][:1000]
            report.longrepr = f"UsageError: {message}"
            report.longctx_usage_error = message  # type: ignore[attr-defined]
    elif report.skipped and excinfo is not None:
        missing = excinfo.value
        if isinstance(missing, DataMissing) and is_selected(collector, missing.experiments):
            report.longctx_data_missing = missing.to_json()  # type: ignore[attr-defined]  # one summary line


def wrong_answer(item: pytest.Item, call: pytest.CallInfo[None]) -> pytest.ExceptionInfo[BaseException] | None:
    """The failed assert of a trial that got its answer: an ``incorrect`` trial, whose report :func:`classify`
    turns into a passed one without a traceback. The plugin hides it while pytest builds the report, so the
    traceback (about 10 ms a trial, with source and AST) is not formatted only to be thrown away. An
    ``xfail`` mark keeps it (pytest's xfail handling needs the exception)."""
    trial = item.stash.get(TRIAL_KEY, None)
    excinfo = call.excinfo
    if (call.when == "call" and trial is not None and excinfo is not None and excinfo.type is AssertionError
            and trial.completions and not item.stash.get(EMITTED_KEY, False)
            and item.get_closest_marker("xfail") is None):
        return excinfo
    return None


def _emit(item: pytest.Item, report: pytest.TestReport, record: dict[str, Any]) -> None:
    report.user_properties.append((RECORD_KEY, record))
    item.stash[EMITTED_KEY] = True


def _setup_error_record(item: pytest.Item, call: pytest.CallInfo[None], seed: int | None) -> dict[str, Any]:
    excinfo = call.excinfo
    error = f"{excinfo.typename}: {excinfo.value}" if excinfo else "setup failed"
    fatal = bool(excinfo and isinstance(excinfo.value, (UsageError, FatalBackendError)))
    return error_record(item.nodeid, trial_identity(item), error, fatal=fatal, seed=seed)


def _shorten(call: pytest.CallInfo[None], report: pytest.TestReport) -> None:
    """Our own errors (bad input, API failures) show as one line, not a traceback."""
    excinfo = call.excinfo
    if excinfo is not None and isinstance(excinfo.value, LongctxError):
        report.longrepr = f"{excinfo.typename}: {excinfo.value}"
