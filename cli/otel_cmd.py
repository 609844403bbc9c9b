"""``sandbox otel export`` and ``sandbox otel import``: runs as OpenTelemetry traces and back."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from pydantic import TypeAdapter, ValidationError

from cli.app import RUN_HELP, StoreOption, app, run_in, store_from
from sandbox.errors import OTelError
from sandbox.snapshot.manifest import Predicate

if TYPE_CHECKING:
    from types import ModuleType

otel_app = typer.Typer(
    name="otel",
    help="OpenTelemetry out and in: send a run as OTLP traces, or make a run of a trace.",
    no_args_is_help=True,
)
app.add_typer(otel_app)


def _otel() -> ModuleType:
    try:
        import sandbox.otel
    except ImportError as exc:
        raise OTelError(
            f"OpenTelemetry is not installed ({exc.name}): pip install 'sandbox-replayer[otel]'"
        ) from None
    return sandbox.otel


@otel_app.command("export")
def export_cmd(
    run: Annotated[str, typer.Argument(help=RUN_HELP)],
    endpoint: Annotated[
        str | None,
        typer.Option(
            "--endpoint", help="OTLP/HTTP collector to send to (http://host:4318 or .../v1/traces)."
        ),
    ] = None,
    file: Annotated[
        Path | None, typer.Option("--file", help="Write the trace as OTLP/JSON to this file.")
    ] = None,
    project: Annotated[
        str | None,
        typer.Option("--project", help="Phoenix project (resource openinference.project.name)."),
    ] = None,
    store: StoreOption = None,
) -> None:
    """Send a run as OTLP traces (GenAI and OpenInference attributes), or write it as JSON.

    Example: [bold]sandbox otel export orders-20240131T235930Z-a1b2c3 --endpoint http://127.0.0.1:6006[/bold]
    """
    if endpoint is None and file is None:
        raise OTelError("give --endpoint URL, --file out.json, or both")
    otel = _otel()
    opened = store_from(store)
    run = run_in(opened, run)
    snapshot = opened.load(run)
    if file is not None:
        written = otel.write_otlp_json(snapshot, file, project=project)
        typer.echo(f"wrote the trace of {run} to {written}")
    if endpoint is not None:
        count = otel.send_otlp(snapshot, endpoint, project=project)
        typer.echo(f"sent {count} spans of {run} to {endpoint}")


def _predicate(text: str | None) -> Predicate | None:
    if text is None:
        return None
    try:
        return TypeAdapter(Predicate).validate_json(text)
    except ValidationError as exc:
        raise OTelError(f"--predicate: {exc.errors()[0]['msg']}") from None


@otel_app.command("import")
def import_cmd(
    file: Annotated[Path, typer.Argument(help="An OTLP/JSON trace file.")],
    run_id: Annotated[str | None, typer.Option("--run-id", help="Id of the new run.")] = None,
    trace_id: Annotated[
        str | None, typer.Option("--trace-id", help="Which trace, when the file holds several.")
    ] = None,
    entrypoint: Annotated[
        str | None, typer.Option("--entrypoint", help="module:function of the agent to replay.")
    ] = None,
    predicate: Annotated[
        str | None,
        typer.Option(
            "--predicate",
            help='The failure as JSON: {"kind": "result", "path": "answer", "op": "contains", '
            '"value": "..."} or {"kind": "exception", "type": "ValueError"}.',
        ),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace a run with the same id.")] = False,
    store: StoreOption = None,
) -> None:
    """Make a run of an OTLP/JSON trace: every model call and tool result served from it.

    Example: [bold]sandbox otel import trace.json --entrypoint shop:main[/bold]
    """
    where = store_from(store)
    snapshot = _otel().import_otlp_json(
        where,
        file,
        run_id=run_id,
        trace_id=trace_id,
        entrypoint=entrypoint,
        predicate=_predicate(predicate),
        force=force,
    )
    typer.echo(f"imported {snapshot.run_id} ({len(snapshot.events)} events) into {where.location}")
