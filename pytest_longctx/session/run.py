"""End of a run on the controller: build the run record, compare, gate, write reports, set the exit code."""

from __future__ import annotations

import datetime as dt
import platform
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_longctx.backends import REFERENCE_MODEL, model_note, provider_of
from pytest_longctx.dispatch.prefetch import Dispatcher
from pytest_longctx.dispatch.send import rate_note
from pytest_longctx.reporting.chance import chance_report
from pytest_longctx.reporting.sections import arrange
from pytest_longctx.reporting.side_by_side import models_lines
from pytest_longctx.reporting.writer import (
    PARTIAL_HTML_NAME,
    PARTIAL_RECORD_NAME,
    RECORD_NAME,
    fallback_dir,
    write_partial_reports,
    write_plan_record,
    write_record,
    write_reports,
)
from pytest_longctx.results.aggregate import CellKeys
from pytest_longctx.results.decide import decide
from pytest_longctx.results.decision import GateResult
from pytest_longctx.results.evidence import Evidence, assign_clusters, by_experiment, describe
from pytest_longctx.results.power import plan_power
from pytest_longctx.results.schema import SCHEMA, SCHEMA_VERSION
from pytest_longctx.results.sequential_plan import plan_sequential
from pytest_longctx.run_settings import Settings
from pytest_longctx.session.defaults import declared as declared_defaults
from pytest_longctx.session.hook_calls import call_each, flat
from pytest_longctx.session.keys import RUN_KEY, SETTINGS_KEY, SHARED_KEY, RunFacts, RunState
from pytest_longctx.session.model_gates import decide_models, write_model_records
from pytest_longctx.session.sequential_gate import gate_of
from pytest_longctx.session.spend import account
from pytest_longctx.version import __version__


def git_commit(root: Path) -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"],  # noqa: S607 - git from PATH, as a user runs it
                             cwd=root, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.strip() or None


def build_record(settings: Settings, state: RunFacts, finished: float, workers: int,
                 declared: dict[str, Evidence] | None = None) -> dict[str, Any]:
    """The versioned run record (see docs/run-record.md); every trial stamped with its cluster."""
    agg = state.aggregator
    cells = agg.cells()
    trials = agg.trials
    declared = declared or {}
    assign_clusters(trials, declared)
    clusters: dict[str, set[str]] = {}
    keys = CellKeys()
    for t in trials:
        if t["outcome"] != "error":
            clusters.setdefault(keys(t["experiment"], t["params"]), set()).add(t["cluster"])
    for cell in cells:
        cell["clusters"] = len(clusters.get(cell["key"], ()))
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
            "model_note": model_note(settings.model),
        },
        "fixtures": dict(sorted(fixtures.items())),
        "evidence": describe(declared, trials),
        "cells": cells,
        "trials": trials,
        "usage": agg.usage(),
        "stopped": state.stop_reason,
        #: experiments not run because their data is not here, each with its one line (what to fetch)
        "missing_data": list(getattr(state, "missing_data", ())),
    }


def finish_run(session: pytest.Session) -> None:
    """Compute everything once and write it; never raises (a reporting problem must not lose results)."""
    try:
        _finish(session)
    except Exception as exc:  # the last line of defence: a bug here must not lose the trials
        _rescue(session, exc)


def _finish(session: pytest.Session) -> None:
    config = session.config
    state = config.stash[RUN_KEY]
    settings = config.stash[SETTINGS_KEY]
    declared = by_experiment(e for e in flat(call_each(config, "pytest_longctx_evidence", state.notes))
                             if isinstance(e, Evidence))
    models: dict[str, dict[str, Any]] = {}
    if settings.several:  # one record per model, each gated; the run's is the reference's (session/model_gates.py)
        record, models = decide_models(settings, state, time.time(), config.stash[SHARED_KEY].workers, declared,
                                       build_record, decide)
    else:
        record = build_record(settings, state, time.time(), config.stash[SHARED_KEY].workers, declared)
        if record["stopped"] is None and session.exitstatus == pytest.ExitCode.INTERNAL_ERROR:
            record["stopped"] = "pytest internal error"  # not a complete run: recorded beside the last complete one
        decide(record, settings.gate, declared, state.baseline, state.notes)
    if (gate := gate_of(config)) is not None:
        gate.apply(record)  # --longctx-sequential: the e-processes' verdicts, or the final look's
    _sections(config, record, settings, state, declared, models)
    state.record = record
    if not state.aggregator.trials and not settings.plan and not (state.stop_reason and state.services_started):
        return  # no longctx trial ran (e.g. only ordinary tests were selected): nothing to gate or write
    # (but a run stopped before any trial finished, once requests could go out, is recorded: e.g. while prefetch
    # or a batch was sending, or at start-up because the endpoint cannot be reached)
    decided = GateResult.from_json(record["gate"], stopped=record.get("stopped"))
    if (code := decided.run_exit(int(session.exitstatus))) != session.exitstatus:
        session.exitstatus = code  # the gate's 10 or 11 (4: a refused record; 1: errored trials) on an OK run
    for lines in call_each(config, "pytest_longctx_run_finished", state.notes, config=config, record=record):
        state.written.extend(lines)
    _write(config, record, settings, state)
    if models and not settings.plan:
        write_model_records(models, record, settings, state)


def _sections(config: pytest.Config, record: dict[str, Any], settings: Settings, state: RunState,
              declared: dict[str, Evidence], models: dict[str, dict[str, Any]]) -> None:
    """The record's sections beside the gate: plan, batch, spend, prefetch, defaults, the experiments' own (their
    settings, tables, chance levels, summary lines), the notes."""
    if settings.plan:
        _guarded(state, "the plan summary", lambda: record.__setitem__("plan", state.plan.summary()))
        _guarded(state, "the plan's power statements", lambda: _plan_power(record, settings, state, declared))
    if (batch := state.batch) is not None:
        _guarded(state, "the batch summary", lambda: record.__setitem__("batch", batch.to_json()))
    _guarded(state, "the ledger's usage", lambda: account(config, record, models))  # what was sent and billed
    if state.dispatcher is not None:
        record["prefetch"] = _prefetch_section(state.dispatcher, state.notes)
    record["settings"]["defaults"] = {e: d.to_json() for e, d in sorted(declared_defaults(config).items())}
    for extra in call_each(config, "pytest_longctx_record_settings", state.notes, config=config):
        record["settings"].update(extra)
    record["tables"] = flat(call_each(config, "pytest_longctx_tables", state.notes,
                                      cells=record["cells"], trials=record["trials"]))
    record["chance"] = _chance(config, record, settings, state)
    state.summary_lines = [str(line) for line in flat(call_each(config, "pytest_longctx_summary_lines",
                                                                state.notes, record=record))]
    if models:
        state.summary_lines += models_lines(record.get("models"))
    record["notes"] = list(state.notes)


def _prefetch_section(dispatcher: Dispatcher, notes: list[str]) -> dict[str, Any]:
    """What the prefetch dispatcher sent (and, with the sequential gate, dropped), and its rates."""
    p = dispatcher.progress
    section: dict[str, Any] = {"requests": p.total, "sent": p.done, "failed": p.failed,
                               "input_tokens": p.input_tokens, "output_tokens": p.output_tokens}
    if p.dropped:  # --longctx-sequential: not sent, every alarm covering their trials was settled first
        section["dropped"] = p.dropped
    if (rates := p.rates(dispatcher.concurrency)) is not None:  # the producer against the lanes' need
        section["rates"] = rates
        notes.append(rate_note(rates))
    return section


def _chance(config: pytest.Config, record: dict[str, Any], settings: Settings, state: RunState) -> dict[str, Any]:
    """The experiments' guessing rates and every experiment indistinguishable from them (or 0), with the command
    that runs the same study on the reference model when this one is not a remote model."""
    levels: dict[str, float] = {}
    for found in call_each(config, "pytest_longctx_chance", state.notes, cells=record["cells"],
                           trials=record["trials"]):
        levels.update({str(k): float(v) for k, v in dict(found).items()})
    provider = provider_of(settings.model)
    hint = None if provider.remote else REFERENCE_MODEL
    return chance_report(record["cells"], record["trials"], levels, model=settings.model.spec, hint_model=hint,
                         rootdir=settings.rootdir, double=provider.in_process)


def _guarded(state: RunState, what: str, action: Callable[[], object]) -> None:
    """Run one optional step of the finish; a failure becomes a note instead of losing the record."""
    try:
        action()
    except Exception as exc:  # see the docstring
        state.notes.append(f"could not compute {what}: {type(exc).__name__}: {exc}")


def _plan_power(record: dict[str, Any], settings: Settings, state: RunState, declared: dict[str, Evidence]) -> None:
    """What the planned run could detect (and, with --longctx-detect, what a given drop would need)."""
    price = settings.price(settings.model)  # genai-prices or --longctx-prices (None: price unknown, $0)

    def cost(input_tokens: int, output_tokens: int) -> float:  # sums of many requests: the base rates, no tiers
        return (input_tokens * price.rates.input + output_tokens * price.rates.output) / 1e6 if price else 0.0

    record["plan"]["power"] = plan_power(
        state.plan_evidence, declared, settings.thresholds, settings.alpha, state.baseline,
        settings.detect, cost, candidate=settings.model.spec)
    record["plan"]["sequential"] = plan_sequential(  # per max-drop alarm: requests and dollars to a decision
        state.plan_evidence, declared, settings.thresholds, settings.alpha, state.baseline,
        settings.detect, settings.budget, cost, settings.seed)


def _write(config: pytest.Config, record: dict[str, Any], settings: Settings, state: RunState) -> None:
    """Write the record and report to the report dir or, if that fails, to a fallback folder the summary names.

    A plan writes only its own record (``longctx-plan.json``): the last run's record, report and history stay.
    """
    sections = arrange(call_each(config, "pytest_longctx_report_sections", state.notes,
                                 cells=record["cells"], trials=record["trials"]), record["cells"])
    if record.get("stopped") and not settings.plan:  # a stopped run never replaces the last complete one
        state.notes.append(f"this run was stopped ({record['stopped']}): its record and report are "
                           f"{partial_name()}; the last complete run's {RECORD_NAME}, report and history are left "
                           "as they were")
    record["notes"] = list(state.notes)  # with what the experiments' end-of-run and section hooks noted

    def write(folder: Path) -> list[str]:
        if settings.plan:
            return [f"{write_plan_record(record, folder)} (this plan; the last run's {RECORD_NAME} is left as it was)"]
        if record.get("stopped"):
            return write_partial_reports(record, folder, sections)
        return write_reports(record, folder, sections)

    try:
        state.written += write(settings.report_dir)
        return
    except Exception as exc:  # whatever went wrong, the record goes somewhere
        reason = f"{type(exc).__name__}: {exc}"
    try:
        target = fallback_dir(settings.cache_dir)
        record["report_fallback"] = {"report_dir": str(settings.report_dir), "reason": reason}
        state.written += write(target)
        state.notes.append(f"could not write reports to {settings.report_dir} ({reason}); "
                           f"wrote them to {target} instead")
    except Exception as exc:  # nothing left to try but saying so
        state.notes.append(f"could not write reports to {settings.report_dir} ({reason}) "
                           f"nor to a fallback folder ({type(exc).__name__}: {exc})")


def partial_name() -> str:
    """The stopped run's file names, as the notes say them."""
    return f"{PARTIAL_RECORD_NAME} and {PARTIAL_HTML_NAME}"


def _rescue(session: pytest.Session, exc: Exception) -> None:
    """A bug while finishing: keep the trials in a fallback record, say where, exit 3 (internal error)."""
    state = session.config.stash[RUN_KEY]
    settings = session.config.stash[SETTINGS_KEY]
    reason = f"{type(exc).__name__}: {exc}"
    record = {"schema": SCHEMA, "version": SCHEMA_VERSION, "settings": settings.to_json(), "cells": [],
              "trials": state.aggregator.trials, "finish_error": reason}
    try:
        target = fallback_dir(settings.cache_dir)
        state.notes.append(f"internal error while finishing the run ({reason}); trials saved to "
                           f"{write_record(record, target)}")
    except Exception as again:  # nothing left to try but saying so
        state.notes.append(f"internal error while finishing the run ({reason}); trials not saved: {again}")
    if session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
