"""The Messages API wire format: request validation, the reply Message, SSE events, rate-limit headers."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .batches import rfc3339
from .faults import APIFailure
from .responders import TokenCounter, count_input_tokens

_ROLES = ("user", "assistant")
_BATCH_ROUTES = {("GET", ""): "batches.retrieve", ("DELETE", ""): "batches.delete"}
_BATCH_ROUTES.update({("GET", "results"): "batches.results", ("POST", "cancel"): "batches.cancel"})
_PIECE_RE = re.compile(r"\S+\s*|\s+")


def _invalid(message: str) -> APIFailure:
    return APIFailure(400, "invalid_request_error", message)


def _check_content(content: Any, where: str) -> None:
    if isinstance(content, str):
        return
    if not isinstance(content, list):
        raise _invalid(f"{where}: Input should be a valid string or a list of content blocks")
    for j, block in enumerate(content):
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise _invalid(f"{where}.{j}.type: Field required")
        if block["type"] == "text" and not isinstance(block.get("text"), str):
            raise _invalid(f"{where}.{j}.text: Field required")


def validate_request(body: Any, *, count_only: bool = False) -> dict[str, Any]:
    """Check a Messages API body (or a ``count_tokens`` body); raise a 400 failure like the API does."""
    if not isinstance(body, dict):
        raise _invalid("request body must be a JSON object")
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise _invalid("model: Field required")
    if not count_only:
        max_tokens = body.get("max_tokens")
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool):
            raise _invalid("max_tokens: Field required")
        if max_tokens < 1:
            raise _invalid("max_tokens: Input should be greater than or equal to 1")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _invalid("messages: at least one message is required")
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in _ROLES:
            raise _invalid(f"messages.{i}.role: Input should be 'user' or 'assistant'")
        _check_content(message.get("content"), f"messages.{i}.content")
    last = messages[-1]
    if last["role"] == "assistant" and isinstance(last["content"], str) and last["content"] != last["content"].rstrip():
        raise _invalid("messages: final assistant content cannot end with trailing whitespace")
    if body.get("system") is not None:
        _check_content(body["system"], "system")
    temperature = body.get("temperature")
    if temperature is not None and (not isinstance(temperature, (int, float)) or not 0 <= temperature <= 1):
        raise _invalid("temperature: Input should be a number between 0 and 1")
    stops = body.get("stop_sequences")
    if stops is not None and (not isinstance(stops, list) or not all(isinstance(s, str) and s.strip() for s in stops)):
        raise _invalid("stop_sequences: each stop sequence must be a string with non-whitespace content")
    return body


def limit_reply(
    text: str, max_tokens: int, stop_sequences: Sequence[str], counter: TokenCounter
) -> tuple[str, str, str | None]:
    """Apply stop sequences, then ``max_tokens``: ``(text, stop_reason, stop_sequence)``."""
    stop_reason, matched = "end_turn", None
    hits = [(text.find(s), s) for s in stop_sequences if s and s in text]
    if hits:
        index, matched = min(hits)
        text, stop_reason = text[:index], "stop_sequence"
    if counter(text) > max_tokens:
        low, high = 0, len(text)  # the longest prefix that fits (binary search: counters are monotone)
        while low < high:
            mid = (low + high + 1) // 2
            if counter(text[:mid]) <= max_tokens:
                low = mid
            else:
                high = mid - 1
        return text[:low].rstrip(), "max_tokens", None
    return text, stop_reason, matched


def build_message(body: Mapping[str, Any], text: str, *, counter: TokenCounter, message_id: str) -> dict[str, Any]:
    """The Message object answering ``body`` with the responder's ``text``."""
    text, stop_reason, stop_sequence = limit_reply(text, body["max_tokens"], body.get("stop_sequences") or (), counter)
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": body["model"],
        "content": [{"type": "text", "text": text}],
        "stop_reason": stop_reason,
        "stop_sequence": stop_sequence,
        "usage": {"input_tokens": count_input_tokens(body, counter), "output_tokens": counter(text)},
    }


def sse_events(message: Mapping[str, Any]) -> bytes:
    """The whole server-sent-event stream that a ``stream: true`` request receives for ``message``."""
    text = message["content"][0]["text"]
    start = {
        **message,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {**message["usage"], "output_tokens": 0},
    }
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": start},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "ping"},
    ]
    events += [
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}}
        for piece in _PIECE_RE.findall(text)
    ]
    events += [
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": message["stop_sequence"]},
            "usage": {"output_tokens": message["usage"]["output_tokens"]},
        },
        {"type": "message_stop"},
    ]
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


@dataclass(frozen=True)
class RateLimits:
    """Per-minute limits reported in the ``anthropic-ratelimit-*`` headers (reported, not enforced)."""

    requests: int = 4000
    input_tokens: int = 2_000_000
    output_tokens: int = 400_000


class RateWindow:
    """Usage in the current clock minute, rendered as the API's rate-limit headers."""

    def __init__(self, limits: RateLimits) -> None:
        self.limits = limits
        self._minute = -1
        self._used = {"requests": 0, "input-tokens": 0, "output-tokens": 0}
        self._lock = threading.Lock()

    def record(self, *, requests: int = 0, input_tokens: int = 0, output_tokens: int = 0) -> dict[str, str]:
        """Add usage, then return the headers."""
        with self._lock:
            minute = int(time.time() // 60)
            if minute != self._minute:
                self._minute, self._used = minute, dict.fromkeys(self._used, 0)
            self._used["requests"] += requests
            self._used["input-tokens"] += input_tokens
            self._used["output-tokens"] += output_tokens
            used = dict(self._used)
        reset = rfc3339((minute + 1) * 60.0)
        limits = {
            "requests": self.limits.requests,
            "input-tokens": self.limits.input_tokens,
            "output-tokens": self.limits.output_tokens,
            "tokens": self.limits.input_tokens + self.limits.output_tokens,
        }
        used["tokens"] = used["input-tokens"] + used["output-tokens"]
        headers: dict[str, str] = {}
        for name, limit in limits.items():
            headers[f"anthropic-ratelimit-{name}-limit"] = str(limit)
            headers[f"anthropic-ratelimit-{name}-remaining"] = str(max(0, limit - used[name]))
            headers[f"anthropic-ratelimit-{name}-reset"] = reset
        return headers


def route(method: str, path: str) -> tuple[str, str | None]:
    """``(endpoint name, batch id)`` for a request path."""
    parts = [p for p in path.split("/") if p]
    if parts[:2] == ["_longctx", "stats"] and method == "GET":
        return "_stats", None
    if parts[:2] == ["_longctx", "reset_stats"] and method == "POST":
        return "_reset", None
    if parts[:2] != ["v1", "messages"]:
        return "unknown", None
    rest = parts[2:]
    if not rest and method == "POST":
        return "messages", None
    if rest == ["count_tokens"] and method == "POST":
        return "count_tokens", None
    if rest == ["batches"]:
        return {"POST": "batches.create", "GET": "batches.list"}.get(method, "unknown"), None
    if len(rest) in (2, 3) and rest[0] == "batches":
        name = _BATCH_ROUTES.get((method, rest[2] if len(rest) == 3 else ""), "unknown")
        return name, rest[1]
    return "unknown", None
