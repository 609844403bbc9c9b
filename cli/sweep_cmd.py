"""``sandbox sweep``: replays spread over a Ray cluster, one task per (run, replay)."""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from cli.app import JsonOption, StoreOption, app, store_from

COLOURS = {"reproduced": "red", "gone": "yellow", "inconclusive": "yellow"}


@app.command()
def sweep(
    runs: Annotated[
        list[str] | None,
        typer.Argument(help="Runs to replay (default: every captured failure in the store)."),
    ] = None,
    times: Annotated[int, typer.Option("--times", min=1, help="Replays per run.")] = 5,
    ray_address: Annotated[
        str | None,
        typer.Option(
            "--ray",
            help="Address of a Ray cluster (host:port or ray://...); default: a local Ray "
            "instance. Tasks ask for the custom resource 'docker': give it to the nodes "
            "that have a Docker engine.",
            show_default=False,
        ),
    ] = None,
    store: StoreOption = None,
    entrypoint: Annotated[
        str | None,
        typer.Option(
            "--entrypoint", help="Replay this module:function instead (a fix).", show_default=False
        ),
    ] = None,
    project: Annotated[
        Path,
        typer.Option("--project", help="Folder the agents' code imports from on every node."),
    ] = Path("."),
    trust: Annotated[
        bool, typer.Option("--trust", help="Run imported runs' commands or outside code.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Replay runs N times each as Ray tasks (on nodes with a Docker engine), the store
    pulled and written back through its location (s3:// for a cluster); print the verdict
    table: reproduced k/N per run, gone, or could not judge. Exit 1 when every run still
    reproduces, 0 when one is gone, 2 when one could not be judged.

    Example: sandbox sweep --times 20 --ray head.internal:6379 --store s3://team-bugs/sandbox
    """

    from rich.console import Console
    from rich.table import Column, Table

    from sandbox.regress.check import CheckReport, RunCheck, select_runs
    from sandbox.sweep import SweepProgress
    from sandbox.sweep import sweep as run_sweep

    opened = store_from(store)
    location = opened.location  # absolute, or the object store's URL: what the workers open
    manifests = [opened.load_manifest(r) for r in runs] if runs else select_runs(opened)
    err = Console(stderr=True, highlight=False)
    if not manifests:  # as ci-repro says it, before any Ray cluster is started
        code = CheckReport(()).exit_code
        if as_json:
            typer.echo(json.dumps({"exit_code": code, "runs": []}, indent=2))
        typer.echo("sandbox: no captured failures in the store", err=True)
        raise typer.Exit(code)

    def progress(step: SweepProgress) -> None:  # on stderr, with --json too
        err.print(f"[dim]{step.run_id}: {step.outcome} ({step.done}/{step.total})[/dim]")

    # Ray writes its own notices (a node that died, ...) to stdout: keep stdout for the
    # table or the JSON.
    with contextlib.redirect_stdout(sys.stderr):
        results = run_sweep(
            manifests,
            store=location,
            times=times,
            address=ray_address,
            project=project,
            entrypoint=entrypoint,
            trust=trust,
            progress=progress,
        )
    checks = [RunCheck.of(r.manifest, r.verdict) for r in results]
    report = CheckReport(tuple(checks))
    if as_json:
        out = [{"run": r.manifest.run_id, **r.verdict.to_json()} for r in results]
        typer.echo(json.dumps({"exit_code": report.exit_code, "runs": out}, indent=2))
        raise typer.Exit(report.exit_code)
    table = Table(
        Column("run", no_wrap=True),
        "failure",
        Column("reproduced", justify="right", no_wrap=True),
        "verdict",
        title=f"sweep: each run replayed {times} times on Ray",
    )
    for result, check in zip(results, checks, strict=True):
        verdict = result.verdict
        colour = COLOURS[verdict.outcome]
        table.add_row(
            check.run_id,
            check.reason,
            f"[{colour}]{verdict.reproduced}/{verdict.total}[/{colour}]"
            + ("" if verdict.outcome != "inconclusive" else " (could not judge)"),
            verdict.summary(),
        )
    Console(highlight=False).print(table)
    raise typer.Exit(report.exit_code)
