"""What a service kind declares besides its state operations, so that everything a kind needs
lives with the kind: how an agent finds it (:class:`KindBinding`) and, for a server, how it runs
in a sandbox container (:class:`ContainerSpec`: image, port, user, limits, readiness).

The sandbox (:mod:`sandbox.containers`) and a replay against services already up
(:mod:`sandbox.replay.attached`) read these from the registered kind; adding a kind is one
module that defines it and registers it (:func:`sandbox.services.base.register`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import urlsplit


@dataclass(frozen=True)
class KindBinding:
    """How an agent usually finds a service of this kind."""

    env: str | None = None
    """The variable an agent usually reads the endpoint from (``DATABASE_URL``): replay sets
    it when the capture recorded no variable of its own."""
    path: Literal["file", "folder"] | None = None
    """Set for a kind restored into a file or a folder the environment owns (no container):
    the endpoint is that path."""


@dataclass(frozen=True)
class Storage:
    """How a kind's storage and memory grow with its state (see
    :func:`sandbox.containers.sizing.size_for`)."""

    path: str | None
    """Where the tmpfs is mounted (``None``: no tmpfs)."""
    owner: tuple[int, int] = (0, 0)
    copies: float = 3.0
    """How many copies of the state the storage holds at most."""
    base_mib: int = 256
    """Storage for an empty state (the cluster, the WAL, headroom)."""
    memory_mib: int = 512
    """Memory for the server itself, on top of its storage."""


def database_in_url(url: str) -> str | None:
    """The database an endpoint URL names (its path), ``None`` when it names none."""
    return urlsplit(url).path.lstrip("/") or None


@dataclass(frozen=True)
class ImageBuild:
    """How the image of a kind's container is built (see :mod:`sandbox.containers.images`)."""

    tag: str
    folder: str
    """The build context: a folder under the project's ``images/``, or an absolute path (a
    kind from another distribution brings its own)."""
    required: bool = True
    """Whether the demos and CI need it: ``sandbox doctor`` fails when a required image is
    missing or cannot freeze its clock, and only warns for another."""


@dataclass(frozen=True)
class ContainerSpec:
    """How a server kind runs in a sandbox container."""

    image: str
    """Name in :data:`sandbox.containers.images.IMAGES`."""
    port: int
    user: str
    """Every sandbox container runs as one non-root user (libfaketime needs that too)."""
    server_major: int
    """Major version of the server in the image: a capture from a newer one is refused."""
    default_database: str
    url: Callable[[str, int, str], str]
    """The endpoint of the server at ``host``, ``port``, for ``database``."""
    ready: Callable[[str], bool]
    """Whether the server at an endpoint answers (polled after the container starts)."""
    prepare_empty: Callable[[str], None] | None = None
    """Run once the server answers when there is no state to restore (make the database)."""
    database_of: Callable[[str], str | None] | None = None
    """The database a captured endpoint names (when the capture did not record one), so the
    restored service serves the same database; ``None``: the default database."""
    faketime: bool = True
    """Whether libfaketime can freeze this server's clock."""
    storage: Storage = field(default_factory=lambda: Storage(path=None))
    """The in-memory storage and memory limit, sized to the state by
    :func:`sandbox.containers.sizing.size_for`."""
    pids_limit: int = 256
    cpus: float = 1.0
    """CPU limit (besides the memory and pid limits)."""
    env: Mapping[str, str] = field(default_factory=dict)
    tmpfs: Mapping[str, str] = field(default_factory=dict)
    """Other in-memory mounts (not sized to the state). The root filesystem is read-only and
    every capability is dropped: a service writes only to its tmpfs mounts."""
    command: tuple[str, ...] = ()
    """Arguments after the image's entrypoint."""
    state_file: str | None = None
    """Where the server loads its state from a file (see
    :class:`sandbox.services.base.ServerFileLoad`): a capture that has one is written there and
    loaded, instead of being restored through the server."""
    build: ImageBuild | None = None
    """How :attr:`image` is built; ``None`` for an image another kind builds."""
