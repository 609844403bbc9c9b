"""Run the ``sandbox`` command in the runner image, on a sandbox's private network.

The host brings the environment up (:func:`~sandbox.containers.bringup.bring_up`); the
runner container joins that network and reaches the services by their aliases
(``ServiceEndpoint.internal_url``), so the agent runs with no way out, like its services. It
has no Docker socket: the replay inside it is given the endpoints (``--services-json``).

What the container sees:

* ``/store`` (read-write): a *staging* store holding the one run to replay and the blobs it
  references (:func:`stage_run`); the replay writes its runs there, and
  :func:`collect_runs` copies them back into the real store. The real store is never mounted,
  so the agent's code cannot touch the other runs, and no ownership of it changes.
* ``/project`` (read-only): the project's working directory, also the container's working
  directory, so the agent's code (``examples.orders:main``) imports as it does on the host
  (the replay looks modules up in the working directory). It is not put on ``PYTHONPATH``:
  a checkout of this project would then shadow the ``sandbox`` installed in the image.
* file services (``files``, ``sqlite``) at the same path as on the host.

Who it runs as: never root. A non-root host user runs the container as its own uid/gid, so
the staging store (and the file services) are theirs on both sides. Root on the host runs it
as the image's ``runner`` user (uid 1000), and hands the staging store and file services to
uid 1000 first (``chown``); the real store keeps its owner either way.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sandbox.containers.bringup import Environment
from sandbox.containers.engine import Progress, no_progress, require_image
from sandbox.containers.images import image_tag
from sandbox.containers.labels import KIND, SERVICE
from sandbox.errors import SandboxError
from sandbox.snapshot.integrity import check_store_run
from sandbox.snapshot.store import DirectoryStore, Store

RUNNER_UID = 1000
RUNNER_GID = 1000
STORE_MOUNT = "/store"
PROJECT_MOUNT = "/project"
SERVICES_MOUNT = "/sandbox-services.json"
RUNNER_KEY = ":runner"
"""Key of the runner container among the environment's containers (not a service name)."""
MEM_LIMIT = "1g"
PIDS_LIMIT = 512
CPU_LIMIT = 2_000_000_000
"""Two CPUs, in units of 1e-9 CPUs (docker's ``nano_cpus``)."""
OUTPUT_TAIL = 40


def container_user() -> tuple[int, int]:
    """The uid/gid the runner runs as: this process' when it is not root, else ``runner``."""
    uid, gid = os.geteuid(), os.getegid()
    if uid == 0:
        return RUNNER_UID, RUNNER_GID
    return uid, gid


def _hand_over(root: Path, uid: int, gid: int) -> None:
    """Give ``root`` and everything in it to ``uid``:``gid`` when that is another user (we
    are root then)."""
    if (uid, gid) == (os.geteuid(), os.getegid()):
        return
    os.chown(root, uid, gid)
    for folder, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            os.chown(os.path.join(folder, name), uid, gid, follow_symlinks=False)


def stage_run(store: Store, run_id: str, folder: Path) -> DirectoryStore:
    """A store in ``folder`` holding ``run_id`` of ``store`` and the blobs it references,
    writable by the user the runner runs as."""
    check = check_store_run(store, run_id)
    if not check.ok:
        raise SandboxError(f"run {run_id!r} fails verification: see `sandbox verify {run_id}`")
    staging = DirectoryStore(folder)
    for sub in (staging.runs_dir, staging.blobs_dir, folder / ".tmp"):
        sub.mkdir(parents=True, exist_ok=True)
    staging.save_raw(store.load_manifest(run_id), store.read_events_bytes(run_id))
    for key in sorted(check.blob_keys):
        staging.put_blob(store.get_verified_blob(key))
    _hand_over(folder, *container_user())
    return staging


def collect_runs(staging: DirectoryStore, store: Store, run_ids: Iterable[str]) -> None:
    """Copy runs the runner wrote into ``staging`` (and the blobs they reference) into
    ``store``, checked first."""
    for run_id in run_ids:
        check = check_store_run(staging, run_id)
        if not check.ok:
            raise SandboxError(f"the runner wrote run {run_id!r}, which fails verification")
        for key in sorted(check.blob_keys):
            if not store.has_blob(key):
                store.put_blob(staging.get_verified_blob(key))
        store.save_raw(staging.load_manifest(run_id), staging.read_events_bytes(run_id))


@dataclass(frozen=True)
class RunnerOutcome:
    """What one ``sandbox`` command in the runner container gave back."""

    exit_code: int
    stdout: str
    stderr: str
    container: str
    image: str
    """Image tag and id the container ran."""

    def json(self) -> dict[str, Any]:
        """The command's ``--json`` output; :class:`SandboxError` (with the command's error
        output) when there is none."""
        try:
            data = json.loads(self.stdout)
        except json.JSONDecodeError:
            data = None
        if not isinstance(data, dict):
            tail = "\n".join(self.stderr.strip().splitlines()[-OUTPUT_TAIL:]) or "(no output)"
            raise SandboxError(
                f"the runner container ({self.image}) exited {self.exit_code} with no JSON "
                f"report; its error output:\n{tail}"
            )
        return data


def create_runner(
    env: Environment,
    args: Sequence[str],
    *,
    store_folder: Path,
    project: Path,
    services: dict[str, str],
    environment: Mapping[str, str] | None = None,
) -> Any:
    """Create (not start) the runner container of :func:`run_sandbox_command`: every
    capability dropped, read-only root filesystem, CPU, memory and pid limits, on the
    sandbox's internal network. ``env.close()`` removes it."""
    if env.network_name is None and any("://" in url for url in services.values()):
        raise SandboxError("the environment has no network for the runner to join")
    if env.network_shared:
        raise SandboxError(
            "the runner cannot reach services on the shared sandbox network: bring the "
            "sandbox up with a network of its own (bring_up(..., private_network=True))"
        )
    tag = image_tag("runner")
    require_image(env.client, tag)
    uid, gid = container_user()
    services_file = store_folder.parent / "services.json"
    services_file.write_text(json.dumps(services, indent=2, sort_keys=True))
    services_file.chmod(0o644)
    volumes: dict[str, dict[str, str]] = {
        str(store_folder): {"bind": STORE_MOUNT, "mode": "rw"},
        str(project.resolve()): {"bind": PROJECT_MOUNT, "mode": "ro"},
        str(services_file): {"bind": SERVICES_MOUNT, "mode": "ro"},
    }
    if env.workdir is not None:  # file services: the same path inside
        _hand_over(env.workdir, uid, gid)
        volumes[str(env.workdir)] = {"bind": str(env.workdir), "mode": "rw"}
    name = f"sbx-{env.session}-runner"
    container = env.client.containers.create(
        tag,
        command=["sandbox", *args],
        name=name,
        hostname=name[:63],
        user=f"{uid}:{gid}",
        working_dir=PROJECT_MOUNT,
        environment={
            **(environment or {}),
            "SANDBOX_STORE": STORE_MOUNT,
            "SANDBOX_SERVICES_JSON": SERVICES_MOUNT,
            "HOME": "/tmp",
            "TZ": "UTC",
        },
        labels=env.owner.labels(**{SERVICE: "runner", KIND: "runner"}),
        network=env.network_name,
        network_disabled=env.network_name is None,
        volumes=volumes,
        mem_limit=MEM_LIMIT,
        pids_limit=PIDS_LIMIT,
        nano_cpus=CPU_LIMIT,
        read_only=True,
        tmpfs={"/tmp": "rw,size=256m"},
        cap_drop=["ALL"],
        security_opt=["no-new-privileges"],
    )
    env._containers[RUNNER_KEY] = container  # env.close() removes it, before the network
    return container


def run_sandbox_command(
    env: Environment,
    args: Sequence[str],
    *,
    store_folder: Path,
    project: Path,
    services: dict[str, str],
    timeout: float = 1800.0,
    progress: Progress = no_progress,
    environment: Mapping[str, str] | None = None,
) -> RunnerOutcome:
    """Run ``sandbox ARGS`` in the runner image on ``env``'s network, with ``store_folder``
    at ``/store``, ``project`` at ``/project`` and ``services`` (name -> endpoint inside the
    network) in a JSON file named by ``$SANDBOX_SERVICES_JSON``; ``environment`` is set in
    the container too (under the runner's own variables, which win). The container is
    removed before this returns (and by ``env.close()`` or ``sandbox gc`` if this process
    dies)."""
    import docker.errors

    container = create_runner(
        env,
        args,
        store_folder=store_folder,
        project=project,
        services=services,
        environment=environment,
    )
    tag, name, uid = image_tag("runner"), container.name, container_user()[0]
    try:
        image = env.client.images.get(tag)
        where = f"{tag} ({str(image.short_id).removeprefix('sha256:')})"
        progress(f"runner: {name} ({where}) as uid {uid}: sandbox {' '.join(args)}")
        container.start()
        try:
            status = container.wait(timeout=timeout)
        except Exception as exc:  # requests' timeouts: the docker SDK re-raises them as is
            with contextlib.suppress(docker.errors.APIError):
                container.kill()
            raise SandboxError(
                f"the runner container did not finish within {timeout:.0f} s ({exc})"
            ) from None
        stdout = container.logs(stdout=True, stderr=False).decode(errors="replace")
        stderr = container.logs(stdout=False, stderr=True).decode(errors="replace")
        code = int(status.get("StatusCode", 2))
        if status.get("Error"):
            stderr += f"\n{status['Error']}"
        if code == 137:
            stderr += f"\n(killed: out of memory? the runner's limit is {MEM_LIMIT})"
        return RunnerOutcome(code, stdout, stderr, name, where)
    finally:
        env._containers.pop(RUNNER_KEY, None)
        with contextlib.suppress(docker.errors.APIError, docker.errors.NotFound):
            container.remove(force=True, v=True)
