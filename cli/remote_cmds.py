"""Commands between a local and a remote store: ``push`` and ``pull``."""

from __future__ import annotations

from typing import Annotated

import typer

from cli.app import StoreOption, app, store_from
from cli.store_cmds import RunArgument

RemoteArg = Annotated[str, typer.Argument(help="The other store: s3://BUCKET/PREFIX or a folder.")]
ForceOption = Annotated[
    bool, typer.Option("--force", help="Replace a run with the same id in the target.")
]


def _copy(source: str | None, target: str | None, run: str, force: bool) -> str:
    from sandbox.snapshot.spool import SpooledStore
    from sandbox.snapshot.transfer import copy_run

    src, dst = store_from(source), store_from(target)
    blobs = copy_run(src, dst, run, overwrite=force)
    if isinstance(dst, SpooledStore):
        dst.upload(run)
    return f"{blobs} blob(s) copied"


@app.command()
def push(
    run: RunArgument, to: RemoteArg, store: StoreOption = None, force: ForceOption = False
) -> None:
    """Copy a run of the local store into another store (blobs it already has are not sent;
    the run appears there whole or not at all). Credentials come from boto3's environment.

    Example: sandbox push orders-2024-1 s3://team-bugs/sandbox --store snapshots
    """
    done = _copy(store, to, run, force)
    typer.echo(f"pushed {run} to {to} ({done})")


@app.command()
def pull(
    run: RunArgument, source: RemoteArg, store: StoreOption = None, force: ForceOption = False
) -> None:
    """Copy a run of another store (s3://...) into the local store, blobs checked.

    Example: sandbox pull orders-2024-1 s3://team-bugs/sandbox --store snapshots
    """
    done = _copy(source, store, run, force)
    typer.echo(f"pulled {run} from {source} ({done})")
