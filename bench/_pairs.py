"""Timing helpers shared by the benchmarks: ratios of two sides doing equal work, the sides
alternating after a warm-up each, printed as a median and its spread."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def pair(ours: Callable[[], object], base: Callable[[], object], repeat: int) -> list[float]:
    """Ratios ours/base, one per round, the two sides alternating after a warm-up each."""
    ours()
    base()
    ratios = []
    for i in range(repeat):
        if i % 2:
            b, o = timed(base), timed(ours)
        else:
            o, b = timed(ours), timed(base)
        ratios.append(o / b)
    return ratios


def line(what: str, ratios: list[float], goal: str) -> str:
    med = statistics.median(ratios)
    return f"  {what:<34} median {med:5.2f}x  spread {min(ratios):.2f}-{max(ratios):.2f}x  ({goal})"
