"""The common database clients, seen where they connect: services are found, not declared.

:func:`install` patches the connect functions of psycopg 3 (sync and async), psycopg2,
asyncpg, redis-py (sync and asyncio connection pools) and sqlite3 (SQLAlchemy engines connect
through these). Each connection is handed to a *router* as a :class:`Connect` (the kind, the
client, the endpoint the agent asked for, credentials included, in memory only); the router
returns the endpoint to really connect to: the same one at capture
(:mod:`sandbox.capture.discovery`), the sandbox's on replay (:mod:`sandbox.replay.redirect`),
or raises to refuse. Connections made by the router itself (capturing a service's state) pass
through unseen.
"""

from __future__ import annotations

import getpass
import importlib
import os
import threading
import warnings
from collections.abc import Callable
from types import ModuleType
from typing import Any
from urllib.parse import quote, urlsplit

from sandbox.capture._site._sandbox_report import sqlite_path as _sqlite_path
from sandbox.capture.onimport import Patch, when_imported
from sandbox.seam.clients import (
    ClientHook,
    ClientPatch,
    Connect,
    Router,
    patch_attribute,
    route,
    unseen,
)

_route = route
_patch = patch_attribute

_LOOPBACK = {"localhost": "127.0.0.1", "::1": "127.0.0.1", "[::1]": "127.0.0.1"}
DEFAULT_PORTS = {"postgres": 5432, "redis": 6379}


_hooks_lock = threading.Lock()
_hooks: list[ClientHook] | None = None


def client_hooks() -> list[ClientHook]:
    """The hooks of the entry-point group, loaded once; one that cannot be loaded is left
    out with a warning (capture fails open)."""
    global _hooks
    with _hooks_lock:
        if _hooks is None:
            from sandbox.plugins import CLIENTS_GROUP, plugin_entry_points

            found: list[ClientHook] = []
            for point in plugin_entry_points(CLIENTS_GROUP):
                try:
                    hook = point.load()
                except Exception as exc:
                    warnings.warn(
                        f"client hook {point.name!r} ({point.value}) cannot be loaded: {exc}",
                        RuntimeWarning,
                        stacklevel=2,
                    )
                    continue
                if isinstance(hook, ClientHook):
                    found.append(hook)
                    if hook.default_port is not None:
                        DEFAULT_PORTS.setdefault(hook.kind, hook.default_port)
            _hooks = found
        return _hooks


def endpoint_key(kind: str, endpoint: str) -> str:
    """The identity of a service endpoint, without credentials: ``postgres://127.0.0.1:5432/app``,
    ``redis://127.0.0.1:6379/0``, or a resolved path."""
    if "://" not in endpoint:
        return os.path.realpath(endpoint)
    if kind not in DEFAULT_PORTS:
        client_hooks()
    parts = urlsplit(endpoint)
    host = (parts.hostname or "localhost").lower()
    host = _LOOPBACK.get(host, host)
    try:
        port = parts.port or DEFAULT_PORTS.get(kind, 0)
    except ValueError:
        port = 0
    path = parts.path.strip("/") or ("0" if kind == "redis" else "")
    return f"{kind}://{host}:{port}/{path}"


def address_of(kind: str, endpoint: str) -> str:
    """``host:port`` of a server endpoint, the path of a file one (for messages and policies)."""
    if "://" not in endpoint:
        return endpoint
    key = endpoint_key(kind, endpoint)
    return key.split("://", 1)[1].split("/", 1)[0]


# --- endpoints from the clients' arguments --------------------------------------------------

_PG_ADDRESS = ("host", "hostaddr", "port", "user", "password", "dbname", "service", "passfile")


def _postgres_url(params: dict[str, Any]) -> str:
    user = str(params.get("user") or os.environ.get("PGUSER") or getpass.getuser())
    password = params.get("password") or os.environ.get("PGPASSWORD")
    host = str(params.get("host") or os.environ.get("PGHOST") or "localhost").split(",")[0]
    port = str(params.get("port") or os.environ.get("PGPORT") or 5432).split(",")[0]
    dbname = str(params.get("dbname") or os.environ.get("PGDATABASE") or user)
    auth = quote(user, safe="") + (f":{quote(str(password), safe='')}" if password else "")
    if host.startswith("/"):
        return f"postgresql://{auth}@:{port}/{quote(dbname)}?host={quote(host)}"
    netloc = f"[{host}]" if ":" in host else host
    return f"postgresql://{auth}@{netloc}:{port}/{quote(dbname)}"


def _redis_url(kwargs: dict[str, Any]) -> str:
    user = kwargs.get("username") or ""
    password = kwargs.get("password") or ""
    auth = quote(str(user), safe="") + (f":{quote(str(password), safe='')}" if password else "")
    auth = f"{auth}@" if auth else ""
    db = kwargs.get("db") or 0
    if kwargs.get("path"):
        return f"unix://{auth}{kwargs['path']}?db={db}"
    host = str(kwargs.get("host") or "localhost")
    return f"redis://{auth}{host}:{kwargs.get('port') or 6379}/{db}"


# --- the patches ----------------------------------------------------------------------------


def _psycopg(router: Router, undo: list[Callable[[], None]]) -> None:
    psycopg = importlib.import_module("psycopg")
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    options = {"autocommit", "prepare_threshold", "context", "row_factory", "cursor_factory"}

    def reroute(conninfo: str, kwargs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        extra = {k: v for k, v in kwargs.items() if k in options}
        params = conninfo_to_dict(
            make_conninfo(conninfo, **{k: v for k, v in kwargs.items() if k not in options})
        )
        endpoint = _postgres_url(params)
        target = _route(router, Connect("postgres", "psycopg", endpoint, conninfo or None))
        if target == endpoint:
            return conninfo, kwargs
        kept = {k: v for k, v in params.items() if k not in _PG_ADDRESS}
        return make_conninfo("", **{**kept, **conninfo_to_dict(target)}), extra

    def sync(original: Any) -> Any:
        func = original.__func__

        def connect(cls: Any, /, conninfo: str = "", **kwargs: Any) -> Any:
            conninfo, kwargs = reroute(conninfo, kwargs)
            return func(cls, conninfo, **kwargs)

        return classmethod(connect)

    def asyn(original: Any) -> Any:
        func = original.__func__

        async def connect(cls: Any, /, conninfo: str = "", **kwargs: Any) -> Any:
            conninfo, kwargs = reroute(conninfo, kwargs)
            return await func(cls, conninfo, **kwargs)

        return classmethod(connect)

    _patch(psycopg.Connection, "connect", sync, undo)
    _patch(psycopg.AsyncConnection, "connect", asyn, undo)
    _patch(psycopg, "connect", lambda _o: psycopg.Connection.connect, undo)


def _psycopg2(router: Router, undo: list[Callable[[], None]]) -> None:
    psycopg2 = importlib.import_module("psycopg2")
    extensions = importlib.import_module("psycopg2.extensions")
    make_dsn, parse_dsn = extensions.make_dsn, extensions.parse_dsn

    def make(original: Any) -> Any:
        def _connect(dsn: str, *args: Any, **kwargs: Any) -> Any:
            params = parse_dsn(dsn)
            endpoint = _postgres_url(params)
            target = _route(router, Connect("postgres", "psycopg2", endpoint, dsn or None))
            if target != endpoint:
                kept = {k: v for k, v in params.items() if k not in _PG_ADDRESS}
                dsn = make_dsn(target, **kept)
            return original(dsn, *args, **kwargs)

        return _connect

    _patch(psycopg2, "_connect", make, undo)


def _asyncpg(router: Router, undo: list[Callable[[], None]]) -> None:
    asyncpg = importlib.import_module("asyncpg")
    connection = importlib.import_module("asyncpg.connection")
    address = ("host", "port", "user", "password", "database", "passfile")

    def make(original: Any) -> Any:
        async def connect(dsn: str | None = None, **kwargs: Any) -> Any:
            params: dict[str, Any] = {}
            if dsn:
                from psycopg.conninfo import conninfo_to_dict

                params = dict(conninfo_to_dict(dsn))
            for key in address:
                if kwargs.get(key) is not None:
                    params["dbname" if key == "database" else key] = kwargs[key]
            endpoint = _postgres_url(params)
            target = _route(router, Connect("postgres", "asyncpg", endpoint, dsn))
            if target != endpoint:
                dsn = target
                kwargs = {k: v for k, v in kwargs.items() if k not in address}
            return await original(dsn, **kwargs)

        return connect

    _patch(connection, "connect", make, undo)
    _patch(asyncpg, "connect", lambda _o: connection.connect, undo)


def _redis(router: Router, undo: list[Callable[[], None]], module: str, client: str) -> None:
    conn = importlib.import_module(module)
    address = ("host", "port", "db", "username", "password", "path")
    parse_url = importlib.import_module("redis.connection").parse_url

    def make(original: Any) -> Any:
        def __init__(self: Any, connection_class: Any = None, *args: Any, **kwargs: Any) -> None:
            connection_class = connection_class or conn.Connection
            endpoint = _redis_url(kwargs)
            target = _route(router, Connect("redis", client, endpoint))
            if target != endpoint:
                kwargs = {k: v for k, v in kwargs.items() if k not in address}
                parsed = dict(parse_url(target))
                parsed.pop("connection_class", None)
                kwargs.update(parsed)
                connection_class = conn.Connection
            original(self, connection_class, *args, **kwargs)

        return __init__

    _patch(conn.ConnectionPool, "__init__", make, undo)


def _redis_commands(router: Router, undo: list[Callable[[], None]], module: str) -> None:
    """The commands of redis-py's clients, noted before they are sent (touched state)."""
    from sandbox.services.redis.commands import patch_commands

    client = "redis.asyncio" if module.startswith("redis.asyncio") else "redis"
    seen = lambda kwargs: _route(router, Connect("redis", client, _redis_url(dict(kwargs))))  # noqa: E731
    patch_commands(module, seen, undo)


def _sqlite(router: Router, undo: list[Callable[[], None]]) -> None:
    sqlite3 = importlib.import_module("sqlite3")
    dbapi2 = importlib.import_module("sqlite3.dbapi2")
    original = sqlite3.connect

    def connect(database: Any, *args: Any, **kwargs: Any) -> Any:
        path = _sqlite_path(database, bool(kwargs.get("uri")))
        if path is not None:
            target = _route(router, Connect("sqlite", "sqlite3", path, str(database)))
            if target != path:
                database = target
                kwargs.pop("uri", None)
        return original(database, *args, **kwargs)

    for owner in {sqlite3, dbapi2}:
        _patch(owner, "connect", lambda _o: connect, undo)


_CLIENTS: dict[str, ClientPatch] = {
    "psycopg": _psycopg,
    "psycopg2": _psycopg2,
    "asyncpg": _asyncpg,
    "redis.connection": lambda r, u: _redis(r, u, "redis.connection", "redis"),
    "redis.asyncio.connection": lambda r, u: _redis(
        r, u, "redis.asyncio.connection", "redis.asyncio"
    ),
    "redis.client": lambda r, u: _redis_commands(r, u, "redis.client"),
    "redis.asyncio.client": lambda r, u: _redis_commands(r, u, "redis.asyncio.client"),
    "sqlite3": _sqlite,
}
"""Module -> its patch, applied when the agent imports it (:mod:`sandbox.capture.onimport`)."""
_lock = threading.RLock()  # a patch may import (and so patch) another client


def install(router: Router) -> Callable[[], None]:
    """Route every connection of the clients through ``router``, patching each client when
    it is imported (at once if it is already); return the undo function."""
    undo: list[Callable[[], None]] = []

    def patcher(patch: Callable[[Router, list[Callable[[], None]]], None]) -> Patch:
        def apply(_module: ModuleType) -> None:
            with _lock:
                patch(router, undo)

        return apply

    patches = {**_CLIENTS, **{hook.module: hook.patch for hook in client_hooks()}}
    stop = when_imported({name: patcher(patch) for name, patch in patches.items()})

    def restore() -> None:
        stop()
        with _lock:
            for step in reversed(undo):
                step()
            undo.clear()

    return restore


__all__ = [
    "ClientHook",
    "ClientPatch",
    "Connect",
    "Router",
    "address_of",
    "client_hooks",
    "endpoint_key",
    "install",
    "patch_attribute",
    "route",
    "unseen",
]
