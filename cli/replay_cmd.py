"""``sandbox replay RUN``: replay a captured run N times and judge whether the failure is back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from cli.app import (
    RUN_HELP,
    EntrypointOption,
    JsonOption,
    PredicateOption,
    StoreOption,
    TimeoutOption,
    TrustOption,
    app,
    run_in,
    store_from,
)
from cli.policy_order import (
    ORDER_KEY,
    LiveOption,
    MissOption,
    PolicyOption,
    PolicyOrderCommand,
    RecordedOption,
    SpyOption,
    ordered_policies,
)
from sandbox.names import SERVICES_ENV

OUTCOME_COLOURS = {"reproduced": "red", "gone": "green", "inconclusive": "yellow"}


@app.command("replay", cls=PolicyOrderCommand)
def replay_command(
    ctx: typer.Context,
    run: Annotated[str, typer.Argument(help=RUN_HELP)],
    times: Annotated[int, typer.Option("--times", "-n", help="How many replays.")] = 1,
    live: LiveOption = None,
    recorded: RecordedOption = None,
    spy: SpyOption = None,
    policy: PolicyOption = None,
    miss: MissOption = "fail",
    no_enforce_order: Annotated[
        bool, typer.Option("--no-enforce-order", help="Let concurrent calls run in any order.")
    ] = False,
    live_clock: Annotated[
        bool, typer.Option("--live-clock", help="Real clocks in the agent and the containers.")
    ] = False,
    no_inject_faults: Annotated[
        bool,
        typer.Option(
            "--no-inject-faults",
            help="Do not inject the recorded timeouts and retry failures: attempts run live, "
            "and a recorded answer that timed out is never served.",
        ),
    ] = False,
    empty: Annotated[
        list[str] | None,
        typer.Option(
            "--empty",
            help="Bring this service up empty instead of with its captured state (repeatable).",
        ),
    ] = None,
    entrypoint: EntrypointOption = None,
    until: Annotated[
        int | None,
        typer.Option(
            "--until",
            min=0,
            help="Fork: serve the steps before STEP (a seq 'sandbox show' prints) as a replay "
            "does, and run live from STEP on (model calls live, no injected faults).",
            metavar="STEP",
        ),
    ] = None,
    override: Annotated[
        list[str] | None,
        typer.Option(
            "--override",
            help="Fork: answer step STEP with this response instead of the recorded one "
            "(STEP=JSON or STEP=FILE), and run live after it.",
            metavar="STEP=JSON|FILE",
        ),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option("--model", help="Fork: the model of the live model calls."),
    ] = None,
    param: Annotated[
        list[str] | None,
        typer.Option(
            "--param",
            help="Fork: a parameter of the live model calls (repeatable), e.g. temperature=0.2.",
            metavar="KEY=VALUE",
        ),
    ] = None,
    env: Annotated[
        list[str] | None,
        typer.Option(
            "--env",
            help="Set a variable for the replayed run (repeatable), over the recorded one: a "
            "value redacted at capture, or one the capture never recorded.",
            metavar="NAME=VALUE",
        ),
    ] = None,
    predicate: PredicateOption = None,
    timeout: TimeoutOption = None,
    as_json: JsonOption = False,
    store: StoreOption = None,
    html: Annotated[
        Path | None, typer.Option("--report", help="Also write an HTML report to this file.")
    ] = None,
    trust: TrustOption = False,
    services_json: Annotated[
        Path | None,
        typer.Option(
            "--services-json",
            envvar=SERVICES_ENV,
            help="Replay against services already up: a JSON file of name -> endpoint "
            "(no Docker; what runs inside the runner container).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Replay a captured run in frozen containers; exit 1 if the failure reproduced, 0 if it
    is gone (every run judged), 2 if a run could not be judged.

    With --until, --override, --model or --param each run is a fork: stored as a run whose
    manifest names its parent and the edits (compare it with 'sandbox diff PARENT FORK').

    Example: sandbox replay orders-20240131T235930Z-a1b2c3 --times 20
    """
    from cli.progress import progress_bar
    from sandbox.replay.engine import replay as run_replay
    from sandbox.replay.plan import ReplayPlan

    plan = ReplayPlan.from_command_line(
        times=times,
        policies=ordered_policies(
            ctx.meta.get(ORDER_KEY, ()),
            {"live": live, "recorded": recorded, "spy": spy, "policy": policy},
        ),
        miss=miss,
        enforce_order=not no_enforce_order,
        clocks="live" if live_clock else "frozen",
        inject_faults=not no_inject_faults,
        empty=tuple(empty or ()),
        entrypoint=entrypoint,
        until=until,
        overrides=override or (),
        model=model,
        params=param or (),
        env=env or (),
        predicate=predicate,
        timeout=timeout,
        trust=trust,
        services_file=services_json,
    )
    opened = store_from(store)
    with progress_bar("replay", times, disable=as_json) as progress:
        report = run_replay(run_in(opened, run), plan, store=opened, progress=progress)
    if html is not None:
        from sandbox.report import write_store_report

        typer.echo(f"sandbox: wrote report {write_store_report(html, opened, report)}", err=True)
    if as_json:
        typer.echo(json.dumps(report.to_json(), indent=2, default=str))
    else:
        from rich.console import Console

        colour = OUTCOME_COLOURS[report.verdict.outcome]
        out = Console()
        out.print(f"[bold {colour}]{report.verdict.summary()}[/bold {colour}]")
        out.print(report.describe(), markup=False, highlight=False)
    raise typer.Exit(report.exit_code)
