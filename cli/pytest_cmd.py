"""``sandbox pytest``: write a regression test for a captured failure."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from cli import jsonout
from cli.app import (
    RUN_HELP,
    JsonOption,
    PredicateOption,
    StoreOption,
    TimeoutOption,
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


@app.command("pytest", cls=PolicyOrderCommand)
def pytest_cmd(
    ctx: typer.Context,
    run: Annotated[str, typer.Argument(help=RUN_HELP)],
    output: Annotated[
        Path, typer.Option("-o", "--output", help="The test file to write (test_*.py).")
    ],
    store: StoreOption = None,
    times: Annotated[int, typer.Option("--times", min=1, help="Replays per test run.")] = 1,
    entrypoint: Annotated[
        str | None,
        typer.Option("--entrypoint", help="Replay this entrypoint instead of the recorded one."),
    ] = None,
    predicate: PredicateOption = None,
    timeout: TimeoutOption = None,
    live: LiveOption = None,
    recorded: RecordedOption = None,
    spy: SpyOption = None,
    policy: PolicyOption = None,
    miss: MissOption = "fail",
    force: Annotated[bool, typer.Option("--force", help="Replace an existing file.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Write a pytest file that replays RUN and fails while its failure still reproduces.
    The policy options (--live, --recorded, --spy, --policy, --miss) are the replay's, and
    the test replays with them.

    Example: sandbox pytest orders-1 -o tests/regressions/test_orders_1.py --times 5
    """
    from sandbox.regress import write_regression_test
    from sandbox.snapshot.predicate_syntax import parse_predicate

    jsonout.requested(as_json)
    policies = ordered_policies(
        ctx.meta.get(ORDER_KEY, ()),
        {"live": live, "recorded": recorded, "spy": spy, "policy": policy},
    )
    opened = store_from(store)
    run = run_in(opened, run)
    manifest = opened.load_manifest(run)
    if output.suffix != ".py":
        raise typer.BadParameter("the test file must end in .py", param_hint="--output")
    if output.exists() and not force:
        raise typer.BadParameter(f"{output} exists (use --force)", param_hint="--output")
    path = write_regression_test(
        output,
        manifest,
        store=opened.location,
        times=times,
        entrypoint=entrypoint,
        predicate=parse_predicate(predicate) if predicate is not None else None,
        overwrite=True,
        timeout=timeout,
        rules=[str(rule) for rule in policies.rules],
        miss=miss,
    )
    warning = None
    if manifest.failure is None and predicate is None:
        warning = f"run {run} records no failure"
        typer.echo(f"sandbox: warning: {warning}", err=True)
    if as_json:
        jsonout.emit({"ok": True, "run_id": run, "path": str(path), "warning": warning})
        return
    typer.echo(f"sandbox: wrote {path}", err=True)
