"""``make demo``: build the images, capture every demo agent, replay each N times.

::

    python -m examples.demo --store demo-store --times 5

1. builds the images that are missing (``sandbox.containers.build_images``, no registry);
2. captures each demo agent of :mod:`examples.capture_demo` into the store, unless the store
   already holds a finished, failed capture of it (a run whose manifest name is the demo's);
3. replays each captured run N times with :func:`sandbox.replay.engine.replay`, writes an HTML
   report per run, and prints a table that fits the terminal (80 columns too): run, reproduced
   k/N and the outcome, failure, first divergent step (ids kept whole, the rest wrapping).

Exits with the verdict's codes over the demos (as ``sandbox ci-repro``): 1 when every demo's
failure reproduced (in at least one of the N replays), 0 when one is gone (every run judged),
2 when one could not be judged or something could not run, 3 on an internal error (a bug:
one line naming the file that holds the traceback).

The demos are the public ``capture_<name>(store) -> run id`` functions of
:mod:`examples.capture_demo` (``capture_orders`` is the ``orders`` demo; ``capture_all`` is
not one), in the order they are defined: orders, inventory, billing, support.
"""

from __future__ import annotations

import argparse
import inspect
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from rich.console import Console
from rich.text import Text

from cli.crash import INTERNAL_ERROR, crash_line
from sandbox.errors import SandboxError
from sandbox.regress.check import CheckReport, RunCheck
from sandbox.replay.judging.verdict import Verdict
from sandbox.snapshot.manifest import Manifest
from sandbox.snapshot.store import Store, open_store

Capturer = Callable[[Store], object]


def demo_captures(module: ModuleType) -> dict[str, Capturer]:
    """``name -> capture function`` for every public ``capture_<name>`` function of
    ``module`` defined there, in definition order (``capture_all``, which calls the others,
    is not a demo)."""
    found: dict[str, Capturer] = {}
    for attr, value in vars(module).items():
        if (
            attr.startswith("capture_")
            and attr != "capture_all"
            and inspect.isfunction(value)
            and value.__module__ == module.__name__
        ):
            found[attr.removeprefix("capture_")] = value
    return found


def captured(store: Store, name: str) -> Manifest | None:
    """The newest finished, failed, original capture of ``name`` in the store."""
    found = [
        m
        for m in store.list()
        if m.name == name
        and m.status == "complete"
        and m.replay_of is None
        and m.failure is not None
        and m.failure.observed
    ]
    return max(found, key=lambda m: m.created) if found else None


def capture(store: Store, name: str, capturer: Capturer, console: Console) -> Manifest:
    existing = captured(store, name)
    if existing is not None:
        console.print(f"[dim]{name}: already captured as {existing.run_id}[/dim]")
        return existing
    console.print(f"{name}: capturing ...")
    result = capturer(store)
    if isinstance(result, str) and store.exists(result):
        manifest = store.load_manifest(result)
    else:
        found = captured(store, name)
        if found is None:
            raise SandboxError(f"capturing demo {name!r} left no failed run in {store.location}")
        manifest = found
    console.print(f"{name}: captured {manifest.run_id}")
    return manifest


@dataclass(frozen=True)
class DemoRow:
    run_id: str
    failure: str
    verdict: Verdict
    first_step: str


def demo_table(rows: Sequence[DemoRow], width: int | None) -> list[str]:
    """The demo's table (run, reproduced k/N and the outcome, failure, the first divergent step)
    at most ``width`` columns wide: run ids kept whole, the failure and the step wrapping
    (:mod:`cli.tables`); ``None``: every cell on one line."""
    from cli.tables import Col, render

    cols = [
        Col("run", is_id=True),
        Col("reproduced", right=True),
        Col("failure", wrap=11),
        Col("diverged at", wrap=14),
    ]
    cells = [
        [
            row.run_id,
            f"{row.verdict.reproduced}/{row.verdict.total} {OUTCOME[row.verdict.outcome]}",
            row.failure,
            row.first_step,
        ]
        for row in rows
    ]
    return list(render(cols, cells, width))


def first_step(report: Any) -> str:
    div = next((d for d in report.divergences if d is not None), None)
    return div.describe().splitlines()[0] if div is not None else "(none)"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m examples.demo", description=__doc__)
    parser.add_argument(
        "--store",
        default="demo-store",
        help="snapshot store for the demo's captures (./demo-store)",
    )
    parser.add_argument("--times", type=int, default=5, help="replays per run (5)")
    parser.add_argument(
        "--reports", default="demo-reports", help="folder for the HTML reports (demo-reports)"
    )
    parser.add_argument("--skip-images", action="store_true", help="do not build images")
    parser.add_argument("demos", nargs="*", help="only these demos (default: all)")
    args = parser.parse_args(argv)
    console = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
    try:
        return run(args, console)
    except SandboxError as exc:
        console.print(f"[red]demo: error: {exc}[/red]")
        return 2
    except Exception as exc:  # a bug: never an exit code that means a verdict
        print(crash_line(exc, "demo"), file=sys.stderr)
        return INTERNAL_ERROR


def run(args: argparse.Namespace, console: Console) -> int:
    from examples import capture_demo
    from sandbox.containers import build_images
    from sandbox.replay.engine import replay
    from sandbox.report import write_store_report

    store = open_store(args.store)
    captures = demo_captures(capture_demo)
    names = list(captures)
    if args.demos:
        unknown = sorted(set(args.demos) - set(names))
        if unknown:
            raise SandboxError(f"unknown demo(s) {', '.join(unknown)}; known: {', '.join(names)}")
        names = [n for n in names if n in args.demos]

    if not args.skip_images:
        console.rule("images")
        with console.status("images") as status:
            build_images(
                progress=lambda line: status.update(Text(line[:76])),
                on_result=lambda result: console.print(result.describe(), markup=False),
            )

    console.rule("capture")
    manifests = [capture(store, name, captures[name], console) for name in names]

    console.rule(f"replay x{args.times}")
    rows: list[DemoRow] = []
    checks: list[RunCheck] = []
    reports = Path(args.reports)
    for manifest in manifests:
        start = time.monotonic()

        def progress(message: str, done: int, total: int, rid: str = manifest.run_id) -> None:
            console.print(f"[dim]{rid}: {message} ({done}/{total})[/dim]")

        report = replay(manifest.run_id, store=store, times=args.times, progress=progress)
        write_store_report(reports / f"{manifest.run_id}.html", store, report)
        verdict = report.verdict
        reason = manifest.failure.reason if manifest.failure else ""
        checks.append(RunCheck.of(manifest, verdict))
        rows.append(DemoRow(manifest.run_id, reason, verdict, first_step(report)))
        console.print(f"{manifest.run_id}: {verdict.summary()} in {time.monotonic() - start:.1f} s")
    console.print(
        f"sandbox-replayer demo: each captured failure replayed {args.times} times", style="bold"
    )
    for line in demo_table(rows, console.width if sys.stdout.isatty() else None):
        console.print(line, markup=False, highlight=False)
    console.print(f"HTML reports: {reports}/<run>.html", markup=False)
    result = CheckReport(tuple(checks))
    console.print(SAYS[result.exit_code])
    return result.exit_code


OUTCOME = {"reproduced": "reproduced", "gone": "gone", "inconclusive": "inconclusive"}
SAYS = {
    1: "[green]every captured failure reproduced[/green]",
    0: "[red]some captured failures are gone[/red]",
    2: "[red]some captured failures could not be judged[/red]",
}


if __name__ == "__main__":
    raise SystemExit(main())
