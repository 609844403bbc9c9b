"""``sandbox mark RUN --fixed [--by COMMIT]``: say a captured failure is fixed, so that
``ci-repro`` expects it gone from then on (``--open`` takes it back); ``sandbox tag RUN TAG``:
give a run a name that every command takes in place of its id."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from cli.app import JsonOption, StoreOption, app, run_in, store_from
from cli.store_cmds import RunArgument


@app.command()
def mark(
    run: RunArgument,
    fixed: Annotated[
        bool,
        typer.Option(
            "--fixed/--open",
            help="The failure is fixed: ci-repro expects it gone and fails if it comes back "
            "(--open: it is expected to reproduce again).",
        ),
    ] = True,
    by: Annotated[
        str | None,
        typer.Option("--by", help="What fixed it (a commit, a ticket).", show_default=False),
    ] = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Mark a captured failure fixed (or open again); the mark is stored in the run.

    Example: sandbox mark demo-orders-duplicate --fixed --by 1a2b3c4
    """
    from sandbox.regress.marks import mark_fixed, mark_open

    opened = store_from(store)
    run = run_in(opened, run)
    manifest = mark_fixed(opened, run, by=by) if fixed else mark_open(opened, run)
    if as_json:
        mark_json = manifest.fixed.model_dump(mode="json") if manifest.fixed else None
        typer.echo(json.dumps({"run": manifest.run_id, "fixed": mark_json}, indent=2))
        return
    if manifest.fixed is None:
        typer.echo(f"{manifest.run_id}: open (ci-repro expects it to reproduce)")
    else:
        what = f" by {manifest.fixed.by}" if manifest.fixed.by else ""
        typer.echo(f"{manifest.run_id}: fixed{what} (ci-repro expects it gone)")


@app.command()
def tag(
    run: RunArgument,
    name: Annotated[
        str, typer.Argument(help="The tag: names this run (and no other) from now on.")
    ],
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Tag a run: every command then takes the tag where it takes a run id (the tag moves
    from the run that had it).

    Example: sandbox tag orders-20240301T120000Z-a1b2c3 duplicate-order
    """
    from sandbox.snapshot.refs import tag_run

    opened = store_from(store)
    manifest = tag_run(opened, run_in(opened, run), name)
    if as_json:
        typer.echo(json.dumps({"run": manifest.run_id, "tags": manifest.tags}, indent=2))
        return
    typer.echo(f"{manifest.run_id}: tagged {name}")
