"""The one retry loop every HTTP backend shares, against the scripted server's OpenAI and llama.cpp dialects."""

from __future__ import annotations

import asyncio

import pytest

from pytest_longctx.backends.base import Request
from pytest_longctx.backends.local import LocalBackend
from pytest_longctx.backends.openai_compat import OpenAIBackend
from pytest_longctx.backends.retry import Retrier, RetryPolicy, Verdict
from pytest_longctx.errors import BackendError, FatalBackendError
from pytest_longctx.server import FaultPlan, MessagesServer

FAST = RetryPolicy(attempts=3, base_s=0.0)


def test_connection_failures_with_answers_between_never_declare_the_endpoint_dead() -> None:
    retrier = Retrier("t", "http://x", FAST)
    script = iter(["reset", "reset", "ok", "reset", "reset", "ok", "reset", "reset", "reset"])

    async def attempt() -> str:
        if next(script) == "reset":
            raise ConnectionResetError("reset by peer")
        return "answer"

    def judge(exc: Exception) -> Verdict:
        return Verdict("retry", str(exc), unreachable=True)

    async def go() -> None:
        assert await retrier.run(attempt, judge) == "answer"
        assert await retrier.run(attempt, judge) == "answer"
        with pytest.raises(FatalBackendError, match="cannot reach http://x: 3 connection failures in a row"):
            await retrier.run(attempt, judge)
        with pytest.raises(FatalBackendError):  # later calls fail at once, sending nothing
            await retrier.run(attempt, judge)

    asyncio.run(go())


def test_openai_halves_its_requests_in_flight_on_429_and_honours_retry_after() -> None:
    with MessagesServer("echo", faults=FaultPlan(sequence=("429", "429"), retry_after=0.01)) as srv:
        backend = OpenAIBackend("gpt-x", base_url=srv.base_url + "/v1", tokenize=False, max_concurrency=8,
                                policy=FAST)

        async def go() -> str:
            try:
                return (await backend.complete(Request.user("hello"))).text
            finally:
                await backend.aclose()

        assert asyncio.run(go()) == "hello"
        limit = backend.retrier.limit
        assert limit is not None and limit.throttled == 2 and limit.current < 8
        assert srv.stats.endpoints == {"chat.completions": 3}


def test_a_request_the_server_refuses_fails_once_without_retry() -> None:
    with MessagesServer("echo", models=["gpt-known"]) as srv:
        backend = OpenAIBackend("gpt-unknown", base_url=srv.base_url + "/v1", tokenize=False, policy=FAST)
        with pytest.raises(BackendError, match="HTTP 404") as info:
            asyncio.run(backend.complete(Request.user("hello")))
        assert not isinstance(info.value, FatalBackendError) and srv.stats.endpoints == {"chat.completions": 1}


def test_blocking_token_counts_go_through_the_loop_inside_a_running_event_loop() -> None:
    """count_tokens is synchronous and called from async tests: the same loop runs without awaiting the event loop."""
    with MessagesServer("echo") as srv:
        backend = LocalBackend("smollm2-135m", base_url=srv.base_url, policy=FAST)

        async def go() -> int:
            return backend.count_tokens("one two three, four")

        assert asyncio.run(go()) == 5  # the server's counter: 4 words and a comma
        assert srv.stats.endpoints == {"tokenize": 1}


def test_the_openai_dialect_answers_like_an_openai_server() -> None:
    import httpx

    with MessagesServer("fixed:one two three four five", models=["gpt-a", "gpt-b"], api_key="k") as srv:
        headers = {"Authorization": "Bearer k"}
        models = httpx.get(f"{srv.base_url}/v1/models", headers=headers).json()
        assert [m["id"] for m in models["data"]] == ["gpt-a", "gpt-b"] and models["object"] == "list"
        body = {"model": "gpt-a", "max_tokens": 3, "stop": "five",
                "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "count"}]}
        answer = httpx.post(f"{srv.base_url}/v1/chat/completions", json=body, headers=headers).json()
        assert answer["object"] == "chat.completion" and answer["model"] == "gpt-a"
        assert answer["choices"][0] == {"index": 0, "message": {"role": "assistant", "content": "one two three"},
                                        "finish_reason": "length"}
        assert answer["usage"] == {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6}
        refused = httpx.post(f"{srv.base_url}/v1/chat/completions", json=body)  # no key
        assert refused.status_code == 401 and refused.json()["error"]["code"] == "invalid_api_key"
        assert srv.stats.requests[0]["messages"][0]["role"] == "system"  # the OpenAI body, as sent


def test_the_watch_hears_of_each_failed_attempt_and_each_retry_before_it_goes_out() -> None:
    from pytest_longctx.backends.retry import ATTEMPT_WATCH

    heard: list[str] = []

    class Watch:
        def failed(self, verdict: Verdict, last: bool) -> None:
            heard.append(verdict.billing + ("!" if last else ""))

        def again(self) -> None:
            heard.append("again")
            if heard.count("again") == 3:
                raise RuntimeError("refused")  # e.g. the budget no longer covers it

    retrier = Retrier("t", "http://x", FAST)
    script = iter(["none", "unknown", "ok", "unsent", "none"])

    async def attempt() -> str:
        if (kind := next(script)) != "ok":
            raise ConnectionError(kind)
        return "answer"

    def retry(exc: Exception) -> Verdict:
        return Verdict("retry", str(exc), billing=str(exc))

    async def go() -> None:
        token = ATTEMPT_WATCH.set(Watch())
        try:
            assert await retrier.run(attempt, retry) == "answer"
            with pytest.raises(RuntimeError, match="refused"):  # the watch refused the third retry: nothing sent
                await retrier.run(attempt, retry)
            with pytest.raises(BackendError):  # a failure no retry fixes: the last attempt
                await retrier.run(attempt, lambda exc: Verdict("fail", str(exc)))
        finally:
            ATTEMPT_WATCH.reset(token)

    asyncio.run(go())
    assert heard == ["none", "again", "unknown", "again", "unsent", "again", "none!"]
