"""End of a run of several models: one record per model, each gated, and the side-by-side summary.

Each model's trials make a record in the usual schema (``settings.model`` names it), built and decided as a
one-model run's, at ``--longctx-alpha`` divided by the number of models gated (Bonferroni: an unchanged set of
models fails the run at most alpha of the time). The reference is gated with the thresholds that need no compared
run (all of them against ``--longctx-compare`` when given); every other model with all of them, against the
reference's record (or the ``--longctx-compare`` record). The run's record is the reference's, with ``models``
(the side-by-side summary, :func:`side_by_side`) and a gate that holds every model's checks: its status and exit
code are the worst.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_longctx.reporting.writer import PARTIAL_RECORD_NAME, write_record
from pytest_longctx.results.aggregate import Aggregator
from pytest_longctx.results.decision import GateResult, combine
from pytest_longctx.results.evidence import Evidence
from pytest_longctx.results.ranking import paired, rank
from pytest_longctx.run_settings import Settings
from pytest_longctx.session.keys import RunState
from pytest_longctx.session.model_axis import slug
from pytest_longctx.util.fsutil import atomic_write_text

#: Under the report dir: ``models/<slug>/longctx.json``, one record per model (with its own history).
MODELS_DIR = "models"


@dataclasses.dataclass
class _ModelState:
    """What :func:`run.build_record` reads of the run's state, for one model's trials."""

    aggregator: Aggregator
    started: float
    stop_reason: str | None
    missing_data: list[dict[str, Any]]


def model_record_path(report_dir: Path, spec: str) -> Path:
    return report_dir / MODELS_DIR / slug(spec) / "longctx.json"


def split_trials(trials: Sequence[dict[str, Any]], reference: str) -> dict[str, list[dict[str, Any]]]:
    """The trials of each model (a trial without a model is the reference's)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for trial in trials:
        out.setdefault(str(trial.get("model") or reference), []).append(trial)
    return out


def decide_models(settings: Settings, state: RunState, finished: float, workers: int, declared: dict[str, Evidence],
                  build_record: Callable[..., dict[str, Any]], decide: Callable[..., GateResult]
                  ) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The run's record (the reference's, with ``models``) and every model's own record, built and decided by the
    run's own ``build_record`` and ``decide`` (``session/run.py``, which calls this)."""

    reference = settings.model.spec
    by_model = split_trials(state.aggregator.trials, reference)
    order = [reference, *(m.spec for m in settings.models if m.spec != reference)]
    records: dict[str, dict[str, Any]] = {}
    results: dict[str, GateResult] = {}
    absolute = tuple(t for t in settings.thresholds if not t.relative)
    gated = sum(1 for spec in order if settings.thresholds and (spec != reference or absolute or settings.compare))
    alpha = settings.alpha / max(1, gated)  # Bonferroni across the models gated: the run's false alarms <= alpha
    for spec in order:
        aggregator = Aggregator()
        for trial in by_model.get(spec, []):
            aggregator.add(trial)
        mine = _ModelState(aggregator, state.started, state.stop_reason, list(getattr(state, "missing_data", ())))
        model_settings = dataclasses.replace(settings, model=next(m for m in settings.models if m.spec == spec),
                                             alpha=alpha)
        baseline = getattr(state, "baseline", None)
        if settings.compare is None and spec == reference:  # the reference is what the others are compared with
            model_settings = dataclasses.replace(model_settings, thresholds=absolute)
        elif settings.compare is None:
            baseline = records[reference]
            model_settings = dataclasses.replace(model_settings,
                                                 compare=model_record_path(settings.report_dir, reference))
        record = build_record(model_settings, mine, finished, workers, declared)
        record["settings"].update(reference=reference, run_alpha=settings.alpha, models_gated=gated)
        results[spec] = decide(record, model_settings.gate, declared, baseline, state.notes)
        records[spec] = record
    run = dict(records[reference])
    run["models"] = side_by_side(records, settings)
    run["gate"] = combined_gate(results, settings).to_json()
    return run, records


def combined_gate(results: Mapping[str, GateResult], settings: Settings) -> GateResult:
    """Every model's checks (each naming its model) under the worst status and its exit code (one decision:
    :func:`~pytest_longctx.results.decision.combine`)."""
    return combine(results, [t.text for t in settings.thresholds], settings.alpha)


def _cost(spec: str, usage: Mapping[str, Any], settings: Settings) -> dict[str, Any]:
    profile = next(m for m in settings.models if m.spec == spec).profile
    billed = int(usage.get("billed_input_tokens", usage.get("paid_input_tokens", 0)))
    out = int(usage.get("paid_output_tokens", 0))
    return {"calls": int(usage.get("calls", 0)), "input_tokens": int(usage.get("input_tokens", 0)),
            "output_tokens": int(usage.get("output_tokens", 0)), "billed_input_tokens": billed,
            "paid_output_tokens": out,
            "usd": round((billed * profile.input_price + out * profile.output_price) / 1e6, 6)}


def side_by_side(records: Mapping[str, Mapping[str, Any]], settings: Settings) -> dict[str, Any]:
    """Per experiment and model: pooled accuracy and effective length with intervals, the paired difference
    from the reference (95%), each experiment's ranking (simultaneous intervals) and its per-model series (the
    accuracy of every cell, for charts); per model: its cost and gate."""
    reference = settings.model.spec
    models = [m.spec for m in settings.models]
    experiments = sorted({t["experiment"] for r in records.values() for t in r.get("trials", [])})
    out: dict[str, Any] = {}
    for experiment in experiments:
        trials = {m: [t for t in records[m].get("trials", []) if t["experiment"] == experiment] for m in models}
        rows = {}
        for m in models:
            record = records[m]
            entry: dict[str, Any] = {
                "pooled": ((record.get("experiments") or {}).get(experiment) or {}).get("pooled"),
                "effective_length": (record.get("effective_length") or {}).get(experiment),
                "errors": sum(1 for t in trials[m] if t["outcome"] == "error"),
                "series": [{"params": c["params"], "accuracy": c["accuracy"], "n": c["n"], "low": c.get("ci_low"),
                            "high": c.get("ci_high")} for c in record.get("cells", [])
                           if c["experiment"] == experiment],
            }
            if m != reference:
                entry["vs_reference"] = paired(trials[m], trials[reference], 0.95).to_json()
            rows[m] = entry
        out[experiment] = {"models": rows, "ranking": rank(trials, settings.alpha)}
    return {"reference": reference, "order": models, "experiments": out,
            "records": {m: str(model_record_path(settings.report_dir, m)) for m in models},
            "cost": {m: _cost(m, records[m].get("usage") or {}, settings) for m in models},
            "gate": {m: (records[m].get("gate") or {}).get("status") for m in models}}


def write_model_records(records: Mapping[str, dict[str, Any]], run: Mapping[str, Any], settings: Settings,
                        state: RunState) -> None:
    """Each model's record to ``models/<slug>/longctx.json`` (the earlier one to its history); a failure is a
    note (the run's record holds every model's summary already). A stopped run writes each model's
    ``longctx.partial.json`` beside its last complete record instead, as the run's own record does."""
    for spec, record in records.items():
        record["notes"] = list(run.get("notes") or [])
        record["settings"] = {**(run.get("settings") or {}), **record["settings"]}  # + defaults, experiments' own
        path = model_record_path(settings.report_dir, spec)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            if run.get("stopped"):
                record["stopped"] = run["stopped"]
                partial = path.parent / PARTIAL_RECORD_NAME
                atomic_write_text(partial, json.dumps(record, indent=1, ensure_ascii=False))
                state.written.append(str(partial))
            else:
                state.written.append(str(write_record(record, path.parent)))
        except Exception as exc:  # the summary says what is missing
            state.notes.append(f"could not write {spec}'s record to {path}: {type(exc).__name__}: {exc}")
