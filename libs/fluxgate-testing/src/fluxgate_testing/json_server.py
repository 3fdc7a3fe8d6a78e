"""A stand-in HTTP server for unit tests: real sockets on loopback, replies a test scripts.

A test hands :class:`JsonServer` a function that answers each request (method, path, body)
with a status and a JSON document; the server runs in a daemon thread while the ``with``
block lasts. :meth:`JsonServer.stop` inside the block is "the server gone": the client then
meets a refused connection, as it would in production.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Answer = Callable[[str, str, bytes], tuple[int, Any]]
"""(method, path, request body) to (status, JSON document)."""


class _Handler(BaseHTTPRequestHandler):
    answer: Answer

    def do_GET(self) -> None:
        self._reply(b"")

    def do_POST(self) -> None:
        self._reply(self.rfile.read(int(self.headers.get("Content-Length", 0))))

    def _reply(self, body: bytes) -> None:
        status, document = type(self).answer(self.command, self.path, body)
        data = json.dumps(document).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *_: object) -> None:
        """Quiet: a test says what went wrong in its assertions, not in request lines."""


class JsonServer:
    """``with JsonServer(answer) as server:`` a server at ``server.url`` answering GET and POST."""

    def __init__(self, answer: Answer) -> None:
        handler = type("Handler", (_Handler,), {"answer": staticmethod(answer)})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> JsonServer:
        threading.Thread(target=self._server.serve_forever, name="json-server", daemon=True).start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop serving and close the socket; safe to call twice."""
        self._server.shutdown()
        self._server.server_close()
