"""What the server saw: counters that tests and other processes read."""

from __future__ import annotations

import copy
import json
import urllib.request
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from .prompt_cache import Accounting


@dataclass
class ServerStats:
    """What the server saw. ``MessagesServer.stats`` returns a copy, so it is safe to keep."""

    #: Requests per endpoint (``messages``, ``count_tokens``, ``batches.create``, ...).
    endpoints: dict[str, int] = field(default_factory=dict)
    #: JSON bodies of the ``/v1/messages`` requests, in arrival order (faulted ones included).
    requests: list[dict[str, Any]] = field(default_factory=list)
    #: Injected faults and sticky answers by kind.
    faults: dict[str, int] = field(default_factory=dict)
    #: Error answers by error type (injected or not, e.g. ``invalid_request_error``).
    errors: dict[str, int] = field(default_factory=dict)
    in_flight: int = 0
    max_in_flight: int = 0
    #: Arrival times (``time.time()``) of the counted API requests, in order: what started after a given moment.
    arrivals: list[float] = field(default_factory=list)
    #: Tokens billed on successful ``/v1/messages`` answers (``input_tokens`` as the API reports it: after the
    #: prompt-cache breakpoint).
    input_tokens: int = 0
    output_tokens: int = 0
    #: Prompt cache: answers that wrote / read a cached prefix, and the tokens written / read.
    prompt_cache_writes: int = 0
    prompt_cache_reads: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    #: Of the writes: those with the 1-hour lifetime (``cache_control.ttl: "1h"``).
    prompt_cache_writes_1h: int = 0
    #: Message batches created: bytes of each body and requests in each, in order.
    batch_bytes: list[int] = field(default_factory=list)
    batch_requests: list[int] = field(default_factory=list)
    #: Tokens of the batch requests answered (``input_tokens`` after the cache breakpoint, as for messages).
    batch_answered: int = 0
    batch_input_tokens: int = 0
    batch_output_tokens: int = 0
    #: Per model (the body's ``model``), of the answered messages and batch requests: ``answered``,
    #: ``input_tokens``, ``output_tokens``, ``cache_creation_input_tokens``, ``cache_read_input_tokens``.
    by_model: dict[str, dict[str, int]] = field(default_factory=dict)

    def count_answer(self, model: str, usage: Mapping[str, Any], *, batch: bool = False) -> None:
        """Count one answered request's usage (call under the server's lock)."""
        if batch:
            self.batch_answered += 1
            self.batch_input_tokens += int(usage["input_tokens"])
            self.batch_output_tokens += int(usage["output_tokens"])
        else:
            self.input_tokens += usage["input_tokens"]
            self.output_tokens += usage["output_tokens"]
        mine = self.by_model.setdefault(model, dict.fromkeys(
            ("answered", "input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"), 0))
        mine["answered"] += 1
        for name in ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"):
            mine[name] += int(usage.get(name) or 0)

    def count_prompt_cache(self, cache: Accounting) -> None:
        """Count one answer's prompt-cache write or read (call under the server's lock)."""
        self.prompt_cache_writes += bool(cache.cache_creation_input_tokens)
        self.prompt_cache_writes_1h += bool(cache.cache_creation_input_tokens) and cache.ttl == "1h"
        self.prompt_cache_reads += bool(cache.cache_read_input_tokens)
        self.cache_creation_input_tokens += cache.cache_creation_input_tokens
        self.cache_read_input_tokens += cache.cache_read_input_tokens

    def to_json(self, *, requests: bool = True) -> dict[str, Any]:
        """Plain JSON (``requests=False`` leaves the request bodies out)."""
        data = asdict(self)
        if not requests:
            data["requests"] = []
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ServerStats:
        """Inverse of :meth:`to_json`."""
        return cls(**{k: copy.deepcopy(v) for k, v in data.items() if k in cls.__dataclass_fields__})


def fetch_stats(base_url: str, *, requests: bool = False, timeout: float = 5.0) -> ServerStats:
    """Read the stats of a server running elsewhere (e.g. started with the CLI)."""
    if not base_url.startswith(("http://", "https://")):
        raise ValueError(f"expected an http(s) base URL, got {base_url!r}")
    url = f"{base_url.rstrip('/')}/_longctx/stats?requests={int(requests)}"
    with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 (scheme checked above)
        return ServerStats.from_json(json.loads(response.read()))
