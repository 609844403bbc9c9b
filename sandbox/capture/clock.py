"""Time as the capture sees it: an injectable clock, the run's start and time zone, and clock
reads that go through the boundary seam (so replay can hand back the recorded time)."""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Protocol

from sandbox.seam import boundary
from sandbox.seam.boundary import BlobReader, Call, Emitter, Outcome
from sandbox.snapshot.events import ClockRead, Event


class TimeSource(Protocol):
    """Where the capture reads time. Inject a fake in tests; never reach for globals."""

    def time(self) -> float: ...
    def monotonic(self) -> float: ...


class SystemClock:
    """The real clock."""

    def time(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()


class FakeClock:
    """A clock that moves only when told (for tests and benchmarks)."""

    def __init__(self, start: float = 1_700_000_000.0, tick: float = 0.0) -> None:
        self.wall = start
        self.mono = 0.0
        self.tick = tick

    def advance(self, seconds: float) -> None:
        self.wall += seconds
        self.mono += seconds

    def sleep(self, seconds: float) -> None:
        self.advance(seconds)

    def time(self) -> float:
        self.advance(self.tick)
        return self.wall

    def monotonic(self) -> float:
        return self.mono


def start_datetime(clock: TimeSource) -> datetime:
    return datetime.fromtimestamp(clock.time(), tz=UTC)


def local_timezone(environ: Mapping[str, str] | None = None) -> str:
    """The time zone the run sees: ``$TZ`` of ``environ`` (default: this process's) when set,
    else the system's zone (its ``/etc/localtime`` link), else the local zone's name."""
    tz = (os.environ if environ is None else environ).get("TZ")
    if tz:
        return tz.lstrip(":")
    return _system_timezone()


@functools.cache
def _system_timezone() -> str:
    """The system's zone (its ``/etc/localtime`` link), else the local zone's name: read
    once per process, as the C library reads it once (a process sees a new zone only when
    it starts again)."""
    link = os.path.realpath("/etc/localtime")  # .../zoneinfo/Europe/Paris on most systems
    if "/zoneinfo/" in link:
        return link.split("/zoneinfo/", 1)[1]
    name = datetime.now().astimezone().tzname()
    return name or "UTC"


class ClockAdapter:
    """Records a clock read as a ``clock`` event; replay hands back the recorded value."""

    def record(self, call: Call, outcome: Outcome[float], emitter: Emitter) -> float:
        if outcome.error is None and outcome.value is not None:
            emitter.emit(ClockRead, call, value=outcome.value, source=call.name)
        return outcome.value if outcome.value is not None else 0.0

    def replay(self, call: Call, event: Event, blobs: BlobReader) -> float:
        assert isinstance(event, ClockRead)
        return event.value


_ADAPTER = ClockAdapter()


def now(clock: TimeSource | None = None) -> float:
    """Read the wall clock through the seam: recorded during capture, served on replay."""
    source = clock or _active_clock()
    return boundary.through("clock", "time.time", None, source.time, _ADAPTER)


def _active_clock() -> TimeSource:
    active = boundary.current()
    found = getattr(active, "clock", None)
    return found if found is not None else _SYSTEM


_SYSTEM = SystemClock()
