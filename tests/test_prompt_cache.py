"""Prompt caching: the shared-prefix mark, the Anthropic request blocks, the server's cache accounting,
the lanes' order (a prefix warmed before its siblings go out) and the plan's estimate."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import anthropic
import pytest

from pytest_longctx.backends.anthropic import AnthropicBackend, build_params
from pytest_longctx.backends.base import Completion, Request, request_key, shared_prefix_end
from pytest_longctx.backends.prompt_cache import billed_input, min_cacheable_tokens, prefix_group
from pytest_longctx.dispatch.cache import ResponseCache
from pytest_longctx.dispatch.lanes import LaneQueue
from pytest_longctx.dispatch.plan import format_plan, summarize_plan
from pytest_longctx.dispatch.policy import PlannedRequest
from pytest_longctx.dispatch.prefetch import Dispatcher
from pytest_longctx.server import MessagesServer
from pytest_longctx.server.prompt_cache import PromptCache, default_min_tokens
from pytest_longctx.server.responders import approx_token_count, echo

#: ~1,200 tokens under the server's counter (words plus punctuation): over the 1,024-token minimum.
DOCUMENTS = "Here are the documents:\n" + " ".join(f"Section {i} says the fee is {i} dollars." for i in range(150))


def variant(documents: str, question: str) -> Request:
    text = f"{documents}\n\nInstructions for this variant.\nQuestion: {question}"
    return Request.user(text, max_tokens=16, template="t@1", cache_prefix=shared_prefix_end(text, documents))


# -- the mark and the request the API sees ------------------------------------------------------------------


def test_the_prefix_mark_splits_the_first_turn_into_the_same_text() -> None:
    request = variant(DOCUMENTS, "What is the fee of section 7?")
    prefix, rest = request.split_prefix() or ("", "")
    assert prefix == DOCUMENTS and prefix + rest == request.messages[0].content
    params = build_params("claude-x", request)
    blocks = params["messages"][0]["content"]
    assert blocks == [{"type": "text", "text": prefix, "cache_control": {"type": "ephemeral"}},
                      {"type": "text", "text": rest}]
    assert "".join(b["text"] for b in blocks) == request.messages[0].content  # what the model reads is unchanged
    assert build_params("claude-x", request, cache=False)["messages"][0]["content"] == request.messages[0].content
    unmarked = Request.user(request.messages[0].content, max_tokens=16, template="t@1")
    assert build_params("claude-x", unmarked)["messages"][0]["content"] == request.messages[0].content


def test_the_mark_is_not_part_of_the_cache_key_and_survives_the_plan_file() -> None:
    request = variant(DOCUMENTS, "q")
    unmarked = Request.user(request.messages[0].content, max_tokens=16, template="t@1")
    assert request_key("anthropic", "m", request) == request_key("anthropic", "m", unmarked)
    assert "cache_prefix" not in unmarked.to_json()  # existing requests serialize (and hash) as before
    assert Request.from_json(json.loads(json.dumps(request.to_json()))) == request
    assert prefix_group(request.to_json()) == prefix_group(variant(DOCUMENTS, "another").to_json()) is not None
    assert prefix_group(variant(DOCUMENTS + ".", "q").to_json()) != prefix_group(request.to_json())
    assert prefix_group(unmarked.to_json()) is None
    assert shared_prefix_end("abc", "zz") == 0 and Request.user("abc", cache_prefix=3).split_prefix() is None


def test_minimum_lengths_and_prices() -> None:
    assert min_cacheable_tokens("claude-sonnet-4-5") == 1024 == default_min_tokens("claude-sonnet-4-5")
    assert min_cacheable_tokens("claude-3-5-haiku-latest") == 2048 == default_min_tokens("claude-3-5-haiku-latest")
    assert min_cacheable_tokens("claude-haiku-4-5") == 4096 == default_min_tokens("claude-haiku-4-5")
    assert billed_input(100, 1000, 7000) == pytest.approx(100 + 1250 + 700)


# -- the server's cache, through the real SDK ----------------------------------------------------------------


def _send(client: anthropic.Anthropic, request: Request, model: str = "claude-test", cache: bool = True) -> Any:
    params = build_params(model, request, temperature=False, cache=cache)
    return client.messages.create(**params).usage


def test_the_server_bills_writes_then_reads_like_the_api() -> None:
    cache = PromptCache()
    with MessagesServer("echo", prompt_cache=cache) as srv:
        client = anthropic.Anthropic(base_url=srv.base_url, api_key="k", max_retries=0)
        first, second = variant(DOCUMENTS, "one?"), variant(DOCUMENTS, "two?")
        prefix_tokens = approx_token_count(DOCUMENTS)
        assert prefix_tokens >= 1024
        u1 = _send(client, first)
        assert (u1.cache_creation_input_tokens, u1.cache_read_input_tokens) == (prefix_tokens, 0)
        assert u1.input_tokens == approx_token_count(first.messages[0].content[len(DOCUMENTS):])  # after the breakpoint
        u2 = _send(client, second)
        assert (u2.cache_creation_input_tokens, u2.cache_read_input_tokens) == (0, prefix_tokens)
        assert _send(client, second, model="claude-other").cache_creation_input_tokens == prefix_tokens  # per model
        unmarked = _send(client, second, cache=False)
        assert (unmarked.cache_creation_input_tokens, unmarked.cache_read_input_tokens) == (0, 0)
        assert unmarked.input_tokens == u2.input_tokens + prefix_tokens
        cache.advance(299)  # a read refreshes the lifetime ...
        assert _send(client, first).cache_read_input_tokens == prefix_tokens
        cache.advance(301)  # ... and an entry unused for longer is gone
        assert _send(client, first).cache_creation_input_tokens == prefix_tokens
        short = variant("Short documents.", "q")  # under the minimum: not cached, all of it is input
        u3 = _send(client, short)
        assert (u3.cache_creation_input_tokens, u3.cache_read_input_tokens) == (0, 0)
        assert u3.input_tokens == approx_token_count(short.messages[0].content)
        stats = srv.stats
        assert (stats.prompt_cache_writes, stats.prompt_cache_reads) == (3, 2)
        assert (stats.cache_creation_input_tokens, stats.cache_read_input_tokens) == (3 * prefix_tokens,
                                                                                      2 * prefix_tokens)
        assert json.loads(json.dumps(stats.to_json()))["prompt_cache_reads"] == 2


def test_a_one_hour_breakpoint_lives_an_hour_and_says_so_in_its_usage() -> None:
    cache = PromptCache()
    with MessagesServer("echo", prompt_cache=cache) as srv:
        client = anthropic.Anthropic(base_url=srv.base_url, api_key="k", max_retries=0)
        prefix_tokens = approx_token_count(DOCUMENTS)
        hour = build_params("claude-test", variant(DOCUMENTS, "one?"), temperature=False, cache_ttl="1h")
        assert hour["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
        written = client.messages.create(**hour).usage
        assert written.cache_creation_input_tokens == prefix_tokens
        assert (written.cache_creation.ephemeral_1h_input_tokens, written.cache_creation.ephemeral_5m_input_tokens) \
            == (prefix_tokens, 0)
        cache.advance(3599)  # far past 5 minutes, within the hour
        assert client.messages.create(**hour).usage.cache_read_input_tokens == prefix_tokens
        cache.advance(3601)
        assert client.messages.create(**hour).usage.cache_creation_input_tokens == prefix_tokens
        five = client.messages.create(**build_params("claude-test", variant(DOCUMENTS, "two?"), temperature=False))
        assert five.usage.cache_read_input_tokens == prefix_tokens  # the same prefix: one entry
        assert (srv.stats.prompt_cache_writes, srv.stats.prompt_cache_writes_1h) == (2, 2)


def test_the_server_minimum_and_lifetime_are_configurable() -> None:
    with pytest.raises(ValueError, match="lifetime"):
        PromptCache(lifetime_s=0)
    with MessagesServer("echo", prompt_cache=PromptCache(lifetime_s=10, min_tokens=5000)) as srv:
        client = anthropic.Anthropic(base_url=srv.base_url, api_key="k", max_retries=0)
        assert _send(client, variant(DOCUMENTS, "q")).cache_creation_input_tokens == 0  # 1,2xx < 5,000


@pytest.mark.asyncio
async def test_the_backend_reports_every_input_token_and_the_cache_share(monkeypatch: pytest.MonkeyPatch) -> None:
    with MessagesServer("echo") as srv:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", srv.base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
        backend = AnthropicBackend("claude-test")
        try:
            first = await backend.complete(variant(DOCUMENTS, "one?"))
            second = await backend.complete(variant(DOCUMENTS, "two?"))
        finally:
            await backend.aclose()
    prefix_tokens = approx_token_count(DOCUMENTS)
    assert first.cache_creation_input_tokens == prefix_tokens == second.cache_read_input_tokens
    assert first.input_tokens == approx_token_count(variant(DOCUMENTS, "one?").messages[0].content)
    again = Completion.from_json(json.loads(json.dumps(second.to_json())))
    assert (again.cache_read_input_tokens, again.input_tokens) == (prefix_tokens, second.input_tokens)


# -- the lanes: a prefix warmed before its siblings go out --------------------------------------------------


@pytest.mark.asyncio
async def test_lane_queue_holds_siblings_until_their_first_is_done() -> None:
    queue = LaneQueue(lanes=2)
    a = [(variant("A" * 50, str(i)), f"a{i}") for i in range(3)]
    b = [(variant("B" * 50, str(i)), f"b{i}") for i in range(2)]
    plain = (Request.user("no mark"), "plain")
    for line, (request, name) in enumerate((a[0], a[1], b[0], a[2], plain, b[1])):  # the plan's order
        queue.offer(PlannedRequest(name, request.to_json(), line))
    queue.end_of_input()
    assert queue.held == 3
    got = [(await queue.get()) for _ in range(3)]
    assert [e.key for e in got if e] == ["a0", "b0", "plain"]  # firsts and unmarked, in plan order
    queue.done(got[2])  # an unmarked request releases nothing
    queue.done(got[1])  # b0 answered: b1 goes out next, ahead of anything queued later
    nxt = await queue.get()
    assert nxt is not None and nxt.key == "b1"
    queue.done(nxt)
    queue.done(got[0])
    rest = [await queue.get() for _ in range(4)]
    assert [e.key if e else None for e in rest] == ["a1", "a2", None, None]  # then one end mark per lane


def _plan(work: Path, requests: list[Request]) -> Path:
    work.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"key": request_key("anthropic", "claude-test", r), "cached": False, "request": r.to_json()})
             for r in requests]
    (work / "plan.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return work / "plan.jsonl"


def test_the_dispatcher_warms_each_prefix_before_its_siblings(tmp_path: Path, api: Any) -> None:
    # Three contexts x 8 variants, planned variant-major (every context's variant 0, then variant 1, ...), then 4
    # unmarked requests; 8 lanes. The server holds the first arrival of each context until all 4 unmarked requests
    # have arrived. Sent in plan order, siblings would arrive while their first is held, be answered first and
    # write the cache themselves. Warmed first, each context's first arrival writes it and the other 7 read it,
    # and the unmarked requests kept the free lanes busy meanwhile (else the held firsts would never be released).
    unmarked_in, lock = [0], threading.Lock()
    released = threading.Event()
    arrivals: dict[str, list[str]] = {}

    def responder(body: dict[str, Any]) -> str:
        content = body["messages"][0]["content"]
        if isinstance(content, list):
            with lock:
                order = arrivals.setdefault(content[0]["text"], [])
                order.append("".join(b["text"] for b in content))
                first = len(order) == 1
            if first:
                assert released.wait(60), "the unmarked requests never arrived"  # a bound on a hang
        else:
            with lock:
                unmarked_in[0] += 1
                if unmarked_in[0] == 4:
                    released.set()
        return echo(body)

    srv = api(responder)
    contexts = [f"{DOCUMENTS} Context {c}." for c in range(3)]
    requests = [variant(ctx, f"variant {v}?") for v in range(8) for ctx in contexts]
    requests += [Request.user(f"unmarked {i}", max_tokens=16, template="t@1") for i in range(4)]
    backend = AnthropicBackend("claude-test", max_concurrency=8, timeout_s=120.0)
    cache, work = ResponseCache(tmp_path / "cache"), tmp_path / "work"
    dispatcher = Dispatcher(backend, cache, work, _plan(work, requests), concurrency=8)
    dispatcher.start()
    dispatcher.join(timeout=120)  # a bound on a hang, not a speed target
    stats = srv.stats
    assert stats.endpoints == {"messages": 28} and dispatcher.progress.done == 28 and not stats.errors
    assert (stats.prompt_cache_writes, stats.prompt_cache_reads) == (3, 21)
    prefix_tokens = approx_token_count(contexts[0])
    for ctx in contexts:
        answers = [Completion.from_json(cache.get(request_key("anthropic", "claude-test", Request.user(
            text, max_tokens=16, template="t@1"))) or {"text": ""}) for text in arrivals[ctx]]
        assert [(c.cache_creation_input_tokens, c.cache_read_input_tokens) for c in answers] == (
            [(prefix_tokens, 0)] + [(0, prefix_tokens)] * 7)  # in arrival order: the first wrote, the rest read


# -- the plan's estimate --------------------------------------------------------------------------------------


def _planned(model: str, groups: int, siblings: int, prefix: int, rest: int, mark: bool = True) -> list[dict[str, Any]]:
    out = []
    for g in range(groups):
        for s in range(siblings):
            entry = {"key": f"{g}-{s}", "model": model, "template": "t@1", "cached": False,
                     "input_tokens": prefix + rest, "max_tokens": 10, "tokenizer": "tiktoken/cl100k_base"}
            if mark:
                entry.update(prefix=f"group-{g}", prefix_tokens=prefix)
            out.append(entry)
    return out


def test_the_plan_estimates_writes_reads_and_stacks_the_batch_discount() -> None:
    model = "anthropic/claude-sonnet-4-5"  # $3 / $15 per million tokens
    on = summarize_plan(_planned(model, 10, 8, 70_000, 200))["models"][model]
    off = summarize_plan(_planned(model, 10, 8, 70_000, 200, mark=False))["models"][model]
    uncached = 80 * 70_200
    assert on["input_tokens"] == off["input_tokens"] == off["billed_input_tokens"] == uncached
    assert (on["prefix_groups"], on["cache_write_tokens"], on["cache_read_tokens"]) == (10, 700_000, 70 * 70_000)
    billed = 80 * 200 + 1.25 * 700_000 + 0.1 * 70 * 70_000
    assert on["billed_input_tokens"] == round(billed) and on["billed_input_tokens"] / uncached < 1 / 3.5
    assert on["est_input_cost_usd"] == pytest.approx(billed * 3 / 1e6, abs=1e-4)
    assert on["est_uncached_input_cost_usd"] == off["est_input_cost_usd"] == pytest.approx(uncached * 3 / 1e6)
    output = 80 * 10 * 15 / 1e6
    batch_billed = 80 * 200 + 2.0 * 700_000 + 0.1 * 70 * 70_000  # batches write the 1-hour cache: 2x
    assert on["batch_billed_input_tokens"] == round(batch_billed)
    assert on["est_batch_cost_usd"] == pytest.approx((batch_billed * 3 / 1e6 + output) / 2, abs=1e-4)  # discounts stack
    assert on["est_batch_uncached_cost_usd"] == off["est_batch_cost_usd"] == off["est_batch_uncached_cost_usd"] == (
        pytest.approx((uncached * 3 / 1e6 + output) / 2, abs=1e-4))
    lines = format_plan({"models": {model: on}, "note": ""})
    assert any("prompt cache: 10 shared prefixes written" in line for line in lines)
    saved = on["est_batch_uncached_cost_usd"] - on["est_batch_cost_usd"]
    assert f"{model}: with batches: <= ${on['est_batch_cost_usd']:.2f} with the 1-hour prompt cache (half price; " \
           f"writes 2x, reads 0.1x: billed input {round(batch_billed):,}) against <= " \
           f"${on['est_batch_uncached_cost_usd']:.2f} uncached: ${saved:.2f} saved (66%)" in lines
    assert not any("prompt cache" in line for line in format_plan({"models": {model: off}, "note": ""}))
    short = summarize_plan(_planned(model, 2, 8, 900, 10))["models"][model]
    assert short["prefix_groups"] == 0 and short["billed_input_tokens"] == short["input_tokens"]  # under 1,024
    haiku = "anthropic/claude-3-5-haiku-latest"
    assert summarize_plan(_planned(haiku, 1, 8, 1500, 10))["models"][haiku]["prefix_groups"] == 0


def test_lane_queue_with_no_entries_ends_at_once() -> None:
    async def main() -> list[Any]:
        queue = LaneQueue(lanes=3)
        queue.end_of_input()
        return [await queue.get() for _ in range(3)]

    assert asyncio.run(main()) == [None, None, None]


def test_the_progress_line_and_the_spend_show_billed_input() -> None:
    from types import SimpleNamespace

    from pytest_longctx.backends.model_spec import parse_model_spec
    from pytest_longctx.reporting.progress import Display, estimated_spend, prompt_cache_text
    from pytest_longctx.results.aggregate import Aggregator

    agg = Aggregator()
    for i, (written, read) in enumerate([(70_000, 0)] + [(0, 70_000)] * 7):
        agg.add({"nodeid": f"t{i}", "experiment": "qa", "params": {}, "sample": i, "outcome": "correct", "calls": 1,
                 "cache_hits": 0, "input_tokens": 70_100, "output_tokens": 1, "paid_input_tokens": 70_100,
                 "paid_output_tokens": 1, "cache_creation_input_tokens": written, "cache_read_input_tokens": read})
    usage = agg.usage()
    assert usage["billed_input_tokens"] == round(8 * 100 + 1.25 * 70_000 + 0.1 * 7 * 70_000)
    settings = SimpleNamespace(model=parse_model_spec("anthropic/claude-sonnet-4-5"), plan=False)
    assert estimated_spend(usage, settings) == pytest.approx((usage["billed_input_tokens"] * 3 + 8 * 15) / 1e6)  # type: ignore[arg-type]
    state = SimpleNamespace(aggregator=agg, dispatcher=None)
    line = Display(None).line(state, settings, 8, 0.0)  # type: ignore[arg-type]
    assert "; prompt cache: 70,000 input tokens written, 490,000 read; billed input 137,300 of " \
           "560,800 uncached (0.245)" in line
    assert prompt_cache_text({"paid_input_tokens": 5}) is None
