"""Environment commands: ``images build``, ``images list`` and ``gc``."""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Annotated

import typer

from cli import jsonout
from cli.app import JsonOption, StoreOption, app, store_from
from sandbox.names import BASE_ENV

if TYPE_CHECKING:
    from rich.console import Console

images_app = typer.Typer(
    name="images",
    help="Build and list the service and runner images (no registry needed).",
    no_args_is_help=True,
)
app.add_typer(images_app)

BaseOption = Annotated[
    str | None,
    typer.Option(
        "--base",
        envvar=BASE_ENV,
        help="Image to build FROM (default: the local debootstrap base; with a registry, "
        "e.g. debian:bookworm-slim).",
        show_default=False,
    ),
]


def _console() -> Console:
    from rich.console import Console

    return Console(stderr=True, highlight=False, soft_wrap=True)


@images_app.command("build")
def images_build(
    names: Annotated[
        list[str] | None,
        typer.Argument(help="Images to build, as `sandbox images list` names them; default all."),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Rebuild even if present.")] = False,
    base: BaseOption = None,
) -> None:
    """Build the images that are missing (or changed): one line per image, present, built in
    N s, or rebuilt because its build context changed (the build output only passes by).

    Example: sandbox images build postgres redis
    """
    from rich.text import Text

    from sandbox.containers import build_images

    console = _console()
    with console.status("images") as status:
        # Build output only moves the transient status line; each image is printed once.
        build_images(
            names or None,
            progress=lambda line: status.update(Text(line[: max(console.width - 4, 20)])),
            on_result=lambda result: console.print(result.describe(), markup=False),
            force=force,
            base=base,
        )


@images_app.command("list")
def images_list(base: BaseOption = None, as_json: JsonOption = False) -> None:
    """Show each image, whether it is built, and whether it matches this checkout.

    Example: sandbox images list
    """
    from rich.console import Console
    from rich.table import Column, Table

    from sandbox.containers import list_images

    statuses = list_images(base=base)
    if as_json:
        typer.echo(json.dumps([s.__dict__ for s in statuses], indent=2))
        return
    table = Table(
        "name", Column("tag", no_wrap=True), "state", "id", Column("size", justify="right")
    )
    for s in statuses:
        size = f"{s.size / 1e6:.0f} MB" if s.size else ""
        table.add_row(s.name, s.tag, s.state, s.image_id or "", size)
    Console(highlight=False).print(table)


@app.command("gc")
def gc_command(
    all_: Annotated[
        bool,
        typer.Option("--all", help="Remove every sandbox container and network, live or not."),
    ] = False,
    runs: Annotated[
        bool,
        typer.Option(
            "--runs",
            help="Prune the store's runs instead: those older than --older-than, then the "
            "oldest while it is over --max-size, and the blobs only they referenced.",
        ),
    ] = False,
    older_than: Annotated[
        str | None,
        typer.Option("--older-than", help="With --runs: an age (7d, 12h, 30m, 2w)."),
    ] = None,
    max_size: Annotated[
        str | None,
        typer.Option("--max-size", help="With --runs: a size cap (500M, 10G)."),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="With --runs: say what would go, remove nothing.")
    ] = False,
    claimed_within: Annotated[
        str,
        typer.Option(
            "--claimed-within",
            help="With --runs: keep the blobs a run wrote or reused within this age before "
            "the pruning, or during it (a run still being published may need them).",
        ),
    ] = "1h",
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Remove what killed writers left in the store's staging folder, then the containers,
    networks and firewall rules that dead sessions left behind. With --runs, prune the
    store's runs instead (a store that capture fills in production).

    Example: sandbox gc --store snapshots; sandbox gc --runs --older-than 7d --max-size 10G
    """
    from sandbox.containers import gc

    jsonout.requested(as_json)
    console = _console()  # stderr: with --json, stdout holds the JSON alone
    if runs or older_than is not None or max_size is not None or dry_run:
        _prune_runs(
            store,
            runs,
            older_than,
            max_size,
            claimed_within,
            dry_run=dry_run,
            as_json=as_json,
        )
        return
    stale = store_from(store).clean_stale()
    report = gc(all=all_, progress=lambda line: console.print(line, markup=False))
    if as_json:
        jsonout.emit(
            {
                "ok": True,
                "containers": list(report.containers),
                "networks": list(report.networks),
                "rules": report.rules,
                "folders": list(report.folders),
                "stale": stale,
            }
        )
        return
    if report.empty and not stale:
        console.print("nothing to clean up")
    else:
        console.print(
            f"removed {len(report.containers)} container(s), {len(report.networks)} "
            f"network(s), {report.rules} firewall rule(s), {len(report.folders)} folder(s), "
            f"{stale} stale store entr{'y' if stale == 1 else 'ies'}"
        )


def _prune_runs(
    location: str | None,
    runs: bool,
    older_than: str | None,
    max_size: str | None,
    claimed_within: str,
    *,
    dry_run: bool,
    as_json: bool,
) -> None:
    from sandbox.errors import SandboxError
    from sandbox.sizes import human_size, parse_size
    from sandbox.snapshot.prune import parse_age, prune

    if not runs:
        raise SandboxError("gc: --older-than, --max-size and --dry-run prune runs: add --runs")
    pruned = prune(
        store_from(location),
        older_than=None if older_than is None else parse_age(older_than),
        max_bytes=None if max_size is None else parse_size(max_size),
        dry_run=dry_run,
        claimed_within=parse_age(claimed_within, "--claimed-within"),
    )
    if as_json:
        jsonout.emit({"ok": True, "dry_run": dry_run, **dataclasses.asdict(pruned)})
        return
    verb = "would remove" if dry_run else "removed"
    _console().print(
        f"{verb} {len(pruned.runs)} run(s) and {pruned.blobs} blob(s), "
        f"{human_size(pruned.freed)}; {pruned.remaining} run(s) left, {human_size(pruned.size)}"
        + (
            f"; kept {pruned.claimed} blob(s) a run wrote or reused lately (it may still be "
            "publishing)"
            if pruned.claimed
            else ""
        ),
        markup=False,
    )
