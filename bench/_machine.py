"""The machine's CPU, as the benchmarks that share two cores with services count it: this
process's, its finished child processes' and the services' containers'."""

from __future__ import annotations

import os

from sandbox.containers import Environment


def process_cpu() -> float:
    """This process's CPU seconds (user and system, every thread): the service, its load's
    clients and the capture share one interpreter."""
    times = os.times()
    return times.user + times.system


def children_cpu() -> float:
    """The CPU seconds of this process's finished child processes (the kept runs'
    ``pg_dump``)."""
    times = os.times()
    return times.children_user + times.children_system


class Containers:
    """The CPU seconds each service's container has used (the engine's one-shot stats):
    the database's work for a side (its sessions, the capture's pins and dumps) runs
    there, on the same cores as this process."""

    def __init__(self, env: Environment) -> None:
        self._client = env.client
        self._ids = {name: s.container_id for name, s in env.services.items() if s.container_id}

    def cpu(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for name, container_id in self._ids.items():
            stats = self._client.api.stats(container_id, stream=False, one_shot=True)
            out[name] = stats["cpu_stats"]["cpu_usage"]["total_usage"] / 1e9
        return out
