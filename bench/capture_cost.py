"""What capture costs a service that keeps it on: opening and closing one run, and recording
one tool call against an OpenTelemetry SDK span carrying the same arguments and result. One
warm-up each, the sides alternating over the rounds (:func:`bench.compare.compare`).
``python -m bench.capture_cost [--quick]``

Capture syncs a finished run's files in a background thread (:mod:`sandbox.capture.durable`),
off the agent's path. That work is still the run's: every side that opens runs waits, inside
its timed region, for the syncer to have synced them (:func:`~sandbox.capture.durable.flush`).

1. One run opened and closed (``capture.run`` with its defaults, no services, one
   ``@tool`` call), ms per run: N runs, then their files synced, against the same N tool
   calls with no run; the difference per run. Goal: at most 2 ms.
2. Recording one tool call: ``capture.run`` around N ``@tool`` calls against the same run
   around N plain calls each wrapped in an OpenTelemetry SDK span whose attributes hold the
   same arguments and result (JSON), the span exported as it ends to a file, as the recorder
   writes each event to its log as it happens: a ``TracerProvider`` with a simple processor
   and the SDK's stream exporter (``ConsoleSpanExporter``) writing each span as one line of
   compact JSON and flushing it. Each side then makes its file durable: our run's files
   synced by the syncer, the span file ``fsync``-ed. A run around nothing (synced) is
   measured too and taken off both sides; ratio span / ours per call. Goal: >= 1
   (recording costs at most what the span does).
3. The same with the spans exported to memory instead (``InMemorySpanExporter``: nothing
   serialized, nothing written), for information: the cheapest span there is, against a
   recording that is written to disk and synced.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from bench.compare import compare, ratios, record
from sandbox import capture
from sandbox.capture import durable
from sandbox.snapshot.store import DirectoryStore

QUICK = ["--quick"]


def plain_lookup(order_id: int, region: str = "eu") -> dict[str, Any]:
    return {"id": order_id, "region": region, "items": [1, 2, 3]}


lookup = capture.tool(plain_lookup)


def bench_run(root: Path, runs: int, rounds: int) -> list[float]:
    """ms per run opened and closed (one tool call in it, its files synced), one value per
    round."""
    store = DirectoryStore(root / "runs")

    def captured() -> None:
        for i in range(runs):
            with capture.run("cost", store=store, services="none"):
                lookup(i)
        durable.flush()

    def bare() -> None:
        for i in range(runs):
            lookup(i)

    ours, base = compare(captured, bare, rounds=rounds)
    return [(o - b) / runs * 1e3 for o, b in zip(ours, base, strict=True)]


def bench_tool_call(root: Path, calls: int, rounds: int, *, to_file: bool) -> list[float]:
    """Ratios (µs per OpenTelemetry span) / (µs per recorded call), one per round; the spans
    exported to a file (``to_file``) or to memory."""
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import (
        ConsoleSpanExporter,
        SimpleSpanProcessor,
        SpanExporter,
    )
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    store = DirectoryStore(root / ("calls-file" if to_file else "calls-memory"))
    count = itertools.count()
    memory = InMemorySpanExporter()

    def one_line(span: ReadableSpan) -> str:
        return f"{span.to_json(indent=None)}\n"

    def spans_to(out: Any) -> SpanExporter:
        return ConsoleSpanExporter(out=out, formatter=one_line) if to_file else memory

    def recorded() -> None:
        with capture.run(f"calls-{next(count)}", store=store, services="none"):
            for i in range(calls):
                lookup(i)
        durable.flush()

    def spanned() -> None:
        path = root / f"spans-{next(count)}.jsonl"
        with open(path, "w", encoding="utf-8") as out:
            provider = TracerProvider()
            provider.add_span_processor(SimpleSpanProcessor(spans_to(out)))
            tracer = provider.get_tracer("bench")
            with capture.run(f"calls-{next(count)}", store=store, services="none"):
                for i in range(calls):
                    with tracer.start_as_current_span("tool lookup") as span:
                        span.set_attribute("tool.name", "lookup")
                        span.set_attribute("tool.args", json.dumps({"order_id": i, "region": "eu"}))
                        result = plain_lookup(i)
                        span.set_attribute("tool.result", json.dumps(result))
            out.flush()
            os.fsync(out.fileno())
            durable.flush()
        memory.clear()
        path.unlink()

    def empty() -> None:
        with capture.run(f"calls-{next(count)}", store=store, services="none"):
            pass
        durable.flush()

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
            "capture: one run opened and closed, synced (no services, one tool call)",
            bench_run(root, runs, rounds),
            goal="<= 2 ms",
            holds=lambda ms: ms <= 2,
            unit=" ms",
        )
        record(
            f"capture: OpenTelemetry span to a file / recorded tool call ({calls} calls)",
            bench_tool_call(root, calls, rounds, to_file=True),
            goal=">= 1x",
            holds=lambda ratio: ratio >= 1,
        )
        record(
            f"capture: OpenTelemetry span to memory / recorded tool call ({calls} calls)",
            bench_tool_call(root, calls, rounds, to_file=False),
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
