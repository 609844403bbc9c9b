"""A store run of 1,000,000 events exported, then verified, imported, verified, shown (text and
JSON) and listed, each by the real ``sandbox`` command in a child process whose peak resident
set size (``VmHWM``) is read. Baseline, in the same script: the same commands on a run of a
tenth of the events. Goals: every command under 256 MiB, and memory that does not grow with
the run (each command's peak at the full size within 1.25x of its peak at a tenth).
``python -m bench.big_run`` (``--quick``: 100,000 events against 10,000).

``tests/unit/test_hostile_input.py`` runs the same commands on a smaller run in ``make test``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from bench.compare import record
from sandbox.snapshot import DirectoryStore, Manifest
from sandbox.snapshot.bundle import export_bundle
from sandbox.snapshot.events import StateTransition
from sandbox.snapshot.store import dump_event

QUICK = ["--quick"]
EVENTS = 1_000_000
CEILING_MIB = 256
_CHILD = """
import os, sys
from cli.main import main
code = main(sys.argv[1:])
with open("/proc/self/status") as status:
    peak = next(line.split()[1] for line in status if line.startswith("VmHWM:"))
with open(os.environ["PEAK_RSS_OUT"], "w") as f:
    f.write(peak)
sys.exit(code)
"""
"""The child's peak RSS is its ``VmHWM`` (KiB): unlike ``ru_maxrss``, it starts again at
``exec``, so the parent's size at ``fork`` does not count."""


def run_cli(args: list[str], folder: Path) -> tuple[int, str, str, int]:
    """Run ``sandbox ARGS`` in a child; return exit code, stdout, stderr, peak RSS (KiB)."""
    out = folder / "peak-rss"
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PEAK_RSS_OUT": str(out)},
        timeout=600,
        check=False,
    )
    return done.returncode, done.stdout, done.stderr, int(out.read_text())


def big_run(store: DirectoryStore, run_id: str, events: int) -> None:
    """Save a complete run of ``events`` state events as ``run_id`` in ``store``."""
    line = dump_event(StateTransition(seq=0, wall=1.0, mono=0.5, task="main", name="s", target="t"))
    head, _, tail = line.partition(b'"seq":0')
    body = b"".join(head + b'"seq":%d' % i + tail for i in range(events))
    created = datetime(2024, 3, 1, tzinfo=UTC)
    manifest = Manifest(run_id=run_id, name="big", created=created)
    store.save_raw(manifest.model_copy(update={"status": "complete"}), body)


def commands(run_id: str, bundle: Path, target: Path) -> dict[str, list[str]]:
    """The commands measured on a big run, by name: its bundle verified, imported into the
    store at ``target``, verified there, shown (text and JSON) and listed."""
    store = ["--store", str(target)]
    return {
        "verify bundle": ["verify", str(bundle)],
        "import": ["import", str(bundle), *store],
        "verify": ["verify", run_id, *store],
        "show": ["show", run_id, *store],
        "show --json": ["show", run_id, "--json", *store],
        "list": ["list", *store],
    }


def peak_mib(args: list[str], folder: Path) -> tuple[float, str]:
    """Run ``sandbox ARGS`` in a child; its peak RSS in MiB and its standard output."""
    code, out, err, peak = run_cli(args, folder)
    if code != 0:
        raise SystemExit(f"sandbox {' '.join(args[:2])} exited {code}: {err}")
    return peak / 1024, out


def peaks(events: int, folder: Path) -> dict[str, float]:
    """Each command's peak RSS (MiB) on a run of ``events`` events."""
    source = DirectoryStore(folder / "source")
    run = f"big-{events}"
    big_run(source, run, events)
    bundle = export_bundle(source, run, folder / "big.tar.gz")
    steps = commands(run, bundle, folder / "target")
    found = {}
    for name, args in steps.items():
        found[name], out = peak_mib(args, folder)
        if name == "show --json":
            assert out.count('"kind":"state"') == events, "every event shown"
    return found


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(prog="bench.big_run", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="100,000 events against 10,000")
    args = parser.parse_args(argv)
    events = EVENTS // 10 if args.quick else EVENTS
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "small").mkdir()
        (Path(tmp) / "full").mkdir()
        small = peaks(events // 10, Path(tmp) / "small")
        full = peaks(events, Path(tmp) / "full")
    for name in full:
        at = f"{full[name]:.0f} MiB at {events:,} events, {small[name]:.0f} MiB at a tenth"
        print(f"big run: {name}: {at}")
    record(
        f"big run: peak RSS of a command on {events:,} events",
        list(full.values()),
        goal=f"< {CEILING_MIB} MiB",
        holds=lambda mib: mib < CEILING_MIB,
        unit=" MiB",
    )
    growth = [full[name] / small[name] for name in full]
    record(
        f"big run: peak RSS at {events:,} events / at a tenth",
        growth,
        goal="<= 1.25x",
        holds=lambda r: r <= 1.25,
    )
    return {"peak": max(full.values()), "growth": max(growth)}


if __name__ == "__main__":
    main()
