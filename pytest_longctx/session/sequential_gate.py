"""The sequential gate on the controller: look after each completed sample group, stop once every alarm is settled.

``--longctx-sequential`` with ``--longctx-compare`` and pooled ``max-drop`` alarm thresholds: tests run sample by
sample (:mod:`~pytest_longctx.dispatch.ordering`); when every test of the next sample index has reported (the
controller sees every report, with or without xdist), its trials are paired with the compared run and each item's
drop feeds every alarm's e-processes (:mod:`~pytest_longctx.results.eprocess`). Once every alarm is settled the
run stops: the prefetch dispatcher is cancelled and the stop file is written, so a test whose answer is not already
there ends skipped with the reason; answers already received are used and recorded. Before that, each alarm stops on
its own (``--longctx-sequential-stop alarm``, the default): once it is settled its e-process is fed no more, and a
trial every covering alarm of which is settled is not needed: prefetch drops its request and the test ends skipped
naming the alarm (``dispatch/settled.py``; workers learn it from a file beside the stop file). Trials no alarm covers
run until the whole run stops. The run then ends normally:
the gate's verdicts are the sequential ones (exit 10 when an alarm fired) and ``record["sequential"]`` says where
and why it stopped. Prefetch is kept a window ahead of the reported tests, so a stop leaves little paid for nothing.

``--longctx-budget DOLLARS`` (any run) stops the run as interrupted (exit 2) once its requests cost that much.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_longctx.errors import UsageError
from pytest_longctx.results.eprocess import DEFAULT_DETECT, AlarmSequence, levels, split
from pytest_longctx.session.keys import RUN_KEY, SETTINGS_KEY, SHARED_KEY
from pytest_longctx.session.options import Settings


@dataclass
class SeqRun:
    """The controller's sequential state: tests per sample group, reports so far, the alarms' e-processes."""

    alarms: dict[str, AlarmSequence]
    thresholds: list[Any]
    baseline: list[dict[str, Any]]
    sizes: dict[int, int] | None = None
    #: the first test index of each sample group in the run's order (the prefetch window places requests by it)
    starts: dict[int, int] = field(default_factory=dict)
    done: Counter[int] = field(default_factory=Counter)
    pending: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    looked: list[dict[str, Any]] = field(default_factory=list)
    groups_done: int = 0
    reported: int = 0
    window: int = 64
    stopped: str | None = None
    declared: dict[str, Any] | None = None
    #: per alarm, the items already fed to its e-process: an item is fed once, when every trial of it the compared
    #: run holds in the alarm's cells has reported here (or at the end of the design), with all its paired trials
    fed: dict[str, set[str]] = field(default_factory=dict)
    #: per alarm: the compared run's trials of each item in its cells (what "complete" means), and this run's
    #: reported trials of each item so far
    expected: dict[str, Counter[str]] = field(default_factory=dict)
    have: dict[str, Counter[str]] = field(default_factory=dict)
    #: the last sample index looked at (set once the look, and a stop it led to, are done): the batch rounds read it
    looked_sample: int = -1
    #: --longctx-sequential-stop: "alarm" (a settled alarm's own trials stop) or "run" (only the whole run stops)
    stop: str = "alarm"
    #: per settled alarm: the sample groups completed when it settled, and how it settled (the skips' reason)
    settled_at_group: dict[str, int] = field(default_factory=dict)
    why: dict[str, str] = field(default_factory=dict)
    #: the compared record's sha256 and the model: what the record's ``sequential.spent`` names (session/rerun.py)
    compared: str = ""
    model: str = ""
    #: per alarm: trials skipped because it (with every other alarm covering them) was settled
    skipped: Counter[str] = field(default_factory=Counter)
    #: the settled alarms the prefetch dispatcher drops requests for (replaced whole: read by its thread)
    unneeded: frozenset[str] = frozenset()

    def to_json(self, trials: int) -> dict[str, Any]:
        return {"stopped": self.stopped is not None, "reason": self.stopped, "groups_completed": self.groups_done,
                "groups_planned": len(self.sizes or {}), "trials_answered": trials, "window": self.window,
                "stop": self.stop,
                "alarms": [{**a.to_json(), "settled_at_group": self.settled_at_group.get(text),
                            "skipped_trials": self.skipped[text]} for text, a in self.alarms.items()]}


SEQ_KEY = pytest.StashKey[SeqRun]()


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


def start(config: pytest.Config) -> None:
    """Controller, after the compared run is read: one e-process pair per alarm threshold."""
    s = config.stash[SETTINGS_KEY]
    baseline = config.stash[RUN_KEY].baseline
    if not s.sequential or s.plan or baseline is None:
        return
    a, b = levels(s.alpha, len(s.thresholds))
    a1, a2 = split(a)  # the e-process's share and the final fixed-design look's
    detect = s.detect if s.detect is not None else DEFAULT_DETECT
    from pytest_longctx.session.rerun import fingerprint, refusal

    compared = fingerprint(s.compare) if s.compare is not None else ""
    refused = refusal(s.report_dir, s.model.spec, s.compare, compared) if s.compare is not None else None
    if refused is not None:  # a second final look of the same test: refused, not spent again
        raise pytest.UsageError(refused)
    trials = [t for t in baseline.get("trials", []) if t.get("outcome") != "error"]
    alarms = {}
    for t in s.thresholds:
        planned = len({str(x.get("cluster")) for x in trials if t.matches(x["experiment"], x["params"])})
        alarms[t.text] = AlarmSequence(t.text, t.value, detect, a1, b, planned=max(planned, 1), final_level=a2)
    config.stash[SEQ_KEY] = SeqRun(alarms, list(s.thresholds), list(baseline.get("trials", [])),
                                   window=max(4 * s.max_concurrency, 32), stop=s.sequential_stop,
                                   compared=compared, model=s.model.spec)


def reorder(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every process: collect sample group by sample group (the same order everywhere)."""
    if not config.stash[SETTINGS_KEY].sequential:
        return
    from pytest_longctx.dispatch.ordering import by_sample
    from pytest_longctx.session.identity import SAMPLE_ARG

    items[:] = by_sample(items, SAMPLE_ARG)


def set_groups(config: pytest.Config, nodeids: list[str]) -> None:
    """Controller: the tests of each sample group (from the collection, or the first xdist worker's)."""
    seq = config.stash.get(SEQ_KEY, None)
    if seq is None or seq.sizes is not None:
        return
    from pytest_longctx.dispatch.ordering import group_sizes, group_starts

    sizes = group_sizes(nodeids)
    seq.window = max(seq.window, 2 * max(sizes.values(), default=0))
    seq.starts = group_starts(sizes)  # read by the prefetch dispatcher's thread: replaced whole
    seq.sizes = sizes


def allowance(config: pytest.Config) -> Any:
    """For the prefetch dispatcher: ``(entry, line) -> whether that planned request is inside the window`` (None:
    no window). A request is placed by its test: the first test index of its sample group (the same order every
    process runs; before the groups are known, its line in the plan, which runs in that order too), and may go out
    once that place is less than the reported tests plus the window. The lowest test not yet reported is always
    inside (every test before it has reported), whatever requests went out of order (prompt-cache siblings, a test
    waiting far ahead); the dispatcher sends a request a test waits for anyway (``dispatch/lanes.py``)."""
    seq = config.stash.get(SEQ_KEY, None)
    if seq is None:
        return None
    from pytest_longctx.dispatch.ordering import place

    return lambda entry, line: place(entry, line, seq.starts) < seq.reported + seq.window


def batch_gate(config: pytest.Config) -> Any:
    """For the batch rounds (``dispatch.batch_rounds``): the last sample index the gate has looked at, and why the
    run stops (the gate settled, or a budget, -x, a signal; None while it goes on). None without a gate."""
    seq = config.stash.get(SEQ_KEY, None)
    if seq is None:
        return None
    state = config.stash[RUN_KEY]
    return lambda: (seq.looked_sample, seq.stopped or state.stop_reason)


def unneeded(config: pytest.Config) -> Any:
    """For the prefetch dispatcher: ``(experiment, params) -> why`` once every alarm covering that trial is settled
    (None: still needed, or no alarm covers it); None without per-alarm stops."""
    seq = config.stash.get(SEQ_KEY, None)
    if seq is None or seq.stop != "alarm":
        return None

    def why(experiment: str, params: dict[str, Any]) -> str | None:
        settled = seq.unneeded
        covering = [t.text for t in seq.thresholds if t.matches(experiment, params)] if settled else []
        if covering and all(t in settled for t in covering):
            return "; ".join(f"alarm '{t}' {seq.why.get(t, 'settled')}" for t in covering)
        return None

    return why


def settled_alarms(config: pytest.Config) -> Any:
    """Every process's model client: the settled alarms the controller writes beside the stop file (None without
    per-alarm stops)."""
    s = config.stash[SETTINGS_KEY]
    stop_file = config.stash[SHARED_KEY].stop_file
    if not s.sequential or s.plan or s.sequential_stop != "alarm" or not stop_file:
        return None
    from pytest_longctx.dispatch.settled import SettledAlarms, settled_path

    thresholds = s.thresholds
    return SettledAlarms(settled_path(stop_file),
                         lambda experiment, params: [t.text for t in thresholds if t.matches(experiment, params)])


def on_report(config: pytest.Config, report: pytest.TestReport, records: list[dict[str, Any]]) -> None:
    """Controller, every report: the budget, then the sequential looks."""
    _budget(config, records)
    seq = config.stash.get(SEQ_KEY, None)
    if seq is None or "longctx" not in report.keywords:
        return
    from pytest_longctx.session.outcomes import SETTLED_KEY

    for key, value in report.user_properties:
        if key == SETTLED_KEY and isinstance(value, list):  # skipped: every alarm covering it was settled
            seq.skipped.update(str(v) for v in value)
    if not (report.when == "call" or (report.when == "setup" and not report.passed)):
        return
    from pytest_longctx.dispatch.ordering import sample_of_nodeid

    seq.reported += 1
    sample = sample_of_nodeid(report.nodeid)
    if sample is None or seq.sizes is None or seq.stopped is not None:
        return  # (after a stop the groups' counts stay where the decision was made)
    seq.done[sample] += 1
    seq.pending.setdefault(sample, []).extend(records)
    order = list(seq.sizes)
    new: list[int] = []
    while seq.groups_done < len(order) and seq.done[order[seq.groups_done]] >= seq.sizes[order[seq.groups_done]]:
        new.append(order[seq.groups_done])
        seq.groups_done += 1
    if new:
        _look(config, seq, new)
        seq.looked_sample = new[-1]


def _look(config: pytest.Config, seq: SeqRun, groups: list[int]) -> None:
    """Look after each newly completed sample group in turn (one look a group, however many complete at one report:
    the e-processes see the same looks whatever the reports' timing)."""
    if seq.declared is None:
        seq.declared = _declared(config)
        _expect(seq)
    planned = len(seq.sizes or {})
    first = seq.groups_done - len(groups)  # the groups completed before these
    new: list[str] = []
    for i, g in enumerate(groups):
        at = first + i + 1
        records = seq.pending.pop(g, [])
        seq.looked.extend(records)
        _count(seq, records)
        if seq.stopped is not None:
            continue  # (settled at an earlier group of this report: the rest are kept, not fed)
        _feed(seq, final=bool(seq.sizes) and at >= planned)
        verdicts = [alarm.look() for alarm in seq.alarms.values()]
        for text, alarm in seq.alarms.items():
            if alarm.settled is not None and text not in seq.why:
                seq.settled_at_group[text] = at
                seq.why[text] = f"{alarm.settled} after {alarm.at_item} items ({at} of {planned} sample groups)"
                new.append(text)
        if all(v is not None for v in verdicts):
            items = max(a.n for a in seq.alarms.values())
            fired = sum(v == "fired" for v in verdicts)
            _stop(config, seq, f"sequential gate settled after {at} of {planned} sample groups ({items} items): "
                               f"{fired} of {len(verdicts)} alarms fired")
    if new and seq.stopped is None and seq.stop == "alarm":
        _settle(config, seq, new)


def _cluster(seq: SeqRun, trial: Mapping[str, Any]) -> str:
    from pytest_longctx.results.evidence import DEFAULT, cluster_of

    return cluster_of(trial, (seq.declared or {}).get(trial["experiment"], DEFAULT))


def _expect(seq: SeqRun) -> None:
    """Per alarm: the compared run's trials of each item in its cells, and the largest item (the increments'
    scale, known before any answer)."""
    for t in seq.thresholds:
        want = Counter(_cluster(seq, b) for b in seq.baseline if t.matches(b["experiment"], b["params"]))
        seq.expected[t.text] = want
        seq.have[t.text] = Counter()
        alarm = seq.alarms[t.text]
        if want:
            alarm.rescale(max(want.values()), sum(want.values()) / len(want))


def _count(seq: SeqRun, records: list[dict[str, Any]]) -> None:
    for t in seq.thresholds:
        have = seq.have.setdefault(t.text, Counter())
        have.update(_cluster(seq, r) for r in records if t.matches(r["experiment"], r["params"]))


def _feed(seq: SeqRun, final: bool) -> None:
    """Feed every alarm the items now complete (all of them at the end of the design), in item order: each item's
    summed paired drop over its paired trials."""
    from pytest_longctx.results.pairing import pair_runs

    ready: dict[str, list[str]] = {}
    for t in seq.thresholds:
        if seq.alarms[t.text].settled is not None:
            continue  # a settled alarm's e-process is fed no more: its verdict and the items it took stay
        fed, want, have = seq.fed.setdefault(t.text, set()), seq.expected[t.text], seq.have[t.text]
        done = sorted(i for i in want if i not in fed and (final or have[i] >= want[i]))
        if done:
            ready[t.text] = done
    if not ready:
        return
    sums: dict[tuple[str, str], list[int]] = {}
    for _, a, b in pair_runs(seq.looked, seq.baseline).pairs:
        item = _cluster(seq, a)
        for t in seq.thresholds:
            if t.text in ready and t.matches(a["experiment"], a["params"]):
                s = sums.setdefault((t.text, item), [0, 0, 0, 0])  # drop, trials, regressed, improved
                d = int(b["outcome"] == "correct") - int(a["outcome"] == "correct")
                s[0], s[1], s[2], s[3] = s[0] + d, s[1] + 1, s[2] + (d > 0), s[3] + (d < 0)
    for text, items in ready.items():
        alarm = seq.alarms[text]
        for item in items:
            seq.fed[text].add(item)
            drop, trials, regressed, improved = sums.get((text, item), (0, 0, 0, 0))
            if trials:  # an item none of whose trials paired (errors) is not an observation
                alarm.add_item(drop, trials, regressed, improved)


def _settle(config: pytest.Config, seq: SeqRun, new: list[str]) -> None:
    """Some alarms settled, others go on: the trials only settled alarms cover are no longer needed. The workers
    learn it from the file beside the stop file (written first), then the prefetch dispatcher drops their requests."""
    state = config.stash[RUN_KEY]
    stop_file = config.stash[SHARED_KEY].stop_file
    if not stop_file:
        return
    from pytest_longctx.dispatch.settled import settled_path, write_settled

    try:
        write_settled(settled_path(stop_file), seq.why)
    except OSError as exc:  # the workers would wait for requests never sent: nothing is dropped then
        state.notes.append(f"could not tell the workers which alarms settled ({stop_file}: {exc.strerror or exc})")
        return
    seq.unneeded = frozenset(seq.why)
    for text in new:
        state.display.say(f"alarm '{text}' {seq.why[text]}; the trials only settled alarms cover are "
                          "skipped from now on, the other alarms go on")


def _declared(config: pytest.Config) -> dict[str, Any]:
    from pytest_longctx.results.evidence import Evidence, by_experiment
    from pytest_longctx.session.hook_calls import call_each, flat

    notes = config.stash[RUN_KEY].notes
    return by_experiment(e for e in flat(call_each(config, "pytest_longctx_evidence", notes))
                         if isinstance(e, Evidence))


def _stop(config: pytest.Config, seq: SeqRun, reason: str) -> None:
    """Nothing more is sent: prefetch cancelled, the stop file written; the run itself ends normally."""
    seq.stopped = reason
    state = config.stash[RUN_KEY]
    if state.dispatcher is not None:
        state.dispatcher.cancel(reason)
    stop_file = config.stash[SHARED_KEY].stop_file
    if stop_file:
        try:
            Path(stop_file).parent.mkdir(parents=True, exist_ok=True)
            Path(stop_file).write_text(reason, encoding="utf-8")
        except OSError as exc:
            state.notes.append(f"could not tell the workers to stop ({stop_file}: {exc.strerror or exc})")
    state.display.say(f"{reason}; the remaining trials are skipped")


def _budget(config: pytest.Config, records: list[dict[str, Any]]) -> None:
    """--longctx-budget: the ledger refuses a request that would pass it (``dispatch/ledger.py``, where requests
    leave); once it has, the run stops as a budget stop (``records`` are counted there, not here)."""
    if config.stash[SETTINGS_KEY].budget is None:
        return
    from pytest_longctx.session.stopping import budget_stop

    budget_stop(config)


def apply(config: pytest.Config, record: dict[str, Any]) -> None:
    """The finished run's sequential section, and its gate decided with it: each alarm's verdict is its sequential
    one (the fixed-design reading kept beside; :func:`~pytest_longctx.results.decision.with_sequential`).

    When the run reached the end of its design (every sample group reported, no stop), an alarm the e-processes
    did not settle is decided by the final look: the fixed gate's own unadjusted one-sided p (the check's ``p``,
    computed on the whole design) against the alarm's final level."""
    seq = config.stash.get(SEQ_KEY, None)
    if seq is None or config.stash[SETTINGS_KEY].plan:
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
    from pytest_longctx.session.rerun import spent

    final_level = max((a.final_level for a in seq.alarms.values()), default=0.0)
    record["sequential"] = {**seq.to_json(answered), "final_look": complete,
                            "spent": spent(seq.model, seq.compared, config.stash[SETTINGS_KEY].alpha, final_level,
                                           complete and any(a.by == "final look" for a in seq.alarms.values()))}
    lane = config.stash[RUN_KEY].batch
    if hasattr(lane, "rounds"):  # --longctx-batch: its rounds are over once every test has reported
        lane.finish()
        batches = lane.to_json()
        record["sequential"]["batch_rounds"] = {"sent": batches["rounds_sent"], "planned": batches["rounds_planned"],
                                                "open_at_stop": lane.open_at_stop}
        open_note = (f"; {len(lane.open_at_stop)} batches left open, collected by the next run with this cache"
                     if lane.open_at_stop else "")
        config.stash[RUN_KEY].notes.append(
            f"batch rounds: {batches['rounds_sent']} of {batches['rounds_planned']} sent "
            f"({batches['requests_submitted']:,} requests in {len(batches['batches'])} batches){open_note}")
    if seq.stopped is not None:
        config.stash[RUN_KEY].notes.append(f"stopped early: {seq.stopped}; {answered:,} trials answered, the "
                                           "rest skipped (see 'sequential' in the record)")
    if seq.skipped:
        per = ", ".join(f"{n:,} for '{text}'" for text, n in seq.skipped.items())
        config.stash[RUN_KEY].notes.append(f"per-alarm stops: trials skipped once every alarm covering them was "
                                           f"settled ({per})")
    for entry, alarm in zip(record["sequential"]["alarms"], seq.alarms.values(), strict=True):
        entry["words"] = alarm.words()  # the verdict in words, kept with the state it was reached on
    if gate.get("checks"):  # the alarms' verdicts are the sequential ones: one decision (results/decision.py)
        from pytest_longctx.results.decision import GateResult, with_sequential

        record["gate"] = with_sequential(GateResult.from_json(gate, stopped=record.get("stopped")),
                                         record["sequential"]).to_json()
