"""Remove what crashed or killed sessions left behind, found by label."""

from __future__ import annotations

import contextlib
import socket
from dataclasses import dataclass, field

from sandbox.containers import firewall
from sandbox.containers.engine import DockerClient, Progress, connect, no_progress
from sandbox.containers.labels import MANAGED, SESSION, owner_alive
from sandbox.containers.workdirs import gc_workdirs


@dataclass
class GcReport:
    containers: list[str] = field(default_factory=list)
    networks: list[str] = field(default_factory=list)
    rules: int = 0
    folders: list[str] = field(default_factory=list)
    """Temporary folders of file services (``files``, ``sqlite``) left by dead sessions."""

    @property
    def empty(self) -> bool:
        return not (self.containers or self.networks or self.rules or self.folders)


def gc(
    all: bool = False,
    *,
    client: DockerClient | None = None,
    progress: Progress = no_progress,
) -> GcReport:
    """Remove the containers and networks labelled by sandbox-replayer whose owning process
    is gone (or, with ``all``, every one of them, including live sessions' and the shared
    sandbox network, which is otherwise kept), then the host firewall rules of sessions that
    have no network left, and the temporary folders of
    file services whose session is gone."""
    import docker.errors

    client = client or connect()
    host = socket.gethostname()
    report = GcReport()
    wanted = {"label": f"{MANAGED}=true"}

    def doomed(labels: dict[str, str]) -> bool:
        return all or not owner_alive(labels or {}, host)

    for container in client.containers.list(all=True, filters=wanted):
        if doomed(container.labels):
            with contextlib.suppress(docker.errors.NotFound):
                container.remove(force=True, v=True)
                report.containers.append(container.name)
                progress(f"removed container {container.name}")
    keep: set[str] = set()
    for network in client.networks.list(filters=wanted):
        labels = network.attrs.get("Labels") or {}
        if not doomed(labels):  # the shared network names no process: kept unless ``all``
            keep.add(labels.get(SESSION, ""))
            continue
        with contextlib.suppress(docker.errors.NotFound):
            network.reload()
            for attached in network.attrs.get("Containers") or {}:
                with contextlib.suppress(docker.errors.APIError):
                    network.disconnect(attached, force=True)
            network.remove()
            report.networks.append(network.name)
            progress(f"removed network {network.name}")
    report.rules = firewall.gc_rules(keep)
    if report.rules:
        progress(f"removed {report.rules} firewall rule(s)")
    report.folders = gc_workdirs(all)
    for folder in report.folders:
        progress(f"removed folder {folder}")
    return report
