"""The gate's one decision: checks in, one typed result out (verdicts, status, counts, the exit code, computed once).

Every path that decides a run's exit code goes through :class:`GateResult`: the run's finish
(:func:`~pytest_longctx.results.decide.decide`), its sequential gate (:func:`with_sequential`, from
``session/sequential_gate.SequentialGate.apply`` and from ``longctx-gate`` on a sequential run's record), a run of
several models (:func:`combine`) and ``longctx-gate``. No pytest here: a record is decided the same way inside a run
and outside.

Exit codes (docs/ci-gating.md, "Exit codes"): 0 the gate passed or none was set; 1 a trial errored (an
infrastructure failure is never a wrong answer, and the record is not clean whatever the gate says); 2 the run was
stopped; 4 a record was refused (it contradicts itself or the compared run); 10 a threshold was missed; 11 the gate
could not check what it was asked to. A run's own exit status from pytest (1 failed tests, 2 interrupted, 3
internal error...) comes first: codes are never ORed together.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pytest_longctx.gate_spec import DEFAULT_ALPHA
from pytest_longctx.results.thresholds import GATE_ERROR_EXIT_CODE, GATE_EXIT_CODE, VERDICTS

EXIT_OK, EXIT_ERRORS, EXIT_STOPPED, EXIT_USAGE = 0, 1, 2, 4
STATUSES = ("pass", "fail", "error", "none")
#: statuses from worst to best (several models: the run's status is its worst model's)
WORST_FIRST = ("error", "fail", "pass", "none")


@dataclass(frozen=True)
class GateResult:
    """One decided gate: its checks (the verdicts), status, counts and exit code.

    ``status`` is the gate's own verdict (``none`` without thresholds); :attr:`exit_code` is the run's: a refused
    record (4), a stop (2) and errored trials (1) come before the gate's 10 and 11.
    """

    checks: tuple[dict[str, Any], ...] = ()
    errors: tuple[str, ...] = ()
    thresholds: tuple[str, ...] = ()
    alpha: float = DEFAULT_ALPHA
    errored: int = 0  # trials of the decided record that errored
    stopped: str | None = None
    refused: str | None = None  # why a record was refused (one line): exit 4
    sequential: str | None = None  # whose sequential verdicts decided its alarms: "run" or "record"
    extra: Mapping[str, Any] = field(default_factory=dict)  # partial_baseline, alpha_each, models

    @property
    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys(VERDICTS, 0)
        for check in self.checks:
            counts[str(check["verdict"])] += 1
        return counts

    @property
    def status(self) -> str:
        if self.errors or self.refused:
            return "error"
        if not self.thresholds:
            return "none"
        return "fail" if any(c["verdict"] == "fail" for c in self.checks) else "pass"

    @property
    def gate_exit_code(self) -> int:
        """The gate alone: 10 when a threshold was missed, 11 when it could not check, else 0."""
        return {"error": GATE_ERROR_EXIT_CODE, "fail": GATE_EXIT_CODE}.get(self.status, EXIT_OK)

    @property
    def exit_code(self) -> int:
        """The run's exit code for this record: 4 refused, 2 stopped, 1 errored trials, else the gate's."""
        if self.refused:
            return EXIT_USAGE
        if self.stopped:
            return EXIT_STOPPED
        if self.errored:
            return EXIT_ERRORS
        return self.gate_exit_code

    def run_exit(self, pytest_status: int) -> int:
        """A run's final exit status: pytest's own when it is not OK (never ORed with the gate's), else
        :attr:`exit_code` without the stop (a stop that pytest did not report as one ended the run normally)."""
        if pytest_status != EXIT_OK:
            return pytest_status
        return replace(self, stopped=None).exit_code

    def to_json(self) -> dict[str, Any]:
        """The record's ``gate`` section."""
        out: dict[str, Any] = {"status": self.status, "counts": self.counts, "errors": list(self.errors),
                               "checks": list(self.checks), "thresholds": list(self.thresholds),
                               "alpha": self.alpha, "exit_code": self.gate_exit_code,
                               "errored_trials": self.errored, "run_exit_code": self.exit_code}
        if self.refused:
            out["refused"] = self.refused
        if self.sequential:
            out["sequential"] = True
            out["sequential_verdicts"] = self.sequential
        out.update(self.extra)
        return out

    @classmethod
    def from_json(cls, gate: Mapping[str, Any], *, errored: int | None = None,
                  stopped: str | None = None) -> GateResult:
        """A recorded ``gate`` section back as a result (``errored``: the record's errored trials, when counted)."""
        known = {"status", "counts", "errors", "checks", "thresholds", "alpha", "exit_code", "errored_trials",
                 "run_exit_code", "refused", "sequential", "sequential_verdicts"}
        return cls(tuple(dict(c) for c in gate.get("checks") or []), tuple(str(e) for e in gate.get("errors") or []),
                   tuple(str(t) for t in gate.get("thresholds") or []), float(gate.get("alpha", DEFAULT_ALPHA)),
                   int(gate.get("errored_trials", 0) if errored is None else errored), stopped,
                   gate.get("refused"), gate.get("sequential_verdicts") or ("run" if gate.get("sequential") else None),
                   {k: v for k, v in gate.items() if k not in known})


def errored_trials(record: Mapping[str, Any]) -> int:
    """The record's errored trials (from its trials, else its cells' counts)."""
    trials = record.get("trials")
    if trials:
        return sum(1 for t in trials if t.get("outcome") == "error")
    return sum(int(c.get("errors", 0)) for c in record.get("cells") or [])


def record_exit_code(record: Mapping[str, Any]) -> int:
    """The exit code a record's decision gives (what its run gave when nothing but its trials failed)."""
    gate = record.get("gate") or {}
    errored = None if "errored_trials" in gate else errored_trials(record)  # older records: counted here
    return GateResult.from_json(gate, errored=errored, stopped=record.get("stopped")).exit_code


def refused(reason: str, thresholds: Sequence[str], alpha: float) -> GateResult:
    """A record refused as a whole (one line): exit 4."""
    return GateResult(errors=(reason,), thresholds=tuple(thresholds), alpha=alpha, refused=reason)


def with_sequential(result: GateResult, section: Mapping[str, Any], *, source: str = "run") -> GateResult:
    """The alarms' verdicts of a sequential run: each alarm check takes the verdict its e-processes (or the final
    look) reached, recorded in ``section`` (``record["sequential"]``), the fixed test's kept beside as ``fixed``.

    ``source`` "record": re-decided from a record (``longctx-gate``), and every such verdict says so.
    """
    alarms = {str(a.get("threshold")): a for a in section.get("alarms") or []}
    checks = []
    for check in result.checks:
        alarm = alarms.get(str(check.get("threshold")))
        if alarm is None or check.get("verdict") in ("error", "too-few"):
            checks.append(check)
            continue
        words = str(alarm.get("words") or _alarm_words(alarm))
        if source == "record":
            words = f"the run's sequential verdict, from its record: {words}"
        checks.append({**check, "fixed": {"verdict": check["verdict"], "words": check.get("words"),
                                          "p_adjusted": check.get("p_adjusted")},
                       "sequential": {k: v for k, v in alarm.items() if k != "words"},
                       "verdict": "fail" if alarm.get("settled") == "fired" else "pass", "words": words})
    return replace(result, checks=tuple(checks), sequential=source)


def _alarm_words(alarm: Mapping[str, Any]) -> str:
    """An alarm's verdict in words, from its recorded state (records written before the words were kept)."""
    settled, by, at = alarm.get("settled"), alarm.get("settled_by"), alarm.get("settled_at_item")
    if settled is None:
        return "not settled before the run ended: not shown larger than its margin"
    return f"{settled} by the {by or 'e-process'} after {at} items"


def combine(results: Mapping[str, GateResult], thresholds: Sequence[str], alpha: float) -> GateResult:
    """Several models' gates as one: every check naming its model, the worst status, each model's own result."""
    checks: list[dict[str, Any]] = []
    errors: list[str] = []
    for spec, gate in results.items():
        checks += [{**c, "model": spec, "words": f"{spec}: {c.get('words', '')}"} for c in gate.checks]
        errors += [f"{spec}: {e}" for e in gate.errors]
    worst = min((g.status for g in results.values()), key=WORST_FIRST.index, default="none")
    refusals = [g.refused for g in results.values() if g.refused]
    extra = {"alpha_each": next((g.alpha for g in results.values()), alpha),
             "models": {spec: {"status": g.status, "exit_code": g.gate_exit_code} for spec, g in results.items()}}
    # the thresholds only make the status "none" when no model was gated
    named = tuple(thresholds) if worst != "none" else ()
    return GateResult(tuple(checks), tuple(errors), named, alpha, sum(g.errored for g in results.values()),
                      refused=refusals[0] if refusals else None, extra=extra)
