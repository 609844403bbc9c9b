"""Capture overhead. ``python -m bench.capture``

1. Tool calls: median cost per recorded ``@tool`` call, against the same loop with no capture
   running (the decorator's pass-through). Goal: at most 50 µs per event.
2. HTTP: the same requests (local server, one ``httpx.Client``) recorded by our transport
   capture and by vcrpy writing a cassette; overhead per request over the plain loop, and the
   ratio vcrpy / ours. Goal: faster than vcrpy.
3. A whole 20-request run, each side paying its setup and its save: ``capture.run`` with its
   defaults (package list, git, manifest, event log) against ``vcr.use_cassette`` writing a
   new cassette; the sides alternate, after a warm-up each; median ratio vcrpy / ours and
   its spread over 15 rounds. Goal: > 1 (ours cheaper).
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

from sandbox import capture
from sandbox.snapshot.store import DirectoryStore

TOOL_CALLS = 2_000
HTTP_CALLS = 200
REPEATS = 5


@capture.tool
def lookup(order_id: int, region: str = "eu") -> dict[str, Any]:
    return {"id": order_id, "region": region, "items": [1, 2, 3]}


def _median(fn: Callable[[], None], repeats: int = REPEATS) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _tool_loop() -> None:
    for i in range(TOOL_CALLS):
        lookup(i)


def bench_tools(root: Path) -> dict[str, float]:
    plain = _median(_tool_loop)
    store = DirectoryStore(root / "tools")
    with capture.run("bench-tools", store=store, seed=1, packages=False, http=False):
        captured = _median(_tool_loop)
    per_call = (captured - plain) / TOOL_CALLS
    return {"plain_us": plain / TOOL_CALLS * 1e6, "overhead_us": per_call * 1e6}


class _Handler(BaseHTTPRequestHandler):
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


def _http_loop(client: httpx.Client, url: str) -> Callable[[], None]:
    def loop() -> None:
        for i in range(HTTP_CALLS):
            client.post(url, json={"i": i, "q": "where is my order"}).json()

    return loop


def bench_http(root: Path) -> dict[str, float]:
    import vcr

    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/echo"
    try:
        with httpx.Client() as client:
            loop = _http_loop(client, url)
            loop()  # warm the connection
            plain = _median(loop)
            store = DirectoryStore(root / "http")
            with capture.run("bench-http", store=store, seed=1, packages=False):
                ours = _median(loop)
            cassettes = []

            def vcr_loop() -> None:
                path = root / f"cassette-{len(cassettes)}.yaml"
                cassettes.append(path)
                with vcr.use_cassette(str(path), record_mode="all"):
                    loop()

            theirs = _median(vcr_loop)
    finally:
        server.shutdown()
        server.server_close()
    return {
        "plain_us": plain / HTTP_CALLS * 1e6,
        "ours_us": (ours - plain) / HTTP_CALLS * 1e6,
        "vcr_us": (theirs - plain) / HTTP_CALLS * 1e6,
    }


RUN_REQUESTS = 20
RUN_ROUNDS = 15


def bench_small_run(root: Path) -> list[float]:
    """Ratios vcrpy / ours of a whole 20-request run, setup and save included."""
    import vcr

    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/echo"
    store = DirectoryStore(root / "runs")
    count = iter(range(10**6))

    def requests() -> None:
        with httpx.Client() as client:
            for i in range(RUN_REQUESTS):
                client.post(url, json={"i": i, "q": "where is my order"}).json()

    def ours() -> float:
        start = time.perf_counter()
        with capture.run(f"small-{next(count)}", store=store, seed=1):
            requests()
        return time.perf_counter() - start

    def theirs() -> float:
        start = time.perf_counter()
        with vcr.use_cassette(str(root / f"small-{next(count)}.yaml"), record_mode="all"):
            requests()
        return time.perf_counter() - start

    try:
        ours()
        theirs()
        ratios = []
        for i in range(RUN_ROUNDS):
            if i % 2:
                t, o = theirs(), ours()
            else:
                o, t = ours(), theirs()
            ratios.append(t / o)
    finally:
        server.shutdown()
        server.server_close()
    return ratios


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        tools = bench_tools(root)
        http = bench_http(root)
        small = bench_small_run(root)
    print(
        f"tool call: {tools['plain_us']:.1f} µs plain, +{tools['overhead_us']:.1f} µs per "
        f"recorded call (goal ≤ 50 µs): {'ok' if tools['overhead_us'] <= 50 else 'OVER'}"
    )
    ratio = http["vcr_us"] / http["ours_us"] if http["ours_us"] > 0 else float("inf")
    print(
        f"http request: {http['plain_us']:.1f} µs plain; overhead +{http['ours_us']:.1f} µs "
        f"ours vs +{http['vcr_us']:.1f} µs vcrpy cassette: vcrpy/ours = {ratio:.1f}x"
    )
    print(
        f"{RUN_REQUESTS}-request run with setup and save: vcrpy/ours median "
        f"{statistics.median(small):.2f}x, spread {min(small):.2f}-{max(small):.2f}x over "
        f"{RUN_ROUNDS} rounds (goal > 1)"
    )
    print(
        f"(cpu count {os.cpu_count()}, {TOOL_CALLS} tool calls, {HTTP_CALLS} requests, "
        f"median of {REPEATS})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
