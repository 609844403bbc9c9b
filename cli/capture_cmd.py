"""``sandbox capture``: run an unmodified program with capture on."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from cli.app import StoreOption, app, store_from


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
            help="auto: capture the state of each Postgres, Redis or SQLite service the "
            "program connects to (before its first connection and at exit); none: record "
            "the endpoints only (a replay refuses them).",
        ),
    ] = "auto",
    secret_env: Annotated[
        list[str] | None,
        typer.Option("--secret-env", help="Extra secret environment variable (repeatable)."),
    ] = None,
    mask: Annotated[
        list[str] | None,
        typer.Option(
            "--mask",
            help="Mask captured service state: SERVICE:TARGET=METHOD, SERVICE a name or kind, "
            "METHOD hash, null or redact (repeatable), e.g. postgres:users.email=hash.",
        ),
    ] = None,
    mask_file: Annotated[
        Path | None,
        typer.Option("--mask-file", help="Masking rules in TOML: [mask.SERVICE] TARGET = METHOD."),
    ] = None,
) -> None:
    """Run a program with capture on; keep its output and exit code.

    Example: sandbox capture --name checkout -- python agent.py --order 42
    """
    from sandbox.capture.command import capture_command
    from sandbox.capture.redact import RedactionConfig
    from sandbox.services.masking import load_mask_file, parse_mask_options

    masks = load_mask_file(mask_file) if mask_file is not None else {}
    for service, rules in parse_mask_options(mask or ()).items():
        masks.setdefault(service, {}).update(rules)

    result = capture_command(
        command,
        name=name,
        store=store_from(store),
        seed=seed,
        redaction=RedactionConfig(
            patterns=tuple(redact or ()), env_names=tuple(secret_env or ()), masks=masks
        ),
        services=services,
    )
    outcome = "failed" if result.failed else "ok"
    typer.echo(
        f"sandbox: captured run {result.run_id} ({outcome}, exit code {result.exit_code})",
        err=True,
    )
    raise typer.Exit(result.exit_code)
