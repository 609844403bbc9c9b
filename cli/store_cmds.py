"""Store commands: ``list``, ``show``, ``verify``, ``export`` and ``import``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from cli import jsonout
from cli.app import RUN_HELP, JsonOption, StoreOption, app, run_in, store_from
from sandbox.errors import UnsafePathError
from sandbox.replay.window import Labelled

if TYPE_CHECKING:
    from rich.console import Console

    from sandbox.snapshot.events import Event
    from sandbox.snapshot.store import Store
    from sandbox.snapshot.verify import VerifyReport

RunArgument = Annotated[str, typer.Argument(help=RUN_HELP)]


def _console() -> Console:
    from rich.console import Console

    return Console(soft_wrap=False, highlight=False)


WideOption = Annotated[
    bool, typer.Option("--wide", help="Every column, whole, whatever the terminal's width.")
]

FAILURE_MIN = 20
"""The narrowest the failure column is cut down to (with an ellipsis) before the time is
left out."""


@app.command("list")
def list_runs(
    store: StoreOption = None, as_json: JsonOption = False, wide: WideOption = False
) -> None:
    """List the runs in the store, oldest first: id, when, events, status and failure, one
    line per run fitted to the terminal (run ids are never cut, the failure is cut with an
    ellipsis: the whole of it is in --json and `show`); --wide adds the entrypoint and size,
    every cell whole.

    Example: sandbox list --store snapshots --json
    """
    from cli.tables import Col, render, terminal_width
    from sandbox.sizes import human_size
    from sandbox.snapshot.listing import summarize_runs

    summaries = summarize_runs(store_from(store))
    if as_json:
        typer.echo(json.dumps([s.to_dict() for s in summaries], indent=2))
        return
    if not summaries:
        typer.echo(f"no runs in {store_from(store).location}")
        return
    # Plain columns: a store of thousands of runs lists in milliseconds (a rich table takes
    # seconds to measure and wrap them).
    when = "%Y-%m-%d %H:%M:%S" if wide else "%Y-%m-%d %H:%M"
    rows = []
    for s in summaries:
        created = s.created.strftime(when) if s.created else "-"
        events = "-" if s.events is None else str(s.events)
        if wide:
            rows.append(
                [s.run_id, created, s.entrypoint, events, s.state, s.failure, human_size(s.size)]
            )
        else:
            rows.append([s.run_id, created, events, s.state, s.failure])
    if wide:
        cols = [
            Col("id", is_id=True),
            Col("when"),
            Col("entrypoint"),
            Col("events", right=True),
            Col("status"),
            Col("failure"),
            Col("size", right=True),
        ]
    else:
        # One line per run: the failure is cut, then the time left out, before an id folds.
        cols = [
            Col("id", is_id=True),
            Col("when", optional=True),
            Col("events", right=True),
            Col("status"),
            Col("failure", truncate=FAILURE_MIN),
        ]
    for line in render(cols, rows, None if wide else terminal_width()):
        typer.echo(line)


SHOWN = 200
"""Events ``show`` prints without ``--limit``."""


@app.command()
def show(
    run: RunArgument,
    store: StoreOption = None,
    as_json: JsonOption = False,
    kind: Annotated[
        list[str] | None,
        typer.Option("--kind", help="Only events of this kind (repeatable): llm, tool, http, ..."),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option(
            "--limit",
            min=0,
            help=f"At most this many events, 0 for all (default {SHOWN}; with --json, all).",
            show_default=False,
        ),
    ] = None,
    start: Annotated[
        int, typer.Option("--start", min=0, help="First event's sequence number.")
    ] = 0,
) -> None:
    """Show a run: its manifest in short, and the timeline of its events, streamed from the
    event log one page at a time.

    Example: sandbox show duplicate-order-1 --kind tool --limit 50 --start 200
    """
    from sandbox.snapshot.listing import entrypoint_text, event_summary, failure_text, run_state

    opened = store_from(store)
    run = run_in(opened, run)
    manifest = opened.load_manifest(run)
    kinds = tuple(kind or ())
    if as_json:
        events = opened.iter_events(run, kinds=kinds, start=start, limit=limit)
        typer.echo('{"manifest": ' + manifest.model_dump_json(indent=2) + ', "events": [')
        for i, event in enumerate(events):
            typer.echo(("," if i else "") + event.model_dump_json())
        typer.echo("]}")
        return
    console = _console()
    console.print(f"[bold]{manifest.run_id}[/bold] {manifest.name}".rstrip())
    console.print(f"  entrypoint  {entrypoint_text(manifest) or '-'}", markup=False)
    block = Labelled.of(manifest.labels).block
    if block is not None:
        console.print(f"  replays     its {block} alone", markup=False)
    if manifest.provenance is not None:
        console.print(
            f"  imported    from {manifest.provenance.imported_from} (untrusted: its code "
            "runs on this host only with --trust)",
            markup=False,
        )
    console.print(f"  created     {manifest.created.isoformat()}")
    console.print(f"  status      {run_state(manifest)}")
    if manifest.code.commit:
        dirty = " (dirty)" if manifest.code.dirty else ""
        console.print(f"  code        {manifest.code.commit}{dirty}")
    if manifest.models:
        console.print(
            "  models      " + ", ".join(f"{m.provider}/{m.model}" for m in manifest.models)
        )
    if manifest.services:
        console.print(
            "  services    " + ", ".join(f"{s.name} ({s.kind})" for s in manifest.services)
        )
        from sandbox.services.base import capture_note
        from sandbox.services.registry import kinds as service_kinds

        for service in manifest.services:
            said = capture_note(service_kinds().get(service.kind), service.meta)
            if said is not None:
                console.print(f"  state       {service.name}: {said}", markup=False)
    for touched in manifest.touched:
        state = f"captured as {touched.service}" if touched.service else "not captured"
        console.print(
            f"  touched     {touched.kind} {touched.endpoint} via "
            f"{', '.join(touched.clients)}: {state}",
            markup=False,
        )
    if manifest.labels.get("imported_from"):
        console.print(
            f"  state       none: imported from {manifest.labels['imported_from']} (no service "
            "state, seeds or environment); replay serves the calls the trace recorded",
            markup=False,
        )
    console.print(f"  failure     {failure_text(manifest) or '-'}")
    from sandbox.explain import load_explanation

    explained = load_explanation(opened, run)
    if explained is not None:
        for i, line in enumerate(explained.summary_lines()):
            console.print(f"  {'explained' if i == 0 else '':<10}  {line}", markup=False)
    if manifest.event_count is not None:
        console.print(f"  events      {manifest.event_count}")
    page = SHOWN if limit is None else limit
    typer.echo(f"{'seq':>6}  {'+time':>10}  {'task':<10}  {'kind':<9}  {'name':<24}  summary")
    shown = opened.iter_events(run, kinds=kinds, start=start, limit=page + 1 if page else None)
    for i, event in enumerate(shown):
        if page and i == page:
            typer.echo(f"... more: sandbox show {run} --start {event.seq}")
            break
        typer.echo(
            f"{event.seq:>6}  {f'+{event.mono:.3f}s':>10}  {event.task:<10.10}  {event.kind:<9}  "
            f"{event.name:<24.24}  {_served(event)}{event_summary(event)}"
        )


def _served(event: Event) -> str:
    """``[live] `` in a fork's timeline: how the crossing was served."""
    return f"[{event.served}] " if event.served else ""


def _is_run(store: Store, target: str) -> bool:
    from sandbox.snapshot.store import check_run_id

    try:
        check_run_id(target)
    except UnsafePathError:
        return False
    return store.exists(target)


@app.command()
def verify(
    target: Annotated[str, typer.Argument(help="A run id in the store, or a bundle file.")],
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Check a run or a bundle: manifest, every event line, hashes, blobs.

    Exit code 0 when everything checks, 1 when problems were found (each names its file)
    or the run is incomplete (its capture did not finish, or still runs).

    Example: sandbox verify bug-123.tar.gz
    """
    from sandbox.snapshot.verify import verify_bundle, verify_run

    where = store_from(store)
    report: VerifyReport
    if _is_run(where, target) or not Path(target).is_file():
        report = verify_run(where, run_in(where, target))  # an unknown run raises (exit 2)
    else:
        report = verify_bundle(target)
    if as_json:
        typer.echo(json.dumps(report.to_dict(), indent=2))
    else:
        for problem in report.problems:
            typer.echo(f"problem: {problem}")
        for warning in report.warnings:
            typer.echo(f"warning: {warning}")
        verdict = "ok" if report.ok else f"{len(report.problems)} problem(s)"
        if report.ok and not report.complete:
            verdict = (
                "running: the capture is still writing it"
                if report.state == "running"
                else "incomplete: its capture did not finish"
            )
        typer.echo(f"{report.target}: {verdict} ({report.events} events, {report.blobs} blobs)")
    if not report.complete:
        raise typer.Exit(1)


@app.command("export")
def export_cmd(
    run: RunArgument,
    output: Annotated[Path, typer.Option("-o", "--output", help="Bundle file to write (.tar.gz).")],
    store: StoreOption = None,
    allow: Annotated[
        list[str] | None,
        typer.Option(
            "--allow",
            help="Accept findings of the scan: a glob over '<kind> in <where>' (repeatable).",
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Scan a run for likely secrets and personal data (events, manifest, every blob, the
    rows, keys and files inside service dumps), then write it and the blobs it references
    into one file to share. A finding stops the export and is named with where it is.

    Example: sandbox export duplicate-order-1 -o bug-123.tar.gz --allow 'e-mail address in *'
    """
    from sandbox.services.sharescan import export_shareable
    from sandbox.sizes import human_size

    jsonout.requested(as_json)
    opened = store_from(store)
    run = run_in(opened, run)
    path = export_shareable(opened, run, output, allow=allow or ())
    size = path.stat().st_size
    if as_json:
        jsonout.emit({"ok": True, "run_id": run, "path": str(path), "bytes": size})
        return
    typer.echo(f"exported {run} to {path} ({human_size(size)})")


@app.command("import")
def import_cmd(
    bundle: Annotated[Path, typer.Argument(help="Bundle file made by `sandbox export`.")],
    store: StoreOption = None,
    force: Annotated[
        bool, typer.Option("--force", help="Replace a different run with the same id.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Check a bundle and add its run to the store; nothing is written unless all checks.

    Example: sandbox import bug-123.tar.gz --store snapshots
    """
    from sandbox.snapshot.bundle import import_bundle

    jsonout.requested(as_json)
    where = store_from(store)
    run_id = import_bundle(where, bundle, force=force)
    if as_json:
        jsonout.emit({"ok": True, "run_id": run_id, "store": where.location})
        return
    typer.echo(f"imported {run_id} into {where.location}")
