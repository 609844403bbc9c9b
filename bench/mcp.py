"""Capture overhead of an MCP tool call. ``python -m bench.mcp``

One stdio session to a real MCP server (``bench/_mcp_server.py``) makes batches of
``tools/call`` with capture on (each call recorded as a ``tool`` event) and off (the same
session and calls, the patch passing through), the two sides alternating after a warm-up.
Prints the median time per call of each side, and the median of the per-pair ratios
captured / uncaptured with their spread (min to max).
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from bench.compare import ratios, record
from sandbox import capture
from sandbox.seam import boundary
from sandbox.snapshot.store import DirectoryStore

QUICK: list[str] = []
CALLS = 50
PAIRS = 15
WARMUP = 2
ROOT = Path(__file__).resolve().parent.parent


async def _batch(session: ClientSession, recorded: bool) -> float:
    start = time.perf_counter()
    if recorded:
        for i in range(CALLS):
            await session.call_tool("lookup", {"order_id": i})
    else:
        with boundary.bypassed():
            for i in range(CALLS):
                await session.call_tool("lookup", {"order_id": i})
    return (time.perf_counter() - start) / CALLS


async def _measure(store: DirectoryStore) -> tuple[list[float], list[float]]:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "bench._mcp_server"], cwd=str(ROOT)
    )
    plain: list[float] = []
    captured: list[float] = []
    with capture.run("bench-mcp", store=store, seed=1, packages=False):
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await session.list_tools()
            for _ in range(WARMUP):
                await _batch(session, False)
                await _batch(session, True)
            for pair in range(PAIRS):
                sides = (False, True) if pair % 2 == 0 else (True, False)
                for recorded in sides:
                    (captured if recorded else plain).append(await _batch(session, recorded))
    return plain, captured


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = DirectoryStore(Path(tmp))
        plain, captured = asyncio.run(_measure(store))
        (run_id,) = [m.run_id for m in store.list()]
        calls = [e for e in store.load_events(run_id) if e.name == "mcp:bench/lookup"]
        assert len(calls) == (PAIRS + WARMUP) * CALLS, len(calls)  # only the captured side
    print(
        f"mcp tools/call over stdio: uncaptured {statistics.median(plain) * 1e6:.0f} µs, "
        f"captured {statistics.median(captured) * 1e6:.0f} µs per call "
        f"({PAIRS} alternating pairs of {CALLS} calls, after {WARMUP} warm-up pairs)"
    )
    record("mcp: captured / uncaptured tools/call over stdio", ratios(captured, plain))


if __name__ == "__main__":
    main()
