"""A local HTTP server speaking the Anthropic Messages API, with seeded fault injection.

It runs in a background thread (one thread per connection, so latency sleeps overlap) and is what
the project's Anthropic backend tests drive with the real ``anthropic`` SDK::

    with MessagesServer(responder="echo", latency=0.05, faults=FaultPlan(rate=0.2, seed=0)) as srv:
        client = anthropic.Anthropic(base_url=srv.base_url, api_key="test-key")
        ...
        srv.stats.faults  # {"429": 3, ...}

Endpoints: ``POST /v1/messages`` (also ``stream: true``), ``POST /v1/messages/count_tokens``, the
Message Batches endpoints (see :mod:`.batches`), and two for other processes (pytest-xdist workers
sharing a server started by ``python -m pytest_longctx.server``): ``GET /_longctx/stats``
(``?requests=1`` includes the request bodies) and ``POST /_longctx/reset_stats``. The same server
also speaks OpenAI's ``/v1/chat/completions`` and llama.cpp's native endpoints (see :mod:`.dialects`).

This module serves: it routes a request, checks its key and body, injects the planned fault, counts
it, and sends the answer or the error; what each endpoint answers is built by :class:`~.answers.Answers`.
"""

from __future__ import annotations

import copy
import itertools
import json
import logging
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

from . import dialects
from .answers import JSON, Answers
from .batches import MAX_BYTES, MAX_REQUESTS, BatchStore
from .faults import APIFailure, FaultInjector, FaultPlan, status_failure
from .handler import Handler, HTTPServer
from .prompt_cache import PromptCache
from .responders import Responder, TokenCounter, approx_token_count
from .stats import ServerStats
from .wire import RateLimits, RateWindow, route

_log = logging.getLogger(__name__)
#: ``(status, payload, headers)`` of an answer, or ``None`` to drop the connection.
_Reply: TypeAlias = tuple[int, bytes, dict[str, str]] | None


class MessagesServer:
    """The fake Messages API server; a context manager, or call :meth:`start` / :meth:`stop`.

    Args:
        responder: A callable ``(request_json) -> str`` or a name for
            :func:`~.resolve.resolve_responder` (``echo``, ``fixed:<text>``, ``scripted:<file>``,
            ``graded:<spec>``: a model of known accuracy, see :mod:`.graded`).
        host: Interface to bind (``127.0.0.1``).
        port: Port to bind; 0 picks a free one (read it from :attr:`base_url`).
        latency: Seconds before each ``/v1/messages`` answer, or ``(min, max)`` drawn uniformly
            from a ``random.Random`` seeded with ``seed``.
        faults: Fault plan; ``None`` injects nothing.
        api_key: When given, requests whose ``x-api-key`` differs get 401 ``authentication_error``.
        token_counter: ``(text) -> int`` used for ``usage`` and ``count_tokens``.
        batch_delay: Seconds a batch stays ``in_progress``.
        batch_error_rate: Fraction of batch requests that end ``errored`` (seeded).
        batch_expire_rate: Fraction of batch requests that end ``expired`` (seeded).
        batch_max_requests: Most requests a batch may hold (the API's 100,000); more is a 400.
        batch_max_bytes: Largest batch body in bytes (the API's 256 MB); more is a 413 ``request_too_large``.
        seed: Seed of the latency and batch-error draws (faults use ``faults.seed``).
        models: When given, any other model gets 404 ``not_found_error``.
        rate_limits: Limits reported in the ``anthropic-ratelimit-*`` headers.
        record_requests: Keep the request bodies in :attr:`stats` (turn off for huge runs).
        prompt_cache: The prompt cache that bills ``cache_control`` prefixes (default: the API's 5-minute
            lifetime and per-model minimums); reachable as :attr:`prompt_cache`.
    """

    def __init__(
        self,
        responder: Responder | str = "echo",
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        latency: float | tuple[float, float] = 0.0,
        faults: FaultPlan | None = None,
        api_key: str | None = None,
        token_counter: TokenCounter = approx_token_count,
        batch_delay: float = 0.5,
        batch_error_rate: float = 0.0,
        batch_expire_rate: float = 0.0,
        batch_max_requests: int = MAX_REQUESTS,
        batch_max_bytes: int = MAX_BYTES,
        seed: int = 0,
        models: Sequence[str] | None = None,
        rate_limits: RateLimits | None = None,
        record_requests: bool = True,
        prompt_cache: PromptCache | None = None,
    ) -> None:
        self.host, self._port = host, port
        self.api_key = api_key
        self.record_requests = record_requests
        self.batches = BatchStore(processing_delay=batch_delay, error_rate=batch_error_rate,
                                  expire_rate=batch_expire_rate, seed=seed, max_requests=batch_max_requests,
                                  max_bytes=batch_max_bytes)
        self._injector = FaultInjector(faults or FaultPlan())
        self._rate = RateWindow(rate_limits or RateLimits())
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._stats = ServerStats()
        self._stopping = threading.Event()
        self.answers = Answers(responder, token_counter=token_counter, latency=latency, seed=seed, models=models,
                               prompt_cache=prompt_cache or PromptCache(), batches=self.batches, rate=self._rate,
                               owner=self)
        self.prompt_cache = self.answers.prompt_cache
        self._connections: set[socket.socket] = set()
        self._httpd: HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> MessagesServer:
        """Bind and serve in a daemon thread; returns ``self``."""
        if self._httpd is not None:
            return self
        self._stopping.clear()
        httpd = HTTPServer((self.host, self._port), Handler)
        httpd.app = self
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, name="longctx-messages-server", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving: held requests are dropped and open connections closed."""
        httpd, thread = self._httpd, self._thread
        if httpd is None:
            return
        self._stopping.set()
        httpd.shutdown()
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        httpd.server_close()
        if thread is not None:
            thread.join(timeout=5)
        self._httpd = self._thread = None

    def __enter__(self) -> MessagesServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The bound port while running, else the requested one."""
        return int(self._httpd.server_address[1]) if self._httpd is not None else self._port

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` (the server must be started)."""
        if self._httpd is None:
            raise RuntimeError("the server is not running: call start() or use it as a context manager")
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    # -- configuration and stats -----------------------------------------------------------------

    @property
    def faults(self) -> FaultPlan:
        """The fault plan in force."""
        return self._injector.plan

    def set_faults(self, plan: FaultPlan | None) -> None:
        """Replace the fault plan (its draws start again from its seed)."""
        self._injector = FaultInjector(plan or FaultPlan())

    @property
    def stats(self) -> ServerStats:
        """A consistent copy of the counters."""
        with self._lock:
            snapshot = copy.copy(self._stats)
            snapshot.endpoints = dict(self._stats.endpoints)
            snapshot.requests = list(self._stats.requests)
            snapshot.arrivals = list(self._stats.arrivals)
            snapshot.batch_bytes = list(self._stats.batch_bytes)
            snapshot.batch_requests = list(self._stats.batch_requests)
            snapshot.faults = dict(self._stats.faults)
            snapshot.errors = dict(self._stats.errors)
        return snapshot

    def reset_stats(self) -> None:
        """Zero every counter (requests still in flight keep being counted)."""
        with self._lock:
            self._stats = ServerStats(in_flight=self._stats.in_flight)

    def _bump(self, table: str, key: str) -> None:
        with self._lock:
            counts: dict[str, int] = getattr(self._stats, table)
            counts[key] = counts.get(key, 0) + 1

    def _count(self, change: Callable[[ServerStats], None]) -> None:
        with self._lock:
            change(self._stats)

    def _hold(self, seconds: float) -> None:
        self._stopping.wait(seconds)

    def _track(self, connection: socket.socket, *, add: bool) -> None:
        with self._lock:
            (self._connections.add if add else self._connections.discard)(connection)

    def _next_id(self, prefix: str) -> str:
        with self._lock:
            return f"{prefix}_srv{next(self._ids):017d}"

    # -- request handling ------------------------------------------------------------------------

    def _serve(self, handler: Handler, method: str) -> None:
        path, _, query_string = handler.path.partition("?")
        query = dict(urllib.parse.parse_qsl(query_string))
        endpoint, batch_id = (dialects.route(method, path), None)
        if endpoint is None:
            endpoint, batch_id = route(method, path)
        try:
            raw = handler.read_body(self.batches.max_bytes if endpoint == "batches.create" else None)
            if endpoint in ("_stats", "_reset"):  # control endpoints: not counted, never faulted
                if endpoint == "_reset":
                    self.reset_stats()
                stats = self.stats.to_json(requests=query.get("requests") == "1")
                reply: _Reply = (200, json.dumps(stats).encode(), {"Content-Type": JSON})
            else:
                with self._lock:
                    self._stats.endpoints[endpoint] = self._stats.endpoints.get(endpoint, 0) + 1
                    self._stats.arrivals.append(time.time())
                    self._stats.in_flight += 1
                    self._stats.max_in_flight = max(self._stats.max_in_flight, self._stats.in_flight)
                try:
                    reply = self._reply(handler, method, path, endpoint, batch_id, query, raw)
                finally:  # before the answer goes out, so a client that has it sees consistent stats
                    with self._lock:
                        self._stats.in_flight -= 1
            if reply is None:
                handler.abort()
            else:
                handler.send(*reply)
        except OSError:  # the client went away
            handler.close_connection = True

    def _reply(
        self,
        handler: Handler,
        method: str,
        path: str,
        endpoint: str,
        batch_id: str | None,
        query: dict[str, str],
        raw: bytes | None,
    ) -> _Reply:
        """The answer to one API request (``raw`` None: a body over the endpoint's size limit); ``None`` drops
        the connection."""
        request_id = self._next_id("req")
        headers = {"request-id": request_id}
        if endpoint == "messages":
            self._rate.record(requests=1)
        try:
            if endpoint == "unknown":
                raise APIFailure(404, "not_found_error", f"Not found: {method} {path}")
            if raw is None:  # like the API's front (Cloudflare): refused before anything else looks at it
                raise APIFailure(413, "request_too_large", "Request exceeds the maximum allowed number of bytes "
                                 f"({self.batches.max_bytes:,} for a message batch)")
            self._authenticate(handler)
            body = self._parse(raw) if method == "POST" and endpoint != "batches.cancel" else {}
            if endpoint in ("messages", "chat.completions", "completion") and self.record_requests:
                with self._lock:
                    self._stats.requests.append(body)
            fault = self._injector.draw(endpoint)
            if fault is not None:
                self._bump("faults", fault)
                failure = status_failure(fault, self.faults)
                if failure is not None:
                    raise failure
                if fault == "timeout":
                    self._hold(self.faults.timeout_hold)
                if fault in ("timeout", "reset"):
                    return None
            base = f"http://{handler.headers.get('Host') or self.base_url.removeprefix('http://')}"
            status, payload, content_type = self.answers.reply(endpoint, batch_id, body, query, base)
            if endpoint == "batches.create":
                with self._lock:
                    self._stats.batch_bytes.append(len(raw))
                    self._stats.batch_requests.append(len(body["requests"]))
            if fault == "malformed":
                payload = payload[: max(1, len(payload) // 2)]
            headers["Content-Type"] = content_type
        except Exception as exc:
            if not isinstance(exc, APIFailure):  # a bug here: answer like the API would, and log it
                _log.exception("the fake Messages API failed on %s %s", method, path)
                exc = APIFailure(500, "api_error", f"internal error in the test server: {exc!r}")
            self._bump("errors", exc.error_type)
            error = dialects.openai_error(exc) if endpoint in dialects.OPENAI_ERRORS else exc.body(request_id)
            status, payload = exc.status, json.dumps(error).encode()
            headers.update({**exc.headers, "Content-Type": JSON})
        if endpoint in ("messages", "count_tokens"):
            headers.update(self._rate.record())
        return status, payload, headers

    def _authenticate(self, handler: Handler) -> None:
        if self.api_key is None:
            return
        key = handler.headers.get("x-api-key")
        bearer = handler.headers.get("Authorization", "")
        if key != self.api_key and bearer != f"Bearer {self.api_key}":
            raise APIFailure(401, "authentication_error", "invalid x-api-key")

    @staticmethod
    def _parse(raw: bytes) -> dict[str, Any]:
        try:
            body = json.loads(raw or b"null")
        except ValueError as exc:
            raise APIFailure(400, "invalid_request_error", f"request body is not valid JSON: {exc}") from None
        if not isinstance(body, dict):
            raise APIFailure(400, "invalid_request_error", "request body must be a JSON object")
        return body
