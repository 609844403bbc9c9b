"""``sandbox sweep``: replays spread over a Ray cluster, one task per (run, replay)."""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from cli.app import JsonOption, StoreOption, app, run_in, store_from
from cli.progress import progress_bar
from cli.tables import Col, render, terminal_width


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

    from sandbox.regress.check import CheckReport, RunCheck, select_runs
    from sandbox.sweep import SweepProgress
    from sandbox.sweep import sweep as run_sweep

    opened = store_from(store)
    location = opened.location  # absolute, or the object store's URL: what the workers open
    manifests = (
        [opened.load_manifest(run_in(opened, r)) for r in runs] if runs else select_runs(opened)
    )
    if not manifests:  # as ci-repro says it, before any Ray cluster is started
        code = CheckReport(()).exit_code
        if as_json:
            typer.echo(json.dumps({"exit_code": code, "runs": []}, indent=2))
        typer.echo("sandbox: no captured failures in the store", err=True)
        raise typer.Exit(code)

    # Progress on stderr: a bar in a terminal, else (and with --json) a line a replay. Ray
    # writes its own notices (a node that died, ...) to stdout: keep stdout for the table or
    # the JSON.
    bar = sys.stderr.isatty() and not as_json
    total = len(manifests) * times
    with (
        progress_bar("sweep", total, disable=not bar) as update,
        contextlib.redirect_stdout(sys.stderr),
    ):

        def progress(step: SweepProgress) -> None:
            line = f"{step.run_id}: {step.outcome} ({step.done}/{step.total})"
            if bar:
                update(line, step.done, step.total)
            else:
                typer.echo(line, err=True)

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
    cols = [
        Col("run", is_id=True),
        Col("reproduced", right=True),
        Col("verdict", wrap=24),
        Col("failure", wrap=12),
    ]
    rows = [
        [
            check.run_id,
            f"{result.verdict.reproduced}/{result.verdict.total}",
            result.verdict.summary(),
            check.reason,
        ]
        for result, check in zip(results, checks, strict=True)
    ]
    typer.echo(f"sweep: each run replayed {times} times on Ray")
    for line in render(cols, rows, terminal_width() if sys.stdout.isatty() else None):
        typer.echo(line)
    raise typer.Exit(report.exit_code)
