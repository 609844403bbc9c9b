"""``sandbox ci-repro``: every captured failure in the store must still reproduce."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from cli.app import JsonOption, StoreOption, app, store_from

if TYPE_CHECKING:
    from sandbox.replay.incontainer import ContainerReplayReport
    from sandbox.snapshot.manifest import Manifest


@app.command("ci-repro")
def ci_repro(
    store: StoreOption = None,
    times: Annotated[int, typer.Option("--times", min=1, help="Replays per run.")] = 1,
    run: Annotated[
        list[str] | None, typer.Option("--run", help="Only this run (repeatable).")
    ] = None,
    as_json: JsonOption = False,
    in_container: Annotated[
        bool,
        typer.Option(
            "--in-container/--in-process",
            help="Run each agent in the runner container on the sandbox's private network "
            "(building the runner image if it is missing or stale), or in this process.",
        ),
    ] = False,
    trust: Annotated[
        bool,
        typer.Option(
            "--trust",
            help="In process: run imported runs' commands or outside code on this host (they "
            "are refused otherwise; in the runner container they always run).",
        ),
    ] = False,
    project: Annotated[
        Path | None,
        typer.Option(
            "--project",
            help="With --in-container: the folder mounted read-only as the runner's working "
            "directory, where the agents' code imports from (default: this one).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Replay every captured failure in the store; exit 1 if one no longer reproduces.

    A run captured as failed must still show its failure on replay; one that does not (or
    cannot be replayed) is a lost reproduction. Example: sandbox ci-repro --times 3
    """
    from rich.console import Console
    from rich.table import Column, Table

    from sandbox.regress import check_store

    opened = store_from(store)
    err = Console(stderr=True, highlight=False)

    def progress(manifest: Manifest) -> None:
        if not as_json:
            where = " in the runner container" if in_container else ""
            err.print(f"replaying {manifest.run_id} x{times}{where} ...")

    replayer = None
    options: dict[str, Any] = {"trust": trust}
    if in_container:
        options = {}
        from sandbox.replay.incontainer import ensure_runner_image, replay_in_container

        def step(line: str) -> None:
            if not as_json:
                err.print(f"  {line}", markup=False)

        ensure_runner_image(step)

        def replayer(run_id: str, **options: Any) -> ContainerReplayReport:
            return replay_in_container(run_id, project=project, progress=step, **options)

    result = check_store(
        opened, times=times, runs=run, on_run=progress, replayer=replayer, **options
    )
    if as_json:
        typer.echo(json.dumps(result.to_json(), indent=2))
        raise typer.Exit(result.exit_code)
    table = Table(
        Column("run", no_wrap=True),
        "failure",
        Column("reproduced", justify="right", no_wrap=True),
        "status",
    )
    for check in result.checks:
        status = (
            "[green]ok[/green]"
            if check.ok
            else f"[red]error: {check.error}[/red]"
            if check.error
            else "[red]LOST[/red]"
        )
        table.add_row(check.run_id, check.reason, f"{check.reproduced}/{check.total}", status)
    Console(highlight=False).print(table)
    lost = len(result.lost)
    if not result.checks:
        typer.echo("sandbox: no captured failures in the store", err=True)
    elif lost:
        typer.echo(f"sandbox: {lost} expected reproduction(s) lost", err=True)
    else:
        typer.echo(f"sandbox: all {len(result.checks)} failure(s) still reproduce", err=True)
    raise typer.Exit(result.exit_code)
