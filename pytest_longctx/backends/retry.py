"""The one retry policy of every HTTP backend (anthropic, openai, local) and the loop that applies it.

Backoff is exponential with full jitter, capped, and a server's ``retry-after`` (or
``retry-after-ms``) always wins. :class:`AdaptiveLimit` halves the allowed requests in flight on
each 429 and grows back by one after a run of successes (AIMD), so a run slows down instead of
hammering a rate-limited API. :class:`Retrier` is the loop: each backend only says how to send one
attempt and how to judge a failure (:class:`Verdict`); the loop retries, stops the whole run on
errors no retry can fix (auth, quota), and on a dead endpoint: when a request used all its attempts
on connection failures (refused, DNS, reset) and the process has seen at least ``attempts`` of them
in a row with no answer in between, the endpoint is declared unreachable and every later call fails
at once without sending.

Every attempt is a request the API sees (the SDK's own retries are off), so whoever pays for them hears of each:
the dispatch layer sets :data:`ATTEMPT_WATCH` (an :class:`AttemptWatch`) around ``Backend.complete``, and the loop
tells it of each failed attempt (with what the API may bill for it, :attr:`Verdict.billing`) and of each retry before
it goes out (the watch may refuse it by raising: the run's ledger does when a budget cannot cover it).
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from pytest_longctx.errors import BackendError, FatalBackendError

T = TypeVar("T")


#: HTTP statuses worth another try, for every backend: rate limits, overload, gateway trouble.
RETRY_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})
#: Environment variable scaling the backoff: seconds of the first retry's upper bound (default 0.5).
BASE_ENV = "LONGCTX_RETRY_BASE_S"


def _base_from_env() -> float:
    try:
        return max(0.0, float(os.environ.get(BASE_ENV, "0.5")))
    except ValueError:
        return 0.5


@dataclass(frozen=True)
class RetryPolicy:
    """How many times and how long to wait between attempts (``$LONGCTX_RETRY_BASE_S`` sets ``base_s``)."""

    attempts: int = 6
    base_s: float = field(default_factory=_base_from_env)
    cap_s: float = 30.0

    def delay(self, attempt: int, rng: random.Random, retry_after: float | None = None) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (0-based)."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), 120.0)
        return rng.uniform(0, min(self.cap_s, self.base_s * 2**attempt))


def retry_after_seconds(headers: Mapping[str, str] | None) -> float | None:
    """Parse ``retry-after-ms`` or ``retry-after`` (seconds); None when absent or not a number."""
    if not headers:
        return None
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is not None:
            try:
                return float(value) * scale
            except ValueError:
                continue
    return None


@dataclass
class AdaptiveLimit:
    """An asyncio concurrency limit that shrinks on rate limiting and recovers gradually."""

    maximum: int
    current: float = 0.0
    _in_flight: int = 0
    _cond: asyncio.Condition | None = field(default=None, repr=False)
    successes: int = 0
    throttled: int = 0

    def __post_init__(self) -> None:
        self.current = float(self.maximum)

    def _condition(self) -> asyncio.Condition:
        if self._cond is None:
            self._cond = asyncio.Condition()
        return self._cond

    async def acquire(self) -> None:
        cond = self._condition()
        async with cond:
            await cond.wait_for(lambda: self._in_flight < max(1, int(self.current)))
            self._in_flight += 1

    async def release(self, *, rate_limited: bool = False) -> None:
        cond = self._condition()
        async with cond:
            self._in_flight -= 1
            if rate_limited:
                self.throttled += 1
                self.current = max(1.0, self.current / 2)
            else:
                self.successes += 1
                self.current = min(float(self.maximum), self.current + 1.0 / max(1.0, self.current))
            cond.notify_all()


@dataclass(frozen=True)
class Verdict:
    """What one failed attempt means."""

    #: "retry" (transient), "fatal" (stop the run: auth, quota) or "fail" (this request only).
    kind: str
    #: One line describing the failure (the server's own message where it gave one).
    detail: str
    retry_after: float | None = None
    rate_limited: bool = False
    #: The endpoint did not answer at all: connection refused, DNS failure, connection reset.
    unreachable: bool = False
    #: What the API may bill for the failed attempt: "none" (an error answer was read: errors are not billed),
    #: "unknown" (sent, but no usage was read: a timeout, a dropped connection, a body cut short; the API may have
    #: answered and billed it) or "unsent" (the connection was never made: the API never saw it).
    billing: str = "none"


class AttemptWatch(Protocol):
    """Hears of every attempt of one request after the first (see the module docstring)."""

    def failed(self, verdict: Verdict, last: bool) -> None:
        """An attempt failed (``last``: no other attempt follows: the request ends with this failure)."""

    def again(self) -> None:
        """Another attempt goes out now (may raise to refuse it: the request then ends with that exception)."""


#: The watch of the request being sent in this task (asyncio tasks and threads each see their own; None: nobody
#: counts attempts). A ``ContextVar``, not state: each caller sets it around one ``complete`` and resets it.
ATTEMPT_WATCH: ContextVar[AttemptWatch | None] = ContextVar("longctx_attempt_watch", default=None)


class Retrier:
    """The retry loop of one backend instance (one per process): attempts, backoff, AIMD, fatal stops.

    Args:
        what: Prefix of every error message, e.g. ``openai/gpt-x``.
        url: The endpoint, named when it cannot be reached.
        policy: Attempts and backoff.
        seed: Seed of the backoff jitter.
        max_concurrency: Requests in flight (an :class:`AdaptiveLimit`); None: unlimited.
        hint: Appended to the dead-endpoint message (e.g. which variable sets the URL).
    """

    def __init__(self, what: str, url: str, policy: RetryPolicy | None = None, *, seed: int = 0,
                 max_concurrency: int | None = None, hint: str = "") -> None:
        self.what = what
        self.url = url
        self.policy = policy or RetryPolicy()
        self.limit = AdaptiveLimit(max_concurrency) if max_concurrency else None
        self.hint = hint
        self._rng = random.Random(f"{what}-backoff|{seed}")
        #: Set by the first error no retry can fix: later calls fail at once, sending nothing.
        self.fatal: str | None = None
        #: Connection failures in a row, across this process's requests, with no answer in between.
        self.unreachable_streak = 0

    async def run(self, attempt: Callable[[], Awaitable[T]], judge: Callable[[Exception], Verdict], *,
                  sleep: Callable[[float], Awaitable[object]] = asyncio.sleep, limited: bool = True) -> T:
        """Call ``attempt`` until it returns, retrying failures ``judge`` calls transient."""
        limit = self.limit if limited else None
        watch = ATTEMPT_WATCH.get() if limited else None  # blocking calls (token counts, batch calls): not attempts
        last: Verdict | None = None
        for number in range(max(1, self.policy.attempts)):
            if self.fatal is not None:  # an earlier call hit an error no retry can fix: send nothing more
                if watch is not None:
                    watch.failed(Verdict("fatal", self.fatal, billing="unsent"), True)
                raise FatalBackendError(self.fatal)
            if number and watch is not None:
                watch.again()
            if limit is not None:
                await limit.acquire()
            verdict: Verdict | None = None
            try:
                result = await attempt()
            except FatalBackendError:
                raise
            except Exception as exc:  # judged below; BaseException (cancellation) passes through
                verdict = judge(exc)
            finally:
                if limit is not None:
                    await limit.release(rate_limited=verdict is not None and verdict.rate_limited)
            if verdict is None:
                self.unreachable_streak = 0
                return result
            if watch is not None:
                watch.failed(verdict, verdict.kind != "retry" or number + 1 >= self.policy.attempts)
            self.unreachable_streak = self.unreachable_streak + 1 if verdict.unreachable else 0
            if verdict.kind == "fatal":
                self.fatal = f"{self.what}: {verdict.detail} — stopping the run"
                raise FatalBackendError(self.fatal)
            if verdict.kind != "retry":
                raise BackendError(f"{self.what}: {verdict.detail}")
            last = verdict
            if number + 1 < self.policy.attempts:
                await sleep(self.policy.delay(number, self._rng, verdict.retry_after))
        assert last is not None
        if last.unreachable and self.unreachable_streak >= self.policy.attempts and self.fatal is None:
            self.fatal = (f"{self.what}: cannot reach {self.url}: {self.unreachable_streak} connection failures "
                          f"in a row, no answer in between (last: {last.detail}){self.hint} — stopping the run")
        if self.fatal is not None:
            raise FatalBackendError(self.fatal)
        raise BackendError(f"{self.what}: gave up after {self.policy.attempts} attempts; last error {last.detail}")

    def run_blocking(self, attempt: Callable[[], T], judge: Callable[[Exception], Verdict]) -> T:
        """:meth:`run` for a blocking ``attempt`` (token counting): the same loop, sleeping with ``time.sleep``.

        The coroutine never suspends (nothing in it awaits the event loop), so it is driven to its end
        here even when called from inside a running loop.
        """

        async def call() -> T:
            return attempt()

        async def pause(seconds: float) -> None:
            time.sleep(seconds)

        return _drive(self.run(call, judge, sleep=pause, limited=False))


def _drive(coro: Coroutine[Any, Any, T]) -> T:
    try:
        coro.send(None)
    except StopIteration as done:
        result: T = done.value
        return result
    coro.close()
    raise RuntimeError("a blocking retry loop awaited the event loop")
