"""Bring up a sandbox: a private network with no way out, one container per server service,
a folder for file services, the captured state restored, the clocks frozen.

::

    with bring_up(manifest.services, store, frozen_at=manifest.clock.start) as env:
        os.environ.update(env.env)        # DATABASE_URL=postgresql://postgres@10.x.y.z:5432/app
        for attempt in range(n):
            run_agent()
            env.reset()                   # back to the restored state, no restart

Containers are started with testcontainers' ``DockerContainer`` builder (its Ryuk reaper is
off: it cannot be pulled without a registry, and cleanup here is by label) on an
``internal`` bridge network (the shared sandbox network, or one of the sandbox's own: see
:mod:`sandbox.containers.networks`); the host reaches them at their address on that network
(it holds the bridge's gateway address), so no port is published. A container restores its
state with no CPU limit and gets its limit before the agent runs. Each container and a
network of the sandbox's own carry the session's labels (:mod:`sandbox.containers.labels`);
the environment is closed on exit, on exceptions, on SIGINT and on SIGTERM, and
:func:`sandbox.containers.gc.gc` removes what a killed process left.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Self
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from sandbox.containers import cleanup, firewall, networks
from sandbox.containers.engine import (
    DockerClient,
    Progress,
    connect,
    no_progress,
    put_file,
    require_image,
)
from sandbox.containers.labels import KIND, SERVICE, Owner
from sandbox.containers.sizing import Size, check_fits, host_memory, size_for, state_bytes
from sandbox.containers.specs import (
    LIBFAKETIME,
    container_spec,
    is_path_kind,
    major_version,
    spec_image_tag,
)
from sandbox.containers.workdirs import make_workdir
from sandbox.errors import (
    SandboxError,
    ServiceNotReadyError,
    ServiceVersionError,
    StoreError,
    UnknownNameError,
)
from sandbox.services.base import TIMEZONE_META, ServerFileLoad, ServiceKind
from sandbox.services.descriptor import ContainerSpec
from sandbox.services.registry import get_kind
from sandbox.snapshot.manifest import ServiceState
from sandbox.snapshot.store import Store

LOG_LINES = 20
_NAME = re.compile(r"[^a-zA-Z0-9_.-]+")


# --- what to bring up ------------------------------------------------------------------------


@dataclass(frozen=True)
class RestoreSpec:
    """One service to bring up and the state to restore into it (a capture declares its
    services with :class:`sandbox.capture.RestoreSpec`). Made from a manifest's
    :class:`ServiceState` by :meth:`from_state`, or by hand (tests, benchmarks) with inline
    ``data``."""

    name: str
    kind: str
    env: str | None = None
    """Variable the agent reads the address from; default: the kind's usual one (containers)."""
    path: str | None = None
    """For file kinds: the path the agent used at capture (its last part names the copy)."""
    blob: str | None = None
    """SHA-256 of the state to restore, in the store."""
    data: bytes | None = None
    """The state to restore, inline (instead of ``blob``)."""
    version: str | None = None
    """Server version at capture: a newer major than the image's is refused up front."""
    database: str | None = None
    state_bytes: int | None = None
    """Size of the live state (the database's size, as measured at capture): the container's
    storage and memory are sized to it; default: estimated from the dump's size."""
    timezone: str | None = None
    """The time zone the server ran in at capture (its container's ``TZ``); default: the
    sandbox's (UTC). The agent's own zone is never the service's."""

    @classmethod
    def from_state(cls, state: ServiceState) -> RestoreSpec:
        database = state.meta.get("database")
        value = state.binding.value
        if not isinstance(database, str):
            database = None
            container = get_kind(state.kind).container
            if value and "://" in value and container and container.database_of:
                database = container.database_of(value)
        return cls(
            name=state.name,
            kind=state.kind,
            env=state.binding.env,
            path=value if is_path_kind(state.kind) else None,
            blob=state.before.sha256 if state.before else None,
            version=state.version,
            database=database,
            state_bytes=state_bytes(
                state.meta.get("state_bytes"), state.before.size if state.before else None
            ),
            timezone=known_zone(state.meta.get(TIMEZONE_META)),
        )


def known_zone(name: object) -> str | None:
    """``name`` when it is a time zone this machine knows, else ``None`` (a capture may come
    from a bundle)."""
    if not isinstance(name, str) or not name or len(name) > 64:
        return None
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None
    return name


@dataclass(frozen=True)
class ServiceEndpoint:
    """Where a brought-up service answers."""

    name: str
    kind: str
    url: str
    """The endpoint from this host (a URL for a server, a path for a file kind)."""
    env: dict[str, str]
    """The binding: variable -> value, for the agent's environment."""
    internal_url: str | None = None
    """The endpoint from inside the sandbox network (by service name), for the runner."""
    container_id: str | None = None
    ip: str | None = None
    port: int | None = None
    restored: bool = False


# --- the environment -------------------------------------------------------------------------


@dataclass
class Environment:
    """A running sandbox. Close it (or use it as a context manager) to remove everything."""

    session: str
    owner: Owner
    frozen_at: datetime | None
    client: DockerClient
    network_name: str | None = None
    network_id: str | None = None
    network_shared: bool = False
    """Whether the containers are on the shared sandbox network (kept, with its firewall
    rules, when the sandbox closes; its containers cannot reach each other)."""
    workdir: Path | None = None
    host_isolated: bool = False
    """Whether new connections from the sandbox to this host are refused (see firewall)."""
    timezone: str = "UTC"
    """The containers' time zone (``TZ``) where a service recorded none of its own."""
    services: dict[str, ServiceEndpoint] = field(default_factory=dict)
    _containers: dict[str, Any] = field(default_factory=dict, repr=False)
    _marked: dict[str, ServiceKind] = field(default_factory=dict, repr=False)
    _closed: bool = field(default=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def env(self) -> dict[str, str]:
        """Every service's binding, merged: set these in the agent's environment."""
        merged: dict[str, str] = {}
        for endpoint in self.services.values():
            merged.update(endpoint.env)
        return merged

    def reset(self) -> None:
        """Return every service to its restored state without restarting anything (the
        services are reset side by side)."""
        marked = list(self._marked.items())
        if len(marked) <= 1:
            for name, kind in marked:
                kind.reset(self.services[name].url)
            return
        with ThreadPoolExecutor(len(marked), thread_name_prefix="sbx-reset") as pool:
            futures = [pool.submit(kind.reset, self.services[n].url) for n, kind in marked]
            for future in futures:
                future.result()

    def exec(self, service: str, command: list[str]) -> tuple[int, str]:
        """Run ``command`` in a service's container; return its exit code and output."""
        container = self._containers.get(service)
        if container is None:
            raise UnknownNameError("container service", service, list(self._containers))
        code, output = container.exec_run(command)
        return int(code), output.decode(errors="replace")

    def logs(self, service: str, tail: int = LOG_LINES) -> str:
        container = self._containers[service]
        return str(container.logs(tail=tail).decode(errors="replace"))

    def close(self) -> None:
        """Remove the containers, the network, the firewall rules and the folder. Idempotent;
        safe to call from a signal handler while the environment is being built."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        cleanup.unregister(self)
        import docker.errors

        for container in list(self._containers.values()):
            with contextlib.suppress(docker.errors.APIError, docker.errors.NotFound):
                container.remove(force=True, v=True)
        # The shared network stays for the next sandbox, with its rules (see networks).
        if self.network_id is not None and not self.network_shared:
            with contextlib.suppress(docker.errors.APIError, docker.errors.NotFound):
                self.client.networks.get(self.network_id).remove()
        if self.host_isolated and not self.network_shared:
            firewall.unblock_host(self.session)
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --- bringing it up --------------------------------------------------------------------------


def faketime_env(frozen_at: datetime, timezone: str = "UTC") -> dict[str, str]:
    """libfaketime settings that start a container's clock at ``frozen_at`` (naive: UTC), in
    the time zone ``timezone`` (libfaketime reads its start time as local time)."""
    when = frozen_at if frozen_at.tzinfo else frozen_at.replace(tzinfo=UTC)
    local = when.astimezone(ZoneInfo(timezone))
    return {
        "LD_PRELOAD": LIBFAKETIME,
        "FAKETIME": f"@{local:%Y-%m-%d %H:%M:%S}",
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        "TZ": timezone,
    }


def bring_up(
    services: Iterable[RestoreSpec | ServiceState],
    store: Store | None = None,
    frozen_at: datetime | None = None,
    *,
    timezone: str | None = None,
    progress: Progress = no_progress,
    client: DockerClient | None = None,
    timeout: float = 60.0,
    session: str | None = None,
    isolate_host: bool = True,
    private_network: bool = False,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> Environment:
    """Start every service, wait until each answers, restore its captured state and mark a
    restore point; return the running :class:`Environment` (a context manager).

    ``frozen_at`` starts each container's clock at that time (libfaketime); a container's
    ``TZ`` is its service's recorded zone (:attr:`RestoreSpec.timezone`), else ``timezone``
    (default UTC: a server's own time zone setting follows it). ``timeout`` bounds
    the wait for each service to answer. ``private_network`` gives the sandbox a network of its
    own, where its containers reach each other (the runner container needs it); otherwise they
    run on the shared sandbox network where this host can guard it (see
    :mod:`sandbox.containers.networks`). Anything that fails on the way removes what was
    started before the error propagates.
    """
    specs = [s if isinstance(s, RestoreSpec) else RestoreSpec.from_state(s) for s in services]
    _check_names(specs)
    states = _load_states(specs, store)
    for spec in specs:
        if not is_path_kind(spec.kind):
            _check_version(spec, container_spec(spec.kind))
    client = client or connect()
    for spec in specs:
        if not is_path_kind(spec.kind):
            require_image(client, spec_image_tag(container_spec(spec.kind)))
    check_fits(_sizes(specs, states), host_memory(client.info()))

    owner = Owner.current(session)
    env = Environment(owner.session, owner, frozen_at, client, timezone=timezone or "UTC")
    cleanup.register(env)
    try:
        _start(env, specs, states, progress, timeout, isolate_host, private_network, sleep, clock)
    except BaseException:
        env.close()
        raise
    return env


def _check_names(specs: list[RestoreSpec]) -> None:
    seen: set[str] = set()
    for spec in specs:
        if spec.name in seen:
            raise SandboxError(f"two services are named {spec.name!r}: names must be unique")
        seen.add(spec.name)
        get_kind(spec.kind)  # unknown kind: a clear error before anything starts


def _load_states(specs: list[RestoreSpec], store: Store | None) -> dict[str, bytes]:
    states: dict[str, bytes] = {}
    for spec in specs:
        if spec.data is not None:
            states[spec.name] = spec.data
        elif spec.blob is not None:
            if store is None:
                raise StoreError(f"service {spec.name!r} names blob {spec.blob}, but no store")
            states[spec.name] = store.get_blob(spec.blob)
    return states


def _sizes(specs: list[RestoreSpec], states: Mapping[str, bytes]) -> dict[str, tuple[Size, int]]:
    """Each container's size (see :mod:`sandbox.containers.sizing`) and its state's."""
    out: dict[str, tuple[Size, int]] = {}
    for spec in specs:
        if not is_path_kind(spec.kind):
            found = states.get(spec.name)
            held = state_bytes(spec.state_bytes, len(found) if found is not None else None)
            out[spec.name] = (size_for(container_spec(spec.kind).storage, held), held)
    return out


def _check_version(spec: RestoreSpec, cspec: ContainerSpec) -> None:
    captured = major_version(spec.version)
    if captured is not None and captured > cspec.server_major:
        tag = spec_image_tag(cspec)
        raise ServiceVersionError(
            f"service {spec.name!r} was captured from {spec.kind} {spec.version}, newer than "
            f"the {tag} image ({spec.kind} {cspec.server_major}): its dump cannot "
            f"be restored there; build images/{cspec.image} for {spec.kind} {captured}"
        )


def _start(
    env: Environment,
    specs: list[RestoreSpec],
    states: Mapping[str, bytes],
    progress: Progress,
    timeout: float,
    isolate_host: bool,
    private_network: bool,
    sleep: Callable[[float], None],
    clock: Callable[[], float],
) -> None:
    servers = [s for s in specs if not is_path_kind(s.kind)]
    if servers:
        shared = networks.shared(env.client) if isolate_host and not private_network else None
        if shared is not None:
            env.network_name, env.network_id = shared
            env.network_shared = env.host_isolated = True
        else:
            env.network_name, env.network_id = networks.private(env.client, env.owner)
            if isolate_host:
                env.host_isolated = firewall.block_host(env.owner.session)
        progress(f"network {env.network_name} (internal{', shared' if shared else ''})")
        if isolate_host and not env.host_isolated:
            progress(
                "warning: containers can reach this host's own addresses (blocking them "
                "needs root and iptables)"
            )
    for spec in specs:
        if is_path_kind(spec.kind):
            _prepare_path(env, spec, states, progress)
    if servers:
        pool = ThreadPoolExecutor(max_workers=len(servers), thread_name_prefix="sbx-ready")
        try:
            futures = [
                pool.submit(_ready_and_restore, env, s, states, progress, timeout, sleep, clock)
                for s in servers
            ]
            for future in futures:
                future.result()
        except BaseException:
            env.close()  # the other services' waits end at once: their containers are gone
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)


def _container_name(session: str, service: str) -> str:
    return f"sbx-{session}-{_NAME.sub('-', service)}"[:63]


def _create(env: Environment, spec: RestoreSpec, size: Size, progress: Progress) -> None:
    import docker.errors
    from docker.types import EndpointConfig
    from testcontainers.core.config import testcontainers_config
    from testcontainers.core.container import DockerContainer

    # Ryuk's image cannot be pulled without a registry; the sandbox cleans up by label.
    testcontainers_config.ryuk_disabled = True

    cspec = container_spec(spec.kind)
    alias = _NAME.sub("-", spec.name)
    zone = spec.timezone or env.timezone
    environment = {**cspec.env, "TZ": zone}
    if env.frozen_at is not None and cspec.faketime:
        environment.update(faketime_env(env.frozen_at, zone))
    # On the shared network no name resolves: its containers cannot reach each other.
    aliases = None if env.network_shared else [alias]
    builder = (
        DockerContainer(spec_image_tag(cspec))
        .with_name(_container_name(env.session, spec.name))
        .with_envs(**environment)
        .with_kwargs(
            user=cspec.user,
            labels=env.owner.labels(**{SERVICE: spec.name, KIND: spec.kind}),
            network=env.network_name,
            networking_config={
                env.network_name: EndpointConfig(env.client.api._version, aliases=aliases)
            },
            mem_limit=size.mem_limit,
            pids_limit=cspec.pids_limit,
            # No CPU limit yet: the restore runs at full speed; see _limit_cpus.
            # Each server runs as its own non-root user and needs no capability at all.
            cap_drop=["ALL"],
            read_only=True,
            security_opt=["no-new-privileges"],
        )
    )
    if cspec.command:
        builder.with_command(list(cspec.command))
    for path, options in {**cspec.tmpfs, **size.tmpfs(cspec.storage)}.items():
        builder.with_tmpfs_mount(path, options)  # the value is docker's tmpfs option string
    try:
        container = builder.start().get_wrapped_container()
    except docker.errors.APIError as exc:
        raise ServiceNotReadyError(
            f"service {spec.name!r} ({spec_image_tag(cspec)}) could not start: {exc.explanation}"
        ) from None
    env._containers[spec.name] = container
    container.reload()
    ip = container.attrs["NetworkSettings"]["Networks"][env.network_name]["IPAddress"]
    database = spec.database or cspec.default_database
    url = cspec.url(ip, cspec.port, database)
    variable = spec.env or get_kind(spec.kind).binding.env
    binding = {variable: url} if variable else {}
    env.services[spec.name] = ServiceEndpoint(
        name=spec.name,
        kind=spec.kind,
        url=url,
        env=binding,
        internal_url=None if env.network_shared else cspec.url(alias, cspec.port, database),
        container_id=container.id,
        ip=ip,
        port=cspec.port,
    )
    progress(f"{spec.name}: started {spec_image_tag(cspec)} at {ip}")


def _ready_and_restore(
    env: Environment,
    spec: RestoreSpec,
    states: Mapping[str, bytes],
    progress: Progress,
    timeout: float,
    sleep: Callable[[float], None],
    clock: Callable[[], float],
) -> None:
    import docker.errors

    cspec = container_spec(spec.kind)
    start = clock()
    _create(env, spec, _sizes([spec], states)[spec.name][0], progress)
    endpoint = env.services[spec.name]
    container = env._containers[spec.name]
    deadline = start + timeout
    while not cspec.ready(endpoint.url):
        try:
            container.reload()
            status = container.status
        except docker.errors.NotFound:
            status = "removed"
        if status in {"exited", "dead", "removed"}:
            raise _not_ready(env, spec, f"its container stopped ({status})")
        if clock() >= deadline:
            raise _not_ready(env, spec, f"it did not answer within {timeout:.0f} s")
        sleep(0.05)
    progress(f"{spec.name}: ready in {clock() - start:.2f} s")
    _restore(env, spec, endpoint.url, states, progress)
    _limit_cpus(spec, cspec, container)


CPU_PERIOD_US = 100_000


def _limit_cpus(spec: RestoreSpec, cspec: ContainerSpec, container: Any) -> None:
    """Give a service its CPU limit once its state is restored, before the agent runs (the
    restore is our own work, not the replay's: it runs unlimited)."""
    import docker.errors

    if cspec.cpus <= 0:
        return
    try:
        container.update(cpu_period=CPU_PERIOD_US, cpu_quota=int(cspec.cpus * CPU_PERIOD_US))
    except docker.errors.APIError as exc:
        raise ServiceNotReadyError(
            f"service {spec.name!r}: cannot set its CPU limit: {exc.explanation}"
        ) from None


def _not_ready(env: Environment, spec: RestoreSpec, why: str) -> ServiceNotReadyError:
    try:
        logs = env.logs(spec.name, LOG_LINES).rstrip()
    except Exception as exc:  # the container may be gone
        logs = f"(no logs: {exc})"
    cspec = container_spec(spec.kind)
    return ServiceNotReadyError(
        f"service {spec.name!r} ({spec_image_tag(cspec)}) never became ready: {why}; its last "
        f"{LOG_LINES} log lines:\n{logs or '(empty)'}"
    )


def _restore(
    env: Environment,
    spec: RestoreSpec,
    url: str,
    states: Mapping[str, bytes],
    progress: Progress,
) -> None:
    data = states.get(spec.name)
    kind = get_kind(spec.kind)
    if data is None and kind.container is not None and kind.container.prepare_empty:
        kind.container.prepare_empty(url)
    if data is not None:
        if not _load_file(env, spec, kind, url, data):
            kind.restore(url, data)
        env.services[spec.name] = replace(env.services[spec.name], restored=True)
        progress(f"{spec.name}: state restored ({len(data)} bytes)")
    kind.mark_restore_point(url)
    env._marked[spec.name] = kind


def _load_file(
    env: Environment, spec: RestoreSpec, kind: ServiceKind, url: str, data: bytes
) -> bool:
    """Write the capture's server file into the container and load it (see
    :class:`ServerFileLoad`); ``False`` when the kind or the capture has none."""
    if is_path_kind(spec.kind) or not isinstance(kind, ServerFileLoad):
        return False
    path = container_spec(spec.kind).state_file
    payload = kind.server_file(data)
    if path is None or payload is None:
        return False
    put_file(env.client, env._containers[spec.name], path, payload)
    return kind.load_server_file(url, data)


def _prepare_path(
    env: Environment, spec: RestoreSpec, states: Mapping[str, bytes], progress: Progress
) -> None:
    if env.workdir is None:
        env.workdir = make_workdir(env.owner)
    folder = env.workdir / _NAME.sub("-", spec.name)
    folder.mkdir()
    leaf = Path(spec.path).name if spec.path else ""
    if get_kind(spec.kind).binding.path == "folder":
        target = folder / (leaf or "workspace")
        target.mkdir()
    else:
        target = folder / (leaf or f"{spec.name}.db")
        if spec.name not in states:
            target.touch()  # nothing to restore: an empty file (an empty SQLite database)
    binding = {spec.env: str(target)} if spec.env else {}
    env.services[spec.name] = ServiceEndpoint(spec.name, spec.kind, str(target), binding)
    progress(f"{spec.name}: {spec.kind} at {target}")
    _restore(env, spec, str(target), states, progress)
