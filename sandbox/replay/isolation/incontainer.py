"""Replay a run with the agent inside the runner container, on the sandbox's private network.

::

    report = replay_in_container("demo-orders-duplicate", store="snapshots", times=3)
    report.verdict.summary()    # as replay(): 'failure reproduced: 3/3 runs'
    report.where                # 'sandbox-replayer/runner:latest (1a2b3c4d5e6f)'

The host brings the environment up as :func:`sandbox.replay.engine.replay` does (state
restored, clocks frozen, a private network that cannot reach the host), then runs
``sandbox replay RUN --times N --json`` in the runner image on that network, given the
services' addresses on it (:mod:`sandbox.replay.attached`): the resets between runs happen
inside, through the service kinds. The replay's runs are copied back into the store. See
:mod:`sandbox.containers.runner` for the mounts and the user it runs as.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sandbox.errors import ReplayError, SandboxError
from sandbox.replay.isolation.environment import redacted_values
from sandbox.replay.judging.verdict import RunVerdict, Verdict, predicate_for
from sandbox.snapshot.store import Store, as_store


@dataclass(frozen=True)
class ContainerReplayReport:
    """The report of ``sandbox replay --json`` run in the runner container."""

    original: str
    verdict: Verdict
    exit_code: int
    report: dict[str, Any]
    """The replay's JSON report, as :meth:`ReplayReport.to_json` wrote it inside."""
    where: str
    """The runner image (tag and id) the replay ran in."""
    replays: list[str] = field(default_factory=list)

    @property
    def mismatch(self) -> dict[str, Any] | None:
        found = self.report.get("mismatch")
        return found if isinstance(found, dict) else None

    @property
    def refused(self) -> list[str]:
        """Connections outside the sandbox refused inside (the runs are inconclusive)."""
        return [str(line) for line in self.report.get("refused") or []]


def ensure_runner_image(progress: Callable[[str], None] | None = None) -> None:
    """Build the runner image when it is missing or holds another version of the project."""
    from sandbox.containers.images import build_images

    build_images(["runner"], progress=progress or (lambda _line: None))


def replay_in_container(
    run_id: str,
    *,
    store: Store | str | os.PathLike[str] | None = None,
    times: int = 1,
    project: str | os.PathLike[str] | None = None,
    progress: Callable[[str], None] | None = None,
    timeout: float = 1800.0,
    extra_args: list[str] | None = None,
) -> ContainerReplayReport:
    """Replay ``run_id`` ``times`` times with the agent in the runner container.

    ``project`` (default: the working directory) is mounted read-only as the container's
    working directory, so the run's entrypoint imports there; an imported run's code runs
    there too (``--trust`` inside: the container is the sandbox). The runner image must be built
    (:func:`ensure_runner_image`). ``extra_args`` go to ``sandbox replay`` as they are.
    """
    from sandbox.containers import bring_up
    from sandbox.containers.runner import collect_runs, run_sandbox_command, stage_run

    if times < 1:
        raise ReplayError(f"times must be at least 1, got {times}")
    tell = progress or (lambda _line: None)
    st = as_store(store)
    manifest = st.load_manifest(run_id)
    if manifest.status != "complete":
        raise ReplayError(f"run {run_id} is incomplete (its capture never finished)")
    predicate = predicate_for(manifest.failure)
    # What capture redacted, the user sets here; the runner's environment is its own.
    secrets = redacted_values(manifest, os.environ)
    folder = Path(tempfile.mkdtemp(prefix="sbx-runner-store-"))
    try:
        staging = stage_run(st, run_id, folder / "store")
        frozen_at = manifest.clock.start if manifest.clock else None
        with bring_up(
            manifest.services, st, frozen_at=frozen_at, progress=tell, private_network=True
        ) as env:
            services = {
                name: ep.internal_url or ep.url for name, ep in sorted(env.services.items())
            }
            outcome = run_sandbox_command(
                env,
                ["replay", run_id, "--times", str(times), "--json", "--trust", *(extra_args or [])],
                store_folder=staging.root,
                project=Path(project) if project is not None else Path.cwd(),
                services=services,
                timeout=timeout,
                progress=tell,
                environment=secrets,
            )
        data = outcome.json()
        replays = [str(r) for r in data.get("replays", [])]
        collect_runs(staging, st, replays)
    finally:
        _remove(folder)
    raw_verdict = data.get("verdict")
    if not isinstance(raw_verdict, dict):
        raise SandboxError(f"the runner's report has no verdict: {str(data)[:200]}")
    runs = tuple(RunVerdict.from_json(r) for r in raw_verdict.get("runs", []))
    return ContainerReplayReport(
        original=run_id,
        verdict=Verdict(predicate, runs),
        exit_code=outcome.exit_code,
        report=data,
        where=outcome.image,
        replays=replays,
    )


def _remove(folder: Path) -> None:
    import shutil

    shutil.rmtree(folder, ignore_errors=True)
