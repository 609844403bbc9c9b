"""A local HTTP server that answers every request with JSON, shared by the replay tests
that record a service and then stop it."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

Answer = Callable[[str, bytes], object]
"""``(path, request body)`` → what the server answers, as JSON."""


@contextmanager
def json_server(answer: Answer) -> Iterator[ThreadingHTTPServer]:
    """Serve ``answer`` to GET and POST on a free local port until the block ends (a test
    may stop it earlier: ``shutdown()`` and ``server_close()`` twice are harmless)."""

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            sent = self.rfile.read(int(self.headers.get("content-length") or 0))
            body = json.dumps(answer(self.path, sent)).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _answer

        def log_message(self, format: str, *args: object) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
