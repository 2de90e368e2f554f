"""The prefetch producer: the child plan run counts no tokens, and the run reports its rate beside the lanes' need."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from pytest_longctx.backends.base import Completion, Request
from pytest_longctx.dispatch.cache import ResponseCache
from pytest_longctx.dispatch.client import ModelClient
from pytest_longctx.dispatch.plan import format_plan, summarize_plan
from pytest_longctx.dispatch.send import Progress, rate_note
from pytest_longctx.dispatch.skips import Planned


class NoCounting:
    """A backend whose counters fail: planning must not call them when ``plan_counts`` is off."""

    provider = "anthropic"
    model = "claude-test"
    tokenizer = "test"
    context_window = 200_000

    def count_tokens(self, text: str) -> int:
        raise AssertionError("tokenized on the producer's path")

    def count_request(self, request: Request) -> int:
        raise AssertionError("counted on the producer's path")

    async def complete(self, request: Request) -> Completion:
        raise AssertionError("plan mode sent a request")

    async def aclose(self) -> None:
        return None


def plan_one(client: ModelClient, text: str) -> dict[str, object]:
    with pytest.raises(Planned) as planned:
        asyncio.run(client.complete(Request.user(text, max_tokens=8, template="t@1")))
    return planned.value.entry


def test_the_prefetch_child_plans_without_counting(tmp_path: Path) -> None:
    out = tmp_path / "plan.jsonl"
    client = ModelClient(NoCounting(), ResponseCache(tmp_path / "cache"), plan=True, plan_out=out,  # type: ignore[arg-type]
                         plan_counts=False)
    entry = plan_one(client, "a long prompt " * 1000)
    assert (entry["input_tokens"], entry["tokenizer"]) == (None, "not counted")
    (line,) = out.read_text(encoding="utf-8").splitlines()
    assert json.loads(line)["request"]["messages"][0]["content"] == "a long prompt " * 1000  # what the lanes send
    with pytest.raises(AssertionError, match="producer's path"):  # a dry run (the default) does count
        plan_one(ModelClient(NoCounting(), None, plan=True), "x")  # type: ignore[arg-type]


def test_a_plan_of_uncounted_requests_sums_to_zero_tokens_and_says_so() -> None:
    entries = [{"key": str(i), "model": "anthropic/claude-test", "template": "t@1", "cached": False,
                "input_tokens": None, "max_tokens": 8, "tokenizer": "not counted"} for i in range(3)]
    plan = summarize_plan(entries)
    model = plan["models"]["anthropic/claude-test"]
    assert (model["requests"], model["input_tokens"], model["max_output_tokens"]) == (3, 0, 24)
    assert "0 input tokens (not counted)" in format_plan(plan)[0]


def test_rates_set_the_producer_beside_what_the_lanes_need() -> None:
    progress = Progress(total=101, done=64, started=10.0, first_planned=12.0, last_planned=14.0, latency_s=64 * 2.0)
    rates = progress.rates(concurrency=64)
    assert rates == {"planned": 101, "plan_s": 2.0, "first_planned_after_s": 2.0, "plan_requests_per_s": 50.0,
                     "mean_latency_s": 2.0, "lanes_need_requests_per_s": 32.0}
    assert rate_note(rates) == ("prefetch: the plan produced 101 requests at 50.0/s (first after 2.0s); the lanes "
                                "need C / latency = 32.0/s (mean latency 2.00s): the plan keeps ahead of them")
    assert rate_note({**rates, "lanes_need_requests_per_s": 64.0}).endswith(": the plan falls behind them")
    assert Progress(total=1, done=1, first_planned=1.0, last_planned=1.0, latency_s=1.0).rates(8) is None
    assert Progress(total=5, done=0, first_planned=1.0, last_planned=2.0).rates(8) is None  # nothing answered yet
