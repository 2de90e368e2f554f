"""JSON over HTTP with the shared retry loop: what the httpx backends (openai, local) send and how they judge answers.

One POST is one attempt of :class:`~pytest_longctx.backends.retry.Retrier`; :func:`judge` turns its
failure into a verdict: statuses worth another try (408, 409, 425, 429, 5xx, 529), a 200 whose body
is not JSON (cut short on the way), timeouts and dropped connections are retried; 401/403 and
exhausted quota stop the run; anything else fails the one request.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from pytest_longctx.backends.retry import RETRY_STATUSES, Retrier, Verdict, retry_after_seconds

#: Error codes (OpenAI's ``error.code``/``error.type``) and phrases of errors no retry can fix.
_FATAL_MARKERS = ("insufficient_quota", "billing_hard_limit", "billing_not_active", "exceeded your current quota",
                  "spend_limit", "credit balance")


class BadAnswer(Exception):
    """An HTTP answer that is not a JSON object: an error status, or a body that is not JSON."""

    def __init__(self, response: httpx.Response, problem: str) -> None:
        super().__init__(problem)
        self.response = response
        self.problem = problem


def json_object(response: httpx.Response) -> dict[str, Any]:
    """The JSON object of a successful answer; :class:`BadAnswer` otherwise."""
    if response.is_error:
        raise BadAnswer(response, f"HTTP {response.status_code}{_error_message(response)}")
    try:
        data = response.json()
    except ValueError:
        raise BadAnswer(response, f"answer is not JSON: {brief(response)}") from None
    if not isinstance(data, dict):
        raise BadAnswer(response, f"answer is not a JSON object: {brief(response)}")
    return data


def judge(exc: Exception, *, key_hint: str = "") -> Verdict:
    """The verdict on one failed httpx attempt (see the module docstring)."""
    if isinstance(exc, BadAnswer):
        response, code = exc.response, exc.response.status_code
        text = f"{exc.problem} {brief(response)}".lower()
        if code in (401, 403):
            return Verdict("fatal", f"{exc.problem}{key_hint}")
        if code == 402 or (code in (400, 429) and any(marker in text for marker in _FATAL_MARKERS)):
            return Verdict("fatal", exc.problem)
        if code in RETRY_STATUSES:
            return Verdict("retry", exc.problem, retry_after=retry_after_seconds(response.headers),
                           rate_limited=code == 429)
        if not response.is_error and "not JSON:" in exc.problem:  # a body cut short: worth another try
            return Verdict("retry", exc.problem, billing="unknown")  # answered, its usage unread
        return Verdict("fail", exc.problem)
    if isinstance(exc, (httpx.UnsupportedProtocol, httpx.InvalidURL)):  # no retry fixes the URL
        return Verdict("fatal", f"{describe(exc)} (check the base URL)", billing="unsent")
    if isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout, httpx.ReadError, httpx.WriteError,
                        httpx.RemoteProtocolError)):  # billing: never sent, or sent and its answer lost
        billing = "unsent" if isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout)) else "unknown"
        return Verdict("retry", describe(exc), unreachable=True, billing=billing)
    if isinstance(exc, httpx.TransportError):  # read/write/pool timeouts: the endpoint is there, only slow
        return Verdict("retry", describe(exc), billing="unknown")
    if isinstance(exc, ValueError):
        return Verdict("fail", describe(exc))
    raise exc  # a bug, not an answer: let it show with its traceback


async def apost_json(client: httpx.AsyncClient, url: str, payload: dict[str, Any], *, retrier: Retrier,
                     headers: dict[str, str] | None = None, key_hint: str = "") -> dict[str, Any]:
    """POST JSON and return the JSON object answered, through ``retrier``."""

    async def attempt() -> dict[str, Any]:
        return json_object(await client.post(url, json=payload, headers=headers))

    return await retrier.run(attempt, lambda exc: judge(exc, key_hint=key_hint))


def post_json(client: httpx.Client, url: str, payload: dict[str, Any], *, retrier: Retrier,
              headers: dict[str, str] | None = None, key_hint: str = "") -> dict[str, Any]:
    """Blocking :func:`apost_json` (token counting, which the backend protocol makes synchronous)."""
    return retrier.run_blocking(lambda: json_object(client.post(url, json=payload, headers=headers)),
                                lambda exc: judge(exc, key_hint=key_hint))


class Clients:
    """The httpx clients of one backend: an async one per event loop (a pooled connection must not outlive its loop)
    and a blocking one (token counting), each made when first used."""

    def __init__(self, timeout: httpx.Timeout, blocking_timeout: httpx.Timeout, *, trust_env: bool = True) -> None:
        self._timeout, self._blocking_timeout, self._trust_env = timeout, blocking_timeout, trust_env
        self._client: httpx.AsyncClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._blocking: httpx.Client | None = None

    def async_client(self) -> httpx.AsyncClient:
        """This event loop's client."""
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            self._client = httpx.AsyncClient(timeout=self._timeout, trust_env=self._trust_env)
            self._loop = loop
        return self._client

    def blocking_client(self) -> httpx.Client:
        """The blocking client."""
        if self._blocking is None:
            self._blocking = httpx.Client(timeout=self._blocking_timeout, trust_env=self._trust_env)
        return self._blocking

    async def aclose(self) -> None:
        """Close both (the async one only from the loop it belongs to)."""
        client, self._client = self._client, None
        if client is not None and self._loop is asyncio.get_running_loop():
            await client.aclose()
        self.close_blocking()

    def close_blocking(self) -> None:
        """Close the blocking client."""
        if self._blocking is not None:
            self._blocking.close()
            self._blocking = None


def _error_message(response: httpx.Response) -> str:
    """`` <type>: <message>`` of an OpenAI-style error body, else ``: <body>``."""
    try:
        error = response.json().get("error")
    except (ValueError, AttributeError, UnicodeDecodeError):
        error = None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        kind = error["code"] if isinstance(error.get("code"), str) else error.get("type") or "error"
        return " " + " ".join(f"{kind}: {error['message']}".split())[:300]
    return f": {brief(response)}"


def brief(response: httpx.Response) -> str:
    """The body of ``response`` on one line, cut to 300 characters."""
    try:
        text = response.text
    except (httpx.HTTPError, UnicodeDecodeError):
        return "(unreadable body)"
    return " ".join(text.split())[:300] or "(empty body)"


def describe(exc: BaseException) -> str:
    """``Type: message`` of an exception, on one line."""
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return " ".join(text.split())[:300]
