"""``sandbox explain RUN``: which recorded conditions does the failure need?"""

from __future__ import annotations

from typing import Annotated

import typer

from cli.app import (
    RUN_HELP,
    EntrypointOption,
    JsonOption,
    PredicateOption,
    StoreOption,
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


@app.command("explain", cls=PolicyOrderCommand)
def explain_command(
    ctx: typer.Context,
    run: Annotated[str, typer.Argument(help=RUN_HELP)],
    times: Annotated[int, typer.Option("--times", "-n", min=1, help="Replays per trial (N).")] = 2,
    budget: Annotated[
        int, typer.Option("--budget", min=1, help="At most this many replays in all.")
    ] = 40,
    quorum: Annotated[
        int | None,
        typer.Option(
            "--quorum",
            min=1,
            help="A trial reproduces when at least this many of its N runs do "
            "(default: most of them).",
            show_default=False,
        ),
    ] = None,
    live: LiveOption = None,
    recorded: RecordedOption = None,
    spy: SpyOption = None,
    policy: PolicyOption = None,
    miss: MissOption = "live",
    predicate: PredicateOption = None,
    entrypoint: EntrypointOption = None,
    as_json: JsonOption = False,
    store: StoreOption = None,
    trust: TrustOption = False,
) -> None:
    """Find the smallest set of recorded conditions (clock, interleaving, timeouts and
    retries, parts of each service's state, each model, host, MCP server and recorded tool)
    that still reproduces the failure, by delta debugging over replays with groups of them
    released. Prints "the failure needs: ...; it does not need: ..." and stores the result
    with the run (sandbox show prints it).

    Exit 1 when the failure reproduced with every condition held (the search ran), 2 when it
    did not (nothing to explain).

    Example: sandbox explain orders-20240131T235930Z-a1b2c3 --times 2 --budget 40
    """
    from sandbox.explain import explain
    from sandbox.snapshot.predicate_syntax import parse_predicate

    policies = ordered_policies(
        ctx.meta.get(ORDER_KEY, ()),
        {"live": live, "recorded": recorded, "spy": spy, "policy": policy},
    )
    from cli.progress import progress_bar

    opened = store_from(store)
    with progress_bar("explain", budget, disable=as_json) as progress:
        found = explain(
            run_in(opened, run),
            store=opened,
            times=times,
            budget=budget,
            quorum=quorum,
            policies=policies,
            miss=miss,
            entrypoint=entrypoint,
            trust=trust,
            predicate=parse_predicate(predicate) if predicate is not None else None,
            progress=progress,
        )
    if as_json:
        typer.echo(found.model_dump_json(indent=2))
    else:
        typer.echo(found.describe())
    raise typer.Exit(2 if found.status == "not reproduced" else 1)
