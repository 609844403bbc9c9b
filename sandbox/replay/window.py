"""Which ``capture.run`` block of a replayed program is the run being replayed.

A program that opens several runs one after another (a script's loop over its cases) is
run again from its start to replay one of them. The capture labelled that run with its
place among the blocks the process entered (:mod:`sandbox.capture.openings`); the replay
counts the blocks again as the program enters them. What the program does outside that
block is not the run's: its crossings are made as the program makes them (inside the
sandbox: the network guard refuses the rest), neither served from the recording nor
recorded. Those that could have changed state are counted (not clock reads, draws, or
requests that failed refused): the runs before this one may have changed the restored
state this one starts from, so such a replay does not earn "gone". When the run's block
ends, so does the replay of the program (``on_close``). A run with no place (recorded by
an older version, or opened while another was open) has every block handed over to it,
as before."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

_CHANGE_NOTHING = frozenset({"clock", "random", "retry", "timeout"})


@dataclass
class Window:
    """The run's block among the program's ``capture.run`` blocks; the boundary holds its
    lock around :meth:`enter` and :meth:`leave`."""

    opening: int | None = None
    """The run's place (1 for the first block the process entered); ``None``: every block."""
    on_close: Callable[[], None] | None = None
    """Called as the run's block ends."""
    entered: int = 0
    """The blocks the program entered outside the run's (and the run's own)."""
    depth: int = 0
    """Blocks open inside the run's, itself included."""
    crossings_outside: int = 0
    """Crossings the program made outside the run's block that could have changed state."""
    refusals: int = 0
    """Connections refused outside the run's block."""

    @property
    def reached(self) -> bool:
        return self.opening is None or self.entered >= self.opening

    @property
    def outside(self) -> bool:
        """Whether the program is outside the run's block now."""
        return self.opening is not None and self.depth == 0

    def enter(self) -> bool:
        """The program entered a ``capture.run`` block: whether it is (in) the run's."""
        if self.opening is None:
            return True
        if self.depth:  # a block inside the run's block: part of the run
            self.depth += 1
            return True
        self.entered += 1
        if self.entered != self.opening:
            return False
        self.depth = 1
        return True

    def leave(self) -> bool | None:
        """The program left a block: ``True`` when it was the run's (its exception is the
        run's: the run ends at :meth:`close`), ``False`` when it was one of the run's
        otherwise (every block, without a place), ``None`` when it was not the run's to
        record."""
        if self.opening is None:
            return False
        if self.depth == 0:
            return None
        if self.depth == 1:
            return True
        self.depth -= 1
        return None

    def count(self, kind: str) -> None:
        """Count a crossing made outside the run's block, unless of a kind that changes
        nothing (a clock read, a draw, a retry's or timeout's note)."""
        if kind not in _CHANGE_NOTHING:
            self.crossings_outside += 1

    def close(self) -> None:
        """The run's block is over: the program is outside it from now on."""
        self.depth = 0
