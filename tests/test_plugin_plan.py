"""Plan mode: every request is built and counted, none is sent, and every test ends skipped."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_longctx.corpus.tokens import TiktokenCounter

PLAN = '''
from pathlib import Path

import pytest

from pytest_longctx import Oracle, Request

pytestmark = pytest.mark.longctx("plan")


@pytest.mark.parametrize("size", [10, 100])
async def test_plan(longctx, size):
    prompt = "word " * size
    answer = await longctx.ask(Request.user(prompt, max_tokens=8, template="plan@1"), oracle=Oracle("x"))
    Path("sent").mkdir(exist_ok=True)
    Path("sent", f"{size}-{longctx.sample}").write_text(answer)
    assert answer == "x"
'''


@pytest.mark.parametrize("mode_args", [[], ["-n", "2"]], ids=["plain", "n2"])
def test_plan_sends_nothing(longctx_runner: Any, mode_args: list[str]) -> None:
    pytester = longctx_runner.pytester
    pytester.makepyfile(test_plan=PLAN)
    run = longctx_runner.run("--longctx-plan", "true", "--longctx-samples", "2", *mode_args)

    assert run.ret == pytest.ExitCode.OK
    outcomes = run.result.parseoutcomes()
    assert {k: v for k, v in outcomes.items() if k not in ("warning", "warnings")} == {"planned": 4}, \
        run.result.stdout.str()[-3000:]
    assert not (pytester.path / "sent").exists()  # no test got past its model call
    record = run.record
    assert record["trials"] == [] and record["cells"] == []
    assert record["usage"]["calls"] == 0
    plan = record["plan"]
    assert plan["trials"] == 4
    counter = TiktokenCounter()
    expected_tokens = 2 * (counter.count("word " * 10) + counter.count("word " * 100))
    assert plan["models"] == {"fake/perfect": {
        "requests": 4, "cached": 0, "input_tokens": expected_tokens, "max_output_tokens": 32,
        "tokenizers": ["tiktoken/cl100k_base"], "est_input_cost_usd": 0.0, "est_max_cost_usd": 0.0,
        "est_batch_cost_usd": 0.0, "est_uncached_input_cost_usd": 0.0, "billed_input_tokens": expected_tokens,
        "batch_billed_input_tokens": expected_tokens, "est_batch_uncached_cost_usd": 0.0,
        "cache_write_tokens": 0, "cache_read_tokens": 0, "prefix_groups": 0,
    }}
    assert record["settings"]["plan"] is True
