"""The sequential gate, a plugin object registered only with ``--longctx-sequential``: look after each completed
sample group, stop once every alarm is settled.

``--longctx-sequential`` with ``--longctx-compare`` and pooled ``max-drop`` alarm thresholds: every process collects
sample group by sample group; on the controller each completed group is a look (:mod:`.sequential_looks`). Once every
alarm is settled the run stops: the prefetch dispatcher is cancelled and the stop file is written, so a test whose
answer is not already there ends skipped with the reason; answers already received are used and recorded. Before
that, each alarm stops on its own (``--longctx-sequential-stop alarm``, the default): once it is settled its
e-process is fed no more, and a trial every covering alarm of which is settled is not needed: prefetch drops its
request and the test ends skipped naming the alarm (``dispatch/settled.py``; workers learn it from a file beside the
stop file). Trials no alarm covers run until the whole run stops. The run then ends normally: the gate's verdicts are
the sequential ones (exit 10 when an alarm fired) and ``record["sequential"]`` says where and why it stopped.
Prefetch is kept a window ahead of the reported tests, so a stop leaves little paid for nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_longctx.dispatch.ordering import by_sample, group_sizes, group_starts
from pytest_longctx.dispatch.settled import SettledAlarms, settled_path, write_settled
from pytest_longctx.errors import UsageError
from pytest_longctx.results.aggregate import records_of
from pytest_longctx.results.decision import GateResult, with_sequential
from pytest_longctx.results.eprocess import DEFAULT_DETECT, AlarmSequence, levels, split
from pytest_longctx.results.evidence import Evidence, by_experiment
from pytest_longctx.run_settings import Settings
from pytest_longctx.session.gate_policy import GatePolicy
from pytest_longctx.session.hook_calls import call_each, flat
from pytest_longctx.session.identity import SAMPLE_ARG
from pytest_longctx.session.keys import RUN_KEY, SETTINGS_KEY, SHARED_KEY, RunState
from pytest_longctx.session.rerun import fingerprint, refusal, spent
from pytest_longctx.session.sequential_looks import SEQ_KEY, SeqRun, count_report, look


def check(s: Settings) -> None:
    """A one-line usage error for a sequential gate that cannot run (its plan is refused alike)."""
    if not s.sequential:
        return
    if s.compare is None:
        raise UsageError("--longctx-sequential: needs --longctx-compare PATH (the run it pairs items with)")
    if not s.thresholds or any(t.kind != "max-drop" or t.reading != "alarm" or t.each for t in s.thresholds):
        raise UsageError("--longctx-sequential: every --longctx-threshold must be a pooled max-drop alarm such as "
                         "'experiment=lrt:max-drop=0'; drop the others or --longctx-sequential")
    if s.several:
        raise UsageError("--longctx-sequential: gates one candidate against --longctx-compare; run one "
                         "--longctx-model at a time, or drop --longctx-sequential")


class SequentialGate:
    """Every process: collects sample group by sample group. The controller (once :meth:`start`\\ ed) also keeps
    the alarms' e-processes in ``config.stash[SEQ_KEY]``, looks after each completed group and stops the run."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.settings: Settings = config.stash[SETTINGS_KEY]

    @property
    def seq(self) -> SeqRun | None:
        """The controller's looks so far (None on a worker, in a plan, or before :meth:`start`)."""
        return self.config.stash.get(SEQ_KEY, None)

    @property
    def _state(self) -> RunState:
        return self.config.stash[RUN_KEY]

    def start(self) -> None:
        """Controller, after the compared run is read: one e-process pair per alarm threshold."""
        s, baseline = self.settings, self._state.baseline
        if s.plan or baseline is None or s.compare is None:
            return
        a, b = levels(s.alpha, len(s.thresholds))
        a1, a2 = split(a)  # the e-process's share and the final fixed-design look's
        detect = s.detect if s.detect is not None else DEFAULT_DETECT
        compared = fingerprint(s.compare)
        refused = refusal(s.report_dir, s.model.spec, s.compare, compared)
        if refused is not None:  # a second final look of the same test: refused, not spent again
            raise pytest.UsageError(refused)
        trials = [t for t in baseline.get("trials", []) if t.get("outcome") != "error"]
        alarms = {}
        for t in s.thresholds:
            planned = len({str(x.get("cluster")) for x in trials if t.matches(x["experiment"], x["params"])})
            alarms[t.text] = AlarmSequence(t.text, t.value, detect, a1, b, planned=max(planned, 1), final_level=a2)
        self.config.stash[SEQ_KEY] = SeqRun(alarms, list(s.thresholds), list(baseline.get("trials", [])),
                                            window=max(4 * s.max_concurrency, 32), stop=s.sequential_stop,
                                            compared=compared, model=s.model.spec)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        """Every process collects sample group by sample group (after experiments' own edits)."""
        items[:] = by_sample(items, SAMPLE_ARG)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """Without xdist the controller collects: the sample groups come from its items."""
        if any(item.get_closest_marker("longctx") for item in session.items):
            self.set_groups([item.nodeid for item in session.items])

    def set_groups(self, nodeids: list[str]) -> None:
        """Controller: the tests of each sample group (from the collection, or the first xdist worker's)."""
        seq = self.seq
        if seq is None or seq.sizes is not None:
            return
        sizes = group_sizes(nodeids)
        seq.window = max(seq.window, 2 * max(sizes.values(), default=0))
        seq.starts = group_starts(sizes)  # read by the prefetch dispatcher's thread: replaced whole
        seq.sizes = sizes

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Controller, every longctx report (after the run controller counted it): look, maybe stop."""
        seq = self.seq
        if seq is None or "longctx" not in report.keywords:
            return
        new = count_report(seq, report, records_of(report.user_properties))
        if not new:
            return
        settled, stop = look(seq, new, self._declared())
        if stop is not None:
            self._stop(stop)
        elif settled and seq.stopped is None and seq.stop == "alarm":
            self._settle(seq, settled)
        seq.looked_sample = new[-1]

    def _declared(self) -> dict[str, Evidence]:
        notes = self._state.notes
        return by_experiment(e for e in flat(call_each(self.config, "pytest_longctx_evidence", notes))
                             if isinstance(e, Evidence))

    def _settle(self, seq: SeqRun, new: list[str]) -> None:
        """Some alarms settled, others go on: the trials only settled alarms cover are no longer needed. The workers
        learn it from the file beside the stop file (written first), then the prefetch dispatcher drops their
        requests."""
        state = self._state
        stop_file = self.config.stash[SHARED_KEY].stop_file
        if not stop_file:
            return
        try:
            write_settled(settled_path(stop_file), seq.why)
        except OSError as exc:  # the workers would wait for requests never sent: nothing is dropped then
            state.notes.append(f"could not tell the workers which alarms settled ({stop_file}: {exc.strerror or exc})")
            return
        seq.unneeded = frozenset(seq.why)
        for text in new:
            state.display.say(f"alarm '{text}' {seq.why[text]}; the trials only settled alarms cover are "
                              "skipped from now on, the other alarms go on")

    def _stop(self, reason: str) -> None:
        """Nothing more is sent: prefetch cancelled, the stop file written; the run itself ends normally."""
        state = self._state
        if state.dispatcher is not None:
            state.dispatcher.cancel(reason)
        stop_file = self.config.stash[SHARED_KEY].stop_file
        if stop_file:
            try:
                Path(stop_file).parent.mkdir(parents=True, exist_ok=True)
                Path(stop_file).write_text(reason, encoding="utf-8")
            except OSError as exc:
                state.notes.append(f"could not tell the workers to stop ({stop_file}: {exc.strerror or exc})")
        state.display.say(f"{reason}; the remaining trials are skipped")

    def policy(self) -> GatePolicy | None:
        """The gate as the request path's stop policy (the prefetch dispatcher's window and per-alarm drops, the
        batch rounds' looks and stop); None before :meth:`start` or on a worker."""
        seq = self.seq
        return GatePolicy(seq, self._state) if seq is not None else None

    def settled_alarms(self) -> SettledAlarms | None:
        """Every process's model client: the settled alarms the controller writes beside the stop file (None without
        per-alarm stops)."""
        s = self.settings
        stop_file = self.config.stash[SHARED_KEY].stop_file
        if s.plan or s.sequential_stop != "alarm" or not stop_file:
            return None
        return SettledAlarms(settled_path(stop_file), s.thresholds)

    def apply(self, record: dict[str, Any]) -> None:
        """The finished run's sequential section, and its gate decided with it: each alarm's verdict is its
        sequential one (the fixed-design reading kept beside; :func:`~pytest_longctx.results.decision.with_sequential`).

        When the run reached the end of its design (every sample group reported, no stop), an alarm the e-processes
        did not settle is decided by the final look: the fixed gate's own unadjusted one-sided p (the check's ``p``,
        computed on the whole design) against the alarm's final level."""
        seq = self.seq
        if seq is None or self.settings.plan:
            return
        gate = record.get("gate") or {}
        complete = (seq.stopped is None and record.get("stopped") is None and bool(seq.sizes)
                    and seq.groups_done >= len(seq.sizes or {}))
        if complete:
            for check in gate.get("checks", []):
                alarm = seq.alarms.get(check.get("threshold"))
                if alarm is not None and check.get("verdict") not in ("error", "too-few"):
                    alarm.final(check.get("p"))
        answered = sum(1 for t in record.get("trials", []) if t.get("outcome") != "error")
        final_level = max((a.final_level for a in seq.alarms.values()), default=0.0)
        record["sequential"] = {**seq.to_json(answered), "final_look": complete,
                                "spent": spent(seq.model, seq.compared, self.settings.alpha, final_level,
                                               complete and any(a.by == "final look" for a in seq.alarms.values()))}
        self._batch_rounds(record)
        self._notes(seq, answered)
        for entry, alarm in zip(record["sequential"]["alarms"], seq.alarms.values(), strict=True):
            entry["words"] = alarm.words()  # the verdict in words, kept with the state it was reached on
        if gate.get("checks"):  # the alarms' verdicts are the sequential ones: one decision (results/decision.py)
            record["gate"] = with_sequential(GateResult.from_json(gate, stopped=record.get("stopped")),
                                             record["sequential"]).to_json()

    def _batch_rounds(self, record: dict[str, Any]) -> None:
        """--longctx-batch: its rounds are over once every test has reported; what they sent, in the record."""
        lane = self._state.rounds
        if lane is None:
            return
        lane.finish()
        batches = lane.to_json()
        open_at_stop = lane.open_at_stop
        record["sequential"]["batch_rounds"] = {"sent": batches["rounds_sent"], "planned": batches["rounds_planned"],
                                                "open_at_stop": open_at_stop}
        open_note = (f"; {len(open_at_stop)} batches left open, collected by the next run with this cache"
                     if open_at_stop else "")
        self._state.notes.append(
            f"batch rounds: {batches['rounds_sent']} of {batches['rounds_planned']} sent "
            f"({batches['requests_submitted']:,} requests in {len(batches['batches'])} batches){open_note}")

    def _notes(self, seq: SeqRun, answered: int) -> None:
        notes = self._state.notes
        if seq.stopped is not None:
            notes.append(f"stopped early: {seq.stopped}; {answered:,} trials answered, the rest skipped (see "
                         "'sequential' in the record)")
        if seq.skipped:
            per = ", ".join(f"{n:,} for '{text}'" for text, n in seq.skipped.items())
            notes.append(f"per-alarm stops: trials skipped once every alarm covering them was settled ({per})")


GATE_KEY = pytest.StashKey[SequentialGate]()


def gate_of(config: pytest.Config) -> SequentialGate | None:
    """The run's sequential gate (None without ``--longctx-sequential``)."""
    return config.stash.get(GATE_KEY, None)
