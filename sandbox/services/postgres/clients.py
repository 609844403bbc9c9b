"""Postgres connections seen at capture and routed on replay: psycopg 3 (sync and async),
psycopg2 and asyncpg (SQLAlchemy's engines connect through these), named in the
``sandbox_replayer.clients`` entry-point group (:class:`~sandbox.seam.clients.ClientHook`).
A connection opened outside the run that uses it is seen at its first statement: psycopg's
and asyncpg's through their methods, psycopg2's through its cursor class
(:mod:`.psycopg2_cursors`)."""

from __future__ import annotations

import contextlib
import functools
import getpass
import importlib
import os
from collections.abc import Callable, Hashable
from typing import Any
from urllib.parse import quote

from sandbox.errors import NetworkRefusedError
from sandbox.seam import boundary
from sandbox.seam.clients import (
    ClientHook,
    Connect,
    OncePerRun,
    Router,
    patch_attribute,
    route,
)
from sandbox.services.postgres import pgseen, psycopg2_cursors

PORT = 5432
SEEN = frozenset({"psycopg", "psycopg2", "asyncpg"})
"""The clients whose statements are seen (:mod:`sandbox.services.postgres.pgseen`)."""
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
    _watch_statements(psycopg, undo, router)


_STATEMENT_METHODS = ("execute", "executemany", "copy", "stream")

_ROUTED = OncePerRun()
"""The connections (or engines) each run was made to see."""


def _seen_by_run(
    router: Router,
    client: str,
    key: Hashable,
    params: Callable[[], dict[str, Any]],
    *,
    on_replay: bool = True,
) -> None:
    """Route the database a connection of ``client`` is connected to (``key``: the
    connection, or what stands for it; ``params``: its host, port, dbname, user and
    password) for the run in context, once a run and key: after that, one lookup.

    At capture, the run sees it: a connection it did not open itself (one from a pool or
    engine shared among runs, opened by an earlier one) is otherwise never routed to it,
    and its state never captured; an error of the capture's own never reaches the agent's
    statement. On a replay, a connection opened before the replay began (at import, or by
    the program before its run) still points where it pointed: a statement on it, to the
    recorded database or anywhere else outside the sandbox, is refused as a socket would
    be (the run is inconclusive), never sent; not ``on_replay``: nothing happens there
    (``params`` say where the agent asked, not where its connections were sent)."""
    run = boundary.current()
    if run is None:
        return
    replaying = bool(getattr(run, "replaying", False))
    if (replaying and not on_replay) or not _ROUTED.first(run, key):
        return
    try:
        given = params()
        endpoint = _url(given)
        target = route(router, Connect("postgres", client, endpoint))
    except NetworkRefusedError:
        if replaying:
            _ROUTED.forget(run, key)  # refused at each statement
            raise  # the router noted it
        return
    except Exception:  # capture fails open: the agent's statement goes on
        return
    if replaying and target != endpoint:
        _ROUTED.forget(run, key)
        address = f"{given.get('host')}:{given.get('port')}"
        error = NetworkRefusedError(
            f"replay refused a statement on a postgres connection ({client}) to {address}: "
            "it was opened before the replay began, to the recorded database, not to its "
            "sandbox counterpart (open it inside the replayed call)",
            host=address,
            port=None,
        )
        refuse = getattr(router, "refuse", None)
        if callable(refuse):
            refuse(error)
        raise error
    if not replaying and client not in SEEN:
        _unseen(client, given)


def _info_params(conn: Any) -> dict[str, Any]:
    """Where a psycopg or psycopg2 connection is connected (both have the same ``info``)."""
    info = conn.info
    return {
        "host": info.host,
        "port": info.port,
        "dbname": info.dbname,
        "user": info.user,
        "password": info.password,
    }


def _watch_statements(psycopg: Any, undo: list[Callable[[], None]], router: Router) -> None:
    """Each statement a cursor sends makes the run in context see its database
    (:func:`_seen_by_run`), then is handed to :func:`pgseen.saw` (the runs that keep
    statements are found there by context; none: one check). The wrapper calls the method
    as it is (sync, a coroutine, a generator or a context manager alike)."""

    def make(original: Any) -> Any:
        def method(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
            connection = self.connection
            _seen_by_run(router, "psycopg", connection, lambda: _info_params(connection))
            pgseen.saw(connection, query)
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
            if not args:
                with contextlib.suppress(Exception):  # capture fails open
                    psycopg2_cursors.watched_factory(kwargs, extensions.connection)
            if not psycopg2_cursors.is_watched_factory(kwargs.get("connection_factory")):
                _unseen("psycopg2", params)
            endpoint = _url(params)
            target = route(router, Connect("postgres", "psycopg2", endpoint, dsn or None))
            if target != endpoint:
                kept = {k: v for k, v in params.items() if k not in _ADDRESS}
                dsn = make_dsn(target, **kept)
            connection = original(dsn, *args, **kwargs)
            with contextlib.suppress(Exception):  # capture fails open
                psycopg2_cursors.watch(connection, extensions.cursor)
            return connection

        return _connect

    def seen(connection: Any, cursor: Any, query: Any) -> None:
        _seen_by_run(router, "psycopg2", connection, lambda: _info_params(connection))
        if not pgseen.keeping():
            return
        if psycopg2_cursors.is_watched(connection):
            pgseen.saw(connection, _psycopg2_text(query, cursor))  # never None here
        else:  # opened before the hooks: a cursor of a class it names is not seen
            _unseen("psycopg2", _info_params(connection))

    patch_attribute(psycopg2, "_connect", make, undo)
    undo.append(psycopg2_cursors.install(seen))
    psycopg2_cursors.watch_connections(psycopg2, extensions)


def _psycopg2_text(query: Any, cursor: Any) -> Any:
    """A psycopg2 statement as text (a ``psycopg2.sql`` object made text with its cursor;
    one that cannot be is handed on as it is: the statements then cannot tell)."""
    if isinstance(query, str | bytes) or not hasattr(query, "as_string"):
        return query
    try:
        return query.as_string(cursor)
    except Exception:
        return query


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
            endpoint = _url(params)
            target = route(router, Connect("postgres", "asyncpg", endpoint, dsn))
            if target != endpoint:
                dsn = target
                kwargs = {k: v for k, v in kwargs.items() if k not in address}
            return await original(dsn, **kwargs)

        return connect

    patch_attribute(connection, "connect", make, undo)
    patch_attribute(asyncpg, "connect", lambda _o: connection.connect, undo)
    _watch_asyncpg_queries(connection.Connection, router, undo)


def _asyncpg_params(conn: Any) -> dict[str, Any]:
    addr, params = conn._addr, conn._params
    host, port = (addr, None) if isinstance(addr, str) else addr[:2]
    return {
        "host": host,
        "port": port,
        "dbname": params.database,
        "user": params.user,
        "password": params.password,
    }


def _watch_asyncpg_queries(cls: Any, router: Router, undo: list[Callable[[], None]]) -> None:
    """A statement an asyncpg connection sends (one without arguments, one prepared: what
    ``fetch``, ``executemany``, cursors, a pool's connections and SQLAlchemy's dialect send,
    and ``COPY``) makes the run in context see its database (:func:`_seen_by_run`), then is
    handed to :func:`pgseen.saw_at`."""

    def make(original: Any) -> Any:
        async def method(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
            _seen_by_run(router, "asyncpg", self, lambda: _asyncpg_params(self))
            pgseen.saw_at(lambda: _asyncpg_where(self), query)
            return await original(self, query, *args, **kwargs)

        return method

    for attr in ("execute", "_get_statement", "_copy_out", "_copy_in"):
        patch_attribute(cls, attr, make, undo)


def _asyncpg_where(conn: Any) -> tuple[object, object, object]:
    params = _asyncpg_params(conn)
    return params["host"], params["port"], params["dbname"]


def _sqlalchemy(router: Router, undo: list[Callable[[], None]]) -> None:
    """psycopg2 under SQLAlchemy: a connection of an engine's pool opened by an earlier run
    is seen by the run that checks it out (``engine_connect``, from the engine's URL), even
    when its cursors are not watched (its class makes cursors of its own: see
    :mod:`.psycopg2_cursors`). On a replay the engines' pools are dropped
    before each run (:mod:`sandbox.replay.isolation.pools`) and psycopg2's connections are
    routed where they are opened."""
    event = importlib.import_module("sqlalchemy.event")
    engine_type = importlib.import_module("sqlalchemy.engine.base").Engine

    def checked_out(connection: Any) -> None:
        url = connection.engine.url
        if url.get_backend_name() != "postgresql" or url.get_driver_name() != "psycopg2":
            return  # psycopg and asyncpg are seen at their statements
        _seen_by_run(
            router,
            "psycopg2",
            connection.engine,
            lambda: {
                "host": url.host,
                "port": url.port,
                "dbname": url.database,
                "user": url.username,
                "password": url.password,
            },
            on_replay=False,
        )

    event.listen(engine_type, "engine_connect", checked_out)
    undo.append(lambda: event.remove(engine_type, "engine_connect", checked_out))


PSYCOPG = ClientHook(module="psycopg", patch=_psycopg, kind="postgres", default_port=PORT)
PSYCOPG2 = ClientHook(module="psycopg2", patch=_psycopg2, kind="postgres", default_port=PORT)
ASYNCPG = ClientHook(module="asyncpg", patch=_asyncpg, kind="postgres", default_port=PORT)
SQLALCHEMY_PSYCOPG2 = ClientHook(
    module="sqlalchemy.engine", patch=_sqlalchemy, kind="postgres", default_port=PORT
)
"""Applied once ``sqlalchemy.engine`` is imported whole: its engines' events are declared
by then (not yet while ``sqlalchemy.engine.base`` runs)."""
