"""The command line's own cost: ``python -m bench.cli [--events 100000] [--repeat 5]``.

1. ``sandbox --help``: wall time of the whole process, against a bare interpreter that only
   imports typer (the floor any typer CLI pays). Goal: <= 0.25 s.
2. ``sandbox show RUN`` of a run with ``--events`` events (eight kinds, from
   :func:`bench.events.make_events`): the default page, and ``--kind tool --limit 50
   --start`` half-way. Goal: <= 2 s each.

Each command runs as a real process; one warm-up, then medians and spreads (min-max) over
``--repeat`` runs, the measured command and its baseline alternating.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from bench.compare import compare, ratios, record
from bench.events import make_events
from sandbox.snapshot import DirectoryStore, Manifest

QUICK = ["--events", "10000", "--repeat", "3"]
SANDBOX = [sys.executable, "-m", "cli.main"]


def _wall(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def _pair(cmd: list[str], floor: list[str], repeat: int) -> tuple[list[float], list[float]]:
    return compare(lambda: _wall(cmd), lambda: _wall(floor), rounds=repeat)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="sandbox --help and show at scale")
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)

    floor = [sys.executable, "-c", "import typer"]
    helps, typer_floor = _pair([*SANDBOX, "--help"], floor, args.repeat)
    record("cli: sandbox --help", helps, goal="<= 0.25 s", holds=lambda t: t <= 0.25, unit=" s")
    record("cli: sandbox --help / python -c 'import typer'", ratios(helps, typer_floor))

    with tempfile.TemporaryDirectory() as tmp:
        store = DirectoryStore(Path(tmp) / "store")
        with store.begin(Manifest(run_id="big", created=datetime.now(UTC))) as writer:
            for event in make_events(args.events):
                writer.append(event)
        base = [*SANDBOX, "show", "big", "--store", str(store.root)]
        half = str(args.events // 2)
        page, kind = _pair(
            base, [*base, "--kind", "tool", "--limit", "50", "--start", half], args.repeat
        )
    for what, times in (("first page", page), ("--kind tool --limit 50 --start N/2", kind)):
        record(
            f"cli: sandbox show of {args.events} events, {what}",
            times,
            goal="<= 2 s",
            holds=lambda t: t <= 2,
            unit=" s",
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
