"""What the fake API answers once :class:`~.messages_api.MessagesServer` has let a request through.

The server routes a request, checks its key, parses its body and draws its fault; :class:`Answers` then
builds the answer: for ``/v1/messages`` the Message its responder's text becomes (after the configured
latency, billed through the prompt cache and the rate window, counted in the server's stats), and the
answers of ``count_tokens``, the Message Batches endpoints (:mod:`.batches`) and the OpenAI and llama.cpp
dialects (:mod:`.dialects`).
"""

from __future__ import annotations

import json
import logging
import random
import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from . import dialects
from .batches import BatchStore
from .faults import APIFailure
from .prompt_cache import PromptCache
from .resolve import resolve_responder
from .responders import Responder, TokenCounter, count_input_tokens
from .stats import ServerStats
from .wire import RateWindow, build_message, sse_events, validate_request

_log = logging.getLogger("pytest_longctx.server.messages_api")
JSON = "application/json"


class Owner(Protocol):
    """What the answers use of the server that owns them (:class:`~.messages_api.MessagesServer`)."""

    def _next_id(self, prefix: str) -> str:
        """A new id (``msg_srv...``, ``chatcmpl_srv...``) from the server's one counter."""

    def _count(self, change: Callable[[ServerStats], None]) -> None:
        """Apply ``change`` to the server's stats under its lock."""

    def _hold(self, seconds: float) -> None:
        """Wait ``seconds``, or less if the server stops meanwhile."""


class Answers:
    """The answers of the API endpoints (see the module docstring).

    Args:
        responder: A callable ``(request_json) -> str`` or a name for :func:`~.resolve.resolve_responder`.
        token_counter: ``(text) -> int`` used for ``usage`` and ``count_tokens``.
        latency: Seconds before each generated answer, or ``(min, max)`` drawn uniformly from a
            ``random.Random`` seeded with ``seed``.
        seed: Seed of the latency draws.
        models: When given, any other model gets 404 ``not_found_error``.
        prompt_cache: Bills ``cache_control`` prefixes.
        batches: The Message Batches store; its requests are answered by :meth:`batch_answer`.
        rate: The rate window the answers' tokens are recorded in.
        owner: The server: its ids, its stats, its wait that ends when it stops.
    """

    def __init__(
        self,
        responder: Responder | str,
        *,
        token_counter: TokenCounter,
        latency: float | tuple[float, float],
        seed: int,
        models: Sequence[str] | None,
        prompt_cache: PromptCache,
        batches: BatchStore,
        rate: RateWindow,
        owner: Owner,
    ) -> None:
        low, high = latency if isinstance(latency, tuple) else (latency, latency)
        if not 0 <= low <= high:
            raise ValueError(f"latency must be >= 0 seconds, or (min, max) with 0 <= min <= max; got {latency!r}")
        self.responder = resolve_responder(responder, token_counter)
        self.token_counter = token_counter
        self.latency = latency
        self.models = tuple(models) if models is not None else None
        self.prompt_cache = prompt_cache
        self.batches = batches
        self._rate = rate
        self._owner = owner
        self._latency_rng = random.Random(f"{seed}-latency")
        self._latency_lock = threading.Lock()

    def reply(
        self, endpoint: str, batch_id: str | None, body: dict[str, Any], query: dict[str, str], base: str
    ) -> tuple[int, bytes, str]:
        """``(status, payload, content type)`` of a successful answer (an :class:`APIFailure` otherwise)."""
        if endpoint in dialects.OPENAI_ENDPOINTS or endpoint in dialects.LLAMA_ENDPOINTS:
            return 200, json.dumps(self._dialect(endpoint, body)).encode(), JSON
        if endpoint == "messages":
            message = self._generate(validate_request(body))
            if body.get("stream"):
                return 200, sse_events(message), "text/event-stream; charset=utf-8"
            return 200, json.dumps(message).encode(), JSON
        if endpoint == "count_tokens":
            self._check_model(validate_request(body, count_only=True))
            return 200, json.dumps({"input_tokens": count_input_tokens(body, self.token_counter)}).encode(), JSON
        if endpoint == "batches.results":
            return 200, self.batches.results(str(batch_id)), "application/x-jsonl"
        if endpoint == "batches.create":
            result = self.batches.create(body, self.batch_answer, base)
        elif endpoint == "batches.list":
            result = self.batches.list(query, base)
        elif endpoint == "batches.retrieve":
            result = self.batches.retrieve(str(batch_id), base)
        elif endpoint == "batches.cancel":
            result = self.batches.cancel(str(batch_id), base)
        else:  # batches.delete
            result = self.batches.delete(str(batch_id))
        return 200, json.dumps(result).encode(), JSON

    def batch_answer(self, body: dict[str, Any]) -> dict[str, Any]:
        """A batch request's Message, its usage counted apart (``batch_*``) and per model."""
        message = self._answer(body)
        self._owner._count(lambda stats: stats.count_answer(str(body.get("model")), message["usage"], batch=True))
        return message

    def _dialect(self, endpoint: str, body: dict[str, Any]) -> dict[str, Any]:
        """The answer to an OpenAI or llama.cpp request (see :mod:`.dialects`)."""
        if endpoint == "chat.completions":
            message = self._generate(dialects.messages_body(body))
            return dialects.chat_completion(message, self._owner._next_id("chatcmpl"))
        if endpoint == "completion":
            model = self.models[0] if self.models else "local"
            return dialects.native_completion(self._generate(dialects.completion_body(body, model)))
        if endpoint == "models":
            return dialects.models_list(self.models)
        if endpoint == "apply-template":
            return {"prompt": dialects.render_template(body.get("messages"))}
        if endpoint == "tokenize":
            return dialects.tokenize(body, self.token_counter)
        return {"status": "ok"}  # health

    def _generate(self, body: dict[str, Any]) -> dict[str, Any]:
        """The Message answering a validated Messages body after the configured latency; counted in the stats."""
        self._sleep_latency()
        message = self._answer(body, validated=True)
        self._owner._count(lambda stats: stats.count_answer(str(body.get("model")), message["usage"]))
        return message

    def _answer(self, body: dict[str, Any], *, validated: bool = False) -> dict[str, Any]:
        """Validate a Messages request and build its Message (used for batches too)."""
        self._check_model(body if validated else validate_request(body))
        try:
            text = self.responder(body)
            if not isinstance(text, str):
                raise TypeError(f"a responder must return str, not {type(text).__name__}")
        except Exception as exc:
            _log.warning("responder failed", exc_info=True)
            raise APIFailure(500, "api_error", f"responder failed: {exc!r}") from exc
        message = build_message(body, text, counter=self.token_counter, message_id=self._owner._next_id("msg"))
        cache = self.prompt_cache.account(body, message["usage"]["input_tokens"], self.token_counter)
        message["usage"].update(input_tokens=cache.input_tokens,
                                cache_creation_input_tokens=cache.cache_creation_input_tokens,
                                cache_read_input_tokens=cache.cache_read_input_tokens)
        if cache.cache_creation_input_tokens:
            message["usage"]["cache_creation"] = {f"ephemeral_{ttl}_input_tokens": cache.cache_creation_input_tokens
                                                  if ttl == cache.ttl else 0 for ttl in ("5m", "1h")}
        self._owner._count(lambda stats: stats.count_prompt_cache(cache))
        self._rate.record(
            input_tokens=message["usage"]["input_tokens"], output_tokens=message["usage"]["output_tokens"]
        )
        return message

    def _check_model(self, body: dict[str, Any]) -> None:
        if self.models is not None and body["model"] not in self.models:
            raise APIFailure(404, "not_found_error", f"model: {body['model']}")

    def _sleep_latency(self) -> None:
        if isinstance(self.latency, tuple):
            with self._latency_lock:
                delay = self._latency_rng.uniform(*self.latency)
        else:
            delay = self.latency
        if delay > 0:
            self._owner._hold(delay)
