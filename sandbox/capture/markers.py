"""What the agent says about its own run: state transitions, the final result, timeouts, and
the failure. Each acts on the active capture; outside one they do nothing (``mark_failed``
raises, since a failure that nobody records is a bug in the caller)."""

from __future__ import annotations

from sandbox.capture.recorder import Recorder
from sandbox.errors import CaptureError
from sandbox.seam import boundary
from sandbox.snapshot.manifest import ExceptionPredicate, ResultPredicate, SQLInvariant


def active() -> Recorder | None:
    """The recorder of the capture running in this process, if any."""
    current = boundary.current()
    return current if isinstance(current, Recorder) else None


def state(target: str, source: str | None = None, **data: object) -> None:
    """Record an agent state transition."""
    rec = active()
    if rec is not None:
        rec.state(target, source, **data)


def result(value: object) -> None:
    """Record the run's final result."""
    rec = active()
    if rec is not None:
        rec.set_result(value)


def timeout(after: float, committed: bool | None = None, name: str = "") -> None:
    """Record that the current attempt timed out after ``after`` seconds."""
    rec = active()
    if rec is not None:
        rec.timeout(after, committed, name)


def mark_failed(
    reason: str,
    predicate: ExceptionPredicate | SQLInvariant | ResultPredicate | None = None,
) -> None:
    """Mark the active run as showing the failure; ``predicate`` tells replay how to see it."""
    rec = active()
    if rec is None:
        raise CaptureError("mark_failed: no capture is running in this process")
    rec.mark_failed(reason, predicate)
