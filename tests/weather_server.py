"""A weather service on 127.0.0.1 for the HTTP clients' capture tests (``requests``,
aiohttp): JSON answers, one gzipped, one streamed in chunks, a booking that echoes a
header, and a local model's answer streamed a JSON object a line."""

from __future__ import annotations

import gzip
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Weather(BaseHTTPRequestHandler):
    """``GET /v1/CITY`` (-3 C in oslo, else 21), ``/v1/gz/CITY`` gzipped,
    ``/v1/stream/CITY`` three hours chunked (the last one 0.3 s later); ``POST /book``
    (``{"city"}``, answered with the ``x-agent`` header), ``POST /api/chat`` (a model's
    words, gzipped, a JSON object a line)."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        return None

    def _answer(self, data: bytes, **headers: str) -> None:
        self.send_response(200)
        for name, value in {"content-type": "application/json", **headers}.items():
            self.send_header(name, value)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        city = self.path.rsplit("/", 1)[-1]
        data = json.dumps({"city": city, "temp_c": -3 if city == "oslo" else 21}).encode()
        if "gz" in self.path:
            self._answer(gzip.compress(data), **{"content-encoding": "gzip"})
        elif "stream" in self.path:
            self._stream([{"hour": h, "temp_c": t} for h, t in enumerate([2, -1, -3])])
        else:
            self._answer(data)

    def _stream(self, parts: list[dict[str, Any]]) -> None:
        self.send_response(200)
        self.send_header("content-type", "application/x-ndjson")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        for n, part in enumerate(parts):
            if n == len(parts) - 1:
                time.sleep(0.3)  # the last one comes later
            line = json.dumps(part).encode() + b"\n"
            self.wfile.write(f"{len(line):x}\r\n".encode() + line + b"\r\n")
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        if self.path == "/api/chat":
            words = ["It", " is", " -3", " C", " in", " Oslo."]
            lines = [{"message": {"content": w}, "done": False} for w in words]
            data = b"".join(json.dumps(x).encode() + b"\n" for x in [*lines, {"done": True}])
            self._answer(gzip.compress(data), **{"content-encoding": "gzip"})
            return
        self._answer(json.dumps({"booked": body["city"], "by": self.headers["x-agent"]}).encode())


@contextmanager
def serving() -> Iterator[tuple[ThreadingHTTPServer, str]]:
    """The service on a thread; it and its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Weather)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
