"""Commands past one machine: ``push`` and ``pull`` (between stores), ``k8s-job`` and
``restore-state`` (a replay as Kubernetes objects)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from cli import jsonout
from cli.app import JsonOption, StoreOption, app, run_in, store_from
from cli.store_cmds import RunArgument

RemoteArg = Annotated[str, typer.Argument(help="The other store: s3://BUCKET/PREFIX or a folder.")]
ForceOption = Annotated[
    bool, typer.Option("--force", help="Replace a run with the same id in the target.")
]


def _copy(source: str | None, target: str | None, run: str, force: bool) -> dict[str, object]:
    """Copy the run; its result (``--json``'s object)."""
    from sandbox.snapshot.spool import SpooledStore
    from sandbox.snapshot.transfer import copy_run

    src, dst = store_from(source), store_from(target)
    run = run_in(src, run)
    blobs = copy_run(src, dst, run, overwrite=force)
    if isinstance(dst, SpooledStore):
        dst.upload(run)
    return {"ok": True, "run_id": run, "from": src.location, "to": dst.location, "blobs": blobs}


@app.command()
def push(
    run: RunArgument,
    to: RemoteArg,
    store: StoreOption = None,
    force: ForceOption = False,
    as_json: JsonOption = False,
) -> None:
    """Copy a run of the local store into another store (blobs it already has are not sent;
    the run appears there whole or not at all). Credentials come from boto3's environment.

    Example: sandbox push orders-2024-1 s3://team-bugs/sandbox --store snapshots
    """
    jsonout.requested(as_json)
    done = _copy(store, to, run, force)
    if as_json:
        jsonout.emit(done)
        return
    typer.echo(f"pushed {run} to {to} ({done['blobs']} blob(s) copied)")


@app.command()
def pull(
    run: RunArgument,
    source: RemoteArg,
    store: StoreOption = None,
    force: ForceOption = False,
    as_json: JsonOption = False,
) -> None:
    """Copy a run of another store (s3://...) into the local store, blobs checked.

    Example: sandbox pull orders-2024-1 s3://team-bugs/sandbox --store snapshots
    """
    jsonout.requested(as_json)
    done = _copy(source, store, run, force)
    if as_json:
        jsonout.emit(done)
        return
    typer.echo(f"pulled {run} from {source} ({done['blobs']} blob(s) copied)")


@app.command("restore-state")
def restore_state(
    run: RunArgument,
    services_json: Annotated[
        Path, typer.Option("--services-json", help="Service name -> endpoint (JSON object).")
    ],
    store: StoreOption = None,
) -> None:
    """Restore a run's captured service states into services already up (a Kubernetes
    replay pod's sidecars: see `sandbox k8s-job`).

    Example: sandbox restore-state RUN --store /state --services-json services.json
    """
    from sandbox.replay.attached import load_services, restore_states

    opened = store_from(store)
    run = run_in(opened, run)
    names = restore_states(opened, opened.load_manifest(run), load_services(services_json))
    typer.echo(f"restored {', '.join(names) or 'no service'} for {run}")


@app.command("k8s-job")
def k8s_job(
    run: RunArgument,
    store_cidr: Annotated[
        str,
        typer.Option(
            "--store-cidr",
            help="Address range of the object store: the one egress the NetworkPolicy allows.",
        ),
    ],
    store: StoreOption = None,
    store_port: Annotated[int, typer.Option("--store-port", help="Its port.")] = 443,
    replays: Annotated[int, typer.Option("--replays", min=1, help="Jobs, one per replay.")] = 1,
    registry: Annotated[
        str, typer.Option("--registry", help="Prefix of the image names (registry/path/).")
    ] = "",
    namespace: Annotated[str | None, typer.Option("--namespace", show_default=False)] = None,
    secret: Annotated[
        str, typer.Option("--secret", help="Secret holding boto3's variables for the pull.")
    ] = "sandbox-replayer-s3",
) -> None:
    """Print Kubernetes objects that replay a run of an object store (s3://): a ConfigMap, a
    NetworkPolicy denying egress but to the store, and a Job per replay (state pulled by an
    init container, services as native sidecars, the runner as the main container).

    Example: sandbox k8s-job RUN --store s3://team-bugs/sandbox --store-cidr 10.0.0.0/16
    """
    import os

    from sandbox.errors import StoreError
    from sandbox.k8s import JobSettings, render, replay_objects
    from sandbox.names import STORE_ENV

    url = store or os.environ.get(STORE_ENV, "")
    if not url.startswith("s3://"):
        raise StoreError("k8s-job pulls the run from an object store: give --store s3://...")
    settings = JobSettings(
        store_url=url,
        store_cidr=store_cidr,
        store_port=store_port,
        registry=registry,
        credentials_secret=secret,
        namespace=namespace,
        replays=replays,
    )
    remote = store_from(url)
    typer.echo(
        render(replay_objects(remote.load_manifest(run_in(remote, run)), settings)), nl=False
    )
