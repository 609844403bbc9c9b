"""``sandbox doctor``: what this machine has, and what it lacks, for the main job."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from cli.app import JsonOption, StoreOption, app, store_from


@app.command()
def doctor(
    store: StoreOption = None,
    as_json: JsonOption = False,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="Print only what is not ok (nothing if all is).")
    ] = False,
) -> None:
    """Check the engine, the images, libfaketime, memory, free space, Chromium and the optional
    integrations, one line each with a fix.

    Exit code 0 when everything `make demo` and `make replay` need is there, 1 otherwise.

    Example: sandbox doctor --json
    """
    from sandbox.doctor import diagnose

    diagnosis = diagnose(store_from(store))
    if as_json:
        typer.echo(json.dumps(diagnosis.to_dict(), indent=2))
    else:
        for check in diagnosis.checks:
            if not quiet or check.status in ("warn", "fail"):
                typer.echo(check.line())
    if not diagnosis.ok:
        raise typer.Exit(diagnosis.exit_code)
