"""The server's prompt cache: what the Messages API bills for ``cache_control`` breakpoints.

Like the API: the prompt up to the last block marked ``cache_control`` (model, system and message blocks,
in order) is the cached prefix. Its first request writes it (``cache_creation_input_tokens``), later ones
within the lifetime (5 minutes, or an hour when that block says ``"ttl": "1h"``) read it
(``cache_read_input_tokens``) and refresh the lifetime; ``input_tokens`` is
what comes after the breakpoint. A prefix under the minimum length is not cached (all of it is
``input_tokens``). An entry exists once its writing request is answered, so siblings sent while it is
in flight miss too. One breakpoint (the last) per request is honoured. The clock is injectable and
:meth:`PromptCache.advance` moves it, so tests expire entries without sleeping.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pytest_longctx.backends.prompt_cache import LIFETIME_1H_S, TTL_1H, min_cacheable_tokens
from pytest_longctx.backends.prompt_cache import LIFETIME_S as LIFETIME_S

from .responders import TokenCounter, content_texts

# The lifetime (``ttl: "5m"``) and the minimum cacheable prefix per model family are the API's documented
# figures, kept once in ``backends/prompt_cache.py`` (the plan's estimate uses the same table).
default_min_tokens = min_cacheable_tokens


@dataclass(frozen=True)
class Accounting:
    """How one request's input splits: after the breakpoint, written to the cache, read from it."""

    input_tokens: int
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    #: The breakpoint's lifetime: ``5m`` or ``1h``.
    ttl: str = "5m"


def _blocks(content: Any) -> list[Any]:
    return [content] if isinstance(content, str) else list(content) if isinstance(content, list) else []


def cached_prefix(body: Mapping[str, Any]) -> list[tuple[str, Any]] | None:
    """``(role, block)`` pairs from the start of the prompt through its last ``cache_control`` block, or None."""
    pieces: list[tuple[str, Any]] = [("system", b) for b in _blocks(body.get("system"))]
    for message in body.get("messages") or []:
        if isinstance(message, dict):
            pieces += [(str(message.get("role")), b) for b in _blocks(message.get("content"))]
    last = max((i for i, (_, b) in enumerate(pieces) if isinstance(b, dict) and b.get("cache_control")), default=-1)
    return pieces[: last + 1] if last >= 0 else None


class PromptCache:
    """Entries by exact prefix; thread-safe (the server answers each connection on its own thread).

    Args:
        lifetime_s: Seconds an entry lives after its last write or read.
        lifetime_1h_s: The same for a breakpoint with ``"ttl": "1h"``.
        min_tokens: Shortest cacheable prefix; None: the model's documented minimum.
        clock: Monotonic seconds (``time.monotonic``); :meth:`advance` adds to it.
    """

    def __init__(self, lifetime_s: float = LIFETIME_S, min_tokens: int | None = None,
                 clock: Callable[[], float] = time.monotonic, lifetime_1h_s: float = LIFETIME_1H_S) -> None:
        if lifetime_s <= 0 or lifetime_1h_s <= 0:
            raise ValueError(f"the prompt cache's lifetimes must be > 0 seconds, got {lifetime_s!r} and "
                             f"{lifetime_1h_s!r}")
        self.lifetime_s = lifetime_s
        self.lifetime_1h_s = lifetime_1h_s
        self.min_tokens = min_tokens
        self._clock = clock
        self._offset = 0.0
        self._expires: dict[str, float] = {}
        #: Tokens of each prefix seen (its count never changes; keeps the server from counting it per sibling).
        self._tokens: dict[str, int] = {}
        self._lock = threading.Lock()

    def now(self) -> float:
        return self._clock() + self._offset

    def advance(self, seconds: float) -> None:
        """Move the cache's clock forward (tests: expire entries without waiting)."""
        with self._lock:
            self._offset += seconds

    def clear(self) -> None:
        with self._lock:
            self._expires.clear()

    def account(self, body: Mapping[str, Any], total: int, counter: TokenCounter) -> Accounting:
        """Split ``total`` input tokens of ``body``; a write or read updates the cache."""
        prefix = cached_prefix(body)
        if prefix is None:
            return Accounting(total)
        canonical = [(role, {k: v for k, v in block.items() if k != "cache_control"} if isinstance(block, dict)
                      else block) for role, block in prefix]
        key = hashlib.sha256(json.dumps([body.get("model"), canonical], sort_keys=True).encode("utf-8")).hexdigest()
        with self._lock:
            tokens = self._tokens.get(key)
        if tokens is None:  # counted once per prefix: siblings' prefixes are the same text
            tokens = sum(counter(text) for _, block in prefix
                         for text in content_texts([block] if isinstance(block, dict) else block))
            with self._lock:
                self._tokens[key] = tokens
        minimum = self.min_tokens if self.min_tokens is not None else default_min_tokens(str(body.get("model")))
        if tokens < minimum:
            return Accounting(total)
        ttl = "1h" if (prefix[-1][1].get("cache_control") or {}).get("ttl") == TTL_1H else "5m"
        with self._lock:
            now = self.now()
            hit = self._expires.get(key, float("-inf")) > now
            self._expires[key] = now + (self.lifetime_1h_s if ttl == "1h" else self.lifetime_s)
        rest = max(0, total - tokens)
        return Accounting(rest, cache_read_input_tokens=tokens, ttl=ttl) if hit else Accounting(
            rest, cache_creation_input_tokens=tokens, ttl=ttl)
