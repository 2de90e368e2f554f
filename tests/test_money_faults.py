"""Money under faults: every attempt the local server saw is a request in the record, and a budget holds against
what the server billed, with the server injecting 429, 529, 500, dropped connections and bodies cut short mid-run.

The SDK's own retries are off (``max_retries=0``); the one retry loop (``backends/retry.py``) tells the ledger of
each attempt: an error answer is a failed request at $0 (the server bills no error), a lost answer (a dropped
connection, a body cut short) is a failed, ``unread`` request whose estimate the budget keeps counted (the server may
have billed it: it does for a body cut short).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_longctx.server import FaultPlan
from tests.passkey_api import MODEL
from tests.test_money_runs import PRICES, RATES, assert_usage_is_the_servers, server_usd

#: Faults the server answers with an error (billed nothing) or drops the connection on (billed nothing here).
UNBILLED = ("429", "529", "500", "timeout", "reset")


@pytest.fixture(autouse=True)
def _no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LONGCTX_RETRY_BASE_S", "0")  # retries go out at once: the test waits on nothing


def faulted(stats: Any, *kinds: str) -> int:
    return sum(stats.faults.get(kind, 0) for kind in kinds)


@pytest.mark.parametrize("prefetch", ["on", "off"])
def test_every_retried_attempt_is_a_request_and_the_record_is_the_servers_count(runner: Any, api: Any,
                                                                              prefetch: str) -> None:
    srv = api(faults=FaultPlan(rate=0.3, kinds=UNBILLED, seed=3, retry_after=0, timeout_hold=0))
    run = runner.run("--longctx-samples", "10", *PRICES, "--longctx-prefetch", prefetch,
                     "--longctx-max-concurrency", "4", model=MODEL, cache=True)
    stats, usage = srv.stats, run.record["usage"]
    assert run.ret == 0, run.result.stdout.str()
    assert faulted(stats, *UNBILLED) >= 5 and stats.endpoints["messages"] > 20  # retries reached the server
    assert_usage_is_the_servers(usage, stats)  # requests (every attempt), tokens and dollars
    assert usage["answered"] == 20 and usage["failed"] == faulted(stats, *UNBILLED)
    assert usage["unread"] == faulted(stats, "timeout", "reset") and usage["abandoned"] == 0
    assert usage["abandoned_usd"] > 0  # the lost answers' estimates: counted against a budget, billed nothing here
    assert all(t["outcome"] == "correct" for t in run.record["trials"])


def test_a_budget_holds_against_what_the_server_billed_under_faults(runner: Any, api: Any) -> None:
    srv = api(faults=FaultPlan(rate=0.3, seed=5, retry_after=0, timeout_hold=0))  # every kind, cut bodies too
    run = runner.run("--longctx-samples", "20", *PRICES, "--longctx-budget", "2", "--longctx-max-concurrency", "4",
                     "-rs", model=MODEL, cache=True)
    stats, usage = srv.stats, run.record["usage"]
    assert run.ret == pytest.ExitCode.INTERRUPTED, run.result.stdout.str()
    assert run.record["stopped"].startswith("--longctx-budget: the budget is $2.00; $")
    assert faulted(stats, "malformed") >= 1 and faulted(stats, *UNBILLED) >= 1
    billed = server_usd(stats)  # the bodies cut short included: the server billed them, the client never read them
    assert billed <= 2.0  # the docs' promise: a run ends with at most its budget spent, in flight included
    assert usage["calls"] == stats.endpoints["messages"] and usage["failed"] == faulted(stats, *UNBILLED, "malformed")
    assert usage["unread"] == faulted(stats, "timeout", "reset", "malformed")
    assert usage["usd"] < billed <= usage["usd"] + usage["abandoned_usd"] <= 2.0  # lost answers at their estimates
    assert usage["budget"]["spent_usd"] == pytest.approx(usage["usd"] + usage["abandoned_usd"])
    outcomes = [t["outcome"] for t in run.record["trials"]]
    assert outcomes and set(outcomes) == {"correct"} and len(outcomes) == usage["answered"]


@pytest.mark.parametrize("dist", [pytest.param(("-p", "no:xdist"), id="no-xdist"),
                                  pytest.param(("-n", "2"), id="n2", marks=pytest.mark.e2e)])
def test_a_batch_whose_create_answer_was_lost_is_not_created_again(runner: Any, api: Any,
                                                                   monkeypatch: pytest.MonkeyPatch,
                                                                   dist: tuple[str, ...]) -> None:
    """Retrying the create would have the server make (and bill) the batch twice: the run stops with one line, and
    its record says which requests the batch may hold and what they may cost."""
    monkeypatch.setenv("LONGCTX_BATCH_POLL", "0.05")
    srv = api(batch_delay=0.0, faults=FaultPlan(sequence=("malformed",), endpoints=("batches.create",)))
    run = runner.run("--longctx-samples", "10", *PRICES, "--longctx-batch", *dist, model=MODEL, cache=True)
    stats = srv.stats
    assert stats.batch_requests == [20] and stats.endpoints["batches.create"] == 1  # created once, never again
    out = run.result.stdout.str() + run.result.stderr.str()
    assert run.ret == pytest.ExitCode.USAGE_ERROR and "Traceback" not in out, out
    assert ("the answer to creating a batch was lost (JSONDecodeError: " in out
            and "the API may have created it, so it is not sent again (list your batches to find it)" in out)
    # the stopped run's record names the requests that may have been made and billed, beside the server's own list
    record, usage = run.record, run.record["usage"]
    lost = record["batch"]["lost"]
    assert record["stopped"].startswith("--longctx-batch: could not submit a batch of 20 requests") and not record[
        "trials"]
    (made,) = srv.batches.list({}, srv.base_url)["data"]  # the batch the server made: its id never reached the run
    billed = [json.loads(line) for line in srv.batches.results(made["id"]).splitlines()]
    assert lost["requests"] == 20 and lost["custom_ids"] == sorted(item["custom_id"] for item in billed)
    assert lost["bytes"] == stats.batch_bytes[0] and f"may cost up to ${lost['possible_usd']:,.2f}" in out
    assert usage["calls"] == usage["failed"] == usage["unread"] == 20 and usage["usd"] == 0  # sent, never read
    assert usage["abandoned_usd"] == pytest.approx(lost["possible_usd"])  # the ledger's possible cost, recorded
    server_billed = (stats.batch_input_tokens * RATES.input + stats.batch_output_tokens * RATES.output) / 1e6 / 2
    assert stats.batch_answered == 20 and 0 < server_billed <= lost["possible_usd"]  # what the server billed, within it


def test_a_lost_create_after_a_batch_was_made_records_both(runner: Any, api: Any,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches of 8: the first is made, the second's create answer is lost; the third is never sent. The record
    names the made batch (it stays recorded for the next run) and the lost one's 8 requests; nothing else counted."""
    monkeypatch.setenv("LONGCTX_BATCH_MAX_REQUESTS", "8")
    srv = api(batch_delay=0.0, faults=FaultPlan(sequence=(None, "malformed"), endpoints=("batches.create",)))
    run = runner.run("--longctx-samples", "10", *PRICES, "--longctx-batch", "-p", "no:xdist", model=MODEL, cache=True)
    stats, batch, usage = srv.stats, run.record["batch"], run.record["usage"]
    assert run.ret == pytest.ExitCode.USAGE_ERROR and stats.batch_requests == [8, 8], run.result.stdout.str()
    made = sorted(b["id"] for b in srv.batches.list({}, srv.base_url)["data"])
    assert batch["submitted"] == made[:1] and batch["requests_submitted"] == 8  # the made one: collected next run
    lost = [json.loads(line)["custom_id"] for line in srv.batches.results(made[1]).splitlines()]
    assert batch["lost"]["requests"] == 8 and batch["lost"]["custom_ids"] == sorted(lost)
    assert usage["calls"] == sum(stats.batch_requests) == 16 and usage["unread"] == 8  # the third never reserved
