"""Fault kinds, the seeded fault plan, and error bodies in the Anthropic format.

Per-request faults (drawn at ``FaultPlan.rate``, or scripted by ``FaultPlan.sequence``), and what
the ``anthropic`` SDK (2.x) raises for each with ``max_retries=0``:

=============  ===========================================================  ============================
kind           what the server does                                         SDK exception
=============  ===========================================================  ============================
``429``        429 ``rate_limit_error``, ``retry-after`` header (seconds)   ``RateLimitError``
``529``        529 ``overloaded_error``                                     ``OverloadedError`` (an
                                                                            ``InternalServerError``)
``500``        500 ``api_error``                                            ``InternalServerError``
``timeout``    holds the request ``timeout_hold`` s, then drops it          ``APITimeoutError``
``reset``      closes the socket with a TCP reset, no response              ``APIConnectionError``
``malformed``  200, ``application/json``, body truncated mid-JSON           ``json.JSONDecodeError``
=============  ===========================================================  ============================

The SDK retries the first five itself (when ``max_retries > 0``); ``malformed`` escapes it as a bare
``json.JSONDecodeError`` (a ``ValueError``, not an ``AnthropicError``) and is never retried.

Sticky modes (``FaultPlan.sticky``) answer *every* API request the same way:

``auth``
    401 ``authentication_error`` (a revoked or wrong key): ``AuthenticationError``.
``spend-limit``
    429 ``rate_limit_error`` whose ``error.details.error_code`` is ``enforced_spend_limit_reached``,
    with no ``retry-after`` and ``x-should-retry: false``. The real API answers this way when an
    organization crosses its tier's monthly spend cap; the SDK raises
    ``EnforcedSpendLimitReachedError`` (a ``RateLimitError`` subclass) and does not retry, so a
    backend must check ``err.error_code`` before treating a 429 as transient.
``credit``
    400 ``invalid_request_error`` "Your credit balance is too low ..." (the real API's answer for
    an account without credit): a plain ``BadRequestError``, recognisable only by its message.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass
from typing import Any

#: Per-request fault kinds, in documentation order.
FAULT_KINDS: tuple[str, ...] = ("429", "529", "500", "timeout", "reset", "malformed")
#: Modes that answer every request with the same error.
STICKY_MODES: tuple[str, ...] = ("auth", "spend-limit", "credit")
#: Endpoint names a fault plan can target (see ``MessagesServer.stats.endpoints``).
FAULT_ENDPOINTS: tuple[str, ...] = ("messages", "chat.completions", "completion", "count_tokens", "batches.create",
                                    "batches.retrieve", "batches.results")
#: Where per-request faults go by default: every endpoint that generates an answer, in every dialect.
GENERATION_ENDPOINTS: tuple[str, ...] = ("messages", "chat.completions", "completion")

SPEND_LIMIT_ERROR_CODE = "enforced_spend_limit_reached"
SPEND_LIMIT_MESSAGE = (
    "Your organization has reached the monthly API usage limit of its usage tier. "
    "API access resumes at 00:00 UTC on the first day of next month."
)
CREDIT_MESSAGE = (
    "Your credit balance is too low to access the Anthropic API. "
    "Please go to Plans & Billing to upgrade or purchase credits."
)


class APIFailure(Exception):
    """An error answer: raised anywhere in request handling, sent as an Anthropic error body."""

    def __init__(
        self,
        status: int,
        error_type: str,
        message: str,
        *,
        headers: dict[str, str] | None = None,
        error_code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.error_type = error_type
        self.message = message
        self.headers = dict(headers or {})
        self.error_code = error_code

    def body(self, request_id: str | None = None) -> dict[str, Any]:
        """The JSON error body, e.g. ``{"type": "error", "error": {...}, "request_id": ...}``."""
        return error_body(self.error_type, self.message, request_id=request_id, error_code=self.error_code)


def error_body(
    error_type: str, message: str, *, request_id: str | None = None, error_code: str | None = None
) -> dict[str, Any]:
    """An error in the Messages API format."""
    error: dict[str, Any] = {"type": error_type, "message": message}
    if error_code is not None:
        error["details"] = {"error_code": error_code}
    body: dict[str, Any] = {"type": "error", "error": error}
    if request_id is not None:
        body["request_id"] = request_id
    return body


@dataclass(frozen=True)
class FaultPlan:
    """Which faults to inject, how often, and with which seed.

    Args:
        rate: Probability that a request gets a fault (0 to 1).
        kinds: Fault kinds drawn uniformly when a fault happens (subset of ``FAULT_KINDS``).
        seed: Seed of the ``random.Random`` that decides, in request arrival order.
        sequence: Faults for the first requests, in order (``None`` = answer normally); the
            random draws start after it. E.g. ``("429", None)`` fails exactly the first request.
        sticky: A mode from ``STICKY_MODES`` that answers every request (overrides the rest).
        retry_after: Seconds sent in the ``retry-after`` header of ``429`` faults.
        timeout_hold: Seconds a ``timeout`` fault holds the request before dropping it.
        endpoints: Endpoints the per-request faults apply to (sticky modes apply to all); by default
            ``/v1/messages``, OpenAI's ``/v1/chat/completions`` and llama.cpp's ``/completion``.
    """

    rate: float = 0.0
    kinds: tuple[str, ...] = FAULT_KINDS
    seed: int = 0
    sequence: tuple[str | None, ...] = ()
    sticky: str | None = None
    retry_after: float = 1.0
    timeout_hold: float = 2.0
    endpoints: tuple[str, ...] = GENERATION_ENDPOINTS

    def __post_init__(self) -> None:
        if not 0.0 <= self.rate <= 1.0:
            raise ValueError(f"fault rate must be within [0, 1], got {self.rate}")
        for kind in (*self.kinds, *(k for k in self.sequence if k is not None)):
            if kind not in FAULT_KINDS:
                raise ValueError(f"unknown fault kind {kind!r}; expected one of {', '.join(FAULT_KINDS)}")
        if self.rate > 0 and not self.kinds:
            raise ValueError("a positive fault rate needs at least one fault kind")
        if self.sticky is not None and self.sticky not in STICKY_MODES:
            raise ValueError(f"unknown sticky mode {self.sticky!r}; expected one of {', '.join(STICKY_MODES)}")
        for endpoint in self.endpoints:
            if endpoint not in FAULT_ENDPOINTS:
                raise ValueError(f"unknown endpoint {endpoint!r}; expected one of {', '.join(FAULT_ENDPOINTS)}")
        if self.retry_after < 0 or self.timeout_hold < 0:
            raise ValueError("retry_after and timeout_hold must be >= 0")


class FaultInjector:
    """Draws one decision per request in arrival order (thread-safe, reproducible for a seed)."""

    def __init__(self, plan: FaultPlan) -> None:
        self.plan = plan
        self._rng = random.Random(plan.seed)
        self._count = 0
        self._lock = threading.Lock()

    def draw(self, endpoint: str) -> str | None:
        """The fault (or sticky mode) for the next request to ``endpoint``, or ``None``."""
        plan = self.plan
        if plan.sticky is not None:
            return plan.sticky
        if endpoint not in plan.endpoints:
            return None
        with self._lock:
            index = self._count
            self._count += 1
            if index < len(plan.sequence):
                return plan.sequence[index]
            if plan.rate <= 0.0:
                return None
            if self._rng.random() >= plan.rate:
                return None
            return self._rng.choice(plan.kinds)


def status_failure(kind: str, plan: FaultPlan) -> APIFailure | None:
    """The error answer for a status fault or sticky mode; ``None`` for socket-level kinds."""
    if kind == "429":
        return APIFailure(
            429,
            "rate_limit_error",
            "This request would exceed the rate limit for your organization. "
            "Please reduce the prompt length or the maximum tokens requested, or try again later.",
            headers={"retry-after": f"{plan.retry_after:g}"},
        )
    if kind == "529":
        return APIFailure(529, "overloaded_error", "Overloaded")
    if kind == "500":
        return APIFailure(500, "api_error", "Internal server error")
    if kind == "auth":
        return APIFailure(401, "authentication_error", "invalid x-api-key")
    if kind == "spend-limit":
        return APIFailure(
            429,
            "rate_limit_error",
            SPEND_LIMIT_MESSAGE,
            headers={"x-should-retry": "false"},
            error_code=SPEND_LIMIT_ERROR_CODE,
        )
    if kind == "credit":
        return APIFailure(400, "invalid_request_error", CREDIT_MESSAGE)
    return None
