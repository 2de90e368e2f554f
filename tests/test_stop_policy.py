"""The request path's stop policy (``dispatch/policy.py``) and the sequential gate's answers to it, on plain values.

The runs that exercise it end to end: ``tests/test_liveness.py`` (the window), ``tests/test_sequential_alarms.py``
(per-alarm stops) and ``tests/test_sequential_batches.py`` (the rounds).
"""

from __future__ import annotations

from types import SimpleNamespace

from pytest_longctx.dispatch.policy import PlannedRequest, Trial, settled_by
from pytest_longctx.dispatch.skips import AlarmsSettled
from pytest_longctx.gate_spec import parse_threshold
from pytest_longctx.session.gate_policy import GatePolicy
from pytest_longctx.session.sequential_looks import SeqRun

A, B = "experiment=a:max-drop=0", "experiment=b,n=1:max-drop=0"


def test_a_plan_line_reads_as_a_typed_planned_request() -> None:
    entry = {"key": "k1", "request": {"messages": []}, "test": "t.py::test_x[s3]", "experiment": "a",
             "params": {"n": 1}, "prefix": "p" * 24, "cached": False}
    planned = PlannedRequest.from_plan(entry, 7)
    assert (planned.key, planned.line, planned.test, planned.prefix) == ("k1", 7, "t.py::test_x[s3]", "p" * 24)
    assert planned.trial == Trial("a", {"n": 1}) and planned.request == {"messages": []}
    bare = PlannedRequest.from_plan({"key": "k2", "request": {}, "prefix": None}, 0)
    assert bare.trial is None and bare.prefix is None and bare.test == ""  # no owner: never dropped


def test_a_trial_is_unneeded_once_every_alarm_covering_it_is_settled() -> None:
    assert settled_by({"a": "fired"}, []) is None  # no alarm covers it: it runs until the whole run stops
    assert settled_by({"a": "fired"}, ["a", "b"]) is None
    found = settled_by({"b": "cleared after 9 items", "a": "fired"}, ["b", "a", "b"])
    assert found is not None and found.thresholds == ("a", "b") and found.how == ("fired", "cleared after 9 items")
    assert found.reason == "alarm 'a' fired; alarm 'b' cleared after 9 items"
    skip = found.skip()
    assert isinstance(skip, AlarmsSettled) and skip.thresholds == ["a", "b"] and found.reason in str(skip.msg)


def test_the_gate_answers_the_dispatcher_from_its_state() -> None:
    seq, state = SeqRun({}, [parse_threshold(A), parse_threshold(B)], [], window=2), SimpleNamespace(stop_reason=None)
    policy = GatePolicy(seq, state)
    assert policy.stopped() is None and policy.looked() == -1
    later = PlannedRequest("k", {}, 5, "t.py::test_x[a-s1]")
    assert not policy.inside(later)  # groups not known: placed at its line, 5, beyond 0 reported + 2
    seq.starts = {0: 0, 1: 3}  # its sample group starts at test 3
    seq.reported = 1
    assert not policy.inside(later)  # 3 < 1 + 2: no
    seq.reported = 2
    assert policy.inside(later)  # 3 < 2 + 2

    a, b, other = Trial("a", {"n": 1}), Trial("b", {"n": 1}), Trial("b", {"n": 2})
    assert policy.settled(a) is None  # nothing settled yet
    seq.unneeded, seq.why = frozenset({A, B}), {A: "fired after 5 items"}
    found = policy.settled(a)
    assert found is not None and found.reason == f"alarm '{A}' fired after 5 items"
    found = policy.settled(b)
    assert found is not None and found.how == ("settled",)  # settled, though the gate has not said how yet
    assert policy.settled(other) is None  # no alarm covers it
    seq.stop = "run"  # --longctx-sequential-stop run: only the whole run stops
    assert policy.settled(a) is None

    state.stop_reason = "-x: first failure"
    assert policy.stopped() == "-x: first failure"
    seq.stopped, seq.looked_sample = "every alarm settled", 4
    assert policy.stopped() == "every alarm settled" and policy.looked() == 4
