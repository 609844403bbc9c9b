"""Load for the refund service: ``clients`` concurrent httpx clients sending ``requests``
``POST /refunds/o-N`` in all (bounded also by ``seconds``), against uvicorn on 127.0.0.1.

``python -m examples.refund_load --requests 2000 --clients 100`` brings up Postgres and
Redis containers, the slow-sometimes payment gateway and the service (capture on), sends the
load and prints throughput, p50/p99 latency and the runs kept.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from examples import _model

SLOW_EVERY = 10
"""The gateway is slow (over the client's timeout) on the first charge of every order whose
number is 3 modulo this."""


def is_slow(order: str) -> bool:
    return int(order.rsplit("-", 1)[-1]) % SLOW_EVERY == 3


def _serve_gateway(delay: float) -> tuple[str, Callable[[], None]]:
    """The gateway in this process (see :func:`gateway`)."""
    seen: set[str] = set()
    lock = threading.Lock()

    def handler(path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        order = str(body.get("order"))
        with lock:
            first = order not in seen
            seen.add(order)
        if first and is_slow(order):
            time.sleep(delay)
        return 200, {"status": "refunded"}

    return _model.serve_http(handler, "payments-gateway")


def gateway(delay: float) -> tuple[str, Callable[[], None]]:
    """The payment gateway stand-in, in a process of its own as a payment provider is (its
    answers do not wait for the service's interpreter, however busy): answers at once, but
    ``delay`` seconds late on the first charge of a slow order (:func:`is_slow`); returns
    its URL and its stop function."""
    root = str(Path(__file__).resolve().parents[1])
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])),
    }
    proc = subprocess.Popen(  # its standard input open: it ends when this process does
        [sys.executable, "-m", "examples.refund_load", "--gateway", str(delay)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    if not url.startswith("http://"):
        proc.kill()
        proc.wait()
        raise RuntimeError("the payment gateway did not start")

    def stop() -> None:
        proc.terminate()
        proc.wait(30)
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                pipe.close()

    return url, stop


@contextlib.contextmanager
def serve(app: Any, port: int = 0) -> Iterator[str]:
    """``app`` under uvicorn on 127.0.0.1 in a thread; yields its base URL."""
    import socket

    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", port))
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=120)  # the requests in flight finish
        sock.close()


@dataclass
class Load:
    seconds: float
    latencies: list[float]
    """Of each request answered, and of each still unanswered when the load stopped (the
    time it had waited by then: a lower bound)."""
    statuses: dict[int, int]
    """Answers by status; ``0``: no answer (an error, or still waiting at the stop)."""

    @property
    def answered(self) -> int:
        return sum(n for status, n in self.statuses.items() if status)

    @property
    def throughput(self) -> float:
        return self.answered / self.seconds

    def quantile(self, q: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _load(base: str, orders: list[str], clients: int, seconds: float) -> Load:
    queue: asyncio.Queue[str] = asyncio.Queue()
    for order in orders:
        queue.put_nowait(order)
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    waiting: dict[int, float] = {}

    async def client(me: int) -> None:
        async with httpx.AsyncClient(base_url=base, timeout=seconds) as http:
            while True:
                try:
                    order = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                waiting[me] = start = time.perf_counter()
                try:
                    status = (await http.post(f"/refunds/{order}")).status_code
                except httpx.HTTPError:
                    status = 0
                del waiting[me]
                latencies.append(time.perf_counter() - start)
                statuses[status] = statuses.get(status, 0) + 1

    start = time.perf_counter()
    tasks = [asyncio.create_task(client(i)) for i in range(clients)]
    _, late = await asyncio.wait(tasks, timeout=seconds)
    stopped = time.perf_counter()
    for task in late:
        task.cancel()
    await asyncio.gather(*late, return_exceptions=True)
    latencies.extend(stopped - began for began in waiting.values())
    if waiting:
        statuses[0] = statuses.get(0, 0) + len(waiting)
    return Load(stopped - start, latencies, statuses)


def load(base: str, orders: list[str], clients: int = 100, seconds: float = 300.0) -> Load:
    """Send one ``POST /refunds/{order}`` per order from ``clients`` concurrent clients,
    stopping after ``seconds``."""
    return asyncio.run(_load(base, orders, clients, seconds))


def main(argv: list[str] | None = None) -> int:
    import tempfile

    from sandbox import capture
    from sandbox.containers import RestoreSpec, bring_up
    from sandbox.snapshot.store import DirectoryStore

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--gateway", type=float, default=None, help="serve only the gateway, this slow (s)"
    )
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=300.0)
    parser.add_argument("--store", default=None, help="snapshot store (default: a temp dir)")
    args = parser.parse_args(argv)
    if args.gateway is not None:  # the gateway's own process: its URL, then serve
        url, _ = _serve_gateway(args.gateway)  # until its parent closes the standard input
        print(url, flush=True)
        sys.stdin.read()
        return 0
    from examples import refund_service

    specs = [
        RestoreSpec(name="db", kind="postgres", env="DATABASE_URL"),
        RestoreSpec(name="cache", kind="redis", env="REDIS_URL"),
    ]
    url, stop = gateway(refund_service.GATEWAY_TIMEOUT * 2)
    with tempfile.TemporaryDirectory() as tmp, bring_up(specs) as env:
        store = args.store or tmp
        os.environ.update(
            DATABASE_URL=env.services["db"].url,
            REDIS_URL=env.services["cache"].url,
            PAYMENTS_URL=url,
        )
        refund_service.setup(os.environ["DATABASE_URL"], args.requests)
        orders = [f"o-{i}" for i in range(1, args.requests + 1)]
        with serve(refund_service.create_app(store=store)) as base:
            result = load(base, orders, args.clients, args.seconds)
        capture.flush(120)  # the kept runs are finished while their services are still up
        kept = len(DirectoryStore(store).list())
        print(
            f"{result.answered} requests answered in {result.seconds:.1f}s: "
            f"{result.throughput:.1f} req/s, p50 {result.quantile(0.5) * 1000:.0f} ms, "
            f"p99 {result.quantile(0.99) * 1000:.0f} ms, statuses {result.statuses}, "
            f"{kept} runs kept"
        )
    stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
