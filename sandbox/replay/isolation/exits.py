"""An in-process replay outlives the agent's ``os._exit``.

A function replayed in the ``sandbox replay`` process that calls ``os._exit`` (a worker's
fatal-error path, a fix gone wrong) would end that process with the agent's code, and
``sandbox replay``'s exit code is its verdict: ``os._exit(1)`` would read "reproduced",
``os._exit(0)`` "gone". While the function runs, ``os._exit`` called in this process (any
thread) raises :class:`ProcessExit` instead and is noted; a forked child's still exits.
The run is then inconclusive: a captured run never ended so (its capture would not have
finished)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NoReturn


class ProcessExit(BaseException):
    """Raised where the agent called ``os._exit`` in a replay's process."""

    def __init__(self, code: int) -> None:
        super().__init__(f"os._exit({code})")
        self.code = code


@dataclass
class Exits:
    code: int | None = None
    """The first code the agent gave ``os._exit`` while guarded (``None``: it did not)."""


@contextlib.contextmanager
def exits_caught() -> Iterator[Exits]:
    """Guard this process against ``os._exit`` while the block runs (see the module)."""
    seen = Exits()
    original = os._exit
    pid = os.getpid()

    def _exit(status: int) -> NoReturn:
        if os.getpid() != pid:  # a forked child ends as it asked
            original(status)
        if seen.code is None:
            seen.code = status
        raise ProcessExit(status)

    os._exit = _exit
    try:
        yield seen
    finally:
        os._exit = original
