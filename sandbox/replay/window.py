"""Which ``capture.run`` block of a replayed program is the run being replayed.

A program that opens several runs (a script's loop over its cases, or a decorated function
of the script called from its threads) is run again from its start to replay one of them.
The capture labelled that run with what finds its block again
(:mod:`sandbox.capture.openings`): for a decorated function of the script called with JSON
arguments, that call; and its place among the blocks the process entered, when no other
block was open as it began. The replay looks at each block's call (when the run has one)
or counts the blocks again as the program enters them, and the first that fits is the
run's. What the program does
outside that block (before it, or in other threads beside it) is not the run's: its
crossings are made as the program makes them (inside the sandbox: the network guard refuses
the rest), neither served from the recording nor recorded. Those that could have changed
state are counted (not clock reads, draws, or requests that failed refused): they ran
against the state restored for the run, so such a replay does not earn "gone". What runs
inside the block (its nested blocks, the threads and tasks it starts) is the run's: the
block's context says so. When the run's block ends, so does the replay of the program
(``on_close``). A run with neither label (recorded by an older version, or opened while
another was open with no call to find it by) has every block handed over to it, as
before."""

from __future__ import annotations

import contextvars
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from sandbox.names import (
    OPENED_IN_PROGRAM,
    OPENED_LABEL,
    OPENING_AFTER_LABEL,
    OPENING_CALL_LABEL,
    OPENING_LABEL,
)

CHANGE_NOTHING = frozenset({"clock", "random", "retry", "timeout"})
"""Kinds of crossings that change nothing outside the agent (clock reads, draws, a retry's
or a timeout's note): not counted outside the run's block, and served live by the replay
when the recording has no answer (a fixed agent may draw more ids)."""
_DEPTH: contextvars.ContextVar[int] = contextvars.ContextVar("sandbox_window_depth", default=0)
"""How many ``capture.run`` blocks of the run's are open in this context (0: outside it)."""


@dataclass
class Window:
    """The run's block among the program's ``capture.run`` blocks; the boundary holds its
    lock around :meth:`enter`, :meth:`leave` and :meth:`close`."""

    opening: int | None = None
    """The run's place (1 for the first block the process entered)."""
    call: str | None = None
    """The call that opened the run's block (:func:`~sandbox.capture.openings.call_label`):
    what finds it, when labelled (a place among blocks in threads may differ run to run)."""
    on_close: Callable[[], None] | None = None
    """Called as the run's block ends."""
    entered: int = 0
    """The blocks the program entered outside the run's (and the run's own)."""
    opened: bool = False
    """Whether the run's block was entered."""
    crossings_outside: int = 0
    """Crossings the program made outside the run's block that could have changed state."""
    refusals: int = 0
    """Connections refused outside the run's block."""
    _closed: bool = field(default=False, repr=False)

    @property
    def every_block(self) -> bool:
        """No label finds the run's block: every block is the run (as before labels)."""
        return self.opening is None and self.call is None

    @property
    def reached(self) -> bool:
        return self.every_block or self.opened

    @property
    def outside(self) -> bool:
        """Whether the program, in this context, is outside the run's block now."""
        return not self.every_block and (self._closed or _DEPTH.get() == 0)

    def enter(self, call: str | None, redact: Callable[[str], str] = str) -> bool:
        """The program entered a ``capture.run`` block (opened by ``call``, when a decorated
        function of the script with JSON arguments opened it): whether it is (in) the
        run's. ``redact`` is how the recorded label was redacted."""
        if self.every_block:
            return True
        depth = _DEPTH.get()
        if depth and not self._closed:  # a block inside the run's block: part of the run
            _DEPTH.set(depth + 1)
            return True
        self.entered += 1
        if self.opened:
            return False
        if self.call is not None:  # the call, when labelled: threads enter in any order
            fits = call is not None and self.call in (call, redact(call))
        else:
            fits = self.entered == self.opening
        if fits:
            self.opened = True
            _DEPTH.set(1)
        return fits

    def leave(self) -> bool | None:
        """The program left a block: ``True`` when it was the run's (its exception is the
        run's: the run ends at :meth:`close`), ``False`` when it was one of the run's
        otherwise (every block, without a label), ``None`` when it was not the run's to
        record."""
        if self.every_block:
            return False
        depth = _DEPTH.get()
        if depth == 0 or self._closed:
            return None
        if depth == 1:
            return True
        _DEPTH.set(depth - 1)
        return None

    def count(self, kind: str) -> None:
        """Count a crossing made outside the run's block, unless of a kind that changes
        nothing (a clock read, a draw, a retry's or timeout's note)."""
        if kind not in CHANGE_NOTHING:
            self.crossings_outside += 1

    def close(self) -> None:
        """The run's block is over: the program is outside it from now on, everywhere."""
        _DEPTH.set(0)
        self._closed = True


@dataclass(frozen=True)
class Labelled:
    """What a run's manifest labels say of its block among its program's (all unset but for
    a run its program opened itself): read as data, never trusted further."""

    opening: int | None = None
    call: str | None = None
    ran_before: float = 0.0
    """Seconds the program ran before the block (finite, not negative)."""

    @property
    def block(self) -> str | None:
        """The run's block among its program's, in words (``None``: no label)."""
        if self.call is not None:
            return f"capture.run block of the call {describe_call(self.call)}"
        if self.opening is not None:
            return f"capture.run block number {self.opening}"
        return None

    @classmethod
    def of(cls, labels: Mapping[str, str]) -> Labelled:
        if labels.get(OPENED_LABEL) != OPENED_IN_PROGRAM:
            return cls()
        place = labels.get(OPENING_LABEL, "")
        try:
            seconds = float(labels.get(OPENING_AFTER_LABEL, "0"))
        except ValueError:
            seconds = 0.0
        return cls(
            opening=int(place) if place.isdigit() else None,
            call=labels.get(OPENING_CALL_LABEL),
            ran_before=seconds if seconds > 0 and math.isfinite(seconds) else 0.0,
        )


def describe_call(label: str) -> str:
    """``quote("q-7", fast=true)`` from a :func:`~sandbox.capture.openings.call_label` (the
    label itself when it is not one)."""
    try:
        data = json.loads(label)
        shown = [json.dumps(a) for a in data["args"]]
        shown += [f"{k}={json.dumps(v)}" for k, v in data["kwargs"].items()]
        return f"{data['function']}({', '.join(shown)})"
    except (ValueError, KeyError, TypeError, AttributeError):
        return label
