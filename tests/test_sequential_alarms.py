"""Per-alarm stops of the sequential gate (``--longctx-sequential-stop alarm``, the default).

Unit level: which trials a settled alarm leaves unneeded, and the workers' view of the controller's file.
End to end: LRT against the local Messages-API server's graded responder, gated against a production run with two
alarms: ``lines=400`` (the candidate collapses there: it settles early) and ``lines=100`` (unchanged: it runs on);
``lines=200`` and ``300`` are covered by no alarm (they run until the whole run stops). With prefetch, two workers
and without xdist: the settled alarm's remaining trials end skipped naming it, the server receives fewer requests
than with the whole-run stop (``--longctx-sequential-stop run``, today's path) on the same answers, and every
alarm's verdict, items and e-values are the same on both paths.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_longctx.dispatch.settled import SettledAlarms, settled_path, unneeded, write_settled
from pytest_longctx.dispatch.skips import AlarmsSettled
from pytest_longctx.gate_spec import parse_threshold
from pytest_longctx.server.graded import Graded
from tests.lrt_runs import run_lrt

EARLY, LATE = "experiment=lrt,lines=400:max-drop=0", "experiment=lrt,lines=100:max-drop=0"
#: only a 400-line file has this line (the early alarm's requests, as the server sees them)
LONGEST = "line 350:"
#: the candidate: 5 points below production at 100 lines (~1,150 prompt tokens: its alarm bets on, slow to settle
#: either way), as good at 200 lines (~2,250), 0.25 from ~3,800 (400 lines: a collapse, settled early)
MODELS = "claude-prod=0.85,claude-mix=0.80@1500,0.85@2000,0.85@2800,0.25@3800,flip=0.02,seed=1"


def test_a_trial_is_unneeded_only_when_every_alarm_covering_it_is_settled() -> None:
    settled = {"a": "fired after 5 items"}
    assert unneeded(settled, []) is None  # covered by no alarm: runs until the whole run stops
    assert unneeded(settled, ["a", "b"]) is None  # "b" still needs it
    skip = unneeded(settled, ["a"])
    assert isinstance(skip, AlarmsSettled) and skip.thresholds == ["a"]
    assert "alarm 'a' fired after 5 items" in str(skip.msg)


def test_workers_read_the_settled_alarms_when_the_file_changes(tmp_path: Path) -> None:
    thresholds = [parse_threshold(EARLY), parse_threshold(LATE)]
    alarms = SettledAlarms(settled_path(tmp_path / "stop"), thresholds)
    alarms.check("lrt", {"lines": 400, "shuffle": "none"})  # no file yet: nothing settled
    write_settled(alarms.path, {EARLY: "fired after 10 items (2 of 20 sample groups)"})
    with pytest.raises(AlarmsSettled, match="fired after 10 items"):
        alarms.check("lrt", {"lines": 400, "shuffle": "none"})
    alarms.check("lrt", {"lines": 100, "shuffle": "none"})  # its alarm goes on
    alarms.check("lrt", {"lines": 200, "shuffle": "none"})  # no alarm covers it
    write_settled(alarms.path, {EARLY: "fired", LATE: "cleared after 60 items"})
    with pytest.raises(AlarmsSettled, match="cleared after 60 items"):
        alarms.check("lrt", {"lines": 100, "shuffle": "full"})


def test_the_client_sends_no_request_for_a_trial_only_settled_alarms_cover(tmp_path: Path) -> None:
    """Without prefetch the client checks right before sending; a cached answer is still used (cache mode)."""
    from pytest_longctx.backends import build_backend
    from pytest_longctx.backends.base import Oracle, Request
    from pytest_longctx.backends.model_spec import parse_model_spec
    from pytest_longctx.dispatch.client import ModelClient

    alarms = SettledAlarms(settled_path(tmp_path / "stop"), [parse_threshold(EARLY)])
    client = ModelClient(build_backend(parse_model_spec("fake/perfect"), context_window=8000), None, settled=alarms)
    oracle, covered = Oracle("42"), ("lrt", {"lines": 400})

    async def ask(scope: tuple[str, dict[str, Any]]) -> str:
        return (await client.complete(Request.user("the answer?"), oracle, scope=scope)).text

    import asyncio

    assert asyncio.run(ask(covered)) == "42"
    write_settled(alarms.path, {EARLY: "fired after 5 items"})
    with pytest.raises(AlarmsSettled):
        asyncio.run(ask(covered))
    assert asyncio.run(ask(("lrt", {"lines": 100}))) == "42"  # another alarm's (none here): still sent


def run(pytester: pytest.Pytester, srv: Any, model: str, name: str,
        *args: str) -> tuple[int, dict[str, Any], str, list[str]]:
    """One run; also the ``/v1/messages`` requests the server received during it (their bodies as JSON text)."""
    before = len(srv.stats.requests)
    code, record, out = run_lrt(pytester, model, name, *args, dist=())
    return code, record, out, [json.dumps(body) for body in srv.stats.requests[before:]]


@pytest.mark.e2e
@pytest.mark.parametrize("mode", [("-n", "2"), ("-p", "no:xdist")], ids=["n2", "no-xdist"])
def test_a_settled_alarm_stops_its_own_trials_while_the_other_runs_on(pytester: pytest.Pytester, api: Any,
                                                                      mode: tuple[str, ...]) -> None:
    srv = api(Graded(MODELS))
    code, prod, _, _ = run(pytester, srv, "claude-prod", "prod", "-n", "2", "--longctx-cache", "off")
    assert code == 0 and len(prod["trials"]) == 400
    gate = ("--longctx-compare", str(pytester.path / "prod" / "longctx.json"), "--longctx-threshold", EARLY,
            "--longctx-threshold", LATE, "--longctx-sequential", "-rs", *mode)

    code, whole, _, sent_whole = run(pytester, srv, "claude-mix", "whole", *gate, "--longctx-sequential-stop", "run")
    code_each, each, out, sent_each = run(pytester, srv, "claude-mix", "each", *gate)
    assert code == code_each == 10  # the collapse at 400 lines fails the gate on both paths

    checks = {c["threshold"]: c for c in each["gate"]["checks"]}
    alarms = {a["threshold"]: a for a in each["sequential"]["alarms"]}
    early, late = alarms[EARLY], alarms[LATE]
    assert early["settled"] == "fired" and checks[EARLY]["verdict"] == "fail"
    assert early["settled_at_group"] < 20 and early["items"] == early["settled_at_item"]  # fed no more once settled
    # its remaining trials: skipped with the reason naming it, or (prefetched before it settled) answered
    assert early["skipped_trials"] > 0
    assert f"every alarm covering this trial is settled (alarm '{EARLY}' fired after" in out
    assert f"alarm '{EARLY}' fired after" in out and "the other alarms go on" in out
    trials = {(t["params"]["lines"], t["params"]["shuffle"], t["sample"]) for t in each["trials"]}
    assert len(trials) == len(each["trials"])
    shuffles = {t["params"]["shuffle"] for t in prod["trials"]}
    looked = each["sequential"]["groups_completed"]  # the other alarm, and the cells no alarm covers, ran on
    assert all((lines, sh, s) in trials for lines in (100, 200, 300) for sh in shuffles for s in range(looked))
    assert all((400, sh, s) in trials for sh in shuffles for s in range(early["settled_at_group"]))
    assert sum(1 for t in trials if t[0] == 400) <= 100 - early["skipped_trials"]
    assert all(t["outcome"] != "error" for t in each["trials"])
    assert late["skipped_trials"] == 0 and late["settled"] != "fired"
    assert each["prefetch"]["dropped"] > 0

    # the whole-run stop (today's path) on the same answers: the same verdicts and e-processes, more requests sent
    whole_alarms = {a["threshold"]: a for a in whole["sequential"]["alarms"]}
    same = ("settled", "settled_at_item", "items", "e_value", "e_value_cleared", "mean_drop", "verdict",
            "settled_at_group")
    for text in (EARLY, LATE):
        assert {k: whole_alarms[text][k] for k in same} == {k: alarms[text][k] for k in same}
        assert whole_alarms[text]["skipped_trials"] == 0
    assert [c["verdict"] for c in whole["gate"]["checks"]] == [c["verdict"] for c in each["gate"]["checks"]]
    assert whole["sequential"]["stop"] == "run" and each["sequential"]["stop"] == "alarm"
    assert len(sent_each) < len(sent_whole)
    long_each, long_whole = (sum(LONGEST in body for body in sent) for sent in (sent_each, sent_whole))
    assert long_whole - long_each >= early["skipped_trials"] // 2  # most skipped trials' requests were never sent
    assert each["prefetch"]["sent"] <= len(sent_each)  # (the server also counts requests abandoned at the stop)
    print(f"server requests: {len(sent_whole)} with the whole-run stop ({long_whole} of 400 lines), {len(sent_each)} "
          f"with per-alarm stops ({long_each}); {early['skipped_trials']} trials of the early alarm skipped, "
          f"{each['prefetch']['dropped']} requests dropped")
