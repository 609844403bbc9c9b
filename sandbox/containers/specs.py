"""How each service kind runs in the sandbox: one small table.

A :class:`ContainerSpec` names the image, port, user, limits and readiness check of a kind
served by a container; :data:`PATH_KINDS` lists the kinds that live in a folder the
environment owns (no container). Adding a server kind means adding one entry here.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from urllib.parse import quote

from sandbox.containers.images import image_tag
from sandbox.containers.sizing import Storage
from sandbox.errors import UnknownNameError

LIBFAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
"""Where Debian's libfaketime package puts the library in every sandbox image."""


def _postgres_url(host: str, port: int, database: str) -> str:
    return f"postgresql://postgres@{host}:{port}/{quote(database, safe='')}"


def _redis_url(host: str, port: int, database: str) -> str:
    return f"redis://{host}:{port}/{database or '0'}"


def _postgres_ready(url: str) -> bool:
    """A real connection and a query: ``pg_isready`` would say yes during recovery too."""
    import psycopg

    # The maintenance database exists from initdb on; the target one may not exist yet.
    base = url.rsplit("/", 1)[0] + "/postgres"
    try:
        with psycopg.connect(base, connect_timeout=2) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error:
        return False
    return True


def _postgres_create_database(url: str) -> None:
    """Create the endpoint's database when it does not exist (no state to restore)."""
    import psycopg
    from psycopg import sql

    base, _, database = url.rpartition("/")
    with psycopg.connect(base + "/postgres", autocommit=True, connect_timeout=5) as conn:
        found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,))
        if found.fetchone() is None:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))


def _redis_ready(url: str) -> bool:
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2)
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False
    finally:
        client.close()


@dataclass(frozen=True)
class ContainerSpec:
    kind: str
    image: str
    """Name in :data:`sandbox.containers.images.IMAGES`."""
    port: int
    user: str
    """Every sandbox container runs as one non-root user (libfaketime needs that too)."""
    server_major: int
    """Major version of the server in the image: a capture from a newer one is refused."""
    default_env: str
    """The variable an agent usually reads this service's address from."""
    default_database: str
    url: Callable[[str, int, str], str]
    ready: Callable[[str], bool]
    prepare_empty: Callable[[str], None] | None = None
    """Run once the server answers when there is no state to restore (make the database)."""
    faketime: bool = True
    """Whether libfaketime can freeze this server's clock (see the redis entry)."""
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

    @property
    def image_tag(self) -> str:
        return image_tag(self.image)


CONTAINER_KINDS: dict[str, ContainerSpec] = {
    s.kind: s
    for s in (
        ContainerSpec(
            kind="postgres",
            image="postgres",
            port=5432,
            user="postgres",
            server_major=15,
            default_env="DATABASE_URL",
            default_database="postgres",
            url=_postgres_url,
            ready=_postgres_ready,
            prepare_empty=_postgres_create_database,
            # The cluster is made at start (the entrypoint runs initdb, with fsync and full page
            # writes off) on a tmpfs sized to the database: database copies for reset avoid the
            # overlay filesystem (about 6x faster resets). The image gives the postgres user
            # uid/gid 999 (images/postgres/Dockerfile).
            storage=Storage(path="/var/lib/postgresql", owner=(999, 999), copies=3, memory_mib=512),
            # A restore in one transaction writes no WAL for the tables it creates, and the
            # WAL stays small whatever the database's size.
            command=tuple(
                f"-c{setting}"
                for setting in (
                    "wal_level=minimal",
                    "max_wal_senders=0",
                    "max_wal_size=64MB",
                    "min_wal_size=32MB",
                )
            ),
            pids_limit=256,
            # The socket and lock file, and temporary files: the only places besides the
            # data tmpfs where the server writes (read-only root filesystem).
            tmpfs={
                "/var/run/postgresql": "rw,size=1m,uid=999,gid=999,mode=0775",
                "/tmp": "rw,size=64m,mode=1777",
            },
        ),
        ContainerSpec(
            kind="redis",
            image="redis",
            port=6379,
            user="redis",
            server_major=7,
            default_env="REDIS_URL",
            default_database="0",
            url=_redis_url,
            ready=_redis_ready,
            # The image rebuilds Debian's redis with glibc's malloc: Debian's own binary links
            # jemalloc, whose start-up clock_gettime call recurses into libfaketime before it
            # is initialised, and never starts (images/redis/Dockerfile). Keys' TTLs are
            # restored relative to the restore, so they run out as they would have.
            faketime=True,
            # The data folder (a tmpfs sized to the state) holds the RDB file: the captured
            # snapshot is written there and loaded, and it is the restore point a reset
            # reloads (DEBUG RELOAD, hence the debug command). A SYNC (the state hash) streams
            # from the forked child at once, never touching that file. The image's redis user
            # is uid/gid 100/101.
            storage=Storage(path="/data", owner=(100, 101), copies=2, base_mib=16, memory_mib=256),
            state_file="/data/dump.rdb",
            pids_limit=64,
            tmpfs={"/tmp": "rw,size=64m,mode=1777"},
            command=(
                *("--dir", "/data", "--dbfilename", "dump.rdb"),
                *("--enable-debug-command", "yes"),
                *("--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0"),
            ),
        ),
    )
}

PATH_KINDS: dict[str, str] = {"sqlite": "file", "files": "folder"}
"""Kinds restored into the environment's own folder: a file (sqlite) or a folder (files)."""


def container_spec(kind: str) -> ContainerSpec:
    try:
        return CONTAINER_KINDS[kind]
    except KeyError:
        raise UnknownNameError(
            "container service kind", kind, [*CONTAINER_KINDS, *PATH_KINDS]
        ) from None


def is_path_kind(kind: str) -> bool:
    return kind in PATH_KINDS


def major_version(version: str | None) -> int | None:
    """``"15.18"``, ``"PostgreSQL 15.4 (Debian ...)"``, ``"7.0.15"`` -> 15, 15, 7."""
    if not version:
        return None
    found = re.search(r"(\d+)(?:\.\d+)*", version)
    return int(found.group(1)) if found else None
