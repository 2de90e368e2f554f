"""``anthropic/*`` batches: the Message Batches API (half price) behind the three calls ``dispatch.batch`` makes.

Submit a list of keyed requests, poll a batch until it has ended, read its results. Every SDK call goes
through the retry loop every backend shares (:mod:`pytest_longctx.backends.retry`; the SDK's own retries
are off), judged like the live backend's calls (:func:`~pytest_longctx.backends.anthropic.verdict`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from pytest_longctx.backends.anthropic import DEFAULT_BASE_URL, build_params, completion_of, verdict
from pytest_longctx.backends.base import Completion, Request
from pytest_longctx.backends.retry import Retrier


class AnthropicBatches:
    """The batch API of ``anthropic/*`` (see the module docstring); ``client``: an ``anthropic.Anthropic``."""

    provider = "anthropic"

    def __init__(self, client: Any = None, *, seed: int = 0) -> None:
        if client is None:
            import anthropic

            client = anthropic.Anthropic(max_retries=0)  # retried by the loop every backend shares
        self._sdk = client
        url = os.environ.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL
        self.retrier = Retrier("anthropic batches", url, seed=seed,
                               hint="; set ANTHROPIC_BASE_URL to a running server, or unset it for the real API")

    def _call(self, method: Any, *args: Any, **kwargs: Any) -> Any:
        return self.retrier.run_blocking(lambda: method(*args, **kwargs), verdict)

    def submit(self, model: str, requests: list[tuple[str, Request]]) -> str:
        """Create one batch of ``(key, request)`` (the key is its ``custom_id``); the batch's id."""
        items = []
        for key, request in requests:
            params = build_params(model, request, temperature=False)
            params["temperature"] = request.temperature  # the batch API takes it as a parameter
            items.append({"custom_id": key, "params": params})
        batch = self._call(self._sdk.messages.batches.create, requests=items)
        return str(batch.id)

    def poll(self, batch_id: str) -> tuple[bool, str]:
        """(ended, a progress line for the terminal)."""
        batch = self._call(self._sdk.messages.batches.retrieve, batch_id)
        counts = batch.request_counts
        line = (f"longctx batch: {batch_id} {batch.processing_status}: "
                f"{counts.succeeded} done, {counts.processing} processing")
        return batch.processing_status == "ended", line

    def results(self, batch_id: str) -> Iterator[tuple[str, Completion | None, str]]:
        """``(key, completion, "")`` per answered request, ``(key, None, why)`` per failed one."""
        for item in self._call(self._sdk.messages.batches.results, batch_id):
            result = item.result
            if result.type == "succeeded":
                yield item.custom_id, completion_of(result.message), ""  # prompt-cache writes and reads included
            else:
                detail = getattr(getattr(result, "error", None), "error", None)
                yield item.custom_id, None, f"request {result.type}: {detail}"
