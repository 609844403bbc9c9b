"""``sandbox ci-repro``: every captured failure in the store must still reproduce (exit 1,
the verdict's "reproduced"; 0 when one is gone; 2 when one could not be judged)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from cli.app import JsonOption, StoreOption, TimeoutOption, app, store_from

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
    shard: Annotated[
        str | None,
        typer.Option(
            "--shard",
            help="Only shard I of N (1-based, like 2/4): the runs whose id hashes there, so a "
            "CI matrix of N jobs splits the store; a run's shard never changes as runs are added.",
            show_default=False,
        ),
    ] = None,
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", help="Print the ids of the runs it would replay, one a line."),
    ] = False,
    timeout: TimeoutOption = None,
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
    """Replay every captured failure in the store; exit 1 if every one still reproduces.

    A run captured as failed must still show its failure on replay; one that is gone (exit 0)
    or could not be judged (exit 2) is a lost reproduction. Example: sandbox ci-repro --times 3
    """
    from rich.console import Console
    from rich.table import Column, Table

    from sandbox.errors import RegressionError
    from sandbox.regress import check_store
    from sandbox.regress.shard import Shard

    try:
        part = None if shard is None else Shard.parse(shard)
    except RegressionError as exc:
        raise typer.BadParameter(str(exc), param_hint="--shard") from None
    opened = store_from(store)
    if dry_run:
        from sandbox.regress.check import select_runs

        for manifest in select_runs(opened, run, part):
            typer.echo(manifest.run_id)
        return
    err = Console(stderr=True, highlight=False)

    def progress(manifest: Manifest) -> None:
        if not as_json:
            where = " in the runner container" if in_container else ""
            err.print(f"replaying {manifest.run_id} x{times}{where} ...")

    replayer = None
    options: dict[str, Any] = {"trust": trust, "timeout": timeout}
    if in_container:
        options = {}
        limit = ["--timeout", repr(timeout)] if timeout is not None else []
        from sandbox.replay.incontainer import ensure_runner_image, replay_in_container

        def step(line: str) -> None:
            if not as_json:
                err.print(f"  {line}", markup=False)

        ensure_runner_image(step)

        def replayer(run_id: str, **options: Any) -> ContainerReplayReport:
            return replay_in_container(
                run_id, project=project, progress=step, extra_args=limit, **options
            )

    result = check_store(
        opened, times=times, runs=run, on_run=progress, replayer=replayer, shard=part, **options
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
        table.add_row(
            check.run_id,
            check.reason,
            f"{check.reproduced}/{check.total}",
            _status(check.outcome, check.error),
        )
    Console(highlight=False).print(table)
    counts = {o: sum(1 for c in result.checks if c.outcome == o) for o in STATUS}
    if not result.checks:
        where = "the store" if part is None else f"shard {part} of the store"
        typer.echo(f"sandbox: no captured failures in {where}", err=True)
    elif counts["reproduced"] == len(result.checks):
        typer.echo(f"sandbox: all {len(result.checks)} failure(s) still reproduce", err=True)
    else:
        typer.echo(
            f"sandbox: {len(result.lost)} expected reproduction(s) lost: "
            f"{counts['gone']} gone, {counts['inconclusive']} could not be judged",
            err=True,
        )
    raise typer.Exit(result.exit_code)


STATUS = {
    "reproduced": "[green]ok[/green]",
    "gone": "[red]LOST: gone[/red]",
    "inconclusive": "[yellow]LOST: could not judge[/yellow]",
}


def _status(outcome: str, error: str | None) -> str:
    from rich.markup import escape

    return STATUS[outcome] + (f" [yellow]{escape(error)}[/yellow]" if error else "")
