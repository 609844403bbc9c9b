"""Benchmark: replaying a 1,000-step recorded run in-process with recorded policies.

An agent loop of N steps (each: a tool call, a clock read through the seam and a uuid draw)
is captured once into a temporary store (no containers). Then it is replayed with every
boundary served from the recording (``--recorded tool``): matcher, adapters, event writing,
frozen clock. Baselines measured in the same run: the same loop with no capture or replay
(plain function calls), and the capture itself.

    .venv/bin/python -m bench.replay [--steps 1000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import tempfile
import uuid

from bench.compare import compare, ratios, record
from sandbox import capture
from sandbox.replay import PolicySet, ReplayPlan, replay
from sandbox.snapshot.manifest import Entrypoint, ResultPredicate
from sandbox.snapshot.store import DirectoryStore

STEPS = 1000


QUICK = ["--steps", "300", "--repeat", "3"]


@capture.tool
def lookup(step: int, note: str) -> dict[str, int | str]:
    return {"step": step, "value": (step * 7919) % 1000, "note": note}


def agent() -> dict[str, int]:
    """The benchmarked loop: its result is the sum of the looked-up values."""
    total = 0
    for step in range(STEPS):
        out = lookup(step, f"step {step}")
        capture.now()
        uuid.uuid4()
        total += int(out["value"])
    return {"total": total}


def main(argv: list[str] | None = None) -> int:
    global STEPS
    parser = argparse.ArgumentParser(prog="bench.replay")
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    STEPS = args.steps
    import bench.replay as this  # the module replay imports by its entrypoint

    this.STEPS = args.steps
    with tempfile.TemporaryDirectory() as folder:
        store = DirectoryStore(folder)

        def capture_once() -> str:
            with capture.run(
                "bench",
                store=store,
                seed=1,
                entrypoint=Entrypoint(kind="callable", target="bench.replay:agent"),
                packages=False,
            ) as rec:
                rec.set_result(this.agent())
                rec.mark_failed("bench", ResultPredicate(path="total", op="gt", value=0))
            return rec.run_id

        run_id = capture_once()
        events = len(store.load_events(run_id))
        plan = ReplayPlan(policies=PolicySet().with_rule("recorded", "tool"))

        def replay_once() -> None:
            report = replay(run_id, plan, store=store)
            assert report.verdict.reproduced == 1, report.describe()
            assert report.divergences[0] is None, report.describe()

        replays, captures = compare(replay_once, capture_once, rounds=args.repeat)
        print(f"steps={args.steps} events={events}")
        record(
            f"replay: {args.steps}-step run replayed with recorded tools / its capture",
            ratios(replays, captures),
        )
        record(
            f"replay: {args.steps}-step run, µs per event replayed",
            [t / events * 1e6 for t in replays],
            unit=" µs",
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
