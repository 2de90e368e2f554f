"""Retry policy and adaptive concurrency shared by the HTTP backends.

Backoff is exponential with full jitter, capped, and a server's ``retry-after`` (or
``retry-after-ms``) always wins. :class:`AdaptiveLimit` halves the allowed requests in flight on
each 429 and grows back by one after a run of successes (AIMD), so a run slows down instead of
hammering a rate-limited API.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class RetryPolicy:
    """How many times and how long to wait between attempts."""

    attempts: int = 6
    base_s: float = 0.5
    cap_s: float = 30.0

    def delay(self, attempt: int, rng: random.Random, retry_after: float | None = None) -> float:
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
