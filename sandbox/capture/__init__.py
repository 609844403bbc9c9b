"""The capture agent: record every boundary of an agent run into a snapshot.

::

    from sandbox import capture

    @capture.tool
    def charge(order_id: str, cents: int) -> dict: ...

    with capture.run("checkout", store="snapshots", seed=7) as rec:
        agent.run()               # openai/anthropic/httpx calls are captured unchanged
        capture.result(answer)

Every boundary goes through :mod:`sandbox.seam.boundary`, the seam replay builds on.
"""

from sandbox.capture.clock import Clock, FakeClock, SystemClock, now
from sandbox.capture.command import CommandResult, capture_command
from sandbox.capture.http import patch_httpx
from sandbox.capture.ids import SeededUUID, patch_uuid4, seed_generators
from sandbox.capture.markers import active, mark_failed, result, state, timeout
from sandbox.capture.memory import (
    amemory_read,
    amemory_write,
    memory_delete,
    memory_read,
    memory_write,
)
from sandbox.capture.recorder import Recorder
from sandbox.capture.redact import RedactionConfig, Redactor
from sandbox.capture.retry import AsyncRetrying, Retrying, retrying
from sandbox.capture.run import Capture, ServiceSpec, run
from sandbox.capture.tools import retriever, tool
from sandbox.seam.boundary import (
    Adapter,
    Boundary,
    Call,
    Outcome,
    RecordedError,
    athrough,
    current,
    current_attempt,
    install,
    task_scope,
    through,
    use,
)
from sandbox.snapshot.manifest import ExceptionPredicate, ResultPredicate, SQLInvariant

__all__ = [
    "Adapter",
    "AsyncRetrying",
    "Boundary",
    "Call",
    "Capture",
    "Clock",
    "CommandResult",
    "ExceptionPredicate",
    "FakeClock",
    "Outcome",
    "RecordedError",
    "Recorder",
    "RedactionConfig",
    "Redactor",
    "ResultPredicate",
    "Retrying",
    "SQLInvariant",
    "SeededUUID",
    "ServiceSpec",
    "SystemClock",
    "active",
    "amemory_read",
    "amemory_write",
    "athrough",
    "capture_command",
    "current",
    "current_attempt",
    "install",
    "mark_failed",
    "memory_delete",
    "memory_read",
    "memory_write",
    "now",
    "patch_httpx",
    "patch_uuid4",
    "result",
    "retriever",
    "retrying",
    "run",
    "seed_generators",
    "state",
    "task_scope",
    "through",
    "timeout",
    "tool",
    "use",
]
