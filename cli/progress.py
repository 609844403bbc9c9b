"""A progress bar on stderr for the commands that run replays."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

Update = Callable[[str, int, int], None]
"""``(message, done, total)``, as the library's progress callbacks are called."""


@contextlib.contextmanager
def progress_bar(label: str, total: int, *, disable: bool = False) -> Iterator[Update]:
    """A transient bar named ``label``; yields the callback that moves it."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    with Progress(
        TextColumn(f"[bold]{label}[/bold]"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.description}"),
        console=Console(stderr=True),
        transient=True,
        disable=disable,
    ) as bar:
        task = bar.add_task("starting", total=total)

        def update(message: str, done: int, total: int) -> None:
            bar.update(task, completed=done, total=total, description=message[:70])

        yield update
