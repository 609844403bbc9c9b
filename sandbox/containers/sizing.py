"""Sandbox containers sized to the state they hold: a service's in-memory storage (tmpfs)
and memory limit grow with its captured state, and a state the Docker host cannot hold is
refused up front with the size it needs.

The state's size is what the capture measured (``state_bytes`` in the service's metadata: a
database's size) or, for older captures, an estimate from the dump's size. The kind says how
its container stores it (:class:`~sandbox.services.descriptor.Storage`): the tmpfs path, how
many copies of the state it keeps there (a database server: the database, its restore point
and the scratch copy an end-state diff restores) and its base size; a tmpfs is charged to the
container's memory, so the memory limit covers it too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from sandbox.errors import ResourceError
from sandbox.services.descriptor import Storage
from sandbox.sizes import human_size

MIB = 1 << 20
DUMP_EXPANSION = 8
"""Bytes of live state per byte of dump, for captures that did not measure their state."""


@dataclass(frozen=True)
class Size:
    storage_bytes: int
    memory_bytes: int

    @property
    def mem_limit(self) -> str:
        return f"{math.ceil(self.memory_bytes / MIB)}m"

    def tmpfs(self, storage: Storage) -> dict[str, str]:
        if storage.path is None:
            return {}
        uid, gid = storage.owner
        size = f"{math.ceil(self.storage_bytes / MIB)}m"
        return {storage.path: f"rw,uid={uid},gid={gid},size={size}"}


def size_for(storage: Storage, state_bytes: int) -> Size:
    """The storage and memory a container needs to hold ``state_bytes`` of state."""
    grown = math.ceil(storage.copies * state_bytes * 1.25)
    stored = storage.base_mib * MIB + (grown if storage.path is not None else 0)
    memory = storage.memory_mib * MIB + (stored if storage.path is not None else grown)
    return Size(stored, memory)


def state_bytes(measured: object, dump_bytes: int | None) -> int:
    """The state's size: as measured at capture, else estimated from its dump."""
    if isinstance(measured, int) and measured >= 0:
        return measured
    return DUMP_EXPANSION * (dump_bytes or 0)


def host_memory(info: dict[str, object]) -> int | None:
    """Memory the Docker host can give: its total (``docker info``), or less when this
    machine is the host and has less available."""
    total = info.get("MemTotal")
    found = int(total) if isinstance(total, int) else None
    meminfo = Path("/proc/meminfo")
    if meminfo.is_file():
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                available = int(line.split()[1]) * 1024
                found = available if found is None else min(found, available)
    return found


def check_fits(needs: dict[str, tuple[Size, int]], available: int | None) -> None:
    """Refuse, naming the memory needed, when the services' sizes do not fit ``available``
    (``needs``: service -> (size, state bytes))."""
    total = sum(size.memory_bytes for size, _ in needs.values())
    if available is None or total <= available:
        return
    parts = ", ".join(
        f"{name} {human_size(size.memory_bytes)} for {human_size(state)} of state"
        for name, (size, state) in sorted(needs.items())
    )
    raise ResourceError(
        f"the sandbox needs {human_size(total)} of memory ({parts}) but the Docker host has "
        f"{human_size(available)} available: free memory, or replay on a machine with at "
        f"least {human_size(total)}"
    )
