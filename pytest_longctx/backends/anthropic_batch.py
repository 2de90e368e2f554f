"""``anthropic/*`` batches: the Message Batches API (half price) behind the calls ``dispatch.batch`` makes.

Encode one keyed request as a batch item (its bytes on the wire), create a batch from a file holding the whole
request body (streamed to the API from disk, never held in memory), read a batch's status and counts, and
stream its results (the SDK reads the JSONL results line by line). Every SDK call goes through the retry loop
every backend shares (:mod:`pytest_longctx.backends.retry`; the SDK's own retries are off), judged like the live
backend's calls (:func:`~pytest_longctx.backends.anthropic.verdict`).

The API's limits per batch: at most 100,000 requests and 256 MB of request body (read as 256,000,000 bytes, the
smaller reading); ``$LONGCTX_BATCH_MAX_REQUESTS`` and ``$LONGCTX_BATCH_MAX_BYTES`` lower them (tests do). A
``custom_id`` must match ``^[a-zA-Z0-9_-]{1,64}$``: the request's cache key (64 hex digits) is one. Shared
prefixes carry the 1-hour prompt-cache lifetime (``cache_control.ttl: "1h"``): a batch's requests run in any
order over minutes to hours, longer than the default 5 minutes.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_longctx.backends.anthropic import DEFAULT_BASE_URL, build_params, completion_of, verdict
from pytest_longctx.backends.base import Completion, Request
from pytest_longctx.backends.prompt_cache import TTL_1H
from pytest_longctx.backends.retry import Retrier, Verdict
from pytest_longctx.errors import BackendError

MAX_REQUESTS = 100_000
MAX_BYTES = 256_000_000
CUSTOM_ID = re.compile(r"[a-zA-Z0-9_-]{1,64}")
#: How a request of a batch can end (``request_counts`` of a batch, ``result.type`` of a result).
ENDINGS = ("succeeded", "errored", "canceled", "expired")


@dataclass(frozen=True)
class BatchStatus:
    """A batch's processing status and its request counts (``processing`` and every ending); ``gone``: the API
    has no such batch, or no longer its results (deleted, or archived 29 days after it was created)."""

    ended: bool
    counts: dict[str, int]
    gone: bool = False


def _limit(env: str, api_limit: int) -> int:
    """The API's limit, or a lower one from ``env`` (tests)."""
    value = os.environ.get(env, "").strip().replace("_", "")
    if not value:
        return api_limit
    if not value.isdigit() or not 0 < int(value) <= api_limit:
        raise ValueError(f"${env}: expected a whole number from 1 to the API's {api_limit:,}, got {value!r}")
    return int(value)


class LostBatch(BackendError):
    """A batch create whose answer was lost (a dropped connection, a body cut short): the API may have created the
    batch and will bill it, so it is not created again (that batch would be paid twice); ``billing`` says so."""

    billing = "unknown"


class AnthropicBatches:
    """The batch API of ``anthropic/*`` (see the module docstring); ``client``: an ``anthropic.Anthropic``."""

    provider = "anthropic"
    #: A batch body is ``head + item (sep + item)* + tail``; one item a line, so the upload reads a line at a time.
    head, sep, tail = b'{"requests":[\n', b",\n", b"\n]}\n"

    def __init__(self, client: Any = None, *, seed: int = 0) -> None:
        if client is None:
            import anthropic

            client = anthropic.Anthropic(max_retries=0)  # retried by the loop every backend shares
        self._sdk = client
        url = os.environ.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL
        self.retrier = Retrier("anthropic batches", url, seed=seed,
                               hint="; set ANTHROPIC_BASE_URL to a running server, or unset it for the real API")
        self.max_requests = _limit("LONGCTX_BATCH_MAX_REQUESTS", MAX_REQUESTS)
        self.max_bytes = _limit("LONGCTX_BATCH_MAX_BYTES", MAX_BYTES)

    def _call(self, method: Any, *args: Any, **kwargs: Any) -> Any:
        return self.retrier.run_blocking(lambda: method(*args, **kwargs), verdict)

    def item(self, model: str, key: str, request: Request) -> bytes:
        """One request of a batch as sent: ``{"custom_id": key, "params": {...}}`` (compact UTF-8 JSON, one line)."""
        if not CUSTOM_ID.fullmatch(key):
            raise ValueError(f"the request key {key!r} is not a valid custom_id (^[a-zA-Z0-9_-]{{1,64}}$)")
        params = build_params(model, request, temperature=False, cache_ttl=TTL_1H)
        params["temperature"] = request.temperature  # the batch API takes it as a parameter
        return json.dumps({"custom_id": key, "params": params}, ensure_ascii=False, separators=(",", ":")).encode()

    def submit(self, body: Path) -> str:
        """Create one batch from ``body`` (a file: :attr:`head`, items, :attr:`tail`), streamed from disk;
        its id. (The SDK's ``batches.create`` would build the whole body in memory, twice.)"""
        from anthropic.types.messages import MessageBatch

        size = body.stat().st_size

        def create() -> Any:
            with body.open("rb") as fh:  # reopened on every attempt: a retry sends the body from its start
                return self._sdk.post("/v1/messages/batches", cast_to=MessageBatch, content=fh,
                                      options={"headers": {"Content-Type": "application/json",
                                                           "Content-Length": str(size)}})

        def judge(exc: Exception) -> Verdict:
            seen = verdict(exc)
            if seen.kind == "retry" and seen.billing == "unknown":  # it may exist: another create could pay twice
                raise LostBatch(f"anthropic batches: the answer to creating a batch was lost ({seen.detail}); the "
                                "API may have created it, so it is not sent again (list your batches to find it)")
            return seen

        batch = self.retrier.run_blocking(create, judge)
        return str(batch.id)

    def status(self, batch_id: str) -> BatchStatus:
        """Whether the batch has ended, and how many of its requests are processing or ended which way."""
        import anthropic

        def retrieve() -> Any:
            try:
                return self._sdk.messages.batches.retrieve(batch_id)
            except anthropic.NotFoundError:
                return None

        batch = self.retrier.run_blocking(retrieve, verdict)
        if batch is None or batch.archived_at is not None:
            return BatchStatus(True, {}, gone=True)
        counts = batch.request_counts
        return BatchStatus(batch.processing_status == "ended",
                           {name: int(getattr(counts, name)) for name in ("processing", *ENDINGS)})

    def results(self, batch_id: str) -> Iterator[tuple[str, str, Completion | None, str]]:
        """``(key, ending, completion, why)`` per request, streamed: a completion when it ``succeeded``, else
        None and why (``errored``: the API's error; ``canceled`` and ``expired`` say it themselves)."""
        for item in self._call(self._sdk.messages.batches.results, batch_id):
            result = item.result
            if result.type == "succeeded":  # prompt-cache writes and reads included
                yield item.custom_id, "succeeded", completion_of(result.message), ""
            else:
                error = getattr(getattr(result, "error", None), "error", None)
                why = f"{getattr(error, 'type', 'error')}: {getattr(error, 'message', error)}" if error else ""
                yield item.custom_id, str(result.type), None, why
