"""Postgres connections seen at capture and routed on replay: psycopg 3 (sync and async),
psycopg2 and asyncpg (SQLAlchemy's engines connect through these), named in the
``sandbox_replayer.clients`` entry-point group (:class:`~sandbox.seam.clients.ClientHook`)."""

from __future__ import annotations

import functools
import getpass
import importlib
import os
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from sandbox.seam.clients import ClientHook, Connect, Router, patch_attribute, route

PORT = 5432
_ADDRESS = ("host", "hostaddr", "port", "user", "password", "dbname", "service", "passfile")


def _url(params: dict[str, Any]) -> str:
    user = str(params.get("user") or os.environ.get("PGUSER") or getpass.getuser())
    password = params.get("password") or os.environ.get("PGPASSWORD")
    host = str(params.get("host") or os.environ.get("PGHOST") or "localhost").split(",")[0]
    port = str(params.get("port") or os.environ.get("PGPORT") or PORT).split(",")[0]
    dbname = str(params.get("dbname") or os.environ.get("PGDATABASE") or user)
    auth = quote(user, safe="") + (f":{quote(str(password), safe='')}" if password else "")
    if host.startswith("/"):
        return f"postgresql://{auth}@:{port}/{quote(dbname)}?host={quote(host)}"
    netloc = f"[{host}]" if ":" in host else host
    return f"postgresql://{auth}@{netloc}:{port}/{quote(dbname)}"


def _unseen(client: str, params: dict[str, Any]) -> None:
    """A connection through a client whose statements are not seen (see
    :mod:`sandbox.services.postgres.pgseen`)."""
    from sandbox.services.postgres import pgseen

    user = params.get("user") or os.environ.get("PGUSER")
    pgseen.connected(
        client,
        params.get("host") or os.environ.get("PGHOST"),
        params.get("port") or os.environ.get("PGPORT"),
        params.get("dbname") or os.environ.get("PGDATABASE") or user,
    )


def _psycopg(router: Router, undo: list[Callable[[], None]]) -> None:
    psycopg = importlib.import_module("psycopg")
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    options = {"autocommit", "prepare_threshold", "context", "row_factory", "cursor_factory"}

    @functools.lru_cache(maxsize=64)
    def parsed(conninfo: str, given: tuple[tuple[str, Any], ...]) -> dict[str, Any]:
        """The connection parameters of ``conninfo`` and the keywords ``given``: parsed once
        for the same ones (an agent opens the same connection again and again)."""
        return conninfo_to_dict(make_conninfo(conninfo, **dict(given)))

    def reroute(conninfo: str, kwargs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        extra = {k: v for k, v in kwargs.items() if k in options}
        given = tuple(sorted((k, v) for k, v in kwargs.items() if k not in options))
        try:
            params = dict(parsed(conninfo, given))
        except TypeError:  # a keyword's value cannot be a key: parsed each time
            params = conninfo_to_dict(make_conninfo(conninfo, **dict(given)))
        endpoint = _url(params)
        target = route(router, Connect("postgres", "psycopg", endpoint, conninfo or None))
        if target == endpoint:
            return conninfo, kwargs
        kept = {k: v for k, v in params.items() if k not in _ADDRESS}
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

    patch_attribute(psycopg.Connection, "connect", sync, undo)
    patch_attribute(psycopg.AsyncConnection, "connect", asyn, undo)
    patch_attribute(psycopg, "connect", lambda _o: psycopg.Connection.connect, undo)
    _watch_statements(psycopg, undo)


_STATEMENT_METHODS = ("execute", "executemany", "copy", "stream")


def _watch_statements(psycopg: Any, undo: list[Callable[[], None]]) -> None:
    """Each statement a cursor sends is handed to :func:`pgseen.saw` first (the runs
    that keep statements are found there by context; none: one check). The wrapper calls
    the method as it is (sync, a coroutine, a generator or a context manager alike)."""
    from sandbox.services.postgres import pgseen

    def make(original: Any) -> Any:
        def method(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
            pgseen.saw(self.connection, query)
            return original(self, query, *args, **kwargs)

        return method

    for name in ("Cursor", "AsyncCursor", "ServerCursor", "AsyncServerCursor"):
        cls = getattr(psycopg, name, None)
        for attr in _STATEMENT_METHODS:
            if cls is not None and attr in vars(cls):
                patch_attribute(cls, attr, make, undo)


def _psycopg2(router: Router, undo: list[Callable[[], None]]) -> None:
    psycopg2 = importlib.import_module("psycopg2")
    extensions = importlib.import_module("psycopg2.extensions")
    make_dsn, parse_dsn = extensions.make_dsn, extensions.parse_dsn

    def make(original: Any) -> Any:
        def _connect(dsn: str, *args: Any, **kwargs: Any) -> Any:
            params = parse_dsn(dsn)
            _unseen("psycopg2", params)
            endpoint = _url(params)
            target = route(router, Connect("postgres", "psycopg2", endpoint, dsn or None))
            if target != endpoint:
                kept = {k: v for k, v in params.items() if k not in _ADDRESS}
                dsn = make_dsn(target, **kept)
            return original(dsn, *args, **kwargs)

        return _connect

    patch_attribute(psycopg2, "_connect", make, undo)


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
            _unseen("asyncpg", params)
            endpoint = _url(params)
            target = route(router, Connect("postgres", "asyncpg", endpoint, dsn))
            if target != endpoint:
                dsn = target
                kwargs = {k: v for k, v in kwargs.items() if k not in address}
            return await original(dsn, **kwargs)

        return connect

    patch_attribute(connection, "connect", make, undo)
    patch_attribute(asyncpg, "connect", lambda _o: connection.connect, undo)


PSYCOPG = ClientHook(module="psycopg", patch=_psycopg, kind="postgres", default_port=PORT)
PSYCOPG2 = ClientHook(module="psycopg2", patch=_psycopg2, kind="postgres", default_port=PORT)
ASYNCPG = ClientHook(module="asyncpg", patch=_asyncpg, kind="postgres", default_port=PORT)
