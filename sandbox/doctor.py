"""``sandbox doctor``: whether this machine has what the main job needs, one check a line.

Each :class:`Check` is ``ok``, ``warn`` (works, but something is off or only a side job needs
it), ``fail`` (the main job, ``make demo`` / ``make replay``, cannot run) or ``off`` (an
optional part not installed, or not checked because a check it depends on failed), with a
fix. :attr:`Diagnosis.exit_code` is 0 only when nothing failed.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal, NamedTuple

from sandbox.containers.bringup import RestoreSpec
from sandbox.containers.engine import DockerClient, connect
from sandbox.containers.images import ImageStatus, faketime_images, list_images, required_images
from sandbox.containers.labels import Owner
from sandbox.containers.sizing import Size, check_fits, host_memory, size_for
from sandbox.containers.specs import LIBFAKETIME, container_spec, server_kinds
from sandbox.errors import DockerUnavailableError, ResourceError
from sandbox.seam import llm
from sandbox.sizes import human_size
from sandbox.snapshot.store import DirectoryStore, Store

Status = Literal["ok", "warn", "fail", "off"]

MAIN_JOB_IMAGES = tuple(required_images())
"""Images a replay brings services up from; ``base`` only builds them, ``runner`` serves
``make ci-repro``."""

FAKETIME_IMAGES = tuple(faketime_images())
"""Images whose processes run under libfaketime."""

SPACE_HEADROOM = 64 * 1024**2
"""Free space a replay needs at the store besides its end state: events, reports, temp files."""

INTEGRATIONS: Mapping[str, str] = {
    **dict(llm.client_packages()),
    "mcp": "mcp",
    "langgraph": "langgraph",
    "openai-agents": "agents",
    "pydantic-ai": "pydantic_ai",
    "smolagents": "smolagents",
    "litellm": "litellm",
    "boto3": "botocore",
}
"""Optional integrations agents are built with (model clients, MCP, frameworks): the name
one installs, and the module that is there once it is (``pydantic-ai`` comes as
``pydantic-ai-slim`` too, which installs the same ``pydantic_ai``)."""

CHROMIUM = ("/usr/bin/chromium", "chromium")
"""Where the HTML report test looks for Debian's chromium (a path, then a name on PATH)."""

MAKE_IMAGES = "`make images`"


@dataclass(frozen=True)
class Check:
    name: str
    status: Status
    detail: str
    fix: str = ""

    def line(self) -> str:
        fix = f"; fix: {self.fix}" if self.fix and self.status != "ok" else ""
        return f"{self.status:<4}  {self.name:<26} {self.detail}{fix}"


@dataclass(frozen=True)
class Diagnosis:
    checks: list[Check]

    @property
    def ok(self) -> bool:
        return all(c.status != "fail" for c in self.checks)

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "exit_code": self.exit_code,
            "checks": [asdict(c) for c in self.checks],
        }


class DiskUsage(NamedTuple):
    total: int
    used: int
    free: int


DiskUsageFn = Callable[[str], DiskUsage]


def _disk_usage(path: str) -> DiskUsage:
    return DiskUsage(*shutil.disk_usage(path))


def diagnose(
    store: Store,
    *,
    connect_engine: Callable[[], DockerClient] = lambda: connect(timeout=10),
    image_tags: Mapping[str, str] | None = None,
    disk_usage: DiskUsageFn = _disk_usage,
) -> Diagnosis:
    """Run every check. ``image_tags`` looks for images under other tags (name -> tag);
    ``disk_usage`` measures the volume of a folder (``shutil.disk_usage``)."""
    checks: list[Check] = []
    client = None
    try:
        client = connect_engine()
    except DockerUnavailableError:
        checks.append(
            Check(
                "engine",
                "fail",
                f"no Docker engine answers at {_where()}",
                "`make engine` (as root on Debian it installs and starts one), or start "
                "dockerd, or set DOCKER_HOST",
            )
        )
    if client is not None:
        checks.append(_engine_check(client))
        statuses = list_images(client=client, tags=image_tags)
        checks.extend(_image_check(s) for s in statuses)
        checks.extend(_faketime_checks(client, statuses))
        checks.append(_memory_check(store, client))
    else:
        skipped = "not checked: no engine"
        checks.append(Check("images", "off", skipped))
        checks.append(Check("libfaketime", "off", skipped))
        checks.append(Check("memory", "off", skipped))
    checks.extend(_space_checks(store, disk_usage))
    checks.append(_chromium_check())
    owners: dict[str, list[str]] = {}
    for name, module in INTEGRATIONS.items():
        checks.append(_integration_check(name, module, owners))
    return Diagnosis(checks)


# --- engine and images -------------------------------------------------------------------


def _where() -> str:
    return os.environ.get("DOCKER_HOST") or "the default socket"


def _engine_check(client: DockerClient) -> Check:
    version = client.version()
    return Check(
        "engine",
        "ok",
        f"Docker {version.get('Version', '?')} (API {version.get('ApiVersion', '?')}) "
        f"at {_where()}",
    )


def _image_check(s: ImageStatus) -> Check:
    name = f"image {s.name}"
    needed = s.name in MAIN_JOB_IMAGES
    if s.state == "missing":
        why = {
            "base": "(only needed to build the others)",
            "runner": "(needed by `make ci-repro`)",
        }.get(s.name, "")
        status: Status = "fail" if needed else "warn"
        return Check(name, status, f"{s.tag} is not built {why}".rstrip(), MAKE_IMAGES)
    if s.state == "stale":
        return Check(
            name,
            "warn",
            f"{s.tag} was built from another build context than this checkout's",
            f"{MAKE_IMAGES} rebuilds it",
        )
    if s.state == "unlabelled":
        return Check(name, "ok", f"{s.tag} present (built by hand: not checked against images/)")
    return Check(name, "ok", f"{s.tag} present and current")


def _faketime_checks(client: DockerClient, statuses: list[ImageStatus]) -> Iterator[Check]:
    for s in statuses:
        if s.name not in FAKETIME_IMAGES or not s.present:
            continue
        name = f"libfaketime {s.name}"
        if _image_has_file(client, s.tag, LIBFAKETIME):
            yield Check(name, "ok", f"{LIBFAKETIME} in {s.tag}")
        else:
            yield Check(
                name,
                "fail" if s.name in MAIN_JOB_IMAGES else "warn",
                f"{LIBFAKETIME} is missing from {s.tag}: its clock cannot be frozen",
                f"`sandbox images build {s.name} --force`",
            )


def _image_has_file(client: DockerClient, tag: str, path: str) -> bool:
    """Whether ``path`` exists in the image: read from a created (never started) container."""
    import docker.errors

    container = client.containers.create(
        tag, command=["true"], labels=Owner.current().labels(), network_disabled=True
    )
    try:
        stream, _stat = container.get_archive(path)
        for _chunk in stream:
            pass
    except docker.errors.NotFound:
        return False
    finally:
        container.remove(force=True)
    return True


# --- space -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _State:
    size: int
    run_id: str
    service: str
    kind: str

    def describe(self) -> str:
        return f"{human_size(self.size)} ({self.run_id}, service {self.service})"


def _captured_states(store: Store) -> Iterator[_State]:
    for manifest in store.list():
        for service in manifest.services:
            for ref in (service.before, service.after):
                if ref is not None:
                    yield _State(ref.size, manifest.run_id, service.name, service.kind)


def _existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _space_checks(store: Store, disk_usage: DiskUsageFn) -> Iterator[Check]:
    if not isinstance(store, DirectoryStore):
        yield Check("space", "off", f"the store {store.location} is not a local folder")
        return
    states = list(_captured_states(store))
    largest = max(states, key=lambda s: s.size, default=None)
    need = SPACE_HEADROOM + (largest.size if largest else 0)
    free = disk_usage(str(_existing(store.root))).free
    if free >= need:
        biggest = f"the largest captured state is {largest.describe()}" if largest else "no state"
        yield Check("space", "ok", f"{human_size(free)} free at {store.root}; {biggest}")
    else:
        room = f"{human_size(SPACE_HEADROOM)} for a replay's events and reports"
        if largest:
            room += f" plus the largest captured state, {largest.describe()}"
        yield Check(
            "space",
            "fail",
            f"{human_size(free)} free at {store.root}, {human_size(need)} needed: {room}",
            "free space there, or point --store (SANDBOX_STORE) at a larger volume",
        )


def _memory_check(store: Store, client: DockerClient) -> Check:
    """The run whose containers need the most memory (each one's tmpfs and limit are sized to
    its state, :mod:`sandbox.containers.sizing`) against what the Docker host has."""
    largest: tuple[int, str, dict[str, tuple[Size, int]]] | None = None
    for manifest in store.list():
        needs = {}
        for state in manifest.services:
            if state.kind in server_kinds():
                held = RestoreSpec.from_state(state).state_bytes or 0
                needs[state.name] = (size_for(container_spec(state.kind).storage, held), held)
        total = sum(size.memory_bytes for size, _ in needs.values())
        if needs and (largest is None or total > largest[0]):
            largest = (total, manifest.run_id, needs)
    if largest is None:
        return Check("memory", "ok", "no container state in the store")
    total, run_id, needs = largest
    available = host_memory(client.info())
    if available is None:
        return Check(
            "memory",
            "warn",
            f"the Docker host's memory is unknown; {run_id} needs {human_size(total)}",
        )
    try:
        check_fits(needs, available)
    except ResourceError as exc:
        # Its message ends with what to do: that part is the fix.
        detail, sep, fix = str(exc).partition(": free memory")
        return Check("memory", "fail", f"{run_id}: {detail}", f"free memory{fix}" if sep else "")
    return Check(
        "memory",
        "ok",
        f"{human_size(available)} available to containers; the largest run, {run_id}, needs "
        f"{human_size(total)} (storage and limits sized to its state)",
    )


# --- host tools and integrations ---------------------------------------------------------


def _chromium_check() -> Check:
    path, name = CHROMIUM
    found = path if os.access(path, os.X_OK) else shutil.which(name)
    if found:
        return Check("chromium", "ok", f"{found} (the HTML report test)")
    return Check(
        "chromium",
        "warn",
        "not installed: the HTML report test skips (fails when CI=true)",
        "`apt-get install -y chromium`",
    )


def _integration_check(name: str, module: str, owners: dict[str, list[str]]) -> Check:
    """Installed when its module can be imported (found, not imported); named by the
    distribution that provides it, whichever that is (``owners``: the modules'
    distributions, read once when first needed)."""
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        return Check(
            f"integration {name}", "off", "not installed (optional)", f"pip install {name}"
        )
    if not owners:
        owners.update(importlib.metadata.packages_distributions())
    dists = owners.get(module) or [name]
    dist = name if name in dists else dists[0]  # langgraph-prebuilt installs langgraph too
    try:
        detail = f"{dist} {importlib.metadata.version(dist)}"
    except importlib.metadata.PackageNotFoundError:
        detail = f"{module} (no distribution metadata)"
    return Check(f"integration {name}", "ok", detail)
