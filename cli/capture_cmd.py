"""``sandbox capture``: run an unmodified program with capture on.

It exits as ``docker run`` and ``env`` do: with the program's exit code when the program ran,
:data:`TOOL_FAILURE` (125) when capture itself failed (bad options, a store error, a bug),
126 when the program cannot be executed, 127 when there is no such program."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from cli import jsonout
from cli.app import StoreOption, app, store_from
from sandbox.names import PREDICATE_FORMS

TOOL_FAILURE = 125
"""Exit code of a command that runs a program when it failed itself, not the program."""
STDERR_FD = 2
"""Where the program's stdout goes with --json (so that stdout holds the JSON alone)."""
PASSES_THROUGH = frozenset({"capture"})
"""Commands whose exit code is their program's: their own failures exit :data:`TOOL_FAILURE`."""


@app.command(context_settings={"allow_interspersed_args": False})
def capture(
    command: Annotated[list[str], typer.Argument(help="The program and its arguments.")],
    name: Annotated[str, typer.Option("--name", help="Name of the run.")],
    store: StoreOption = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Seed (default: random).")] = None,
    redact: Annotated[
        list[str] | None, typer.Option("--redact", help="Extra secret regex (repeatable).")
    ] = None,
    services: Annotated[
        str,
        typer.Option(
            "--services",
            help="auto: capture the state of each service the program connects to through "
            "a client of a registered kind (before its first connection and at exit); none: "
            "record the endpoints only (a replay refuses them).",
        ),
    ] = "auto",
    state: Annotated[
        str,
        typer.Option(
            "--state",
            help="whole: capture each service's whole state; touched: a service whose kind "
            "can keeps only the part the program touched (a database the rows of the tables "
            "it read or wrote and of those their foreign keys reference, with the schema of "
            "all; a key-value store its keys; a workspace its files), and a replay that "
            "reaches outside that part is inconclusive.",
        ),
    ] = "whole",
    secret_env: Annotated[
        list[str] | None,
        typer.Option("--secret-env", help="Extra secret environment variable (repeatable)."),
    ] = None,
    mask: Annotated[
        list[str] | None,
        typer.Option(
            "--mask",
            help="Mask captured service state: SERVICE:TARGET=METHOD, SERVICE a name or kind, "
            "METHOD hash, null or redact (repeatable), e.g. db:users.email=hash.",
        ),
    ] = None,
    mask_file: Annotated[
        Path | None,
        typer.Option("--mask-file", help="Masking rules in TOML: [mask.SERVICE] TARGET = METHOD."),
    ] = None,
    fail_if: Annotated[
        str | None,
        typer.Option(
            "--fail-if",
            help=f"The failure predicate, checked when the program ends: {PREDICATE_FORMS}.",
            show_default=False,
        ),
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print the result as one JSON object on stdout (the program's stdout then "
            "goes to stderr).",
        ),
    ] = False,
) -> None:
    """Run a program with capture on; keep its output and exit code.

    Exits with the program's exit code; 125 when capture itself failed, 126 when the program
    cannot be executed, 127 when it is not found (as `docker run` does).

    Example: sandbox capture --name checkout --fail-if 'exit!=0' -- python agent.py
    """
    jsonout.requested(as_json)
    from sandbox.redaction import RedactionConfig
    from sandbox.replay.judging.failif import capture_failing_if
    from sandbox.services.masking import load_mask_file, parse_mask_options
    from sandbox.snapshot.predicate_syntax import parse_predicate

    masks = load_mask_file(mask_file) if mask_file is not None else {}
    for service, rules in parse_mask_options(mask or ()).items():
        masks.setdefault(service, {}).update(rules)

    opened = store_from(store)
    popen: dict[str, Any] = {"stdout": STDERR_FD} if as_json else {}
    result = capture_failing_if(
        command,
        parse_predicate(fail_if) if fail_if is not None else None,
        name=name,
        store=opened,
        seed=seed,
        redaction=RedactionConfig(
            patterns=tuple(redact or ()), env_names=tuple(secret_env or ()), masks=masks
        ),
        services=services,
        state=state,
        **popen,
    )
    if result.not_run is not None:
        typer.echo(f"sandbox: {result.not_run}", err=True)
    if as_json:
        failure = result.manifest.failure
        jsonout.emit(
            {
                "ok": True,
                "run_id": result.run_id,
                "exit_code": result.exit_code,
                "failed": result.failed,
                "failure": failure.reason if failure is not None else None,
                "not_run": result.not_run,
                "store": opened.location,
            }
        )
        raise typer.Exit(result.exit_code)
    outcome = "failed" if result.failed else "ok"
    if fail_if is not None and result.manifest.failure is not None:
        typer.echo(f"sandbox: --fail-if {fail_if}: {result.manifest.failure.reason}", err=True)
    typer.echo(
        f"sandbox: captured run {result.run_id} ({outcome}, exit code {result.exit_code})",
        err=True,
    )
    raise typer.Exit(result.exit_code)
