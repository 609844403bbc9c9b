"""``sandbox schema``: the JSON Schema of the manifest and of one event."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from cli.app import app


@app.command()
def schema(
    which: Annotated[str, typer.Argument(help="manifest, event, or all")] = "all",
) -> None:
    """Print the JSON Schema of the snapshot formats.

    Example: sandbox schema event
    """
    from sandbox.snapshot.events import event_json_schema
    from sandbox.snapshot.manifest import SCHEMA_VERSION, manifest_json_schema

    schemas = {"manifest": manifest_json_schema(), "event": event_json_schema()}
    if which == "all":
        out: object = {"schema_version": SCHEMA_VERSION, **schemas}
    elif which in schemas:
        out = schemas[which]
    else:
        raise typer.BadParameter(f"expected manifest, event or all, got {which!r}")
    typer.echo(json.dumps(out, indent=2))
