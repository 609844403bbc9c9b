"""``sandbox ci-repro``: every captured failure in the store must still reproduce, and every
one marked fixed must be gone (exit 1: all as expected; 0 when one is not; 2 when one could
not be judged)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from cli.app import JsonOption, StoreOption, TimeoutOption, app, run_in, store_from

if TYPE_CHECKING:
    from sandbox.regress.check import RunCheck
    from sandbox.replay.isolation.incontainer import ContainerReplayReport
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
    report_dir: Annotated[
        Path | None,
        typer.Option(
            "--report-dir",
            help="Write one HTML page per replayed run into this folder (RUN.html): the "
            "original against its replay, headed by the verdict.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Replay every captured failure in the store; exit 1 if every one is as expected.

    A run captured as failed must still show its failure on replay, and one marked fixed
    (sandbox mark RUN --fixed) must be gone; otherwise (exit 0) or when one could not be
    judged (exit 2) the check is lost. Example: sandbox ci-repro --times 3
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
    run = [run_in(opened, r) for r in run] if run else run
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
        from sandbox.replay.isolation.incontainer import ensure_runner_image, replay_in_container

        def step(line: str) -> None:
            if not as_json:
                err.print(f"  {line}", markup=False)

        ensure_runner_image(step)

        def replayer(run_id: str, **options: Any) -> ContainerReplayReport:
            return replay_in_container(
                run_id, project=project, progress=step, extra_args=limit, **options
            )

    if report_dir is not None:
        replayer = _reporting(replayer, report_dir, lambda line: err.print(line, markup=False))
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
            _status(check),
        )
    Console(highlight=False).print(table)
    lost = result.lost
    fixed = sum(1 for c in result.checks if c.expected == "gone")
    if not result.checks:
        where = "the store" if part is None else f"shard {part} of the store"
        typer.echo(f"sandbox: no captured failures in {where}", err=True)
    elif not lost and not fixed:
        typer.echo(f"sandbox: all {len(result.checks)} failure(s) still reproduce", err=True)
    elif not lost:
        typer.echo(
            f"sandbox: all {len(result.checks)} failure(s) as expected: "
            f"{len(result.checks) - fixed} still reproduce, {fixed} marked fixed stay gone",
            err=True,
        )
    else:
        back = sum(1 for c in lost if c.expected == "gone" and c.outcome == "reproduced")
        gone = sum(1 for c in lost if c.expected == "reproduced" and c.outcome == "gone")
        unjudged = sum(1 for c in lost if c.outcome == "inconclusive")
        what = "check(s)" if fixed else "expected reproduction(s)"
        came_back = f" {back} marked fixed but back," if fixed else ""
        typer.echo(
            f"sandbox: {len(lost)} {what} lost: {gone} gone,{came_back} "
            f"{unjudged} could not be judged",
            err=True,
        )
    raise typer.Exit(result.exit_code)


def _reporting(
    replayer: Callable[..., Any] | None, folder: Path, say: Callable[[str], None]
) -> Callable[..., Any]:
    """``replayer`` (default: the engine's replay) writing each replay's page into
    ``folder``: the replay report's page in process, the diff of the original and its first
    replay for a replay in the runner container."""
    from sandbox.replay.engine import replay as engine_replay
    from sandbox.replay.report import ReplayReport

    base = replayer or engine_replay

    def replay_and_report(run_id: str, **options: Any) -> Any:
        report = base(run_id, **options)
        store = options["store"]
        path = folder / f"{run_id}.html"
        if isinstance(report, ReplayReport):
            from sandbox.report import write_store_report

            written = write_store_report(path, store, report)
        elif report.replays:
            from sandbox.replay.compare import compare_runs
            from sandbox.report import diff_comparison, write

            written = write(
                path, diff_comparison(store, compare_runs(store, run_id, report.replays[0]))
            )
        else:
            return report
        say(f"  wrote report {written}")
        return report

    return replay_and_report


def _status(check: RunCheck) -> str:
    from rich.markup import escape

    if check.outcome == "inconclusive":
        status = "[yellow]LOST: could not judge[/yellow]"
    elif check.ok:
        status = (
            "[green]ok[/green]" if check.expected == "reproduced" else "[green]ok: fixed[/green]"
        )
    elif check.expected == "gone":
        status = "[red]BACK: marked fixed, reproduced[/red]"
    else:
        status = "[red]LOST: gone[/red]"
    return status + (f" [yellow]{escape(check.error)}[/yellow]" if check.error else "")
