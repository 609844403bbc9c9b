"""What rebinding the names bound before a patch (:mod:`sandbox.capture.rebind`) costs each
run's start, in a process that has imported the frameworks (LangGraph, the OpenAI Agents SDK,
pydantic-ai, ``mcp``: a few thousand modules). Sequential runs of a service apply and undo
the process-wide patches once per run; the MCP patch's transports and ``uuid4`` are rebound
in every module holding them. ``python -m bench.rebind [--quick]``

Measured: N starts and undos of ``patch_mcp()`` and ``patch_uuid4()`` after the process's
first (which looks through every module once), against the baseline: N looks through every
loaded module for the three MCP transports, which is what the MCP patch did on each start
before the rebinder. Figures: ms per start; ratio baseline / ours (goal >= 10).
"""

from __future__ import annotations

import argparse
import sys

from bench.compare import compare, ratios, record
from sandbox.capture.ids import patch_uuid4
from sandbox.capture.mcp import patch_mcp

QUICK = ["--quick"]


def _frameworks() -> None:
    import agents.mcp  # noqa: F401
    import langchain_openai  # noqa: F401
    import langgraph.prebuilt  # noqa: F401
    import mcp.client.sse
    import mcp.client.stdio
    import mcp.client.streamable_http  # noqa: F401
    import pydantic_ai  # noqa: F401


def _starts(n: int) -> None:
    for _ in range(n):
        undo = [patch_mcp(), patch_uuid4()]
        for step in reversed(undo):
            step()


def _full_scans(n: int) -> None:
    from mcp.client import sse, stdio, streamable_http

    transports = (stdio.stdio_client, sse.sse_client, streamable_http.streamable_http_client)
    for _ in range(n):
        for original in transports:
            for module in list(sys.modules.values()):
                names = getattr(module, "__dict__", None)
                if isinstance(names, dict):
                    _ = [attr for attr, value in list(names.items()) if value is original]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.rebind", description=__doc__)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    n, rounds = (5, 5) if args.quick else (20, 9)
    _frameworks()
    _starts(1)  # the process's first start looks through every module
    ours, baseline = compare(lambda: _starts(n), lambda: _full_scans(n), rounds=rounds)
    print(f"{len(sys.modules)} modules loaded")
    record("rebind: patch start+undo per run", [s * 1000 / n for s in ours], unit=" ms")
    record(
        "rebind: full scans / rebinder",
        ratios(baseline, ours),
        goal=">= 10",
        holds=lambda median: median >= 10,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
