"""The capture agent: record every boundary of an agent run into a snapshot.

::

    from sandbox import capture

    @capture.tool
    def charge(order_id: str, cents: int) -> dict: ...

    with capture.run("checkout", store="snapshots", seed=7) as rec:
        agent.run()               # openai/anthropic/httpx calls are captured unchanged
        capture.result(answer)

These names are the public surface: the verbs an agent uses. Every boundary goes through
:mod:`sandbox.seam` (internal), the contract capture and replay share; the clocks, the
recorder and the client patches live in this package's modules.

Importing it starts noting the environment variables read while no run is open (settings
read at import, before ``capture.run``): see :mod:`sandbox.capture.envreads`.
"""

from sandbox.capture.clock import now
from sandbox.capture.envreads import track_from_import
from sandbox.capture.finisher import flush
from sandbox.capture.markers import active, mark_failed, result, state, timeout
from sandbox.capture.memory import (
    amemory_read,
    amemory_write,
    memory_delete,
    memory_read,
    memory_write,
)
from sandbox.capture.retry import AsyncRetrying, Retrying, retrying
from sandbox.capture.run import Capture, ServiceSpec, run
from sandbox.capture.tools import retriever, tool
from sandbox.redaction import RedactionConfig
from sandbox.seam.boundary import task_scope
from sandbox.snapshot.manifest import ExceptionPredicate, ResultPredicate, SQLInvariant

track_from_import()

__all__ = [
    "AsyncRetrying",
    "Capture",
    "ExceptionPredicate",
    "RedactionConfig",
    "ResultPredicate",
    "Retrying",
    "SQLInvariant",
    "ServiceSpec",
    "active",
    "amemory_read",
    "amemory_write",
    "flush",
    "mark_failed",
    "memory_delete",
    "memory_read",
    "memory_write",
    "now",
    "result",
    "retriever",
    "retrying",
    "run",
    "state",
    "task_scope",
    "timeout",
    "tool",
]
