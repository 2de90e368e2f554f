"""The Anthropic backend: its pure parts, then retries and error classes through the local server and the real SDK.

Nothing of the SDK is monkeypatched: the backend finds the local Messages-API server through the SDK's own
``ANTHROPIC_BASE_URL`` and a dummy ``ANTHROPIC_API_KEY``, and every fault is a real HTTP answer (or a dropped
connection) that the SDK turns into its own exception.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from typing import Any

import anthropic
import httpx2
import pytest

from pytest_longctx.backends.anthropic import AnthropicBackend, build_params, classify
from pytest_longctx.backends.base import Message, Request
from pytest_longctx.backends.retry import AdaptiveLimit, RetryPolicy, retry_after_seconds
from pytest_longctx.errors import BackendError, FatalBackendError
from pytest_longctx.server import FAULT_KINDS, FaultPlan

MODEL = "claude-test"
KEY = "sk-ant-test-SECRET-123"
FAST = RetryPolicy(attempts=3, base_s=0.01)

# -- build_params (pure) ---------------------------------------------------------------------------


def test_build_params_maps_every_request_field() -> None:
    turns = (Message("user", "Doc.\nQ?"), Message("assistant", "Let me see."), Message("user", "Go"))
    request = Request(messages=turns,
                      system="You are terse.", max_tokens=32, temperature=0.7, stop=("\n\n", "END"),
                      prefill="The answer is (", template="qa@3")
    params = build_params("claude-x", request)
    assert params == {
        "model": "claude-x",
        "max_tokens": 32,
        "messages": [{"role": "user", "content": "Doc.\nQ?"}, {"role": "assistant", "content": "Let me see."},
                     {"role": "user", "content": "Go"}, {"role": "assistant", "content": "The answer is ("}],
        "system": "You are terse.",
        "stop_sequences": ["\n\n", "END"],
        "extra_body": {"temperature": 0.7},  # the SDK no longer takes temperature as a create() argument
    }
    json.dumps(params)  # plain data: nothing of the SDK in it


def test_build_params_leaves_out_what_the_request_does_not_set() -> None:
    params = build_params("claude-x", Request.user("hi", max_tokens=8))
    assert params == {"model": "claude-x", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}],
                      "extra_body": {"temperature": 0.0}}
    assert "extra_body" not in build_params("claude-x", Request.user("hi"), temperature=False)


def test_build_params_is_pure() -> None:
    request = Request.user("hi", prefill="A:", stop=("x",))
    first = build_params("m", request)
    first["messages"].append({"role": "user", "content": "mutated"})
    first["stop_sequences"].append("y")
    assert build_params("m", request) == {"model": "m", "max_tokens": 512,
                                          "messages": [{"role": "user", "content": "hi"},
                                                       {"role": "assistant", "content": "A:"}],
                                          "stop_sequences": ["x"], "extra_body": {"temperature": 0.0}}
    assert request.messages == (Message("user", "hi"),)


# -- classify: every SDK exception kind ------------------------------------------------------------

_REQ = httpx2.Request("POST", "http://127.0.0.1:1/v1/messages")


def _status(cls: type[anthropic.APIStatusError], status: int, error_type: str, message: str = "nope",
            headers: dict[str, str] | None = None, code: str | None = None) -> anthropic.APIStatusError:
    error: dict[str, Any] = {"type": error_type, "message": message}
    if code:
        error["details"] = {"error_code": code}
    body = {"type": "error", "error": error}
    response = httpx2.Response(status, headers=headers or {}, json=body, request=_REQ)
    return cls(f"Error code: {status} - {body}", response=response, body=body)


CLASSIFIED: dict[str, tuple[BaseException, tuple[str, float | None]]] = {
    "timeout": (anthropic.APITimeoutError(_REQ), ("retry", None)),
    "connection": (anthropic.APIConnectionError(request=_REQ), ("retry", None)),
    "malformed-json": (json.JSONDecodeError("Expecting ','", '{"id": "msg', 11), ("retry", None)),
    "validation": (anthropic.APIResponseValidationError(httpx2.Response(200, request=_REQ), None), ("retry", None)),
    "429-retry-after": (_status(anthropic.RateLimitError, 429, "rate_limit_error", headers={"retry-after": "2"}),
                        ("retry", 2.0)),
    "429-retry-after-ms": (_status(anthropic.RateLimitError, 429, "rate_limit_error",
                                   headers={"retry-after-ms": "150", "retry-after": "9"}), ("retry", 0.15)),
    "429-bare": (_status(anthropic.RateLimitError, 429, "rate_limit_error"), ("retry", None)),
    "529": (_status(anthropic.OverloadedError, 529, "overloaded_error"), ("retry", None)),
    "500": (_status(anthropic.InternalServerError, 500, "api_error"), ("retry", None)),
    "503": (_status(anthropic.ServiceUnavailableError, 503, "api_error"), ("retry", None)),
    "408": (_status(anthropic.RequestTimeoutError, 408, "timeout_error"), ("retry", None)),
    "409": (_status(anthropic.ConflictError, 409, "conflict_error"), ("retry", None)),
    "spend-limit": (_status(anthropic.EnforcedSpendLimitReachedError, 429, "rate_limit_error",
                            headers={"x-should-retry": "false"}, code="enforced_spend_limit_reached"),
                    ("fatal", None)),
    "auth": (_status(anthropic.AuthenticationError, 401, "authentication_error"), ("fatal", None)),
    "payment": (_status(anthropic.PaymentRequiredError, 402, "billing_error"), ("fatal", None)),
    "permission": (_status(anthropic.PermissionDeniedError, 403, "permission_error"), ("fatal", None)),
    "credit": (_status(anthropic.BadRequestError, 400, "invalid_request_error",
                       "Your credit balance is too low to access the Anthropic API."), ("fatal", None)),
    "bad-request": (_status(anthropic.BadRequestError, 400, "invalid_request_error", "max_tokens: too big"),
                    ("fail", None)),
    "not-found": (_status(anthropic.NotFoundError, 404, "not_found_error", "model: claude-nope"), ("fail", None)),
    "too-large": (_status(anthropic.ContentTooLargeError, 413, "request_too_large"), ("fail", None)),
    "bug": (RuntimeError("a bug"), ("fail", None)),
}


@pytest.mark.parametrize("name", list(CLASSIFIED))
def test_classify(name: str) -> None:
    exc, expected = CLASSIFIED[name]
    assert classify(exc) == expected


# -- retry-after, backoff, adaptive limit ---------------------------------------------------------


def test_retry_after_seconds() -> None:
    assert retry_after_seconds(None) is None
    assert retry_after_seconds({}) is None
    assert retry_after_seconds({"retry-after": "2"}) == 2.0
    assert retry_after_seconds({"retry-after": "0.05"}) == 0.05
    assert retry_after_seconds({"retry-after-ms": "250", "retry-after": "7"}) == 0.25  # ms wins
    assert retry_after_seconds({"retry-after-ms": "soon", "retry-after": "7"}) == 7.0  # bad ms: fall back
    assert retry_after_seconds({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) is None  # HTTP date: backoff
    assert retry_after_seconds(httpx2.Headers({"Retry-After": "3"})) == 3.0  # real headers: any case


def test_backoff_is_jittered_capped_and_retry_after_wins() -> None:
    policy, rng = RetryPolicy(attempts=6, base_s=0.5, cap_s=4.0), random.Random(0)
    for attempt in range(8):
        delays = [policy.delay(attempt, rng) for _ in range(200)]
        assert 0 <= min(delays) and max(delays) <= min(4.0, 0.5 * 2**attempt)
    assert policy.delay(0, rng, retry_after=3.5) == 3.5
    assert policy.delay(5, rng, retry_after=0.0) == 0.0
    assert policy.delay(0, rng, retry_after=-1.0) == 0.0
    assert policy.delay(0, rng, retry_after=1e6) == 120.0


@pytest.mark.asyncio
async def test_adaptive_limit_halves_on_429_and_recovers() -> None:
    limit = AdaptiveLimit(16)
    for expected in (8, 4, 2, 1, 1):
        await limit.acquire()
        await limit.release(rate_limited=True)
        assert limit.current == expected
    assert limit.throttled == 5
    successes = 0
    while limit.current < 16:
        await limit.acquire()
        await limit.release()
        successes += 1
    assert limit.current == 16 and 100 < successes < 200  # back to full after about 16 * 16 / 2 successes
    await limit.acquire()
    await limit.release()
    assert limit.current == 16  # never above the maximum


@pytest.mark.asyncio
async def test_adaptive_limit_bounds_requests_in_flight() -> None:
    limit = AdaptiveLimit(4)
    await limit.acquire()
    await limit.release(rate_limited=True)  # now 2 allowed
    go, inside = asyncio.Event(), []

    async def job(i: int) -> None:
        await limit.acquire()
        inside.append(i)
        await go.wait()
        await limit.release()

    jobs = [asyncio.create_task(job(i)) for i in range(12)]
    await asyncio.sleep(0.05)
    assert len(inside) == 2  # the others wait for a free slot
    go.set()
    await asyncio.gather(*jobs)
    assert sorted(inside) == list(range(12))


# -- through the local server with the real SDK ----------------------------------------------------




def _backend(**kwargs: Any) -> AnthropicBackend:
    options: dict[str, Any] = {"policy": FAST, "timeout_s": 5.0, **kwargs}
    return AnthropicBackend(MODEL, **options)


@pytest.mark.asyncio
async def test_a_request_goes_out_as_the_api_expects(api: Any) -> None:
    srv = api("echo", api_key=KEY)
    backend = _backend()
    try:
        request = Request(messages=(Message("user", "Context.\nThe best answer is (B)"),), system="Be brief.",
                          max_tokens=16, temperature=0.3, stop=("STOP",), prefill="The best answer is (")
        completion = await backend.complete(request)
    finally:
        await backend.aclose()
    assert completion.text == "B)" and completion.stop_reason == "end_turn"
    assert (completion.input_tokens, completion.output_tokens) == (srv.stats.input_tokens, srv.stats.output_tokens)
    [body] = srv.stats.requests
    assert body["model"] == MODEL and body["max_tokens"] == 16 and body["temperature"] == 0.3
    assert body["system"] == "Be brief." and body["stop_sequences"] == ["STOP"]
    assert body["messages"][-1] == {"role": "assistant", "content": "The best answer is ("}


@pytest.mark.asyncio
@pytest.mark.parametrize("kind", FAULT_KINDS)
async def test_each_fault_kind_is_retried_then_answered_or_given_up(api: Any, kind: str) -> None:
    # Two faults then an answer (3 attempts suffice); then three faults: a BackendError, never a wrong answer.
    # A held "timeout" request outlasts the client's timeout by far: were the hold to end first, its dropped
    # connection would count as the endpoint being unreachable (a loaded machine can delay the client's timer).
    plan = FaultPlan(sequence=(kind, kind, None, kind, kind, kind), retry_after=0.05, timeout_hold=30.0)
    srv = api("echo", faults=plan)
    backend = _backend(timeout_s=0.15)  # a held "timeout" request times out on the client side
    try:
        started = time.monotonic()
        completion = await backend.complete(Request.user("fine"))
        elapsed = time.monotonic() - started
        assert completion.text == "fine"
        assert srv.stats.endpoints == {"messages": 3} and srv.stats.faults == {kind: 2}
        if kind == "429":
            assert elapsed >= 2 * 0.05  # retry-after honoured (the backoff alone would wait at most 0.03 s)
        # Three resets in a row, no answer between: the endpoint is declared unreachable (a fatal stop naming it).
        expected = "cannot reach http://127.0.0.1:.*: 3 connection failures" if kind == "reset" else "gave up after 3"
        with pytest.raises(BackendError, match=expected) as info:
            await backend.complete(Request.user("doomed"))
    finally:
        await backend.aclose()
    assert isinstance(info.value, FatalBackendError) == (kind == "reset")
    assert srv.stats.endpoints == {"messages": 6} and srv.stats.faults == {kind: 5}
    assert "\n" not in str(info.value) and len(str(info.value)) < 400


@pytest.mark.asyncio
@pytest.mark.parametrize(("sticky", "words"), [("spend-limit", "enforced_spend_limit_reached"),
                                               ("credit", "credit balance is too low"),
                                               ("auth", "authentication_error")])
async def test_errors_no_retry_can_fix_are_fatal_at_once(api: Any, sticky: str, words: str) -> None:
    srv = api("echo", faults=FaultPlan(sticky=sticky))
    backend = _backend(policy=RetryPolicy(attempts=6, base_s=0.01))
    try:
        with pytest.raises(FatalBackendError, match=words) as info:
            await backend.complete(Request.user("q"))
        assert srv.stats.endpoints == {"messages": 1}  # no retry
        with pytest.raises(FatalBackendError):  # later calls fail without sending anything
            await backend.complete(Request.user("another"))
    finally:
        await backend.aclose()
    assert srv.stats.endpoints == {"messages": 1}
    message = str(info.value)
    assert "\n" not in message and len(message) < 400 and "stopping the run" in message


@pytest.mark.asyncio
async def test_a_request_the_api_refuses_fails_once_without_retry(api: Any) -> None:
    srv = api("echo", models=["claude-other"])
    backend = _backend()
    try:
        with pytest.raises(BackendError, match="404 not_found_error") as info:
            await backend.complete(Request.user("q"))
    finally:
        await backend.aclose()
    assert not isinstance(info.value, FatalBackendError)
    assert srv.stats.endpoints == {"messages": 1}


@pytest.mark.asyncio
async def test_a_model_without_sampling_parameters_is_sent_none(api: Any) -> None:
    def newer_model(body: dict[str, Any]) -> str:
        if "temperature" in body:
            raise ValueError("temperature is deprecated for this model")
        return "ok"

    srv = api(newer_model)
    backend = _backend()
    try:
        assert (await backend.complete(Request.user("q"))).text == "ok"
        assert (await backend.complete(Request.user("again"))).text == "ok"
    finally:
        await backend.aclose()
    assert [("temperature" in body) for body in srv.stats.requests] == [True, False, False]


@pytest.mark.asyncio
async def test_concurrency_is_bounded_also_under_429s(api: Any) -> None:
    srv = api("echo", latency=0.1)
    backend = _backend(max_concurrency=4)
    try:
        answers = await asyncio.gather(*(backend.complete(Request.user(f"r{i}")) for i in range(16)))
        assert sorted(a.text for a in answers) == sorted(f"r{i}" for i in range(16))
        assert srv.stats.max_in_flight == 4
        srv.set_faults(FaultPlan(sequence=("429",) * 4, retry_after=0.01))
        srv.reset_stats()
        answers = await asyncio.gather(*(backend.complete(Request.user(f"s{i}")) for i in range(16)))
        assert len(answers) == 16 and srv.stats.faults == {"429": 4}
        assert srv.stats.max_in_flight <= 4
    finally:
        await backend.aclose()
