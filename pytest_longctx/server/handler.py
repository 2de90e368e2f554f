"""The HTTP plumbing of the local server: one handler thread per connection, requests handed to the app."""

from __future__ import annotations

import logging
import socket
import struct
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

_log = logging.getLogger("pytest_longctx.server.messages_api")


class App(Protocol):
    """What the handler hands its connections and requests to (:class:`~.messages_api.MessagesServer`)."""

    def _track(self, connection: socket.socket, *, add: bool) -> None: ...

    def _serve(self, handler: Handler, method: str) -> None: ...


class Handler(BaseHTTPRequestHandler):
    """One connection; every request is handed to the owning :class:`MessagesServer`."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms delayed-ACK stall
    server: HTTPServer

    def setup(self) -> None:
        super().setup()
        self.server.app._track(self.connection, add=True)

    def finish(self) -> None:
        try:
            super().finish()
        except OSError:
            pass
        self.server.app._track(self.connection, add=False)

    def do_GET(self) -> None:
        self.server.app._serve(self, "GET")

    def do_POST(self) -> None:
        self.server.app._serve(self, "POST")

    def do_DELETE(self) -> None:
        self.server.app._serve(self, "DELETE")

    def log_message(self, format: str, *args: Any) -> None:
        _log.debug("%s " + format, self.address_string(), *args)

    def read_body(self, limit: int | None = None) -> bytes | None:
        """The request body; None when it is longer than ``limit`` bytes (then it is read and dropped unparsed,
        in pieces, so the client can read the answer)."""
        length = int(self.headers.get("Content-Length") or 0)
        if limit is not None and length > limit:
            while length > 0:
                piece = self.rfile.read(min(length, 1 << 20))
                if not piece:  # the client gave up
                    break
                length -= len(piece)
            return None
        return self.rfile.read(length) if length > 0 else b""

    def send(self, status: int, payload: bytes, headers: Mapping[str, str]) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def abort(self) -> None:
        """Drop the connection with a TCP reset, sending nothing."""
        self.close_connection = True
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
        except OSError:
            pass


class HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 256
    app: App
