"""Whole runs with prompt caching: a qa-like eval (variants sharing one context) against ``anthropic/claude-test``,
answered by the local Messages-API server, which bills its prompt cache as the API does."""

from __future__ import annotations

from typing import Any

import anthropic  # noqa: F401  (imported once here: in-process runs then reuse it)
import pytest

import pytest_longctx.backends.anthropic  # noqa: F401  (same reason)
from tests.passkey_api import MODEL
from tests.test_money_runs import PRICES, RATES, assert_usage_is_the_servers

#: Two samples x four prompt variants; the variants of a sample share its documents (~1,300 server tokens).
EVAL = '''
import random

import pytest

from pytest_longctx import Request
from pytest_longctx.backends.base import shared_prefix_end

pytestmark = pytest.mark.longctx("qa-like")
FILLER = " ".join(f"Section {i} says the fee is {i} dollars." for i in range(150))


@pytest.mark.parametrize("variant", ["plain", "scratchpad", "examples", "brief"])
async def test_variant(longctx, variant):
    key = random.Random(f"documents-{longctx.sample}").randrange(10_000, 99_999)
    documents = f"<documents>\\n{FILLER}\\nThe pass key is {key}.\\n</documents>"
    text = f"{documents}\\nInstructions ({variant}): answer with the pass key only."
    request = Request.user(text, max_tokens=16, template="qa-like@1", cache_prefix=shared_prefix_end(text, documents))
    answer = await longctx.ask(request)
    longctx.record(expected=key, answer=answer.strip())
    assert str(key) in answer
'''


@pytest.fixture
def qa_like(longctx_runner: Any) -> Any:
    longctx_runner.pytester.makepyfile(test_eval=EVAL)
    return longctx_runner


def _cache_use(trials: list[dict[str, Any]], sample: int) -> list[tuple[bool, bool]]:
    return sorted((t["cache_creation_input_tokens"] > 0, t["cache_read_input_tokens"] > 0)
                  for t in trials if t["sample"] == sample)


def test_siblings_read_the_prefix_their_first_wrote_and_the_run_shows_it(qa_like: Any, api: Any) -> None:
    srv = api()
    run = qa_like.run("--longctx-samples", "2", *PRICES, model=MODEL, cache=True)  # prefetch: the controller sends all
    assert run.ret == 0, run.result.stdout.str()[-2000:]
    assert_usage_is_the_servers(run.record["usage"], srv.stats)  # tokens, cache writes and reads, at their prices
    trials = run.record["trials"]
    assert [t["outcome"] for t in trials] == ["correct"] * 8
    for sample in (0, 1):  # one variant wrote the documents, the other three read them
        assert _cache_use(trials, sample) == [(False, True)] * 3 + [(True, False)]
    usage = run.record["usage"]
    assert (srv.stats.prompt_cache_writes, srv.stats.prompt_cache_reads) == (2, 6)
    assert usage["cache_creation_input_tokens"] == srv.stats.cache_creation_input_tokens > 0
    assert usage["cache_read_input_tokens"] == srv.stats.cache_read_input_tokens == 3 * usage[
        "cache_creation_input_tokens"]
    uncached = usage["paid_input_tokens"]
    assert uncached == usage["input_tokens"] == srv.stats.input_tokens + usage["cache_creation_input_tokens"] + usage[
        "cache_read_input_tokens"]  # every input token the model read; the server's input_tokens: after the breakpoint
    assert usage["billed_input_tokens"] == round(srv.stats.input_tokens + 1.25 * usage["cache_creation_input_tokens"]
                                                 + 0.1 * usage["cache_read_input_tokens"])
    assert usage["billed_input_tokens"] < uncached / 2
    assert run.record["settings"]["prompt_cache"] is True and run.record["settings"]["prompt_cache_mode"] == "auto"
    run.result.stdout.fnmatch_lines([f"usage: prompt cache: {usage['cache_creation_input_tokens']:,} input tokens "
                                     f"written, {usage['cache_read_input_tokens']:,} read; billed input "
                                     f"{usage['billed_input_tokens']:,} of {uncached:,} uncached (0.*)"])
    html = (run.report_dir / "longctx.html").read_text(encoding="utf-8")
    assert f"{usage['billed_input_tokens']:,} of {uncached:,} uncached" in html

    # Where the breakpoint goes is not part of the response cache's key: with it off, every answer is cached.
    srv.reset_stats()
    again = qa_like.run("--longctx-samples", "2", "--longctx-prompt-cache", "off", model=MODEL, cache=True)
    assert again.ret == 0 and again.record["usage"]["cache_hits"] == 8 and srv.stats.endpoints == {}


def test_off_sends_no_cache_control(qa_like: Any, api: Any) -> None:
    srv = api()
    run = qa_like.run("--longctx-samples", "2", "--longctx-prompt-cache", "off", model=MODEL)
    assert run.ret == 0 and srv.stats.endpoints == {"messages": 8}
    assert all(isinstance(m["content"], str) for body in srv.stats.requests for m in body["messages"])
    assert (srv.stats.prompt_cache_writes, srv.stats.prompt_cache_reads) == (0, 0)
    usage = run.record["usage"]
    assert usage["billed_input_tokens"] == usage["paid_input_tokens"] == srv.stats.input_tokens
    assert run.record["settings"]["prompt_cache"] is False
    assert "prompt cache" not in run.result.stdout.str()


def test_on_where_the_provider_has_no_prompt_cache_is_a_usage_error(qa_like: Any) -> None:
    run = qa_like.run("--longctx-prompt-cache", "on")  # fake/perfect
    assert run.ret == pytest.ExitCode.USAGE_ERROR
    run.result.stderr.fnmatch_lines(["ERROR: --longctx-prompt-cache on: only anthropic/* models have prompt caching, "
                                     "not fake/perfect; use auto or off"])
    bad = qa_like.run("--longctx-prompt-cache", "sometimes")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.result.stderr.fnmatch_lines(["ERROR: --longctx-prompt-cache: expected on, off or auto, got 'sometimes'"])
    assert "Traceback" not in bad.result.stderr.str() + run.result.stderr.str()


def test_the_ini_sets_it_and_the_command_line_wins(qa_like: Any, api: Any) -> None:
    srv = api()
    qa_like.project('longctx_prompt_cache = "off"')
    run = qa_like.run("--longctx-samples", "1", model=MODEL)
    assert run.ret == 0 and run.record["settings"]["prompt_cache_mode"] == "off"
    assert srv.stats.prompt_cache_writes == 0
    run = qa_like.run("--longctx-samples", "1", "--longctx-prompt-cache", "on", model=MODEL)
    assert run.ret == 0 and run.record["settings"]["prompt_cache"] is True
    assert srv.stats.prompt_cache_writes >= 1


def test_a_batch_sends_the_breakpoints_and_records_what_the_cache_billed(qa_like: Any, api: Any,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LONGCTX_BATCH_POLL", "0.05")
    srv = api(batch_delay=0.1)
    run = qa_like.run("--longctx-samples", "2", "--longctx-batch", "true", *PRICES, model=MODEL, cache=True)
    assert run.ret == 0 and srv.stats.endpoints.get("batches.create") == 1 and "messages" not in srv.stats.endpoints
    usage, stats = run.record["usage"], srv.stats
    assert usage["calls"] == stats.batch_answered == 8 and usage["sent_input_tokens"] == stats.batch_input_tokens
    assert usage["usd"] == pytest.approx((stats.batch_input_tokens * RATES.input + stats.batch_output_tokens
                                          * RATES.output + stats.cache_creation_input_tokens * RATES.cache_write_1h
                                          + stats.cache_read_input_tokens * RATES.cache_read) / 1e6 / 2)
    assert (srv.stats.prompt_cache_writes, srv.stats.prompt_cache_reads) == (2, 6)  # the server answers in order
    assert srv.stats.prompt_cache_writes_1h == 2  # a batch's breakpoints carry the 1-hour lifetime
    assert usage["cache_creation_input_tokens"] == srv.stats.cache_creation_input_tokens > 0
    assert usage["cache_read_input_tokens"] == srv.stats.cache_read_input_tokens
    assert usage["billed_input_tokens"] < usage["paid_input_tokens"] / 2
