"""The typer application and the options every command shares."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from sandbox.names import PREDICATE_FORMS, STORE_ENV, TIMEOUT_HELP

if TYPE_CHECKING:
    from sandbox.snapshot.store import Store

app = typer.Typer(
    name="sandbox",
    help="Capture a bad LLM-agent run with its tool-side state, and replay it in frozen "
    "containers until the failure shows again.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain click help: rendering it with rich costs 0.2 s of imports
)

StoreOption = Annotated[
    str | None,
    typer.Option(
        "--store",
        envvar=STORE_ENV,
        help="Snapshot store: a folder (default ./snapshots) or s3://BUCKET/PREFIX.",
        show_default=False,
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON for machines.")]
PredicateOption = Annotated[
    str | None,
    typer.Option(
        "--predicate",
        help=f"Judge by this failure predicate instead of the recorded one: {PREDICATE_FORMS}.",
        show_default=False,
    ),
]
TimeoutOption = Annotated[
    float | None,
    typer.Option("--timeout", min=0.001, metavar="SECONDS", help=TIMEOUT_HELP, show_default=False),
]

EntrypointOption = Annotated[
    str | None,
    typer.Option("--entrypoint", help="module:function to run instead of the recorded one."),
]
TrustOption = Annotated[
    bool,
    typer.Option(
        "--trust",
        help="Run an imported run's command or outside code on this host (it is refused "
        "otherwise).",
    ),
]


def store_from(location: str | None) -> Store:
    from sandbox.snapshot.store import open_store

    return open_store(location)


RUN_HELP = "Run id, tag or name (the newest captured run of that name), as `sandbox list` shows."


def run_in(store: Store, ref: str) -> str:
    """The id of the run ``ref`` (an id, a tag or a name) stands for in ``store``."""
    from sandbox.snapshot.refs import resolve_run

    return resolve_run(store, ref)
