"""The HTTP server ``bench.capture`` records: it echoes a JSON body back. ``python -m
bench._echo_server`` serves it in a process of its own and prints its URL."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length)
        raw = json.dumps({"echo": json.loads(body or b"null"), "ok": True}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)


def url_of(server: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}/echo"


@contextmanager
def in_this_process() -> Iterator[str]:
    """The server on a thread of this process; its URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield url_of(server)
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def in_own_process() -> Iterator[str]:
    """The server in a process of its own (``python -m bench._echo_server``); its URL."""
    server = subprocess.Popen(
        [sys.executable, "-m", "bench._echo_server"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=str(ROOT),
    )
    assert server.stdout is not None and server.stdin is not None
    try:
        url = server.stdout.readline().decode().strip()
        if not url:
            raise SystemExit("bench._echo_server: the server did not start")
        yield url
    finally:
        server.stdin.close()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


if __name__ == "__main__":
    with ThreadingHTTPServer(("127.0.0.1", 0), Handler) as served:
        print(url_of(served), flush=True)
        threading.Thread(target=served.serve_forever, daemon=True).start()
        sys.stdin.read()  # until the parent closes it (or ends)
