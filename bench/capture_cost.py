"""What capture costs a service that keeps it on: opening and closing one run, and recording
one tool call against an OpenTelemetry SDK span carrying the same arguments and result. One
warm-up each, the sides alternating over the rounds (:func:`bench.compare.compare`).
``python -m bench.capture_cost [--quick]``

1. One run opened and closed (``capture.run`` with its defaults, no services, one
   ``@tool`` call), ms per run: N runs against the same N tool calls with no run, the
   difference per run. Goal: at most 2 ms.
2. Recording one tool call: ``capture.run`` around N ``@tool`` calls against the same run
   around N plain calls each wrapped in an OpenTelemetry SDK span (a ``TracerProvider``
   with a simple processor and an in-memory exporter: the cheapest export there is) whose
   attributes hold the same arguments and result; ratio span / ours per call. Goal: >= 1
   (recording costs at most what the span does).
"""

from __future__ import annotations

import argparse
import itertools
import json
import tempfile
from pathlib import Path
from typing import Any

from bench.compare import compare, ratios, record
from sandbox import capture
from sandbox.snapshot.store import DirectoryStore

QUICK = ["--quick"]


def plain_lookup(order_id: int, region: str = "eu") -> dict[str, Any]:
    return {"id": order_id, "region": region, "items": [1, 2, 3]}


lookup = capture.tool(plain_lookup)


def bench_run(root: Path, runs: int, rounds: int) -> list[float]:
    """ms per run opened and closed (one tool call in it), one value per round."""
    store = DirectoryStore(root / "runs")

    def captured() -> None:
        for i in range(runs):
            with capture.run("cost", store=store, services="none"):
                lookup(i)

    def bare() -> None:
        for i in range(runs):
            lookup(i)

    ours, base = compare(captured, bare, rounds=rounds)
    return [(o - b) / runs * 1e3 for o, b in zip(ours, base, strict=True)]


def bench_tool_call(root: Path, calls: int, rounds: int) -> list[float]:
    """Ratios (µs per OpenTelemetry span) / (µs per recorded call), one per round."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("bench")
    store = DirectoryStore(root / "calls")
    count = itertools.count()

    def recorded() -> None:
        with capture.run(f"calls-{next(count)}", store=store, services="none"):
            for i in range(calls):
                lookup(i)

    def spanned() -> None:
        with capture.run(f"calls-{next(count)}", store=store, services="none"):
            for i in range(calls):
                with tracer.start_as_current_span("tool lookup") as span:
                    span.set_attribute("tool.name", "lookup")
                    span.set_attribute("tool.args", json.dumps({"order_id": i, "region": "eu"}))
                    result = plain_lookup(i)
                    span.set_attribute("tool.result", json.dumps(result))
        exporter.clear()

    def empty() -> None:
        with capture.run(f"calls-{next(count)}", store=store, services="none"):
            pass

    ours, spans = compare(recorded, spanned, rounds=rounds)
    _, base = compare(empty, empty, rounds=rounds)
    per_ours = [o - b for o, b in zip(ours, base, strict=True)]
    per_span = [s - b for s, b in zip(spans, base, strict=True)]
    return ratios(per_span, per_ours)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.capture_cost")
    parser.add_argument("--quick", action="store_true", help="fewer runs and rounds")
    args = parser.parse_args(argv)
    runs, calls, rounds = (50, 500, 5) if args.quick else (200, 2000, 15)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        record(
            "capture: one run opened and closed (no services, one tool call)",
            bench_run(root, runs, rounds),
            goal="<= 2 ms",
            holds=lambda ms: ms <= 2,
            unit=" ms",
        )
        record(
            f"capture: OpenTelemetry span / recorded tool call ({calls} calls)",
            bench_tool_call(root, calls, rounds),
            goal=">= 1x",
            holds=lambda ratio: ratio >= 1,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
