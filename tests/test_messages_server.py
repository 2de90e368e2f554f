"""The fake Messages API server, driven by the real ``anthropic`` SDK (nothing monkeypatched)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anthropic
import pytest

from pytest_longctx.server import (
    FaultPlan,
    MessagesServer,
    Scripted,
    ServerStats,
    count_input_tokens,
    echo,
    fetch_stats,
)
from pytest_longctx.server.faults import FaultInjector

MODEL = "claude-test"
KEY = "test-key"


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


# The server speaks plain HTTP: verify=False only skips building a TLS context (~50 ms per client).


def sync_client(srv: MessagesServer | str, **kwargs: Any) -> anthropic.Anthropic:
    options: dict[str, Any] = {"api_key": KEY, "max_retries": 0, "timeout": 5.0, **kwargs}
    base_url = srv if isinstance(srv, str) else srv.base_url
    return anthropic.Anthropic(base_url=base_url, http_client=anthropic.DefaultHttpxClient(verify=False), **options)


def async_client(srv: MessagesServer, **kwargs: Any) -> anthropic.AsyncAnthropic:
    options: dict[str, Any] = {"api_key": KEY, "max_retries": 0, "timeout": 5.0, **kwargs}
    http_client = anthropic.DefaultAsyncHttpxClient(verify=False)
    return anthropic.AsyncAnthropic(base_url=srv.base_url, http_client=http_client, **options)


def wait_until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    """Poll ``condition``: the server may still be between reading a request and counting it."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.01)


@pytest.fixture
def server() -> Iterator[MessagesServer]:
    with MessagesServer(api_key=KEY) as srv:
        yield srv


# -- answers ---------------------------------------------------------------------------------------


def test_round_trip_has_the_messages_api_shape(server: MessagesServer) -> None:
    client = sync_client(server)
    raw = client.messages.with_raw_response.create(
        model=MODEL, max_tokens=64, messages=user("A long document.\nThe answer is 42.")
    )
    message = raw.parse()
    assert message.type == "message" and message.role == "assistant" and message.model == MODEL
    assert message.id.startswith("msg_")
    assert [block.type for block in message.content] == ["text"]
    assert message.content[0].text == "The answer is 42."
    assert (message.stop_reason, message.stop_sequence) == ("end_turn", None)
    assert message.usage.input_tokens == 9  # A long document . The answer is 42 .
    assert message.usage.output_tokens == 5
    assert raw.headers["request-id"].startswith("req_")
    assert int(raw.headers["anthropic-ratelimit-requests-remaining"]) < int(
        raw.headers["anthropic-ratelimit-requests-limit"]
    )
    assert "anthropic-ratelimit-input-tokens-remaining" in raw.headers
    assert "anthropic-ratelimit-output-tokens-reset" in raw.headers
    stats = server.stats
    assert stats.endpoints == {"messages": 1}
    assert stats.requests[0]["messages"] == user("A long document.\nThe answer is 42.")
    assert (stats.input_tokens, stats.output_tokens) == (9, 5)


def test_a_prefill_is_continued(server: MessagesServer) -> None:
    messages = [*user("Reply with:\nThe best answer is (B)"), {"role": "assistant", "content": "The best answer is ("}]
    message = sync_client(server).messages.create(model=MODEL, max_tokens=16, messages=messages)
    assert message.content[0].text == "B)"


def test_max_tokens_and_stop_sequences_end_the_reply(server: MessagesServer) -> None:
    client = sync_client(server)
    cut = client.messages.create(model=MODEL, max_tokens=3, messages=user("one two three four five"))
    assert (cut.content[0].text, cut.stop_reason, cut.usage.output_tokens) == ("one two three", "max_tokens", 3)
    stopped = client.messages.create(
        model=MODEL, max_tokens=50, stop_sequences=["four", "three"], messages=user("one two three four five")
    )
    assert (stopped.content[0].text, stopped.stop_reason, stopped.stop_sequence) == (
        "one two ",
        "stop_sequence",
        "three",
    )


def test_count_tokens_is_what_the_server_bills(server: MessagesServer) -> None:
    client = sync_client(server)
    request: dict[str, Any] = {
        "model": MODEL,
        "system": [{"type": "text", "text": "You answer questions about documents."}],
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "Doc (v2)."}},
                    {"type": "text", "text": "What version?"},
                ],
            }
        ],
    }
    counted = client.messages.count_tokens(**request)
    billed = client.messages.create(max_tokens=8, **request)
    assert counted.input_tokens == billed.usage.input_tokens == count_input_tokens(request) == 14
    assert server.stats.endpoints == {"count_tokens": 1, "messages": 1}


def test_responders_and_token_counters_are_pluggable() -> None:
    def shout(body: dict[str, Any]) -> str:
        return body["messages"][-1]["content"].upper()

    with MessagesServer(shout, token_counter=len) as srv:
        message = sync_client(srv).messages.create(model=MODEL, max_tokens=100, messages=user("hi there"))
    assert message.content[0].text == "HI THERE"
    assert (message.usage.input_tokens, message.usage.output_tokens) == (8, 8)


def test_a_broken_responder_is_a_500_not_a_dead_server() -> None:
    def broken(body: dict[str, Any]) -> str:
        return 42  # type: ignore[return-value]

    with MessagesServer(broken) as srv:
        client = sync_client(srv)
        with pytest.raises(anthropic.InternalServerError, match="must return str"):
            client.messages.create(model=MODEL, max_tokens=8, messages=user("q"))
        assert client.messages.count_tokens(model=MODEL, messages=user("still up")).input_tokens == 2


def test_fixed_and_scripted_responders() -> None:
    with MessagesServer("fixed:(C)") as srv:
        assert sync_client(srv).messages.create(model=MODEL, max_tokens=5, messages=user("?")).content[0].text == "(C)"
    by_key = Scripted({"capital of France": "Paris", "2+2": "4"}, default="I don't know")
    with MessagesServer(by_key) as srv:
        client = sync_client(srv)
        answers = [
            client.messages.create(model=MODEL, max_tokens=5, messages=user(q)).content[0].text
            for q in ("What is 2+2?", "The capital of France?", "Why?")
        ]
    assert answers == ["4", "Paris", "I don't know"]
    with MessagesServer(Scripted(["first", "second"])) as srv:
        client = sync_client(srv)
        assert [
            client.messages.create(model=MODEL, max_tokens=5, messages=user("q")).content[0].text for _ in "ab"
        ] == [
            "first",
            "second",
        ]
        with pytest.raises(anthropic.InternalServerError, match="used up"):
            client.messages.create(model=MODEL, max_tokens=5, messages=user("q"))


def test_streaming_through_the_sdk(server: MessagesServer) -> None:
    with sync_client(server).messages.stream(model=MODEL, max_tokens=50, messages=user("alpha beta gamma")) as stream:
        pieces = list(stream.text_stream)
        final = stream.get_final_message()
    assert "".join(pieces) == final.content[0].text == "alpha beta gamma"
    assert final.stop_reason == "end_turn" and final.usage.output_tokens == 3


# -- faults ----------------------------------------------------------------------------------------


async def _fail_once(kind: str, **plan: Any) -> BaseException:
    with MessagesServer(faults=FaultPlan(sequence=(kind,), **plan)) as srv:
        async with async_client(srv, timeout=0.2) as client:
            with pytest.raises(Exception) as info:
                await client.messages.create(model=MODEL, max_tokens=8, messages=user("q"))
            wait_until(lambda: srv.stats.faults == {kind: 1})  # drawn before the follow-up arrives
            follow_up = await client.messages.create(model=MODEL, max_tokens=8, messages=user("fine"))
        assert follow_up.content[0].text == "fine"
        assert srv.stats.faults == {kind: 1}
    return info.value


@pytest.mark.asyncio
async def test_429_is_a_rate_limit_error_with_retry_after() -> None:
    error = await _fail_once("429", retry_after=7)
    assert type(error) is anthropic.RateLimitError
    assert error.status_code == 429 and error.type == "rate_limit_error"
    assert error.response.headers["retry-after"] == "7"
    assert error.request_id is not None and error.request_id.startswith("req_")


@pytest.mark.asyncio
async def test_529_is_an_overloaded_error() -> None:
    error = await _fail_once("529")
    assert type(error) is anthropic.OverloadedError
    assert isinstance(error, anthropic.InternalServerError)
    assert error.status_code == 529 and error.type == "overloaded_error"


@pytest.mark.asyncio
async def test_500_is_an_internal_server_error() -> None:
    error = await _fail_once("500")
    assert type(error) is anthropic.InternalServerError
    assert error.status_code == 500 and error.type == "api_error"


@pytest.mark.asyncio
async def test_timeout_is_an_api_timeout_error() -> None:
    error = await _fail_once("timeout", timeout_hold=30)  # stopping the server releases the hold (tested below)
    assert type(error) is anthropic.APITimeoutError


@pytest.mark.asyncio
async def test_reset_is_a_connection_error() -> None:
    error = await _fail_once("reset")
    assert type(error) is anthropic.APIConnectionError


@pytest.mark.asyncio
async def test_malformed_json_escapes_the_sdk_as_a_json_decode_error() -> None:
    # The SDK parses a 200 body with json.loads and does not wrap the failure (nor retry it).
    error = await _fail_once("malformed")
    assert type(error) is json.JSONDecodeError
    assert not isinstance(error, anthropic.AnthropicError)


def test_the_sdk_retries_status_faults_and_honours_retry_after() -> None:
    # A 429 carries retry-after: 1 s, which the SDK sleeps instead of its own first backoff (at most 0.5 s),
    # so the answer cannot come sooner than 1 s after the first attempt (a lower bound holds on a busy machine).
    with MessagesServer(faults=FaultPlan(sequence=("429", None, "reset"), retry_after=1.0)) as srv:
        client = sync_client(srv, max_retries=2)
        started = time.monotonic()
        message = client.messages.create(model=MODEL, max_tokens=8, messages=user("ok"))
        assert message.content[0].text == "ok" and time.monotonic() - started >= 1.0
        assert srv.stats.endpoints == {"messages": 2} and srv.stats.faults == {"429": 1}
        with pytest.raises(anthropic.APIConnectionError):  # the next scripted fault, not retried here
            client.with_options(max_retries=0).messages.create(model=MODEL, max_tokens=8, messages=user("ok"))
        assert srv.stats.faults == {"429": 1, "reset": 1}


def test_wrong_api_key_is_an_authentication_error(server: MessagesServer) -> None:
    client = sync_client(server, api_key="wrong")
    with pytest.raises(anthropic.AuthenticationError) as info:
        client.messages.create(model=MODEL, max_tokens=8, messages=user("q"))
    assert info.value.status_code == 401 and info.value.type == "authentication_error"
    assert sync_client(server).messages.create(model=MODEL, max_tokens=8, messages=user("q")).content


def test_sticky_auth_fails_every_endpoint() -> None:
    with MessagesServer(faults=FaultPlan(sticky="auth")) as srv:
        client = sync_client(srv)
        for call in (
            lambda: client.messages.create(model=MODEL, max_tokens=8, messages=user("q")),
            lambda: client.messages.count_tokens(model=MODEL, messages=user("q")),
            lambda: client.messages.batches.list(),
        ):
            with pytest.raises(anthropic.AuthenticationError):
                call()
        assert srv.stats.faults == {"auth": 3}


def test_sticky_spend_limit_is_a_distinguishable_rate_limit_that_is_not_retried() -> None:
    with MessagesServer(faults=FaultPlan(sticky="spend-limit")) as srv:
        with pytest.raises(anthropic.RateLimitError) as info:
            sync_client(srv, max_retries=3).messages.create(model=MODEL, max_tokens=8, messages=user("q"))
        error = info.value
        assert type(error) is anthropic.EnforcedSpendLimitReachedError
        assert error.error_code == "enforced_spend_limit_reached"
        assert "retry-after" not in error.response.headers
        assert srv.stats.endpoints == {"messages": 1}  # x-should-retry: false stops the SDK's retries


def test_sticky_credit_is_a_bad_request() -> None:
    with MessagesServer(faults=FaultPlan(sticky="credit")) as srv:
        with pytest.raises(anthropic.BadRequestError, match="credit balance is too low"):
            sync_client(srv).messages.create(model=MODEL, max_tokens=8, messages=user("q"))


def test_faults_are_seeded_by_request_order() -> None:
    plan = FaultPlan(rate=0.3, kinds=("429", "529", "500"), seed=7)
    injector = FaultInjector(plan)
    expected = [injector.draw("messages") for _ in range(40)]
    assert {k for k in expected if k} <= {"429", "529", "500"} and 5 < sum(k is not None for k in expected) < 20
    with MessagesServer(faults=plan) as srv:
        client = sync_client(srv)
        seen: list[str | None] = []
        for _ in range(40):
            try:
                client.messages.create(model=MODEL, max_tokens=8, messages=user("q"))
                seen.append(None)
            except anthropic.APIStatusError as error:
                seen.append(str(error.status_code))
    assert seen == expected
    assert FaultInjector(plan).draw("count_tokens") is None  # only the plan's endpoints get faults


def test_bad_fault_plans_are_rejected() -> None:
    with pytest.raises(ValueError, match="unknown fault kind"):
        FaultPlan(rate=0.1, kinds=("418",))
    with pytest.raises(ValueError, match="sticky"):
        FaultPlan(sticky="teapot")
    with pytest.raises(ValueError, match="rate"):
        FaultPlan(rate=1.5)


# -- requests the API would refuse -----------------------------------------------------------------


def test_invalid_requests_are_bad_requests(server: MessagesServer) -> None:
    client = sync_client(server)
    with pytest.raises(anthropic.BadRequestError, match="max_tokens"):
        client.messages.create(model=MODEL, max_tokens=0, messages=user("q"))
    with pytest.raises(anthropic.BadRequestError, match="trailing whitespace"):
        client.messages.create(
            model=MODEL, max_tokens=8, messages=[*user("q"), {"role": "assistant", "content": "Answer: "}]
        )
    with pytest.raises(anthropic.BadRequestError, match="at least one message"):
        client.messages.create(model=MODEL, max_tokens=8, messages=[])
    with pytest.raises(anthropic.NotFoundError):
        client.get("/v1/nothing-here", cast_to=object)
    assert server.stats.errors == {"invalid_request_error": 3, "not_found_error": 1}


def test_unknown_models_are_not_found() -> None:
    with MessagesServer(models=[MODEL]) as srv:
        client = sync_client(srv)
        assert client.messages.create(model=MODEL, max_tokens=8, messages=user("q")).model == MODEL
        with pytest.raises(anthropic.NotFoundError, match="claude-nope"):
            client.messages.create(model="claude-nope", max_tokens=8, messages=user("q"))


# -- batches ---------------------------------------------------------------------------------------


def _batch_requests(n: int) -> list[dict[str, Any]]:
    return [
        {"custom_id": f"q{i}", "params": {"model": MODEL, "max_tokens": 16, "messages": user(f"answer {i}")}}
        for i in range(n)
    ]


def test_batches_through_the_sdk() -> None:
    with MessagesServer(batch_delay=0.2) as srv:
        client = sync_client(srv)
        batch = client.messages.batches.create(requests=_batch_requests(3))
        assert batch.processing_status == "in_progress" and batch.results_url is None
        assert batch.request_counts.processing == 3
        with pytest.raises(anthropic.AnthropicError, match="results_url"):
            client.messages.batches.results(batch.id)
        wait_until(lambda: client.messages.batches.retrieve(batch.id).processing_status == "ended", timeout=30)
        ended = client.messages.batches.retrieve(batch.id)
        assert ended.processing_status == "ended" and ended.ended_at is not None
        assert ended.request_counts.succeeded == 3 and ended.request_counts.processing == 0
        assert ended.results_url == f"{srv.base_url}/v1/messages/batches/{batch.id}/results"
        results = {r.custom_id: r.result for r in client.messages.batches.results(batch.id)}
        assert sorted(results) == ["q0", "q1", "q2"]
        assert results["q1"].type == "succeeded" and results["q1"].message.content[0].text == "answer 1"
        listed = client.messages.batches.list(limit=10)
        assert [b.id for b in listed.data] == [batch.id]
        assert client.messages.batches.delete(batch.id).type == "message_batch_deleted"
        with pytest.raises(anthropic.NotFoundError):
            client.messages.batches.retrieve(batch.id)


async def _error_of_a_request_without_max_tokens(**server: Any) -> str:
    """The error type a batch result reports for a request lacking ``max_tokens``, on a server with ``server``."""
    with MessagesServer(batch_delay=0.0, **server) as srv:
        async with async_client(srv) as client:
            bad = [{"custom_id": "bad", "params": {"model": MODEL, "messages": user("no max_tokens")}}]
            batch = await client.messages.batches.create(requests=bad)
            results = [r async for r in await client.messages.batches.results(batch.id)]
            assert results[0].result.type == "errored"
            return str(results[0].result.error.error.type)


@pytest.mark.asyncio
async def test_batch_errors_cancellation_and_paging_with_the_async_sdk() -> None:
    assert await _error_of_a_request_without_max_tokens(batch_error_rate=1.0) == "api_error"
    assert await _error_of_a_request_without_max_tokens() == "invalid_request_error"
    with MessagesServer(batch_delay=30.0) as srv:
        async with async_client(srv) as client:
            ids = [(await client.messages.batches.create(requests=_batch_requests(2))).id for _ in range(3)]
            canceling = await client.messages.batches.cancel(ids[0])
            assert canceling.processing_status == "canceling" and canceling.cancel_initiated_at is not None
            canceled = await client.messages.batches.retrieve(ids[0])
            assert canceled.processing_status == "ended" and canceled.request_counts.canceled == 2
            results = [r.result.type async for r in await client.messages.batches.results(ids[0])]
            assert results == ["canceled", "canceled"]
            first_page = await client.messages.batches.list(limit=2)
            assert [b.id for b in first_page.data] == ids[::-1][:2] and first_page.has_more
            everything = [b.id async for b in client.messages.batches.list(limit=2)]
            assert everything == ids[::-1]


# -- concurrency, stats, lifecycle -----------------------------------------------------------------


@pytest.mark.asyncio
async def test_concurrent_requests_overlap() -> None:
    n = 32
    barrier = threading.Barrier(n, timeout=30)  # every reply waits until all n requests are inside the server

    def wait_for_all(body: dict[str, Any]) -> str:
        barrier.wait()
        return echo(body)

    with MessagesServer(wait_for_all) as srv:
        async with async_client(srv, timeout=60.0) as client:
            replies = await asyncio.gather(
                *(client.messages.create(model=MODEL, max_tokens=8, messages=user(f"r{i}")) for i in range(n))
            )
        stats = srv.stats
    assert sorted(r.content[0].text for r in replies) == sorted(f"r{i}" for i in range(n))
    assert stats.max_in_flight >= n and stats.in_flight == 0
    assert stats.endpoints == {"messages": n}


def test_64_requests_are_inside_the_server_at_once() -> None:
    n = 64
    barrier = threading.Barrier(n, timeout=5)  # a server that serialized requests would break it

    def wait_for_all(body: dict[str, Any]) -> str:
        barrier.wait()
        return echo(body)

    with MessagesServer(wait_for_all) as srv:
        client = sync_client(srv)  # one client, one pool: each thread gets its own connection
        with ThreadPoolExecutor(max_workers=n) as pool:
            replies = pool.map(
                lambda i: client.messages.create(model=MODEL, max_tokens=8, messages=user(f"{i}")), range(n)
            )
            texts = [reply.content[0].text for reply in replies]
        assert texts == [str(i) for i in range(n)]
        assert srv.stats.max_in_flight == n


def test_stats_reset_and_json_round_trip(server: MessagesServer) -> None:
    sync_client(server).messages.create(model=MODEL, max_tokens=8, messages=user("q"))
    stats = server.stats
    assert ServerStats.from_json(json.loads(json.dumps(stats.to_json()))) == stats
    assert fetch_stats(server.base_url).endpoints == {"messages": 1}
    assert fetch_stats(server.base_url, requests=True).requests == stats.requests
    server.reset_stats()
    assert server.stats == ServerStats()


def test_stop_releases_held_requests() -> None:
    srv = MessagesServer(faults=FaultPlan(sequence=("timeout",), timeout_hold=600)).start()
    client = sync_client(srv, timeout=0.2)
    with pytest.raises(anthropic.APITimeoutError):
        client.messages.create(model=MODEL, max_tokens=8, messages=user("q"))
    wait_until(lambda: srv.stats.in_flight == 1)
    stopper = threading.Thread(target=srv.stop)  # a held request not released would keep stop() for 600 s
    stopper.start()
    stopper.join(timeout=60)
    assert not stopper.is_alive(), "stop() is still waiting for the held request"
    with pytest.raises(RuntimeError, match="not running"):
        _ = srv.base_url


def test_cli_serves_another_process(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"replies": {"capital": "Paris"}, "default": "?"}))
    repo = Path(__file__).resolve().parents[1]
    command = [sys.executable, "-m", "pytest_longctx.server", "--port", "0", "--responder", f"scripted:{script}"]
    command += ["--faults", "429", "--fault-rate", "1", "--fault-endpoints", "count_tokens", "--api-key", KEY]
    process = subprocess.Popen(command, cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        base_url = process.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:")
        client = sync_client(base_url)
        assert (
            client.messages.create(model=MODEL, max_tokens=8, messages=user("The capital?")).content[0].text == "Paris"
        )
        with pytest.raises(anthropic.RateLimitError):
            client.messages.count_tokens(model=MODEL, messages=user("q"))
        assert fetch_stats(base_url).faults == {"429": 1}
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(f"{base_url}/v1/messages/batches", timeout=5)  # no x-api-key: 401
    finally:
        process.terminate()
        assert process.wait(timeout=10) == 0


def test_cli_rejects_bad_options() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pytest_longctx.server", "--faults", "418", "--fault-rate", "0.5"],
        cwd=Path(__file__).resolve().parents[1],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2 and "unknown fault kind" in result.stderr
