"""The issue's runs end to end: ``pytest evals/lrt -n 2`` against the local Messages-API server's graded responder,
priced by genai-prices (claude-sonnet-4-6: $3 / $15 per million tokens).

* ``--longctx-budget 1`` (prefetch sends ahead, the default for remote models; the whole run costs $2.44) stops with
  at most $1 spent, and the record's requests, tokens and dollars are the server's own count;
* a sequential collapse that stops early: the record's count is the server's, what prefetch sent for trials the
  stop skipped included, and the record says what the stop saved;
* batch rounds (``--longctx-batch --longctx-sequential``) under a budget that ends in the second round: that round is
  cut short (its record says what it submitted beside what it planned), no later one is submitted, and the server's
  billed total (batch price) is within the budget and is the record's.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_longctx.backends.prices import price_of
from pytest_longctx.server.graded import Graded
from tests.lrt_runs import run_lrt
from tests.test_money_runs import assert_usage_is_the_servers

MODEL = "claude-sonnet-4-6"
pytestmark = pytest.mark.e2e


def rates() -> Any:
    price = price_of("anthropic", MODEL)
    assert price is not None and (price.rates.input, price.rates.output) == (3.0, 15.0)
    return price.rates


def test_a_budget_stops_an_lrt_run_that_would_cost_more(pytester: pytest.Pytester, api: Any) -> None:
    srv = api(Graded(f"{MODEL}=0.85,seed=1"))
    code, record, out = run_lrt(pytester, MODEL, "budget", "--longctx-budget", "1")  # the whole run: $2.44
    assert code == pytest.ExitCode.INTERRUPTED, out
    usage = record["usage"]
    assert_usage_is_the_servers(usage, srv.stats, rates())
    assert usage["usd"] <= 1.0 and usage["refused"] >= 1 and usage["abandoned"] == 0
    assert 0 < usage["calls"] < 400 and record["stopped"].startswith("--longctx-budget: the budget is $1.00")
    assert usage["budget"] == {"usd": 1.0, "spent_usd": usage["usd"], "stopped": record["stopped"],
                               "refused": usage["refused"], "answered": usage["calls"]}
    assert len(record["trials"]) == usage["calls"]  # every answer paid for is a trial; the rest skipped, not wrong
    assert all(t["outcome"] != "error" for t in record["trials"])
    assert f"the $1.00 budget bought {usage['calls']:,} answers" in out


def test_a_sequential_stop_counts_what_prefetch_sent_and_says_what_it_saved(pytester: pytest.Pytester,
                                                                           api: Any) -> None:
    srv = api(Graded(f"claude-prod=0.85,{MODEL}=0.55,flip=0.02,seed=1"))
    code, _, _ = run_lrt(pytester, "claude-prod", "prod", "--longctx-cache", "off")
    assert code == 0
    srv.reset_stats()
    code, bad, out = run_lrt(pytester, MODEL, "bad", "--longctx-compare", str(pytester.path / "prod" / "longctx.json"),
                             "--longctx-threshold", "experiment=lrt:max-drop=0", "--longctx-sequential")
    assert code == 10, out
    usage = bad["usage"]
    assert_usage_is_the_servers(usage, srv.stats, rates())
    assert usage["calls"] >= len(bad["trials"]) and usage["abandoned"] == 0  # the stop drained what was in flight
    saving = usage["sequential"]
    assert saving["planned_trials"] == 400 and saving["answered_trials"] == len(bad["trials"])
    assert saving["skipped_trials"] == 400 - len(bad["trials"]) > 0 and saving["saved_usd"] > 0
    assert saving["groups_completed"] < saving["groups_planned"] == 20
    assert f"{saving['skipped_trials']:,} of 400 trials skipped, about ${saving['saved_usd']:,.2f} saved" in out
    html = (pytester.path / "bad" / "longctx.html").read_text(encoding="utf-8")
    assert "sequential stop" in html and f"about ${saving['saved_usd']:,.2f} saved" in html


def test_a_budget_ends_batch_rounds_within_it_and_the_record_is_the_servers(pytester: pytest.Pytester, api: Any,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LONGCTX_BATCH_POLL", "0.02")
    srv = api(Graded(f"claude-prod=0.85,{MODEL}=0.78,flip=0.02,seed=1"), batch_delay=0.0)
    code, _, _ = run_lrt(pytester, "claude-prod", "prod", "--longctx-cache", "off", dist=("-p", "no:xdist"))
    assert code == 0
    srv.reset_stats()  # a small drop: the gate settles nothing in the first rounds, so the budget ends them
    code, cut, out = run_lrt(pytester, MODEL, "cut", "--longctx-compare", str(pytester.path / "prod" / "longctx.json"),
                             "--longctx-threshold", "experiment=lrt:max-drop=0", "--longctx-sequential",
                             "--longctx-batch", "--longctx-budget", "0.3", dist=("-p", "no:xdist"))
    assert code == pytest.ExitCode.INTERRUPTED, out
    stats, usage, batch = srv.stats, cut["usage"], cut["batch"]
    assert cut["stopped"].startswith("--longctx-budget: the budget is $0.30") and batch["refused"]
    assert batch["rounds_sent"] == 2 and batch["rounds_planned"] == 4  # the budget ended the rounds in round 2:
    assert stats.batch_requests[0] == 60 and 0 < stats.batch_requests[1] < 40  # round 1 whole, round 2 cut short,
    assert len(stats.batch_requests) == len(batch["batches"]) == 2  # and nothing submitted after it
    # each round records what it submitted (the server's count) beside its planned size
    assert [(r["requests"], r["planned"]) for r in batch["rounds"]] == [(60, 60), (stats.batch_requests[1], 40)]
    assert stats.endpoints.get("messages", 0) == 0
    billed = (stats.batch_input_tokens * rates().input + stats.batch_output_tokens * rates().output) / 1e6 / 2
    assert billed <= 0.3  # at the batch price, within the budget
    assert usage["calls"] == sum(stats.batch_requests) == stats.batch_answered < 400
    assert (usage["sent_input_tokens"], usage["paid_output_tokens"]) == (stats.batch_input_tokens,
                                                                         stats.batch_output_tokens)
    assert usage["usd"] == pytest.approx(billed, rel=1e-9) and usage["refused"] >= 1
    assert len(cut["trials"]) == usage["calls"] and all(t["outcome"] != "error" for t in cut["trials"])
    # the trials the stop skipped complete no sample group (20 trials each): the groups looked at were answered
    seq = cut["sequential"]
    assert seq["groups_completed"] * 20 <= len(cut["trials"]) and seq["groups_completed"] < seq["groups_planned"]
    assert f"sequential: {seq['groups_completed']} of 20 sample groups looked at" in out
