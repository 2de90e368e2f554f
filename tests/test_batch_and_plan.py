"""Batch mode, dry-run figures and exact sizing, through the local Messages-API server and the real SDK.

Uses the always-right pass-key server (``api``) and eval (``runner``) of ``tests/passkey_api.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import anthropic
import pytest

from pytest_longctx.backends.retry import BASE_ENV
from pytest_longctx.server import FaultPlan, MessagesServer
from tests.conftest import LongctxRun, golden_runner
from tests.passkey_api import EVAL, MODEL, SECRET, passkey
from tests.test_anthropic_run import outcomes

TRIALS = 8  # 2 cells x 4 samples


def answers(record: dict[str, Any]) -> dict[str, tuple[str, Any]]:
    return {t["nodeid"]: (t["outcome"], t["answer"]) for t in record["trials"]}


@dataclass
class Golden:
    """The module's golden runs on one pass-key server, each read by every test that checks it: a batch run and a
    live run (prefetch off, its own cache) of the same 8 trials, with what reached the server during each."""

    srv: MessagesServer
    batch: LongctxRun
    batch_endpoints: dict[str, int]
    live: LongctxRun
    live_messages: int
    live_input_tokens: int


@pytest.fixture(scope="module")
def golden(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Golden]:
    with MessagesServer(passkey, batch_delay=0.2) as srv:
        env = {"ANTHROPIC_BASE_URL": srv.base_url, "ANTHROPIC_API_KEY": SECRET, "LONGCTX_BATCH_POLL": "0.05"}
        with golden_runner(request, tmp_path_factory, env) as runner:
            runner.pytester.makepyfile(test_eval=EVAL)
            batch = runner.run("--longctx-samples", "4", "--longctx-batch", "true", model=MODEL, cache=True)
            batch_endpoints = dict(srv.stats.endpoints)
            srv.reset_stats()
            live = runner.run("--longctx-samples", "4", "--longctx-prefetch", "off", "--longctx-cache-dir",
                              str(runner.pytester.path / "live-cache"), model=MODEL, cache=True)
            stats = srv.stats
            golden = Golden(srv, batch, batch_endpoints, live, stats.endpoints.get("messages", 0), stats.input_tokens)
        yield golden


@pytest.fixture
def on_golden(runner: Any, golden: Golden, monkeypatch: pytest.MonkeyPatch) -> Any:
    """This test's project with a copy of the golden batch run's cache, pointed at the golden server."""
    monkeypatch.setenv("ANTHROPIC_BASE_URL", golden.srv.base_url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    monkeypatch.setenv("LONGCTX_BATCH_POLL", "0.05")
    shutil.copytree(golden.batch.report_dir.parent / "cache", runner.pytester.path / "cache")
    golden.srv.reset_stats()
    return runner


def test_batch_run_submits_once_scores_like_live_and_collects_nothing_twice(golden: Golden, on_golden: Any) -> None:
    batch = golden.batch
    assert outcomes(batch.record) == {"correct": TRIALS, "incorrect": 0, "error": 0}
    assert golden.batch_endpoints.get("batches.create") == 1
    assert golden.batch_endpoints.get("messages", 0) == 0  # everything went through the batch
    assert batch.record["batch"]["requests_submitted"] == TRIALS and batch.record["batch"]["collected"] == TRIALS

    again = on_golden.run("--longctx-samples", "4", "--longctx-batch", "true", model=MODEL, cache=True)
    assert answers(again.record) == answers(batch.record)
    assert golden.srv.stats.endpoints == {}  # nothing submitted, polled or downloaded again
    assert again.record["usage"]["cache_hits"] == TRIALS

    assert answers(golden.live.record) == answers(batch.record)  # same seed: same requests, same scores


@pytest.mark.e2e
def test_a_study_over_the_limits_goes_out_in_as_many_batches_as_it_needs(runner: Any, api: Any,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Limits of a few KB / requests (the API's are 256 MB / 100,000): the client splits, the server enforces."""
    monkeypatch.setenv("LONGCTX_BATCH_POLL", "0.05")
    monkeypatch.setenv("LONGCTX_BATCH_MAX_BYTES", "4000")
    srv = api(batch_delay=0.0, batch_max_bytes=4000, batch_max_requests=100)
    run = runner.run("--longctx-samples", "6", "--longctx-batch", "-n", "2", model=MODEL, cache=True)
    assert outcomes(run.record) == {"correct": 12, "incorrect": 0, "error": 0}, run.result.stdout.str()
    batch = run.record["batch"]
    assert len(srv.stats.batch_bytes) == len(batch["batches"]) >= 3  # 12 requests of ~1 KB: no batch holds them all
    assert all(size <= 4000 for size in srv.stats.batch_bytes)
    assert [b["bytes"] for b in batch["batches"]] == srv.stats.batch_bytes  # counted as the server received them
    assert sum(srv.stats.batch_requests) == batch["requests_submitted"] == 12
    assert batch["endings"] == {"succeeded": 12} and srv.stats.endpoints.get("messages", 0) == 0
    out = run.result.stdout.str()
    assert out.count("longctx batch: submitted msgbatch_") == len(batch["batches"])
    assert (f"longctx batch: {len(batch['batches'])} batches submitted, {len(batch['batches'])} ended; requests: 0 "
            "processing, 12 succeeded, 0 errored, 0 expired") in out  # not a terminal: plain lines

    monkeypatch.delenv("LONGCTX_BATCH_MAX_BYTES")
    monkeypatch.setenv("LONGCTX_BATCH_MAX_REQUESTS", "5")
    srv.batches.max_bytes, srv.batches.max_requests = 256_000_000, 5
    srv.reset_stats()
    run = runner.run("--longctx-samples", "6", "--longctx-batch", "--longctx-cache-dir",
                     str(runner.pytester.path / "cache-2"), model=MODEL, cache=True)
    assert outcomes(run.record) == {"correct": 12, "incorrect": 0, "error": 0}
    assert srv.stats.batch_requests == [5, 5, 2]


def test_expired_requests_are_errors_and_the_next_run_submits_exactly_those(runner: Any, api: Any,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LONGCTX_BATCH_POLL", "0.05")
    srv = api(batch_delay=0.0, batch_expire_rate=0.03, seed=5)
    first = runner.run("--longctx-samples", "50", "--longctx-batch", model=MODEL, cache=True)
    (batch_id,) = first.record["batch"]["submitted"]
    client = anthropic.Anthropic(base_url=srv.base_url, api_key=SECRET)
    expired = {r.custom_id for r in client.messages.batches.results(batch_id) if r.result.type == "expired"}
    assert 0 < len(expired) < 10
    assert outcomes(first.record) == {"correct": 100 - len(expired), "incorrect": 0, "error": len(expired)}
    errors = [t["error"] for t in first.record["trials"] if t["outcome"] == "error"]
    assert all(f"batch {batch_id}: request expired" in e and "the next run submits it again" in e for e in errors)
    assert first.record["batch"]["endings"] == {"succeeded": 100 - len(expired), "expired": len(expired)}

    srv.batches.expire_rate = 0.0  # this time the batch finishes in time
    srv.reset_stats()
    second = runner.run("--longctx-samples", "50", "--longctx-batch", model=MODEL, cache=True)
    assert outcomes(second.record) == {"correct": 100, "incorrect": 0, "error": 0}
    (again,) = second.record["batch"]["submitted"]
    state = json.loads((runner.pytester.path / "cache" / "batches" / f"{again}.json").read_text())
    assert set(state["keys"]) == expired and srv.stats.batch_requests == [len(expired)]
    assert second.record["usage"]["cache_hits"] == 100 - len(expired)


def test_results_that_cannot_be_downloaded_are_one_line_and_the_next_run_collects_them(
        runner: Any, api: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LONGCTX_BATCH_POLL", "0.05")
    monkeypatch.setenv(BASE_ENV, "0.001")
    srv = api(batch_delay=0.0, faults=FaultPlan(rate=1.0, kinds=("500",), endpoints=("batches.results",)))
    failed = runner.run("--longctx-samples", "4", "--longctx-batch", model=MODEL, cache=True)
    assert failed.ret == pytest.ExitCode.USAGE_ERROR
    (line,) = [line for line in failed.result.stderr.lines if line.strip()]
    assert line.startswith("ERROR: --longctx-batch: waiting for msgbatch_") and "InternalServerError" in line, line
    assert line.endswith("they are collected by the next run with the same --longctx-cache-dir, not submitted again")
    srv.set_faults(None)
    srv.reset_stats()
    again = runner.run("--longctx-samples", "4", "--longctx-batch", model=MODEL, cache=True)
    assert outcomes(again.record) == {"correct": TRIALS, "incorrect": 0, "error": 0}
    assert again.record["batch"]["submitted"] == [] and len(again.record["batch"]["resumed"]) == 1
    assert "batches.create" not in srv.stats.endpoints  # paid once


def test_a_recorded_batch_the_api_no_longer_has_is_submitted_again(golden: Golden, on_golden: Any) -> None:
    (batch_id,) = golden.batch.record["batch"]["submitted"]
    cache = on_golden.pytester.path / "cache"
    state_file = cache / "batches" / f"{batch_id}.json"
    state = json.loads(state_file.read_text())
    state["collected"] = False  # as if that run had stopped before collecting, and then ...
    state_file.write_text(json.dumps(state))
    for entry in cache.glob("??/*.json"):
        entry.unlink()
    golden.srv.batches.delete(batch_id)  # ... the batch were deleted (or archived after 29 days)
    again = on_golden.run("--longctx-samples", "4", "--longctx-batch", model=MODEL, cache=True)
    assert outcomes(again.record) == {"correct": TRIALS, "incorrect": 0, "error": 0}
    assert again.record["batch"]["gone"] == [batch_id] and again.record["batch"]["resumed"] == []
    assert again.record["batch"]["requests_submitted"] == TRIALS
    assert f"longctx batch: {batch_id} of an earlier run is gone from the API" in again.result.stdout.str()
    assert json.loads(state_file.read_text())["gone"] is True


@pytest.mark.e2e
def test_batch_survives_an_interruption_between_submit_and_collect(runner: Any, api: Any) -> None:
    srv = api(batch_delay=3600.0)  # in progress until released below: the kill certainly falls before collect
    cache = runner.pytester.path / "cache"
    env = {**os.environ, "LONGCTX_BATCH_POLL": "0.05", "ANTHROPIC_BASE_URL": srv.base_url,
           "ANTHROPIC_API_KEY": SECRET}
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--longctx-model", MODEL,
           "--longctx-samples", "4", "--longctx-batch", "true", "--longctx-cache-dir", str(cache),
           "--longctx-report-dir", str(runner.pytester.path / "reports")]
    proc = subprocess.Popen(cmd, cwd=runner.pytester.path, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not list((cache / "batches").glob("*.json")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert list((cache / "batches").glob("*.json")), "the batch was never recorded"
    os.kill(proc.pid, signal.SIGKILL)  # after submit, before collect
    proc.wait()
    assert srv.batches.end_now() == 1  # the batch ends only now, after the kill
    state = json.loads(next((cache / "batches").glob("*.json")).read_text())
    assert state["collected"] is False

    resumed = runner.run("--longctx-samples", "4", "--longctx-batch", "true", model=MODEL, cache=True)
    assert outcomes(resumed.record) == {"correct": TRIALS, "incorrect": 0, "error": 0}
    assert srv.stats.endpoints.get("batches.create") == 1  # the interrupted run's batch was reused
    assert resumed.record["batch"]["resumed"] == [state["id"]]
    assert json.loads(next((cache / "batches").glob("*.json")).read_text())["collected"] is True


def test_plan_figures_equal_what_the_live_run_sends(runner: Any, api: Any, golden: Golden) -> None:
    srv = api()
    planned = runner.run("--longctx-samples", "4", "--longctx-plan", "true", "--longctx-exact-tokens", "true",
                         model=MODEL, cache=True)
    plan = planned.plan_record["plan"]["models"][MODEL]
    assert srv.stats.endpoints.get("messages", 0) == 0  # a dry run sends no message
    assert plan["requests"] == golden.live_messages == TRIALS
    assert plan["input_tokens"] == golden.live_input_tokens == golden.live.record["usage"]["input_tokens"]


SIZED_EVAL = '''
import pytest

from pytest_longctx import Request
from pytest_longctx.context.haystack import Unit
from pytest_longctx.experiments.qa.collage import build_collage, render

WORDS = "alpha beta, gamma: delta (epsilon) zeta-eta theta; iota kappa lambda mu nu xi omicron pi rho".split()
pytestmark = pytest.mark.longctx("sized")


@pytest.mark.parametrize("budget", [300, 1200])
async def test_sized(longctx, budget):
    texts = [" ".join(longctx.rng.choice(WORDS) for _ in range(longctx.rng.randint(10, 60))) for _ in range(40)]
    pieces = [Unit(str(i), t, longctx.count_tokens(render_one(t)) + longctx.count_tokens("\\n\\n"))
              for i, t in enumerate(texts)]
    collage = build_collage(pieces[0], pieces[1:], budget, 50, longctx.rng)
    text = render(collage)
    answer = await longctx.ask(Request.user(text, max_tokens=4, template="sized@1"))
    longctx.record(expected=budget, answer=collage.tokens, tokenizer=longctx.tokenizer)
    assert answer is not None


def render_one(text):
    return "<section>\\n" + text + "\\n</section>"
'''


def test_exact_sizing_lands_within_the_budget(longctx_runner: Any, api: Any) -> None:
    srv = api()
    longctx_runner.pytester.makepyfile(test_sized=SIZED_EVAL)
    run = longctx_runner.run("--longctx-samples", "3", "--longctx-exact-tokens", "true", "--longctx-prefetch", "off",
                             model=MODEL, cache=True)
    client = anthropic.Anthropic(base_url=srv.base_url, api_key=SECRET)
    overhead = client.messages.count_tokens(model="claude-test", messages=[{"role": "user", "content": "."}])
    per_message = overhead.input_tokens - 1
    assert len(run.record["trials"]) == 6
    for trial in run.record["trials"]:
        assert trial["detail"]["tokenizer"] == "anthropic/claude-test (count_tokens API)"
        billed_context = trial["input_tokens"] - per_message
        assert billed_context <= trial["params"]["budget"], trial
        assert billed_context >= trial["params"]["budget"] * 0.5, trial  # filled, not merely under
