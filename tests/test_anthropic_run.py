"""Whole runs of an eval against ``anthropic/claude-test``, answered by the local Messages-API server.

The server's responder reads the pass key out of the prompt, so it always answers correctly: any
``incorrect`` trial would be a fault counted as a wrong answer. The SDK finds the server through
``ANTHROPIC_BASE_URL``; the API key is a distinctive dummy that must never be written anywhere.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic  # noqa: F401  (imported once here: in-process runs then reuse it instead of importing it again)
import pytest

import pytest_longctx.backends.anthropic  # noqa: F401  (same reason)
from pytest_longctx.backends.base import Message, Request, request_key
from pytest_longctx.server import FAULT_KINDS, FaultPlan
from tests.passkey_api import MODEL, SECRET, TEMPLATE, passkey


def wait_for(condition: Callable[[], bool], timeout: float = 60.0) -> None:
    """Poll ``condition`` with a generous overall timeout (a bound on a hang, not a speed target)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.01)


def body_key(body: dict[str, Any]) -> str:
    """The cache key of the request a Messages API body was sent for (the eval's requests have no prefill)."""
    request = Request(messages=tuple(Message(m["role"], m["content"]) for m in body["messages"]),
                      system=body.get("system"), max_tokens=body["max_tokens"], temperature=body["temperature"],
                      stop=tuple(body.get("stop_sequences", ())), template=TEMPLATE)
    return request_key("anthropic", "claude-test", request)


def cached_keys(cache: Path) -> set[str]:
    return {p.stem for p in cache.glob("??/*.json") if not p.name.startswith(".")}


def outcomes(record: dict[str, Any]) -> dict[str, int]:
    counts = {"correct": 0, "incorrect": 0, "error": 0}
    for trial in record["trials"]:
        counts[trial["outcome"]] += 1
    return counts


def test_faults_end_as_answers_or_errors_and_the_rerun_is_all_cache_hits(runner: Any, api: Any) -> None:
    plan = FaultPlan(rate=0.2, kinds=FAULT_KINDS, seed=5, retry_after=0.05, timeout_hold=0.2)
    srv = api(faults=plan, latency=0.02)
    first = runner.run("--longctx-samples", "8", model=MODEL, cache=True)  # prefetch on (the default)
    counts, trials = outcomes(first.record), 16
    assert counts["incorrect"] == 0, [t for t in first.record["trials"] if t["outcome"] == "incorrect"]
    assert counts["correct"] + counts["error"] == trials == len(first.record["trials"])
    assert first.ret == (1 if counts["error"] else 0)
    assert sum(srv.stats.faults.values()) >= 3 and len(srv.stats.faults) >= 2  # faults happened and were retried
    assert all(t["error"].startswith("BackendError") for t in first.record["trials"] if t["outcome"] == "error")

    srv.set_faults(None)
    srv.reset_stats()
    second = runner.run("--longctx-samples", "8", model=MODEL, cache=True)
    assert outcomes(second.record) == {"correct": trials, "incorrect": 0, "error": 0}
    assert srv.stats.endpoints.get("messages", 0) == counts["error"]  # every answered call came from the cache
    assert second.record["usage"]["cache_hits"] == counts["correct"]

    plan_file = runner.pytester.path / "plan.jsonl"
    planned = runner.run("--longctx-samples", "2", "--longctx-plan=true", f"--longctx-plan-out={plan_file}",
                         model=MODEL)
    assert planned.ret == 0 and len(plan_file.read_text().splitlines()) == 4
    written = [p for p in runner.pytester.path.rglob("*") if p.is_file()]
    names = {p.name for p in written}
    assert {"longctx.json", "longctx.html", "plan.jsonl"} <= names and len(cached_keys(runner.pytester.path / "cache"))
    leaked = [str(p) for p in written if SECRET.encode() in p.read_bytes()]
    assert leaked == []


@pytest.mark.parametrize(("sticky", "args", "words"), [("spend-limit", [], "spend"),
                                                       ("auth", ["--longctx-prefetch", "off"], "authentication")])
def test_spend_limit_and_auth_stop_the_run_with_one_line(runner: Any, api: Any, sticky: str, args: list[str],
                                                         words: str) -> None:
    srv = api(faults=FaultPlan(sticky=sticky))
    run = runner.run("--longctx-samples", "10", *args, model=MODEL, cache=True)
    out = run.result.stdout.str() + run.result.stderr.str()
    assert run.ret not in (0, 1)  # interrupted, not merely some failed tests
    stopped = [line for line in out.splitlines() if "run stopped:" in line]
    assert len(stopped) == 1 and words in stopped[0].lower() and len(stopped[0]) < 400, out
    assert "Traceback" not in out and out.count("ERROR at") <= 2
    record = run.record
    assert words in record["stopped"].lower() and outcomes(record)["incorrect"] == 0
    assert 1 <= len(record["trials"]) <= 2  # the run stopped at the first fatal answer
    sent = srv.stats.endpoints.get("messages", 0)
    assert sent == 1 if args else 1 <= sent <= 16  # prefetch: at most the requests already in flight


def test_replay_fails_uncached_trials_as_errors_not_wrong_answers(runner: Any, api: Any) -> None:
    srv = api()
    assert runner.run("--longctx-samples", "1", "--longctx-prefetch", "off", model=MODEL, cache=True).ret == 0
    srv.reset_stats()
    run = runner.run("--longctx-samples", "2", "--longctx-cache", "replay", model=MODEL, cache=True)
    assert run.ret == 1 and outcomes(run.record) == {"correct": 2, "incorrect": 0, "error": 2}
    for trial in run.record["trials"]:
        if trial["outcome"] == "error":
            assert trial["sample"] == 1 and "replay mode: no cached response" in trial["error"]
            assert "--longctx-cache=on" in trial["error"]
        else:
            assert trial["cache_hits"] == 1
    assert srv.stats.endpoints == {}


def test_a_corrupt_cache_entry_is_reported_and_refetched(runner: Any, api: Any) -> None:
    srv = api()
    assert runner.run("--longctx-samples", "2", "--longctx-prefetch", "off", model=MODEL, cache=True).ret == 0
    body = srv.stats.requests[0]
    entry = runner.pytester.path / "cache" / body_key(body)[:2] / f"{body_key(body)}.json"
    assert entry.is_file()
    entry.write_text('{"format": 1, "completion": {"te', encoding="utf-8")  # cut short, as by a full disk
    srv.reset_stats()
    run = runner.run("--longctx-samples", "2", model=MODEL, cache=True)  # prefetch on (the default)
    out = run.result.stdout.str() + run.result.stderr.str()
    assert run.ret == 0 and outcomes(run.record)["correct"] == 4
    assert "corrupt entry" in out and entry.name in out
    assert [body_key(b) for b in srv.stats.requests] == [body_key(body)]  # only the corrupt one was sent again
    assert json.loads(entry.read_text(encoding="utf-8"))["completion"]["text"] == passkey(body)


def test_missing_api_key_is_a_one_line_usage_error(runner: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    run = runner.run("--longctx-samples", "1", model=MODEL, cache=True)
    err = run.result.stderr.str()
    assert run.ret == 4
    assert [line for line in err.splitlines() if line.strip()] == [
        "ERROR: ANTHROPIC_API_KEY is not set: export your key to run anthropic/* models "
        "(or use --longctx-model local/smollm2-135m, which needs none)"]
    assert not (runner.pytester.path / "cache").exists()


@pytest.mark.e2e
def test_kill_9_then_rerun_repeats_no_completed_call(runner: Any, api: Any) -> None:
    # Three answers, then the server holds every request: the run is certainly mid-sweep when it is killed.
    release, answered, lock = threading.Event(), [0], threading.Lock()

    def three_then_hold(body: dict[str, Any]) -> str:
        with lock:
            answered[0] += 1
            hold = answered[0] > 3
        if hold:
            release.wait(120)
        return passkey(body)

    slow = api(three_then_hold)
    path = runner.pytester.path
    cache = path / "cache"
    command = [sys.executable, "-m", "pytest", "-p", "no:xdist", "--longctx-model", MODEL, "--longctx-samples", "8",
               "--longctx-prefetch", "off", "--longctx-cache-dir", str(cache), "--longctx-report-dir", "r1", "-q"]
    proc = subprocess.Popen(command, cwd=path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while len(cached_keys(cache)) < 3:
            assert proc.poll() is None and time.monotonic() < deadline, "the run ended before it was killed"
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=60) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
        release.set()
    completed = cached_keys(cache)  # nothing writes after the kill: this is what had completed
    wait_for(lambda: slow.stats.in_flight == 0)  # the held request, released, has been counted
    sent_before = [body_key(b) for b in slow.stats.requests]
    assert completed <= set(sent_before) and len(completed) == 3
    fast = api()
    rerun = runner.run("--longctx-samples", "8", "--longctx-prefetch", "off", model=MODEL, cache=True)
    assert outcomes(rerun.record) == {"correct": 16, "incorrect": 0, "error": 0}
    sent_after = [body_key(b) for b in fast.stats.requests]
    assert not completed & set(sent_after)  # no completed call was repeated
    assert sorted(sent_after) == sorted(set(sent_after)) and len(sent_after) == 16 - len(completed)
    assert rerun.record["usage"]["cache_hits"] == len(completed)
