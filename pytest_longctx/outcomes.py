"""Turning a test's result into a trial outcome: correct, incorrect (data) or error (infrastructure)."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_longctx.client import Planned
from pytest_longctx.errors import FatalBackendError, LongctxError, UsageError
from pytest_longctx.keys import EMITTED_KEY, TRIAL_KEY

PLAN_KEY = "longctx_plan"


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
    if report.when == "setup" and report.failed and (trial is not None or item.get_closest_marker("longctx")):
        # A fixture failed, before or after ``longctx`` itself was set up: an error of the cell, never a wrong answer.
        record = _setup_error_record(item, call)
        if trial is not None:
            record.update(experiment=trial.experiment, params=trial.params, sample=trial.sample, seed=trial.seed)
        _emit(item, report, record)
        _shorten(call, report)
        return
    if trial is None or report.when != "call" or item.stash.get(EMITTED_KEY, False):
        return
    excinfo = call.excinfo
    if excinfo is not None and isinstance(excinfo.value, Planned):
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0, "longctx plan: request recorded, not sent")
        report.user_properties.append((PLAN_KEY, excinfo.value.entry))
        item.stash[EMITTED_KEY] = True
        return
    if report.passed:
        record = trial.to_record("correct")
    elif excinfo is not None and excinfo.type is AssertionError and trial.completions:
        reason = str(excinfo.value).split("\n")[0][:500] or "assertion failed"
        record = trial.to_record("incorrect", reason=reason)
        report.outcome = "passed"
        report.longrepr = None
    elif report.failed and excinfo is not None:
        record = trial.to_record("error", error=f"{excinfo.typename}: {excinfo.value}".split("\n")[0][:1000])
        record["fatal"] = isinstance(excinfo.value, (FatalBackendError, UsageError))
        _shorten(call, report)
        if record["fatal"]:
            item.session.shouldstop = str(excinfo.value)
    else:
        return
    _emit(item, report, record)


def _emit(item: pytest.Item, report: pytest.TestReport, record: dict[str, Any]) -> None:
    from pytest_longctx.aggregate import RECORD_KEY

    report.user_properties.append((RECORD_KEY, record))
    item.stash[EMITTED_KEY] = True


def _setup_error_record(item: pytest.Item, call: pytest.CallInfo[None]) -> dict[str, Any]:
    from pytest_longctx.fixtures import SAMPLE_ARG, condition_params

    marker = item.get_closest_marker("longctx")
    experiment = str(marker.args[0]) if marker and marker.args else getattr(item, "originalname", item.name)
    callspec = getattr(item, "callspec", None)
    excinfo = call.excinfo
    error = f"{excinfo.typename}: {excinfo.value}".split("\n")[0][:1000] if excinfo else "setup failed"
    return {
        "nodeid": item.nodeid, "experiment": experiment, "params": condition_params(item),
        "sample": callspec.params.get(SAMPLE_ARG, 0) if callspec else 0, "seed": None,
        "outcome": "error", "item": None, "expected": None, "answer": None, "raw": "", "reason": None,
        "error": error, "fatal": bool(excinfo and isinstance(excinfo.value, (UsageError, FatalBackendError))),
        "calls": 0, "cache_hits": 0, "input_tokens": 0, "output_tokens": 0, "latency_s": 0.0, "detail": {},
    }


def _shorten(call: pytest.CallInfo[None], report: pytest.TestReport) -> None:
    """Our own errors (bad input, API failures) show as one line, not a traceback."""
    excinfo = call.excinfo
    if excinfo is not None and isinstance(excinfo.value, LongctxError):
        report.longrepr = f"{excinfo.typename}: {excinfo.value}"
