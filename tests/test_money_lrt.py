"""The issue's runs end to end: ``pytest evals/lrt -n 2`` against the local Messages-API server's graded responder,
priced by genai-prices (claude-sonnet-4-6: $3 / $15 per million tokens).

* ``--longctx-budget 1`` (prefetch sends ahead, the default for remote models; the whole run costs $2.44) stops with
  at most $1 spent, and the record's requests, tokens and dollars are the server's own count;
* a sequential collapse that stops early: the record's count is the server's, what prefetch sent for trials the
  stop skipped included, and the record says what the stop saved.
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
