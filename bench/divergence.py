"""Benchmark: first-divergence search over long traces.

Builds an original trace of N events (four tasks of LLM calls, tool calls and clock reads)
and a replay of it as another run would log it (new sequence numbers and times, and another
interleaving of the tasks), with one tool output changed near the end. Then times
:func:`sandbox.replay.judging.divergence.first_divergence` against a baseline measured in the same
run: a plain loop comparing the events' ``model_dump()`` dicts (volatile fields excluded)
position by position, on a replay with the *same* interleaving (the baseline cannot align
tasks, so on the reshuffled replay it would stop at a false divergence at once).

    .venv/bin/python -m bench.divergence [--sizes 10000,100000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Sequence
from functools import partial
from typing import Any

from bench.compare import compare, ratios, record
from sandbox.replay.judging.divergence import first_divergence
from sandbox.snapshot.events import ClockRead, Event, LLMCall, ToolCall

VOLATILE = {"seq", "parent", "wall", "mono", "fingerprint", "duration", "started"}
TASKS = ("main", "worker-1", "worker-2", "worker-3")


QUICK = ["--sizes", "1000,10000", "--repeat", "3"]


def _task_events(task: str, count: int, changed_at: int | None) -> list[Event]:
    out: list[Event] = []
    for i in range(count):
        order = f"{task}-{i}"
        if i % 3 == 0:
            out.append(
                LLMCall(
                    seq=0,
                    task=task,
                    wall=0.0,
                    mono=0.0,
                    name="chat",
                    model="gpt-bench",
                    messages=[
                        {"role": "system", "content": "You handle refunds."},
                        {"role": "user", "content": f"Refund order {order}"},
                    ],
                    params={"temperature": 0},
                    response={"content": f"calling refund for {order}"},
                )
            )
        elif i % 3 == 1:
            output: Any = {"ok": True, "order": order}
            if changed_at == i:
                output = {"ok": False, "order": order, "error": "already refunded"}
            out.append(
                ToolCall(
                    seq=0,
                    task=task,
                    wall=0.0,
                    mono=0.0,
                    name="refund",
                    args={"order_id": order, "amount": i % 100},
                    output=output,
                    duration=0.01 * (i % 7),
                )
            )
        else:
            out.append(ClockRead(seq=0, task=task, wall=0.0, mono=0.0, value=1_700_000_000.0 + i))
    return out


def make_trace(n: int, *, seed: int, changed_at: int | None, shift: float) -> list[Event]:
    """``n`` events over four tasks, interleaved by ``seed``; the main task's event at
    ``changed_at`` (a tool call near the end) gets another output."""
    per_task = n // len(TASKS)
    streams = {t: _task_events(t, per_task, changed_at if t == "main" else None) for t in TASKS}
    rng = random.Random(seed)
    cursors = dict.fromkeys(TASKS, 0)
    live = list(TASKS)
    merged: list[Event] = []
    while live:
        task = rng.choice(live)
        merged.append(streams[task][cursors[task]])
        cursors[task] += 1
        if cursors[task] == per_task:
            live.remove(task)
    return [
        e.model_copy(update={"seq": i, "wall": 1_700_000_000.0 + shift + i, "mono": shift + i})
        for i, e in enumerate(merged)
    ]


def baseline(original: Sequence[Event], replayed: Sequence[Event]) -> int | None:
    """Position-by-position comparison of ``model_dump()`` dicts without volatile fields."""
    for i, (a, b) in enumerate(zip(original, replayed, strict=False)):
        if a.model_dump(exclude=VOLATILE) != b.model_dump(exclude=VOLATILE):
            return i
    return None if len(original) == len(replayed) else min(len(original), len(replayed))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]

    ok = True
    for n in sizes:
        per_task = n // len(TASKS)
        changed_at = per_task - 2 - (per_task - 2) % 3 + 1  # a tool call near the end
        original = make_trace(n, seed=1, changed_at=None, shift=0.0)
        replayed = make_trace(n, seed=2, changed_at=changed_at, shift=5000.0)
        same_order = make_trace(n, seed=1, changed_at=changed_at, shift=5000.0)
        div = first_divergence(original, replayed)
        step = getattr(div, "step", None)
        ok = ok and step is not None and step == baseline(original, same_order)
        ours, base = compare(
            partial(first_divergence, original, replayed),
            partial(baseline, original, same_order),
            rounds=args.repeat,
        )
        record(
            f"divergence: first divergence of {len(original)} events, µs per event",
            [t / len(original) * 1e6 for t in ours],
            unit=" µs",
        )
        record(
            f"divergence: {len(original)} events, aligned search / position-by-position loop",
            ratios(ours, base),
        )
    if not ok:
        print("the divergence search and the baseline disagree on the divergent step")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
