"""``sandbox diff RUN_A RUN_B``: where two runs part, and how their end states differ."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from cli.app import JsonOption, StoreOption, app, run_in, store_from


@app.command("diff")
def diff_command(
    run_a: Annotated[str, typer.Argument(help="Run A (captured, replayed or forked).")],
    run_b: Annotated[str, typer.Argument(help="Run B, compared with A.")],
    store: StoreOption = None,
    as_json: JsonOption = False,
    html: Annotated[
        Path | None, typer.Option("--report", help="Also write an HTML page to this file.")
    ] = None,
) -> None:
    """Compare two runs: the first divergent step with its field-level diff (messages,
    parameters, tool arguments and outputs), the steps only one run has, and how the
    services' end states differ. Exit 0 when the runs do not differ, 1 when they do.

    Example: sandbox diff orders-20240131T235930Z-a1b2c3 orders-fork-20240201T101500Z-d4e5f6
    """
    from sandbox.replay.compare import compare_runs

    opened = store_from(store)
    comparison = compare_runs(opened, run_in(opened, run_a), run_in(opened, run_b))
    if html is not None:
        from sandbox.report import diff_comparison, write

        written = write(html, diff_comparison(opened, comparison))
        typer.echo(f"sandbox: wrote report {written}", err=True)
    if as_json:
        typer.echo(json.dumps(comparison.to_json(), indent=2, default=str))
    else:
        typer.echo(comparison.describe())
    raise typer.Exit(0 if comparison.same else 1)
