"""Which ``capture.run`` a program entered, in order: what picks a run out of a program
that opens several, one after another (a script's loop over its cases).

The capture counts every ``capture.run`` block the process enters; a run whose block was
entered while no other was open is labelled with its place
(:data:`~sandbox.names.OPENING_LABEL`), one a decorated function of a script opened with
its call (:func:`call_label`). The replay of the program finds that block again and
records only it (:mod:`sandbox.replay.window`). A block entered while another was open
(threads, a service's requests) has no place a replay could find again."""

from __future__ import annotations

import json
import threading
import time


class Openings:
    """The count of ``capture.run`` blocks entered in this process, and of those open."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entered = 0
        self._open = 0
        self._began = time.monotonic()

    def since_start(self) -> float:
        """Seconds since the count began (as the capture was imported, near the program's
        start): how long the program ran before a block, which its replay runs again."""
        return time.monotonic() - self._began

    def enter(self) -> int | None:
        """Count a block entered: its place (1 for the first) when no other is open, else
        ``None``. Each call is matched by one :meth:`leave`."""
        with self._lock:
            self._entered += 1
            alone = self._open == 0
            self._open += 1
            return self._entered if alone else None

    def leave(self) -> None:
        with self._lock:
            self._open -= 1


OPENINGS = Openings()


def call_label(function: str, args: list[object], kwargs: dict[str, object]) -> str:
    """The label of a call that opened a run (a decorated function of a script): its
    function and JSON arguments, canonical, for its replay to find the call again."""
    return json.dumps(
        {"function": function, "args": args, "kwargs": kwargs},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
