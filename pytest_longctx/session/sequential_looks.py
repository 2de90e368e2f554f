"""The sequential gate's looks: what the controller counts after each report, and what each alarm's e-processes see.

Tests run sample by sample (:mod:`~pytest_longctx.dispatch.ordering`); when every test of the next sample index has
reported, its trials are paired with the compared run and each item's drop feeds every alarm's e-processes
(:mod:`~pytest_longctx.results.eprocess`): an item is fed once, when every trial of it the compared run holds in the
alarm's cells has reported here (or at the end of the design). A settled alarm's e-process is fed no more. The plugin
object that acts on what a look finds (stops, skips) is :class:`~pytest_longctx.session.sequential_gate.SequentialGate`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from pytest_longctx.dispatch.ordering import sample_of_nodeid
from pytest_longctx.gate_spec import Threshold
from pytest_longctx.results.eprocess import AlarmSequence
from pytest_longctx.results.evidence import DEFAULT, Evidence, cluster_of
from pytest_longctx.results.pairing import pair_runs
from pytest_longctx.session.outcomes import SETTLED_KEY, STOPPED_KEY


@dataclass
class SeqRun:
    """The controller's sequential state: tests per sample group, reports so far, the alarms' e-processes."""

    alarms: dict[str, AlarmSequence]
    thresholds: list[Threshold]
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
    declared: dict[str, Evidence] | None = None
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


def count_report(seq: SeqRun, report: pytest.TestReport, records: list[dict[str, Any]]) -> list[int]:
    """Count one longctx report: the skips per settled alarm, the trial's sample group; the sample groups it
    completes, in the run's order (none after a stop: the groups' counts stay where the decision was made)."""
    for key, value in report.user_properties:
        if key == SETTLED_KEY and isinstance(value, list):  # skipped: every alarm covering it was settled
            seq.skipped.update(str(v) for v in value)
    if not (report.when == "call" or (report.when == "setup" and not report.passed)):
        return []
    seq.reported += 1
    sample = sample_of_nodeid(report.nodeid)
    if sample is None or seq.sizes is None or seq.stopped is not None:
        return []
    if any(key == STOPPED_KEY for key, _ in report.user_properties):
        return []  # the run stopped before its answer: a group it leaves unanswered is never looked at
    seq.done[sample] += 1
    seq.pending.setdefault(sample, []).extend(records)
    order = list(seq.sizes)
    new: list[int] = []
    while seq.groups_done < len(order) and seq.done[order[seq.groups_done]] >= seq.sizes[order[seq.groups_done]]:
        new.append(order[seq.groups_done])
        seq.groups_done += 1
    return new


def look(seq: SeqRun, groups: list[int], declared: dict[str, Evidence]) -> tuple[list[str], str | None]:
    """Look after each newly completed sample group in turn (one look a group, however many complete at one report:
    the e-processes see the same looks whatever the reports' timing). Returns the alarms newly settled, and why the
    whole gate stops once every alarm is settled (``seq.stopped`` is then set; None while it goes on)."""
    if seq.declared is None:
        seq.declared = declared
        _expect(seq)
    planned = len(seq.sizes or {})
    first = seq.groups_done - len(groups)  # the groups completed before these
    new: list[str] = []
    stop: str | None = None
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
            stop = seq.stopped = (f"sequential gate settled after {at} of {planned} sample groups ({items} items): "
                                  f"{fired} of {len(verdicts)} alarms fired")
    return new, stop


def _cluster(seq: SeqRun, trial: Mapping[str, Any]) -> str:
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
