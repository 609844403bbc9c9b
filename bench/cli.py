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
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from bench.events import make_events
from sandbox.snapshot import DirectoryStore, Manifest

SANDBOX = [sys.executable, "-m", "cli.main"]


def _wall(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def _runs(cmds: dict[str, list[str]], repeat: int) -> dict[str, list[float]]:
    for cmd in cmds.values():
        _wall(cmd)  # warm-up
    out: dict[str, list[float]] = {name: [] for name in cmds}
    order = list(cmds)
    for i in range(repeat):
        for name in order if i % 2 == 0 else reversed(order):
            out[name].append(_wall(cmds[name]))
    return out


def _line(what: str, times: list[float], goal: str) -> str:
    return (
        f"  {what:<40} median {statistics.median(times):6.3f} s"
        f"  spread {min(times):.3f}-{max(times):.3f} s  ({goal})"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="sandbox --help and show at scale")
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)

    help_runs = _runs(
        {"help": [*SANDBOX, "--help"], "typer": [sys.executable, "-c", "import typer"]},
        args.repeat,
    )
    print("sandbox --help")
    print(_line("sandbox --help", help_runs["help"], "goal <= 0.25 s"))
    print(_line("python -c 'import typer' (floor)", help_runs["typer"], "baseline"))
    ratio = [h / t for h, t in zip(help_runs["help"], help_runs["typer"], strict=True)]
    print(f"  ratio --help / typer floor: median {statistics.median(ratio):.2f}x")

    with tempfile.TemporaryDirectory() as tmp:
        store = DirectoryStore(Path(tmp) / "store")
        with store.begin(Manifest(run_id="big", created=datetime.now(UTC))) as writer:
            for event in make_events(args.events):
                writer.append(event)
        base = [*SANDBOX, "show", "big", "--store", str(store.root)]
        half = str(args.events // 2)
        show_runs = _runs(
            {"page": base, "kind": [*base, "--kind", "tool", "--limit", "50", "--start", half]},
            args.repeat,
        )
    print(f"sandbox show of a {args.events}-event run")
    print(_line("show (first page)", show_runs["page"], "goal <= 2 s"))
    print(_line("show --kind tool --limit 50 --start N/2", show_runs["kind"], "goal <= 2 s"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
