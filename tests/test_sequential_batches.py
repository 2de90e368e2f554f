"""The sequential gate with Message Batches, in rounds (``--longctx-sequential --longctx-batch``): LRT runs against the
local Messages-API server's graded responder and its batches endpoint, gated against a production run.

* a candidate collapsed by 30 points stops after fewer rounds than planned and fails (exit 10): the record says after
  how many rounds, batches and items; the server received fewer batch requests than the design holds, and no batch is
  left open;
* an unchanged candidate passes;
* the verdicts, and where each alarm settled, equal those of the same gate with prefetch (no batches) on the same
  graded models; with two workers and with none.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pytest_longctx.dispatch.batch_rounds import round_ends
from pytest_longctx.dispatch.policy import PlannedRequest, Settled, Trial
from pytest_longctx.server.graded import Graded
from tests.lrt_runs import run_lrt

ALARM = ("--longctx-threshold", "experiment=lrt:max-drop=0")


def same_answers(one: dict[str, Any], other: dict[str, Any]) -> bool:
    """The trials both runs answered got the same outcomes (where a gate looks depends on when reports arrive, so
    the two runs may settle at different looks; their answers, and so their verdicts, agree)."""
    first = {t["nodeid"]: t["outcome"] for t in one["trials"]}
    second = {t["nodeid"]: t["outcome"] for t in other["trials"]}
    common = first.keys() & second.keys()
    return len(common) >= 60 and all(first[k] == second[k] for k in common)


def test_rounds_double_the_share_of_requests_covered() -> None:
    assert round_ends([1] * 20) == [3, 5, 10, 20]
    assert round_ends([1] * 8) == [1, 2, 4, 8]
    assert round_ends([1] * 3) == [1, 2, 3]
    assert round_ends([1]) == [1] and round_ends([]) == []
    assert round_ends([1] * 100) == [13, 25, 50, 100]
    # by requests, not groups: 20 heavy groups (qa's) then 160 light ones (litm's): round 1 is 8 groups, not 23
    assert round_ends([184] * 20 + [46] * 160) == [8, 15, 60, 180]
    assert round_ends([100, 1, 1, 1, 1, 1, 1, 1]) == [1, 8]  # a round is whole sample groups


@pytest.mark.e2e
@pytest.mark.parametrize("dist", [("-n", "2"), ("-p", "no:xdist")], ids=["n2", "no-xdist"])
def test_batches_in_rounds_stop_a_collapse_and_agree_with_prefetch(pytester: pytest.Pytester, api: Any,
                                                                    monkeypatch: pytest.MonkeyPatch,
                                                                    dist: tuple[str, ...]) -> None:
    monkeypatch.setenv("LONGCTX_BATCH_POLL", "0.02")
    srv = api(Graded("claude-prod=0.85,claude-same=0.85,claude-bad=0.55,flip=0.02,seed=1"), batch_delay=0.0)
    code, prod, _ = run_lrt(pytester, "claude-prod", "prod", "--longctx-cache", "off")
    assert code == 0 and len(prod["trials"]) == 400
    compared = ("--longctx-compare", str(pytester.path / "prod" / "longctx.json"), *ALARM, "--longctx-sequential")
    live = srv.stats.endpoints.get("messages", 0)  # the production run's

    code, bad, out = run_lrt(pytester, "claude-bad", "bad-batch", *compared, "--longctx-batch", dist=dist)
    check, seq, batch = bad["gate"]["checks"][0], bad["sequential"], bad["batch"]
    assert code == 10, check["words"] + out
    assert check["verdict"] == "fail" and check["sequential"]["settled"] == "fired"
    assert seq["stopped"] and "settled after" in seq["reason"] and seq["groups_completed"] < 20
    assert seq["batch_rounds"]["sent"] < seq["batch_rounds"]["planned"] == 4
    assert seq["batch_rounds"]["open_at_stop"] == [] and batch["open_at_stop"] == []
    assert batch["rounds_sent"] == len(batch["rounds"]) == seq["batch_rounds"]["sent"]
    assert all(r["collected"] for r in batch["rounds"])
    states = [json.loads(p.read_text()) for p in (pytester.path / "cache-bad-batch" / "batches").glob("*.json")]
    assert len(states) == len(batch["batches"]) and all(s["collected"] for s in states)  # no batch left open
    # the server answered only the rounds sent: fewer requests than the design's 400, none of them live
    assert sum(srv.stats.batch_requests) == batch["requests_submitted"] == batch["collected"] < 400
    assert len(srv.stats.batch_requests) == len(batch["batches"]) == batch["rounds_sent"]
    assert srv.stats.endpoints.get("messages", 0) == live
    # every group the gate looked at was answered; the rest were skipped with the reason
    answered = len(bad["trials"])
    assert seq["groups_completed"] * 20 <= answered == batch["collected"] < 400
    assert all(t["outcome"] != "error" for t in bad["trials"])
    assert "sequential gate settled" in out and "skipped" in out
    assert (f"batch rounds: {batch['rounds_sent']} of 4 sent ({batch['requests_submitted']} requests in "
            f"{len(batch['batches'])} batches)") in out

    created = srv.stats.endpoints.get("batches.create", 0)
    code, bad_pre, _ = run_lrt(pytester, "claude-bad", "bad-prefetch", *compared)
    assert srv.stats.endpoints.get("batches.create", 0) == created  # the prefetch run sent no batch
    assert code == 10
    pre = bad_pre["gate"]["checks"][0]
    assert pre["verdict"] == check["verdict"] == "fail"
    assert pre["sequential"]["settled"] == check["sequential"]["settled"]
    assert same_answers(bad, bad_pre)

    code, same, _ = run_lrt(pytester, "claude-same", "same-batch", *compared, "--longctx-batch", dist=dist)
    check = same["gate"]["checks"][0]
    assert code == 0, check["words"]
    assert check["verdict"] == "pass" and check["sequential"]["settled"] != "fired"
    assert all(t["outcome"] != "error" for t in same["trials"])
    code, same_pre, _ = run_lrt(pytester, "claude-same", "same-prefetch", *compared)
    pre = same_pre["gate"]["checks"][0]
    assert code == 0 and pre["verdict"] == "pass"
    assert pre["sequential"]["settled"] == check["sequential"]["settled"]
    assert same_answers(same, same_pre)


@dataclass
class _Gate:
    """The rounds' stop policy: ``say() -> (the last sample group looked at, why the run stops)``; the trials of
    experiment ``unneeded`` only a settled alarm covers."""

    say: Callable[[], tuple[int, str | None]]
    unneeded: str | None = None

    def stopped(self) -> str | None:
        return self.say()[1]

    def looked(self) -> int:
        return self.say()[0]

    def inside(self, planned: PlannedRequest) -> bool:
        return True

    def settled(self, trial: Trial) -> Settled | None:
        return Settled(("experiment=a:max-drop=0",), ("fired",)) if trial.experiment == self.unneeded else None


def lane_for(tmp: Path, gate: _Gate, lines: list[str], seen: Any = None) -> tuple[Any, list[str]]:
    """A :class:`BatchRounds` over a plan of 8 pass-key requests, one per sample group (s0 .. s7)."""
    from pytest_longctx.backends.base import Request, request_key
    from pytest_longctx.dispatch.batch_progress import StatusLine
    from pytest_longctx.dispatch.batch_rounds import BatchRounds
    from pytest_longctx.dispatch.cache import ResponseCache
    from tests.report_data import settings_for

    settings = settings_for("anthropic/claude-test", tmp)
    work = tmp / "work"
    work.mkdir(exist_ok=True)
    plan, keys = work / "plan.jsonl", []
    with plan.open("w", encoding="utf-8") as fh:
        for i in range(8):
            request = Request.user(f"The pass key is {10_000 + i}. What is the pass key?", max_tokens=16,
                                   template="demo-passkey@1")
            keys.append(request_key("anthropic", "claude-test", request))
            fh.write(json.dumps({"key": keys[-1], "model": "anthropic/claude-test", "request": request.to_json(),
                                 "test": f"t.py::test_x[s{i}]", "experiment": "ab"[i % 2], "params": {"i": i}})
                     + "\n")

    def write(text: str) -> None:
        lines.append(text)
        if seen is not None and "submitted msgbatch_" in text:
            seen.set()

    lane = BatchRounds(settings, ResponseCache(settings.cache_dir), work, plan, gate, StatusLine(write, tty=False))
    lane.prepare()
    return lane, keys


def test_a_settled_gate_submits_no_further_round(tmp_path: Path, api: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_longctx.dispatch.cache import ResponseCache

    monkeypatch.setenv("LONGCTX_BATCH_POLL", "0.01")
    srv = api(batch_delay=0.0)
    cache = ResponseCache(tmp_path / ".longctx-cache")
    keys: list[str] = []

    def gate() -> tuple[int, str | None]:  # settles once the first round's answer is in
        return (0, "settled") if keys and cache.get(keys[0]) is not None else (-1, None)

    lines: list[str] = []
    lane, planned = lane_for(tmp_path, _Gate(gate), lines)
    keys.extend(planned)
    assert sorted((tmp_path / "work" / "keys.txt").read_text().split()) == sorted(keys)  # the workers wait for all
    lane.start()
    lane.join()
    assert srv.stats.batch_requests == [1]  # round 1 of 4: the first sample group only
    record = lane.to_json()
    assert record["rounds_sent"] == 1 and record["rounds_planned"] == 4 and record["stopped"] == "settled"
    assert record["open_at_stop"] == [] and record["collected"] == 1
    assert (tmp_path / "work" / "stopped").read_text() == "settled" and (tmp_path / "work" / "done").exists()
    assert [cache.get(k) is not None for k in keys] == [True] + [False] * 7


def test_rounds_leave_out_requests_only_settled_alarms_cover(tmp_path: Path, api: Any,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Per-alarm stops: once the alarm covering experiment "a" is settled, no round asks for a's requests."""
    monkeypatch.setenv("LONGCTX_BATCH_POLL", "0.01")
    srv = api(batch_delay=0.0)
    lines: list[str] = []
    lane, keys = lane_for(tmp_path, _Gate(lambda: (100, None), unneeded="a"), lines)
    lane.start()
    lane.join()
    record = lane.to_json()
    assert record["dropped"] == 4 and record["rounds_sent"] == 4
    assert sum(r["requests"] for r in record["rounds"]) == 4 == sum(srv.stats.batch_requests)
    from pytest_longctx.dispatch.cache import ResponseCache

    cache = ResponseCache(tmp_path / ".longctx-cache")
    assert [cache.get(k) is not None for k in keys] == [False, True] * 4


def test_a_stop_while_a_batch_runs_leaves_it_to_the_next_run(tmp_path: Path, api: Any,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from pytest_longctx.dispatch.cache import ResponseCache

    monkeypatch.setenv("LONGCTX_BATCH_POLL", "0.01")
    srv = api(batch_delay=3600.0)  # it does not end while this run waits
    submitted = threading.Event()
    lines: list[str] = []
    lane, keys = lane_for(tmp_path, _Gate(lambda: (-1, None)), lines, submitted)
    lane.start()
    submitted.wait()
    lane.cancel("interrupted by SIGINT")
    lane.join()
    record = lane.to_json()
    (batch_id,) = record["submitted"]
    assert record["open_at_stop"] == [batch_id] and record["stopped"] == "interrupted by SIGINT"
    assert any("collected by the next run" in line for line in lines)
    state = json.loads((tmp_path / ".longctx-cache" / "batches" / f"{batch_id}.json").read_text())
    assert state["collected"] is False and state["keys"] == keys[:1]

    srv.batches.end_now()  # the next run with this cache collects it instead of submitting it again
    cache = ResponseCache(tmp_path / ".longctx-cache")
    again, _ = lane_for(tmp_path, _Gate(lambda: (0, "settled") if cache.get(keys[0]) is not None else (-1, None)), [])
    again.start()
    again.join()
    assert again.to_json()["resumed"] == [batch_id] and again.to_json()["requests_submitted"] == 0
    assert again.to_json()["collected"] == 1 and srv.stats.batch_requests == [1]


def test_a_failing_api_ends_the_rounds_waiting_tests_as_errors(tmp_path: Path, api: Any,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_longctx.backends.retry import BASE_ENV
    from pytest_longctx.server import FaultPlan

    monkeypatch.setenv("LONGCTX_BATCH_POLL", "0.01")
    monkeypatch.setenv(BASE_ENV, "0.001")
    api(batch_delay=0.0, faults=FaultPlan(rate=1.0, kinds=("500",), endpoints=("batches.results",)))
    lane, keys = lane_for(tmp_path, _Gate(lambda: (-1, None)), [])
    lane.start()
    lane.join()
    record = lane.to_json()
    assert record["failure"].startswith("--longctx-batch: waiting for msgbatch_") and record["rounds_sent"] == 1
    work = tmp_path / "work"
    errors = {p.stem: json.loads(p.read_text()) for p in (work / "errors").glob("*.json")}
    assert set(errors) == {keys[0]} and errors[keys[0]]["fatal"]  # the round's test: an error that stops the run
    assert (work / "stopped").read_text() == record["failure"]  # the later rounds' tests: skipped with why
    assert record["stopped"] == record["failure"]


def test_a_lost_create_in_a_round_is_recorded_with_what_it_may_cost(tmp_path: Path, api: Any) -> None:
    """The rounds' record (and the ledger) say which requests the lost batch holds and what they may cost."""
    from pytest_longctx.backends.prices import Price, Rates
    from pytest_longctx.dispatch.ledger import Ledger, as_usage, totals
    from pytest_longctx.server import FaultPlan

    srv = api(batch_delay=0.0, faults=FaultPlan(sequence=("malformed",), endpoints=("batches.create",)))
    lane, keys = lane_for(tmp_path, _Gate(lambda: (-1, None)), [])
    price = Price("anthropic/claude-test", Rates.of_input(1000, 2000), (), "test")
    lane.run.ledger = ledger = Ledger.create(tmp_path / "ledger", None, {price.model: price})
    lane.start()
    lane.join()
    record, usage = lane.to_json(), as_usage(totals(ledger.read()))
    lost = record["lost"]
    assert record["failure"].startswith("--longctx-batch: could not submit a batch of 1 requests") and not record[
        "submitted"]
    assert srv.stats.batch_requests == [1] and lost["requests"] == 1 and lost["custom_ids"] == keys[:1]
    assert usage["calls"] == usage["unread"] == 1 and usage["abandoned_usd"] == pytest.approx(lost["possible_usd"])
    billed = (srv.stats.batch_input_tokens * 1000 + srv.stats.batch_output_tokens * 2000) / 1e6 / 2
    assert 0 < billed <= lost["possible_usd"]  # the server billed it; the record's estimate holds it
