"""Redaction cost per event line. ``python -m bench.redaction``

The 10,000 mixed-kind events of :mod:`bench.events`, serialized as the recorder writes them,
are redacted line by line with the default redactor (secret patterns and personal data: the
capture's setting), with personal data off, and with an environment of a few secrets; the
baseline is serializing the same lines (the work every event pays anyway). The sides
alternate after a warm-up; median microseconds per line and the spread over the rounds.
Goal: redaction adds less than serializing does (ratio redaction / serialization < 1).
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable

from bench.events import make_events
from sandbox.capture.redact import RedactionConfig, Redactor
from sandbox.snapshot.store import dump_event

ROUNDS = 9
ENV = {
    "OPENAI_API_KEY": "sk-proj-Zq8t3LmW9xR2vKp7Yc4Nd0123",
    "DATABASE_URL": "postgresql://app:hunter22@db:5432/shop",
    "STRIPE_SECRET": "rk_live_51Hx0123456789abcdef",
    "HOME": "/root",
    "LANG": "C.UTF-8",
}


def _per_line(fn: Callable[[], None], lines: int) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) / lines * 1e6


def main() -> int:
    events = make_events()
    lines = [dump_event(e) for e in events]
    sides: dict[str, Callable[[], None]] = {"serialize": lambda: [dump_event(e) for e in events]}
    for label, redactor in (
        ("redact (default)", Redactor(key=b"k" * 32)),
        ("redact (no PII)", Redactor(RedactionConfig(pii=()), key=b"k" * 32)),
        ("redact (env secrets)", Redactor(env=ENV, key=b"k" * 32)),
    ):
        sides[label] = lambda r=redactor: [r.bytes(line) for line in lines]  # type: ignore[misc]
    for fn in sides.values():
        fn()  # warm-up
    times: dict[str, list[float]] = {name: [] for name in sides}
    order = list(sides)
    for i in range(ROUNDS):
        for name in order if i % 2 == 0 else reversed(order):
            times[name].append(_per_line(sides[name], len(lines)))
    base = statistics.median(times["serialize"])
    print(f"redaction per event line, {len(lines)} lines of 8 kinds, {ROUNDS} rounds")
    print(f"  {'serialize (baseline)':<22} {base:7.2f} µs")
    for name in order[1:]:
        per = times[name]
        ratios = [t / s for t, s in zip(per, times["serialize"], strict=True)]
        print(
            f"  {name:<22} {statistics.median(per):7.2f} µs  "
            f"(spread {min(per):.2f}-{max(per):.2f}); / serialize: median "
            f"{statistics.median(ratios):.2f}x, spread {min(ratios):.2f}-{max(ratios):.2f}x"
        )
    print(f"(cpu count {os.cpu_count()})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
