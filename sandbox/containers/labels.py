"""Labels on every container and network the sandbox starts, so that cleanup finds them.

A session is one :func:`~sandbox.containers.bringup.bring_up`. Its resources carry the owning
process id (and that process' start time, so a reused pid is not mistaken for the owner):
:func:`~sandbox.containers.gc.gc` removes what belongs to processes that are gone.
"""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass

from sandbox.processes import pid_alive, process_start

PREFIX = "org.sandbox-replayer"
MANAGED = f"{PREFIX}.managed"
SESSION = f"{PREFIX}.session"
PID = f"{PREFIX}.pid"
PID_START = f"{PREFIX}.pid-start"
HOST = f"{PREFIX}.host"
SERVICE = f"{PREFIX}.service"
KIND = f"{PREFIX}.kind"
SHARED = f"{PREFIX}.shared"
"""On the shared sandbox network (:mod:`sandbox.containers.networks`), which outlives sessions."""
CONTEXT_HASH = f"{PREFIX}.context-hash"
"""On images: a hash of the build context, so that a changed Dockerfile triggers a rebuild."""


def new_session_id() -> str:
    return uuid.uuid4().hex[:12]


@dataclass(frozen=True)
class Owner:
    """Who owns a sandbox session: a session id and the process that started it."""

    session: str
    pid: int
    pid_start: str | None
    host: str

    @classmethod
    def current(cls, session: str | None = None) -> Owner:
        pid = os.getpid()
        return cls(session or new_session_id(), pid, process_start(pid), socket.gethostname())

    def labels(self, **extra: str) -> dict[str, str]:
        labels = {MANAGED: "true", SESSION: self.session, PID: str(self.pid), HOST: self.host}
        if self.pid_start is not None:
            labels[PID_START] = self.pid_start
        labels.update(extra)
        return labels


def owner_alive(labels: dict[str, str], host: str | None = None) -> bool:
    """Whether the process named by a resource's labels still runs.

    A resource started from another host (a shared engine), or one naming no process (a
    short-lived helper container), is assumed alive: its owner cannot be checked from here.
    """
    if labels.get(HOST, host) != (host or socket.gethostname()):
        return True
    try:
        pid = int(labels.get(PID, ""))
    except ValueError:
        return True
    return pid_alive(pid, labels.get(PID_START))
