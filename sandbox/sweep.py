"""Replay sweeps on a Ray cluster: ``sandbox sweep [RUN ...] --times N --ray ADDRESS``.

Each (run, replay) is one Ray task that asks for one unit of the custom resource ``docker``
(give it to the nodes that have a Docker engine: ``ray start --resources '{"docker": 4}'``).
The task opens the store by its location (an ``s3://`` store: the run is pulled from the
object store into a spool of that worker), replays the run once in that node's sandbox,
uploads the replay run it made, and returns the run's verdict as JSON. The driver gathers
them as they finish (progress), and judges each run as ``sandbox replay --times N`` does:
*reproduced* in one replay at least, *gone* when every replay was judged, else
*inconclusive*.

A worker or node that dies mid-task costs a retry (Ray re-runs the task elsewhere, up to
``retries`` times); a task that still cannot finish counts as an *inconclusive* replay with
its reason, never as *gone*. Ray is optional (``pip install 'sandbox-replayer[ray]'``) and
imported only here.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sandbox.errors import SandboxError
from sandbox.replay.judging.verdict import RunVerdict, Verdict, predicate_for
from sandbox.snapshot.manifest import Manifest
from sandbox.snapshot.spool import SpooledStore, default_spool
from sandbox.snapshot.store import Store, open_store

DOCKER_RESOURCE = "docker"
RETRIES = 3


@dataclass(frozen=True)
class SweepTask:
    run_id: str
    index: int
    store: str
    """The store's location, as every node opens it (``s3://...`` or a shared folder)."""
    project: str
    """The folder the agents' code imports from (the replay's working directory)."""
    entrypoint: str | None = None
    trust: bool = False


@dataclass(frozen=True)
class SweepRun:
    manifest: Manifest
    verdict: Verdict


@dataclass(frozen=True)
class SweepProgress:
    done: int
    total: int
    run_id: str
    outcome: str


def _task_store(location: str) -> Store:
    """The store a task works in: an ``s3://`` store through a spool of this worker process
    (workers on one host never share a spool folder), else the folder itself."""
    if location.startswith("s3://"):
        spool = default_spool(location)
        return SpooledStore(location, spool.with_name(f"{spool.name}.worker-{os.getpid()}"))
    return open_store(location)


def replay_task(task: SweepTask) -> dict[str, Any]:
    """One replay, run on a node with a Docker engine; the verdict of the run as JSON."""
    from sandbox.replay.engine import replay
    from sandbox.replay.plan import ReplayPlan

    os.chdir(task.project)
    store = _task_store(task.store)
    try:
        plan = ReplayPlan(times=1, entrypoint=task.entrypoint, trust=task.trust)
        report = replay(task.run_id, plan, store=store)
        verdict = report.verdict.runs[0].to_json()
    except SandboxError as exc:
        verdict = _inconclusive(task.index, f"the replay could not run: {exc}")
    if isinstance(store, SpooledStore):
        store.flush()  # the replay run goes back to the object store before the task ends
        store.close()
    verdict["run"] = task.index
    verdict["node"] = socket.gethostname()
    return verdict


def _inconclusive(index: int, detail: str) -> dict[str, Any]:
    return RunVerdict(index, "inconclusive", detail, reason="sandbox").to_json()


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise SandboxError("sandbox sweep needs Ray: pip install 'sandbox-replayer[ray]'") from None
    return ray


def sweep(
    manifests: Sequence[Manifest],
    *,
    store: str,
    times: int,
    address: str | None = None,
    project: str | os.PathLike[str] = ".",
    entrypoint: str | None = None,
    trust: bool = False,
    retries: int = RETRIES,
    progress: Callable[[SweepProgress], None] | None = None,
) -> list[SweepRun]:
    """Replay each run ``times`` times as Ray tasks; see the module documentation.
    ``address`` names a running cluster (``ray://`` or ``host:port``); ``None`` starts a
    local Ray instance whose one node offers as many ``docker`` units as it has CPUs."""
    ray = _ray()
    started = not ray.is_initialized()
    if started:
        if address:
            ray.init(address=address, logging_level="ERROR", log_to_driver=False)
        else:
            cpus = os.cpu_count() or 1
            ray.init(
                resources={DOCKER_RESOURCE: cpus},
                include_dashboard=False,
                logging_level="ERROR",
                log_to_driver=False,
            )
    try:
        return _gather(
            ray,
            manifests,
            store,
            times,
            str(Path(project).absolute()),
            entrypoint,
            trust,
            retries,
            progress,
        )
    finally:
        if started:
            ray.shutdown()


def _gather(
    ray: Any,
    manifests: Sequence[Manifest],
    store: str,
    times: int,
    project: str,
    entrypoint: str | None,
    trust: bool,
    retries: int,
    progress: Callable[[SweepProgress], None] | None,
) -> list[SweepRun]:
    remote = ray.remote(replay_task).options(
        num_cpus=1,
        resources={DOCKER_RESOURCE: 1},
        max_retries=retries,
        retry_exceptions=False,
    )
    tasks = {
        remote.remote(SweepTask(m.run_id, i, store, project, entrypoint, trust)): (m.run_id, i)
        for m in manifests
        for i in range(times)
    }
    results: dict[str, list[RunVerdict]] = {m.run_id: [] for m in manifests}
    pending = list(tasks)
    while pending:
        done, pending = ray.wait(pending, num_returns=1)
        for ref in done:
            run_id, index = tasks[ref]
            try:
                data = ray.get(ref)
            except ray.exceptions.RayError as exc:
                reason = f"the task failed after {retries} retries: {type(exc).__name__}"
                data = _inconclusive(index, reason)
            verdict = RunVerdict.from_json(data)
            results[run_id].append(verdict)
            if progress is not None:
                finished = len(tasks) - len(pending)
                progress(SweepProgress(finished, len(tasks), run_id, verdict.label))
    return [
        SweepRun(
            m,
            Verdict(
                predicate_for(m.failure), tuple(sorted(results[m.run_id], key=lambda r: r.run))
            ),
        )
        for m in manifests
    ]
