"""Kept runs are finished off the agent's path.

When a run under ``keep="failed"`` (or a rate) ends kept, what remains to do costs time the
agent must not wait for: its services' states are captured (a Postgres dump of the tables
it touched from the pinned snapshot, its Redis keys as they are now), its blobs written,
its manifest sealed and the run published to the store. :func:`submit` hands that to one
background thread; the run's pinned states stay held until it is done. A request served by
the agent answers as soon as its own work is done, whether its run is kept or not (except
in a child process of :mod:`multiprocessing`: see :func:`submit`).

One thread, one kept run at a time: however many runs fail at once, their captures use a
couple of connections to each service, not one each. Runs finished together share dumps
where they can (see :class:`sandbox.services.postgres.PinnedPostgres`): the state before
them when they shared a pin, the state after them when it was captured once they had all
ended (or the state of a pin taken after they ended, which the runs kept from that pin
share as their state before). So a kept run whose services' end states are dumped (it
holds a pinned state) waits :data:`GATHER_S` on the thread for those kept soon after it,
and they are finished as one batch, in the order they ended: under a steady rate of
failures that is one end-state dump for the batch, not one for each run. A kept run with
nothing to share is finished at once.

:func:`wait` blocks until every run handed over so far is finished (a test, a benchmark, a
service shutting down); the process waits for it when it ends, up to :data:`EXIT_WAIT_S`
(at exit and at ``os._exit``, which task workers' forked children end with:
:mod:`sandbox.capture.exits`).
"""

from __future__ import annotations

import contextlib
import contextvars
import sys
from collections.abc import Callable

from sandbox.capture import durable
from sandbox.capture.worker import Worker

EXIT_WAIT_S = 120.0
"""How long the process waits when it ends for the kept runs still being finished."""
GATHER_S = 0.5
"""How long a kept run that holds a pinned state waits for others to be finished with it
(:func:`wait` cuts it short)."""


Job = tuple[Callable[[], None], bool]
"""A kept run's finishing, and whether it is worth gathering others with it."""


def _finish(jobs: list[Job]) -> None:
    for job, _ in jobs:
        try:
            contextvars.Context().run(job)  # no run's context: the job's own work is unseen
        except BaseException as error:  # a job handles its own errors; never lose the thread
            with contextlib.suppress(Exception):
                sys.stderr.write(f"sandbox: finishing a kept run failed: {error!r}\n")


def _at_exit() -> None:
    if wait(EXIT_WAIT_S):
        durable.wait()  # the files the jobs handed to the syncer


def _gathers(job: Job) -> bool:
    return job[1]


_WORKER: Worker[Job] = Worker(
    "sandbox-finish", _finish, gather=GATHER_S, gathers=_gathers, at_exit=_at_exit
)


def submit(job: Callable[[], None], *, gather: bool = False) -> None:
    """Run ``job`` on the background thread, after the jobs submitted before it; with
    ``gather``, first wait up to :data:`GATHER_S` for more to finish with it. In a child
    process of :mod:`multiprocessing`, at once on the caller's thread: its parent may end it
    as soon as the call returns (a pool's ``terminate``, which leaving ``with Pool()``
    calls, kills its workers), and a run finished in the background would be lost."""
    if _child_of_multiprocessing():
        _WORKER.handle_now([(job, gather)])
    else:
        _WORKER.submit([(job, gather)])


def _child_of_multiprocessing() -> bool:
    process = sys.modules.get("multiprocessing.process")
    return process is not None and process.parent_process() is not None


def spent() -> tuple[int, float]:
    """How many kept runs have been finished in this process, and the CPU seconds spent on
    them (the work a service pays for its kept runs, off its requests' path but in a child
    process of :mod:`multiprocessing`)."""
    return _WORKER.spent()


def pending() -> int:
    """How many jobs are submitted and not finished yet."""
    return _WORKER.pending()


def wait(timeout: float | None = 60.0) -> bool:
    """Wait until every kept run handed over so far is finished (in the store, or marked
    damaged), without waiting for more to gather; whether it was in time."""
    if _WORKER.on_thread():
        return _WORKER.pending() <= 1
    return _WORKER.hurry(timeout)


def flush(timeout: float | None = 60.0) -> bool:
    """Wait until every run kept so far is finished and its files are durable; whether it
    was in time (each of the two waits up to ``timeout``)."""
    return wait(timeout) and durable.flush(timeout)
