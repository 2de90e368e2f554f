"""End of a run on the controller: build the run record, compare, gate, write reports, set the exit code."""

from __future__ import annotations

import datetime as dt
import platform
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_longctx import __version__
from pytest_longctx.compare import baselines_by_key, compare, load_record
from pytest_longctx.errors import UsageError
from pytest_longctx.gating import evaluate
from pytest_longctx.keys import RUN_KEY, SETTINGS_KEY
from pytest_longctx.options import Settings

SCHEMA = "pytest-longctx/run"
SCHEMA_VERSION = 1


def git_commit(root: Path) -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"],  # noqa: S607 - git from PATH, as a user runs it
                             cwd=root, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.strip() or None


def build_record(settings: Settings, state: Any, finished: float, workers: int) -> dict[str, Any]:
    """The versioned run record (see README "Run record")."""
    agg = state.aggregator
    cells = agg.cells()
    trials = agg.trials
    tokenizers = sorted({t["detail"]["tokenizer"] for t in trials if "tokenizer" in t.get("detail", {})})
    fixtures: dict[str, str] = {}
    for t in trials:
        fixtures.update(t.get("detail", {}).get("fixtures", {}))
    return {
        "schema": SCHEMA,
        "version": SCHEMA_VERSION,
        "settings": {
            **settings.to_json(),
            "plugin_version": __version__,
            "pytest_version": pytest.__version__,
            "python": platform.python_version(),
            "git_commit": git_commit(settings.rootdir),
            "started": dt.datetime.fromtimestamp(state.started, dt.UTC).isoformat(timespec="seconds"),
            "finished": dt.datetime.fromtimestamp(finished, dt.UTC).isoformat(timespec="seconds"),
            "duration_s": round(finished - state.started, 2),
            "workers": workers,
            "tokenizers": tokenizers,
        },
        "fixtures": dict(sorted(fixtures.items())),
        "cells": cells,
        "trials": trials,
        "usage": agg.usage(),
        "stopped": state.stop_reason,
    }


def finish_run(session: pytest.Session) -> None:
    """Compute everything once; never raise (a reporting problem must not lose results)."""
    config = session.config
    state = config.stash[RUN_KEY]
    settings = config.stash[SETTINGS_KEY]
    from pytest_longctx.keys import SHARED_KEY

    record = build_record(settings, state, time.time(), config.stash[SHARED_KEY].workers)
    baseline = None
    if settings.compare is not None:
        try:
            baseline = load_record(settings.compare)
        except UsageError as exc:
            record["compare_error"] = str(exc)
    if baseline is not None:
        alphas = [t.alpha for t in settings.thresholds if t.alpha is not None]
        record["comparison"] = compare(record["cells"], record["trials"], baseline, min(alphas) if alphas else 0.05)
    else:
        record["comparison"] = None
    record["gate"] = evaluate(record["cells"], settings.thresholds, baselines_by_key(baseline))
    if settings.plan:
        from pytest_longctx.plan import summarize_plan

        record["plan"] = summarize_plan(state.plan, settings)
    if state.batch is not None:
        record["batch"] = state.batch.to_json()
    if state.dispatcher is not None:
        p = state.dispatcher.progress
        record["prefetch"] = {"requests": p.total, "sent": p.done, "failed": p.failed,
                              "input_tokens": p.input_tokens, "output_tokens": p.output_tokens}
    from pytest_longctx.reporting.tables import experiment_tables

    record["tables"] = experiment_tables(record["cells"], record["trials"], state.notes)
    record["notes"] = list(state.notes)
    state.record = record
    if not state.aggregator.trials and not settings.plan:
        return
    from pytest_longctx.qa.baseline import update_from_record

    try:
        stored = update_from_record(record, settings.cache_dir)
    except OSError as exc:
        stored = None
        state.written.append(f"could not store the qa-baseline results: {exc}")
    if stored is not None:
        record["settings"]["qa_baseline_file"] = str(stored)
    from pytest_longctx.reporting.writer import write_reports

    try:
        state.written += write_reports(record, settings.report_dir)
    except OSError as exc:
        state.written.append(f"could not write reports to {settings.report_dir}: {exc}")
    if record["gate"]["status"] == "fail" and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = record["gate"]["exit_code"]
