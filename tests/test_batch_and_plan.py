"""Batch mode, dry-run figures and exact sizing, through the local Messages-API server and the real SDK.

Uses the always-right pass-key server (``api``) and eval (``runner``) of ``tests/passkey_api.py``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

import anthropic
import pytest

from tests.passkey_api import MODEL, SECRET
from tests.test_anthropic_run import outcomes

TRIALS = 8  # 2 cells x 4 samples


def answers(record: dict[str, Any]) -> dict[str, tuple[str, Any]]:
    return {t["nodeid"]: (t["outcome"], t["answer"]) for t in record["trials"]}


def test_batch_run_submits_once_scores_like_live_and_collects_nothing_twice(runner: Any, api: Any,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LONGCTX_BATCH_POLL", "0.05")
    srv = api(batch_delay=0.2)
    batch = runner.run("--longctx-samples", "4", "--longctx-batch", "true", model=MODEL, cache=True)
    assert outcomes(batch.record) == {"correct": TRIALS, "incorrect": 0, "error": 0}
    assert srv.stats.endpoints.get("batches.create") == 1
    assert srv.stats.endpoints.get("messages", 0) == 0  # everything went through the batch
    assert batch.record["batch"]["requests_submitted"] == TRIALS and batch.record["batch"]["collected"] == TRIALS

    srv.reset_stats()
    again = runner.run("--longctx-samples", "4", "--longctx-batch", "true", model=MODEL, cache=True)
    assert answers(again.record) == answers(batch.record)
    assert srv.stats.endpoints == {}  # nothing submitted, polled or downloaded again
    assert again.record["usage"]["cache_hits"] == TRIALS

    live = runner.run("--longctx-samples", "4", "--longctx-cache-dir", str(runner.pytester.path / "live-cache"),
                      model=MODEL, cache=True)
    assert answers(live.record) == answers(batch.record)  # same seed: same requests, same scores


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


def test_plan_figures_equal_what_the_live_run_sends(runner: Any, api: Any) -> None:
    srv = api()
    planned = runner.run("--longctx-samples", "3", "--longctx-plan", "true", "--longctx-exact-tokens", "true",
                         model=MODEL, cache=True)
    plan = planned.plan_record["plan"]["models"][MODEL]
    assert srv.stats.endpoints.get("messages", 0) == 0  # a dry run sends no message
    srv.reset_stats()
    live = runner.run("--longctx-samples", "3", "--longctx-prefetch", "off", model=MODEL, cache=True)
    assert plan["requests"] == srv.stats.endpoints["messages"] == 6
    assert plan["input_tokens"] == srv.stats.input_tokens == live.record["usage"]["input_tokens"]


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
