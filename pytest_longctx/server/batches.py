"""Message Batches: an in-memory store behind the ``/v1/messages/batches`` endpoints.

Every request of a batch is answered when the batch is created (so results are reproducible),
but the batch reports ``in_progress`` until ``processing_delay`` seconds have passed, then
``ended`` with a ``results_url`` pointing back at this server. A seeded draw errors a fraction
``error_rate`` of the requests (``api_error``) and expires a fraction ``expire_rate`` (``expired``:
what the API does with requests a batch could not process within its 24 hours); requests whose
params are invalid error with ``invalid_request_error``. Cancelling an in-progress batch answers
``canceling`` and the batch ends at once with every request ``canceled``.

The API's limits are enforced: at most ``max_requests`` requests (100,000) and ``max_bytes`` bytes of
request body (256 MB, read as 256,000,000: the smaller reading of the documented figure; the server refuses a
larger body with 413 ``request_too_large`` before reading it as JSON), and every ``custom_id`` matches
``^[a-zA-Z0-9_-]{1,64}$`` and is unique within its batch (400 ``invalid_request_error`` otherwise).
"""

from __future__ import annotations

import itertools
import json
import random
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .faults import APIFailure, error_body

#: Answers one request's params with a Message dict, or raises :class:`APIFailure`.
Answer = Callable[[dict[str, Any]], dict[str, Any]]

_EXPIRY_SECONDS = 24 * 3600
#: The Message Batches API's limits per batch.
MAX_REQUESTS = 100_000
MAX_BYTES = 256_000_000
CUSTOM_ID = re.compile(r"[a-zA-Z0-9_-]{1,64}")


def rfc3339(timestamp: float) -> str:
    """``2024-01-01T00:00:00.123456Z`` for a POSIX timestamp."""
    return datetime.fromtimestamp(timestamp, UTC).isoformat().replace("+00:00", "Z")


@dataclass
class _Batch:
    id: str
    created: float
    end_at: float
    results: list[tuple[str, dict[str, Any]]]
    canceled_at: float | None = None
    ended_by_cancel: bool = False


class BatchStore:
    """Thread-safe store of the server's batches."""

    def __init__(self, *, processing_delay: float = 0.5, error_rate: float = 0.0, expire_rate: float = 0.0,
                 seed: int = 0, max_requests: int = MAX_REQUESTS, max_bytes: int = MAX_BYTES) -> None:
        if not (0.0 <= error_rate <= 1.0 and 0.0 <= expire_rate <= 1.0 and error_rate + expire_rate <= 1.0):
            raise ValueError(f"batch error and expire rates must be within [0, 1] and sum to at most 1, got "
                             f"{error_rate} and {expire_rate}")
        if max_requests < 1 or max_bytes < 1:
            raise ValueError(f"batch limits must be >= 1, got {max_requests} requests and {max_bytes} bytes")
        self.processing_delay = processing_delay
        self.error_rate = error_rate
        self.expire_rate = expire_rate
        self.max_requests = max_requests
        self.max_bytes = max_bytes
        self._rng = random.Random(f"{seed}-batch")
        self._ids = itertools.count(1)
        self._batches: dict[str, _Batch] = {}
        self._lock = threading.Lock()

    def create(self, body: Mapping[str, Any], answer: Answer, base_url: str) -> dict[str, Any]:
        """Validate ``{"requests": [{custom_id, params}, ...]}``, answer every request, store the batch."""
        requests = body.get("requests")
        if not isinstance(requests, list) or not requests:
            raise APIFailure(400, "invalid_request_error", "requests: must be a non-empty list")
        if len(requests) > self.max_requests:
            raise APIFailure(400, "invalid_request_error",
                             f"requests: a batch holds at most {self.max_requests:,} requests, got {len(requests):,}")
        seen: set[str] = set()
        for i, item in enumerate(requests):
            custom_id = item.get("custom_id") if isinstance(item, dict) else None
            if not isinstance(custom_id, str) or not custom_id:
                raise APIFailure(400, "invalid_request_error", f"requests.{i}.custom_id: Field required")
            if not CUSTOM_ID.fullmatch(custom_id):
                raise APIFailure(400, "invalid_request_error", f"requests.{i}.custom_id: String should match "
                                 f"pattern '^[a-zA-Z0-9_-]{{1,64}}$', got {custom_id!r}")
            if custom_id in seen:
                raise APIFailure(400, "invalid_request_error", f"requests.{i}.custom_id: duplicate {custom_id!r}")
            if not isinstance(item.get("params"), dict):
                raise APIFailure(400, "invalid_request_error", f"requests.{i}.params: Field required")
            seen.add(custom_id)
        with self._lock:
            draws = [self._rng.random() for _ in requests]
            batch_id = f"msgbatch_{next(self._ids):024d}"
        results = [
            (item["custom_id"], self._result(item["params"], answer, draw))
            for item, draw in zip(requests, draws, strict=True)
        ]
        now = time.time()
        batch = _Batch(batch_id, now, now + self.processing_delay, results)
        with self._lock:
            self._batches[batch_id] = batch
            return self._render(batch, base_url, now)

    def end_now(self) -> int:
        """End every batch still in progress (a test holds batches open with a long delay, then releases them)."""
        with self._lock:
            now = time.time()
            open_batches = [b for b in self._batches.values() if b.end_at > now]
            for batch in open_batches:
                batch.end_at = now
        return len(open_batches)

    def retrieve(self, batch_id: str, base_url: str) -> dict[str, Any]:
        """The batch object (its status is computed from the clock)."""
        with self._lock:
            return self._render(self._get(batch_id), base_url, time.time())

    def results(self, batch_id: str) -> bytes:
        """The JSONL results of an ended batch."""
        with self._lock:
            batch = self._get(batch_id)
            if time.time() < batch.end_at:
                raise APIFailure(400, "invalid_request_error", f"Batch {batch_id} has not ended processing yet")
            lines = [
                {"custom_id": custom_id, "result": {"type": "canceled"} if batch.ended_by_cancel else result}
                for custom_id, result in batch.results
            ]
        return b"".join(json.dumps(line).encode() + b"\n" for line in lines)

    def cancel(self, batch_id: str, base_url: str) -> dict[str, Any]:
        """Cancel a batch: an in-progress one answers ``canceling`` and then ends at once."""
        with self._lock:
            batch = self._get(batch_id)
            now = time.time()
            if now >= batch.end_at:
                return self._render(batch, base_url, now)
            batch.canceled_at = now
            batch.ended_by_cancel = True
            rendered = self._render(batch, base_url, now)
            batch.end_at = now
        return rendered

    def delete(self, batch_id: str) -> dict[str, Any]:
        """Delete an ended batch."""
        with self._lock:
            batch = self._get(batch_id)
            if time.time() < batch.end_at:
                raise APIFailure(400, "invalid_request_error", f"Batch {batch_id} is still processing; cancel it first")
            del self._batches[batch_id]
        return {"id": batch_id, "type": "message_batch_deleted"}

    def list(self, query: Mapping[str, str], base_url: str) -> dict[str, Any]:
        """One page of batches, most recent first (``limit``, ``after_id``, ``before_id``)."""
        try:
            limit = max(1, min(1000, int(query.get("limit", "20"))))
        except ValueError as exc:
            raise APIFailure(400, "invalid_request_error", "limit: must be an integer") from exc
        with self._lock:
            now = time.time()
            batches = sorted(self._batches.values(), key=lambda b: b.id, reverse=True)
            ids = [b.id for b in batches]
            if query.get("after_id") in ids:
                batches = batches[ids.index(query["after_id"]) + 1 :]
                page = batches[:limit]
            elif query.get("before_id") in ids:
                batches = batches[: ids.index(query["before_id"])]
                page = batches[-limit:]
            else:
                page = batches[:limit]
            data = [self._render(b, base_url, now) for b in page]
        return {
            "data": data,
            "has_more": len(batches) > len(page),
            "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None,
        }

    def _get(self, batch_id: str) -> _Batch:
        try:
            return self._batches[batch_id]
        except KeyError:
            raise APIFailure(404, "not_found_error", f"message_batch {batch_id!r} not found") from None

    def _result(self, params: dict[str, Any], answer: Answer, draw: float) -> dict[str, Any]:
        if draw < self.error_rate:
            return {"type": "errored", "error": error_body("api_error", "Internal server error")}
        if draw < self.error_rate + self.expire_rate:
            return {"type": "expired"}
        try:
            return {"type": "succeeded", "message": answer(params)}
        except APIFailure as failure:
            return {"type": "errored", "error": failure.body()}

    def _render(self, batch: _Batch, base_url: str, now: float) -> dict[str, Any]:
        ended = now >= batch.end_at
        counts = {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        if not ended:
            counts["processing"] = len(batch.results)
        elif batch.ended_by_cancel:
            counts["canceled"] = len(batch.results)
        else:
            for _, result in batch.results:
                counts[result["type"]] += 1
        status = "ended" if ended else ("canceling" if batch.canceled_at is not None else "in_progress")
        return {
            "id": batch.id,
            "type": "message_batch",
            "processing_status": status,
            "request_counts": counts,
            "created_at": rfc3339(batch.created),
            "expires_at": rfc3339(batch.created + _EXPIRY_SECONDS),
            "ended_at": rfc3339(batch.end_at) if ended else None,
            "cancel_initiated_at": rfc3339(batch.canceled_at) if batch.canceled_at is not None else None,
            "archived_at": None,
            "results_url": f"{base_url}/v1/messages/batches/{batch.id}/results" if ended else None,
        }
