"""Deciding a built run record: check it against the compared run, gate it, summarize each experiment, in place.

The run's finish (``session/run.py``), a run of several models (``session/model_gates.py``) and ``longctx-gate``
call :func:`decide`; it returns the one :class:`~pytest_longctx.results.decision.GateResult` the record's ``gate``
section and the exit code come from. No pytest here: the command decides exactly as the run did.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_longctx.errors import UsageError
from pytest_longctx.gate_spec import GateSettings
from pytest_longctx.results.baseline import baseline_problems, partial_note, refusal
from pytest_longctx.results.compare import Comparison, compare
from pytest_longctx.results.decision import GateResult, errored_trials, refused, with_sequential
from pytest_longctx.results.evidence import Evidence, assign_clusters
from pytest_longctx.results.gate import GateInputs, decide_checks
from pytest_longctx.results.pairing import cluster_disagreement
from pytest_longctx.results.schema import load_record


def decide(record: dict[str, Any], settings: GateSettings, declared: dict[str, Evidence],
           baseline: dict[str, Any] | None, notes: list[str],
           sequential: Mapping[str, Any] | None = None) -> GateResult:
    """Compare a built record with the compared run, gate it and summarize each experiment, in place; return the
    decision (also in ``record["gate"]``).

    Whatever fails in the comparison or the gate is a gate error, never a pass; records that contradict each other
    are refused (exit 4); a failing summary costs a note. ``sequential``: a sequential run's recorded section
    (``longctx-gate`` on its record): its alarms keep the run's sequential verdicts, and say so.
    """
    comparison, record["comparison"], result = _compare_and_gate(record, settings, baseline, notes, declared)
    if sequential is not None and not settings.plan:
        result = with_sequential(result, sequential, source="record")
    record["gate"] = result.to_json()
    try:
        _summarize(record, settings, declared, comparison)
    except Exception as exc:  # see the docstring
        notes.append(f"could not compute the per-experiment summary: {type(exc).__name__}: {exc}")
    return result


def _summarize(record: dict[str, Any], settings: GateSettings, declared: dict[str, Evidence],
               comparison: Comparison | None) -> None:
    """Pooled accuracy, effective length and detectable drop per experiment (and the compared run's lengths)."""
    from pytest_longctx.results.overview import effective_lengths, overview

    if settings.plan:
        return
    trials = record["trials"]
    record["experiments"] = overview(trials, declared, comparison=comparison, alpha=settings.alpha,
                                     thresholds=settings.thresholds)
    record["effective_length"] = effective_lengths(trials, declared, settings.effective_accuracy, settings.seed)
    if comparison is not None and record.get("comparison"):
        record["comparison"]["effective_length"] = effective_lengths(
            comparison.baseline.get("trials", []), declared, settings.effective_accuracy, settings.seed)
        from pytest_longctx.results.effective import paired_lengths

        record["comparison"]["effective_length_diff"] = paired_lengths(
            trials, comparison.baseline.get("trials", []), declared, settings.effective_accuracy, settings.seed)


def _error(reason: str, settings: GateSettings, errored: int, stopped: str | None) -> GateResult:
    texts = tuple(t.text for t in settings.thresholds)
    return GateResult(errors=(reason,), thresholds=texts, alpha=settings.alpha, errored=errored, stopped=stopped)


def _compare_and_gate(record: dict[str, Any], settings: GateSettings, baseline: dict[str, Any] | None,
                      notes: list[str], declared: dict[str, Evidence]
                      ) -> tuple[Comparison | None, dict[str, Any] | None, GateResult]:
    """The comparison (with a compared run) and the gate; whatever fails is a gate error, never a pass."""
    compared_with = str(settings.compare) if settings.compare is not None else None
    errored, stopped = errored_trials(record), record.get("stopped")
    if settings.plan:
        if settings.thresholds:
            notes.append("plan mode: nothing was answered, so the gate was not evaluated")
        return None, None, GateResult(alpha=settings.alpha, stopped=stopped)
    comparison = summary = None
    partial = None
    try:
        if settings.compare is not None and baseline is None:
            baseline = load_record(settings.compare)  # normally read at start-up (ModelServices.check_inputs)
        if baseline is not None:
            problems = baseline_problems(baseline, seed=settings.seed, protocol=settings.protocol,
                                         cells=record["cells"])
            refused_why = refusal(compared_with, problems, partial_ok=settings.compare_partial)
            if refused_why is not None:  # normally refused at start-up (session/preflight.py): nothing decided on it
                record["compare_error"] = refused_why
                texts = [t.text for t in settings.thresholds]
                return None, None, _with(refused(refused_why, texts, settings.alpha), errored, stopped)
            partial = partial_note(problems)
            assign_clusters([t for t in baseline["trials"] if "cluster" not in t], declared)
            comparison, summary = compare(record["cells"], record["trials"], baseline, record["settings"],
                                          settings.alpha)
            summary["partial"] = partial
    except Exception as exc:  # a comparison that could not be made fails the gate
        record["compare_error"] = str(exc) if isinstance(exc, UsageError) else f"{type(exc).__name__}: {exc}"
        return None, None, _error(f"comparison with {compared_with} failed: {record['compare_error']}", settings,
                                  errored, stopped)
    if comparison is not None and (why := cluster_disagreement(comparison.pairing)) is not None:
        record["compare_error"] = why
        texts = [t.text for t in settings.thresholds]
        return None, summary, _with(refused(f"{compared_with}: {why}", texts, settings.alpha), errored, stopped)
    inputs = GateInputs(record["cells"], record["trials"], comparison, compared_with, settings.alpha,
                        lengths={e: d.length for e, d in declared.items() if d.length is not None},
                        units={e: d.unit for e, d in declared.items()},
                        effective_accuracy=settings.effective_accuracy, seed=settings.seed,
                        samples=None if settings.samples_all else settings.samples, partial=partial)
    try:
        result = _with(decide_checks(settings.thresholds, inputs), errored, stopped)
    except Exception as exc:  # a gate that could not run fails closed
        result = _error(f"the gate could not be evaluated: {type(exc).__name__}: {exc}", settings, errored, stopped)
    return comparison, summary, result


def _with(result: GateResult, errored: int, stopped: str | None) -> GateResult:
    from dataclasses import replace

    return replace(result, errored=errored, stopped=stopped)
