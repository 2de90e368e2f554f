"""Prompt caching: which providers have it, what it costs, and which requests share a cached prefix.

Anthropic's prompt cache (``cache_control: {"type": "ephemeral"}`` on a content block) stores the prompt
up to that breakpoint for 5 minutes from its last use. Writing it costs 1.25x the input price, reading
it 0.1x; a prefix shorter than the model's minimum is not cached at all (and billed as plain input).
With ``"ttl": "1h"`` the entry lives an hour and writing it costs 2x: what batches use (their requests run in
any order over minutes to hours), where every token then costs half (:data:`BATCH_DISCOUNT`).
Nothing here imports an SDK.
"""

from __future__ import annotations

import hashlib
from typing import Any

#: Price of a cache write / read, as a multiple of the model's input price (5-minute cache).
WRITE_FACTOR = 1.25
READ_FACTOR = 0.1
#: How long an entry lives after its last use, in seconds (the API's default ``ttl``).
LIFETIME_S = 300.0
#: The 1-hour lifetime (``ttl: "1h"``, the batch path's) and the price of its writes.
TTL_1H = "1h"
LIFETIME_1H_S = 3600.0
WRITE_FACTOR_1H = 2.0
#: Every token of a Message Batch costs this fraction of the list price.
BATCH_DISCOUNT = 0.5
#: Shortest cacheable prefix in tokens by model family (Anthropic's documentation; the first match wins).
_MIN_TOKENS = (("haiku-4", 4096), ("opus-4-5", 4096), ("opus-4-6", 4096), ("opus-4.5", 4096), ("opus-4.6", 4096),
               ("sonnet-4-6", 2048), ("sonnet-4.6", 2048), ("haiku", 2048))
DEFAULT_MIN_TOKENS = 1024


def caches_prompts(provider: str) -> bool:
    """True when ``provider``'s API has prompt caching (``Provider.prompt_cache`` in the registry;
    ``--longctx-prompt-cache auto`` turns it on for them)."""
    from pytest_longctx.backends.registry import provider_of

    return provider_of(provider).prompt_cache


def min_cacheable_tokens(model: str) -> int:
    """The shortest prefix ``model`` caches (1024 for Sonnet and Opus 4/4.1, 2048 for Haiku 3.x, ...)."""
    return next((tokens for family, tokens in _MIN_TOKENS if family in model), DEFAULT_MIN_TOKENS)


def prefix_group(request: dict[str, Any]) -> str | None:
    """Identity of a planned request's cached prefix (its ``Request.to_json()``): requests with the same value read
    one cache entry. None when the request marks no prefix."""
    n = int(request.get("cache_prefix") or 0)
    messages = request.get("messages") or []
    if n <= 0 or not messages or messages[0].get("role") != "user" or n >= len(messages[0]["content"]):
        return None
    return prefix_identity(request.get("system"), messages[0]["content"][:n])


def prefix_identity(system: str | None, prefix: str) -> str:
    """The :func:`prefix_group` of a request with this system prompt whose first user turn starts with ``prefix``."""
    digest = hashlib.sha256(f"{system or ''}\x00".encode())
    digest.update(prefix.encode())  # not joined to the system prompt first: no copy of a long prefix
    return digest.hexdigest()[:24]


def billed_input(uncached: int, written: int, read: int, write_factor: float = WRITE_FACTOR) -> float:
    """Input tokens at the plain input price that cost the same: ``uncached`` of them sent in full,
    ``written`` cache writes (``write_factor``: :data:`WRITE_FACTOR_1H` for the 1-hour lifetime) and ``read``
    cache reads."""
    return uncached + write_factor * written + READ_FACTOR * read
