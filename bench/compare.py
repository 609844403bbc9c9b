"""How every benchmark compares two sides, and the figures ``make bench`` prints.

:func:`compare` runs two callables that do the same work (each pays its own setup, sealing
and flushing, or neither does): one warm-up of each, then ``rounds`` rounds in which the side
that goes first alternates, and returns one ratio per round. :func:`record` files a figure
(its name, its goal, the median of its values and their spread) in :data:`FIGURES`, which
``python -m bench.all`` prints as one table; a benchmark adds a figure with one call.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

Side = Callable[[], object]
"""One side's whole work; it returns the seconds to count (a ``float``) when it times a part
of itself (for example without a teardown both sides skip); any other result is ignored and
the whole call is timed."""


@dataclass(frozen=True)
class Figure:
    name: str
    goal: str
    median: float
    low: float
    high: float
    unit: str
    holds: bool | None
    """Whether the median meets the goal (``None``: no goal, information only)."""

    def row(self) -> tuple[str, str, str, str, str]:
        verdict = "-" if self.holds is None else "yes" if self.holds else "NO"
        return (
            self.name,
            self.goal,
            f"{_num(self.median)}{self.unit}",
            f"{_num(self.low)}-{_num(self.high)}{self.unit}",
            verdict,
        )


def _num(value: float) -> str:
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}"


FIGURES: list[Figure] = []
"""Every figure recorded in this process, in order."""


def timed(side: Side) -> float:
    """Seconds one run of ``side`` took (or the seconds it reports itself)."""
    start = time.perf_counter()
    reported = side()
    elapsed = time.perf_counter() - start
    return reported if isinstance(reported, float) else elapsed


def compare(
    measured: Side, baseline: Side, *, rounds: int, warmup: int = 1
) -> tuple[list[float], list[float]]:
    """The seconds of each side per round, after ``warmup`` runs of each; the side that goes
    first alternates from one round to the next, so neither always meets a warmer machine."""
    ours, theirs = compare_all([measured, baseline], rounds=rounds, warmup=warmup)
    return ours, theirs


def compare_all(sides: Sequence[Side], *, rounds: int, warmup: int = 1) -> list[list[float]]:
    """:func:`compare` for any number of sides: the seconds of each side per round (one list
    per side, in the order given); the order the sides run in turns by one each round."""
    for _ in range(warmup):
        for side in sides:
            side()
    seconds: list[list[float]] = [[] for _ in sides]
    for i in range(rounds):
        for k in range(len(sides)):
            j = (i + k) % len(sides)
            seconds[j].append(timed(sides[j]))
    return seconds


def ratios(numerators: Sequence[float], denominators: Sequence[float]) -> list[float]:
    """Per-round ratios ``numerators[i] / denominators[i]``."""
    return [n / d for n, d in zip(numerators, denominators, strict=True)]


def record(
    name: str,
    values: Sequence[float],
    *,
    goal: str = "",
    holds: Callable[[float], bool] | None = None,
    unit: str = "x",
) -> Figure:
    """File a figure (median and spread of ``values``; ``holds`` judges the median against
    the goal) and print its line."""
    median = statistics.median(values)
    figure = Figure(
        name=name,
        goal=goal or "-",
        median=median,
        low=min(values),
        high=max(values),
        unit=unit,
        holds=None if holds is None else holds(median),
    )
    FIGURES.append(figure)
    name_, goal_, med, spread, verdict = figure.row()
    print(f"{name_}: median {med}, spread {spread} over {len(values)} (goal {goal_}: {verdict})")
    return figure


def table(figures: Sequence[Figure]) -> str:
    """The figures as one plain-text table."""
    head = ("figure", "goal", "median", "spread", "holds")
    rows = [head, *(f.row() for f in figures)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(line.rstrip() for line in lines)
