"""Money end to end against the local Messages-API server: the ledger's budget stops spending where requests leave,
and the record's requests, tokens and dollars are the server's own count, in every mode.

The pass-key model (``anthropic/claude-test``) is unknown to genai-prices: ``--longctx-prices`` prices it, high
enough that a few requests pass a small budget.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_longctx.backends.prices import Rates
from tests.passkey_api import MODEL

#: $1,000 / $2,000 per million tokens in / out: a pass-key request (~100-300 tokens in, <= 16 out) costs ~$0.1-0.3.
PRICES = ("--longctx-prices", f"{MODEL}=1000/2000")
RATES = Rates.of_input(1000, 2000)


def server_usd(stats: Any, rates: Rates = RATES, batch: bool = False) -> float:
    """Dollars of what the server answered, at ``rates`` (no tiers: the totals suffice)."""
    usd = (stats.input_tokens * rates.input + stats.output_tokens * rates.output
           + stats.cache_creation_input_tokens * rates.cache_write + stats.cache_read_input_tokens * rates.cache_read)
    return usd / 1e6 * (0.5 if batch else 1.0)


def assert_usage_is_the_servers(usage: dict[str, Any], stats: Any, rates: Rates = RATES) -> None:
    """The record's requests, tokens and dollars equal what the server received and answered."""
    assert usage["ledger"] is True
    assert usage["calls"] == stats.endpoints.get("messages", 0)
    assert usage["sent_input_tokens"] == stats.input_tokens
    assert usage["paid_output_tokens"] == stats.output_tokens
    assert usage["cache_creation_input_tokens"] == stats.cache_creation_input_tokens
    assert usage["cache_read_input_tokens"] == stats.cache_read_input_tokens
    assert usage["usd"] == pytest.approx(server_usd(stats, rates), rel=1e-9, abs=1e-6)


@pytest.mark.parametrize("prefetch", ["on", "off"])
def test_a_budget_stops_sending_and_the_record_is_the_servers_count(runner: Any, api: Any, prefetch: str) -> None:
    srv = api(latency=0.01)
    run = runner.run("--longctx-samples", "20", *PRICES, "--longctx-budget", "2", "--longctx-prefetch", prefetch,
                     "--longctx-max-concurrency", "4", "-rs", model=MODEL, cache=True)
    record, stats = run.record, srv.stats
    assert run.ret == pytest.ExitCode.INTERRUPTED, run.result.stdout.str()
    assert record["stopped"].startswith("--longctx-budget: the budget is $2.00; $"), record["stopped"]
    usage = record["usage"]
    assert_usage_is_the_servers(usage, stats)
    sent = stats.endpoints["messages"]
    assert 0 < sent < 40 and usage["refused"] >= 1
    assert usage["usd"] <= 2.0  # every estimate is an upper bound here: in flight counted, never past the budget
    assert usage["budget"]["answered"] == sent and usage["budget"]["spent_usd"] == pytest.approx(usage["usd"])
    outcomes = [t["outcome"] for t in record["trials"]]
    assert "incorrect" not in outcomes and "error" not in outcomes  # a budget stop is no wrong answer, no error
    assert len(outcomes) == sent  # every answer paid for is used
    html = (run.report_dir / "longctx.partial.html").read_text(encoding="utf-8")  # the partial report says it too
    assert f"<dt>spent</dt><dd>${usage['usd']:,.2f} <span class=muted>({sent:,} requests sent" in html
    assert "<dt>budget</dt>" in html and f"bought {sent:,} answers" in html
    assert f"<dt>tokens sent in / out</dt><dd>{usage['paid_input_tokens']:,} / {stats.output_tokens:,}" in html
    skips = [line for line in run.result.stdout.lines if line.startswith("SKIPPED")]
    assert skips and all("--longctx-budget: the budget is $2.00" in line for line in skips), skips  # each says why


def test_a_batch_is_cut_to_the_budget_and_its_usage_is_the_servers(runner: Any, api: Any,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LONGCTX_BATCH_POLL", "0.05")
    srv = api(batch_delay=0.0)
    whole = runner.run("--longctx-samples", "10", *PRICES, "--longctx-batch", model=MODEL, cache=True)
    stats = srv.stats
    assert whole.ret == 0 and sum(stats.batch_requests) == stats.batch_answered == 20
    usage = whole.record["usage"]
    assert usage["calls"] == 20 and usage["sent_input_tokens"] == stats.batch_input_tokens
    assert usage["paid_output_tokens"] == stats.batch_output_tokens
    batch_usd = (stats.batch_input_tokens * RATES.input + stats.batch_output_tokens * RATES.output) / 1e6 / 2
    assert usage["usd"] == pytest.approx(batch_usd, rel=1e-9)  # half price: Anthropic's batch discount

    srv.reset_stats()  # a budget for about half of it: the batch holds what the budget buys, the rest is not sent
    cut = runner.run("--longctx-samples", "10", *PRICES, "--longctx-batch", "--longctx-budget", f"{batch_usd / 2:.4f}",
                     "--longctx-cache-dir", str(runner.pytester.path / "cache-2"), "-rs", model=MODEL, cache=True)
    stats, usage = srv.stats, cut.record["usage"]
    assert cut.ret == pytest.ExitCode.INTERRUPTED and "--longctx-budget: the budget is" in cut.record["stopped"]
    assert 0 < sum(stats.batch_requests) == usage["calls"] < 20 and usage["refused"] >= 1
    assert usage["sent_input_tokens"] == stats.batch_input_tokens and usage["usd"] <= batch_usd / 2
    assert usage["usd"] == pytest.approx((stats.batch_input_tokens * RATES.input + stats.batch_output_tokens
                                          * RATES.output) / 1e6 / 2, rel=1e-9)
    assert len(cut.record["trials"]) == usage["calls"] and cut.record["batch"]["refused"]
    assert all(t["outcome"] == "correct" for t in cut.record["trials"])


def test_a_sequential_plan_is_refused_as_the_run_is(runner: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-dummy")
    for extra in ((), ("--longctx-plan",)):
        run = runner.run("--longctx-sequential", *extra, model=MODEL)
        assert run.ret == pytest.ExitCode.USAGE_ERROR
        assert "--longctx-sequential: needs --longctx-compare PATH" in run.result.stderr.str()


def test_the_plan_prices_a_sequential_gate_run_in_one_line() -> None:
    from pytest_longctx.dispatch.plan import gate_cost_line

    plan = {"models": {"anthropic/claude-sonnet-4-6": {"est_max_cost_usd": 80.0}}, "sequential": {"alarms": [
        {"usd": 60.0, "cases": {"no change": {"usd_mean": 15.0, "usd_p95": 30.0},
                                "drop 0.05": {"usd_mean": 40.0, "usd_p95": 60.0}}},
        {"usd": 10.0, "cases": {"no change": {"usd_mean": 2.0, "usd_p95": 5.0},
                                "drop 0.05": {"usd_mean": 6.0, "usd_p95": 10.0}}}]}}
    assert gate_cost_line(plan) == ("this gate run costs about $27.00 (p95 $45.00) if nothing changed, $56.00 "
                                    "(p95 $80.00) at a drop of 0.05; the whole design $80.00 (list prices, at most "
                                    "the output cap)")  # $10 no alarm covers + each alarm's cost to its decision
    unknown = {**plan, "models": {"anthropic/claude-x": {"est_max_cost_usd": None}}}
    assert gate_cost_line(unknown) is None and gate_cost_line({**plan, "sequential": {"alarms": []}}) is None
