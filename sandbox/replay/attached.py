"""Replay against services that are already up: endpoints given, no Docker.

This is how a replay runs *inside* the runner container (which has no Docker socket): the
host brought the environment up (state restored, clocks frozen, private network) and hands the
replay each service's address on that network::

    replay(run_id, store="/store", times=3, services={"db": "postgresql://postgres@db:5432/app"})
    # or: sandbox replay RUN --services-json services.json

Each service of the run must be given. Before the first run a restore point is marked through
the service's kind (over the network, or on the path for file kinds); between runs the
services are reset to it, as :meth:`sandbox.containers.Environment.reset` does on the host.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from sandbox.errors import ReplayError, UnknownNameError
from sandbox.services.base import ServiceKind
from sandbox.services.registry import get_kind
from sandbox.snapshot.manifest import Manifest, ServiceState
from sandbox.snapshot.store import Store


class ServicesUp(Protocol):
    """Services someone brought up: their endpoints, the agent's bindings, and how to put
    them back to their starting state between runs."""

    @property
    def endpoints(self) -> Mapping[str, str]: ...

    @property
    def env(self) -> Mapping[str, str]: ...

    def reset(self) -> None: ...


@dataclass
class AttachedServices:
    """Services already running, with a restore point marked on each."""

    endpoints: dict[str, str]
    """Service name -> endpoint (URL or path), as the kinds and the predicates use it."""
    env: dict[str, str]
    """The bindings: variable -> endpoint, for the agent's environment."""
    kinds: dict[str, ServiceKind] = field(default_factory=dict)

    def reset(self) -> None:
        """Return every service to the restore point marked by :func:`attach`."""
        for name, kind in self.kinds.items():
            kind.reset(self.endpoints[name])


def attach(
    states: Sequence[ServiceState],
    given: Mapping[str, str],
    *,
    progress: Callable[[str], None] | None = None,
) -> AttachedServices:
    """Bind each of the run's services to its endpoint in ``given`` and mark a restore point.

    Raises :class:`ReplayError` when a service of the run has no endpoint, or an endpoint
    names no service of the run.
    """
    names = [s.name for s in states]
    missing = [n for n in names if n not in given]
    extra = sorted(set(given) - set(names))
    if missing or extra:
        parts = []
        if missing:
            parts.append("no endpoint for " + ", ".join(missing))
        if extra:
            parts.append("no service named " + ", ".join(extra) + " in the run")
        raise ReplayError(
            f"services given do not match the run's ({', '.join(names) or 'none'}): "
            + "; ".join(parts)
        )
    attached = AttachedServices(endpoints={}, env={})
    for state in states:
        endpoint = given[state.name]
        attached.endpoints[state.name] = endpoint
        try:
            kind = get_kind(state.kind)
        except UnknownNameError:
            if state.binding.env:
                attached.env[state.binding.env] = endpoint
            continue  # nothing to reset with; the service is used as it is
        variable = state.binding.env or kind.binding.env
        if variable:
            attached.env[variable] = endpoint
        kind.mark_restore_point(endpoint)
        attached.kinds[state.name] = kind
        if progress is not None:
            progress(f"{state.name}: attached at {endpoint}")
    return attached


def load_services(path: str | Path) -> dict[str, str]:
    """Read a services JSON file: an object mapping service name to endpoint."""
    try:
        data = json.loads(Path(path).read_text())
    except OSError as exc:
        raise ReplayError(f"cannot read services file {path}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise ReplayError(f"services file {path} is not JSON: {exc}") from None
    if not isinstance(data, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in data.items()
    ):
        raise ReplayError(
            f'services file {path} must be an object of name -> endpoint ({{"db": "postgresql'
            '://postgres@db:5432/app"}})'
        )
    return dict(data)


def restore_states(store: Store, manifest: Manifest, given: Mapping[str, str]) -> list[str]:
    """Restore each service's captured state (its ``before``) into the endpoint given for it
    (services started by someone else: a Kubernetes pod's sidecars); return their names."""
    restored = []
    for state in manifest.services:
        if state.before is None:
            continue
        if state.name not in given:
            raise ReplayError(f"no endpoint for service {state.name!r} of run {manifest.run_id}")
        data = store.get_verified_blob(state.before.sha256)
        get_kind(state.kind).restore(given[state.name], data)
        restored.append(state.name)
    return restored
