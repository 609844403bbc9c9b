"""psycopg2's statements, seen through its connections' cursor class: its cursors are C, so
their methods cannot be patched, but a connection makes its cursors with the class it holds
(``connection.cursor_factory``). A watched connection holds a subclass of the class it had
(:func:`watched_cursor`: the same behaviour, its ``execute``, ``executemany``,
``callproc`` and ``copy_*`` first telling the installed hook the statement and its
connection), so that a connection opened outside the run that uses it (at import, by an
earlier request, by a worker's start) is seen by that run at its first statement, as
psycopg's are (:func:`~sandbox.services.postgres.clients._seen_by_run`).

A connection psycopg2 opens is made of a subclass of its class too
(:func:`watched_factory`, given as ``connection_factory``): its ``cursor()`` watches the
class a call names (``cursor_factory=RealDictCursor``) as well, so every statement it
sends is seen and its statements can tell a kept run's tables
(:mod:`sandbox.services.postgres.pgseen`). One opened before the hooks were first
installed is only watched through the class it holds (:func:`is_watched` says which).

Once a process, when the client hooks are first installed (:func:`watch_connections`),
the connections already open are watched (found by the garbage collector's list of
objects), and ``psycopg2.connect`` is wrapped to watch each connection it opens from then
on, between runs too (when runs come one at a time the hooks are undone between them; a
watched cursor then does nothing of its own).
"""

from __future__ import annotations

import contextlib
import functools
import sys
import threading
from collections.abc import Callable
from typing import Any

from sandbox.seam.clients import instances_of

Seen = Callable[[Any, Any, Any], None]
"""Tell the run in context that a cursor of this connection sends this statement:
``(connection, cursor, statement)``; the statement ``None``: an unwatched cursor was made."""

_lock = threading.Lock()
_hooks: list[Seen] = []
"""The hook of the client hooks installed now (the last installed is used); none: the
watched cursors do nothing of their own."""
_scanned = False


class _Watched:
    """Marks a watched cursor class."""


def _tell(cursor: Any, query: Any) -> None:
    try:
        seen = _hooks[-1]
    except IndexError:  # no hook installed (or the last undone just now)
        return
    seen(cursor.connection, cursor, query)


_classes: dict[type, type] = {}


def watched_cursor(base: type) -> type:
    """The watched subclass of the cursor class ``base`` (made once per class)."""
    with _lock:
        made = _classes.get(base)
        if made is None:
            made = _classes[base] = _subclass(base)
    return made


def _subclass(base: type) -> type:

    class WatchedCursor(base, _Watched):  # type: ignore[misc]
        def execute(self, query: Any, vars: Any = None) -> Any:
            _tell(self, query)
            return super().execute(query, vars)

        def executemany(self, query: Any, vars_list: Any) -> Any:
            _tell(self, query)
            return super().executemany(query, vars_list)

        def callproc(self, procname: Any, parameters: Any = None) -> Any:
            _tell(self, f"SELECT {procname}()")
            return super().callproc(procname, parameters)

        def copy_expert(self, sql: Any, *args: Any, **kwargs: Any) -> Any:
            _tell(self, sql)
            return super().copy_expert(sql, *args, **kwargs)

        def copy_from(self, file: Any, table: Any, *args: Any, **kwargs: Any) -> Any:
            _tell(self, f"COPY {table}")
            return super().copy_from(file, table, *args, **kwargs)

        def copy_to(self, file: Any, table: Any, *args: Any, **kwargs: Any) -> Any:
            _tell(self, f"COPY {table}")
            return super().copy_to(file, table, *args, **kwargs)

    WatchedCursor.__name__ = base.__name__
    WatchedCursor.__qualname__ = base.__qualname__
    return WatchedCursor


class _WatchedConnection:
    """Marks a watched connection class."""


_connections: dict[type, type] = {}


def watched_factory(kwargs: dict[str, Any], default: type) -> None:
    """Give ``psycopg2._connect``'s ``kwargs`` the watched subclass of the connection class
    they name (``default``, psycopg2's, when none), unless it is watched already or not a
    class (a factory function is left as it is)."""
    given = kwargs.get("connection_factory") or default
    if isinstance(given, type) and not issubclass(given, _WatchedConnection):
        with _lock:
            made = _connections.get(given)
            if made is None:
                made = _connections[given] = _connection_subclass(given)
        kwargs["connection_factory"] = made


def _plain(cls: type) -> bool:
    """Whether connections of ``cls`` make their cursors as psycopg2's own do (the class a
    call names, else the connection's, else psycopg2's cursor)."""
    own = sys.modules["psycopg2.extensions"].connection.cursor
    return bool(getattr(cls, "sandbox_plain", cls.cursor is own))  # type: ignore[attr-defined]


def _connection_subclass(base: type) -> type:
    extensions = sys.modules["psycopg2.extensions"]
    plain = _plain(base)

    class WatchedConnection(base, _WatchedConnection):  # type: ignore[misc]
        sandbox_plain = plain

        def cursor(self, *args: Any, **kwargs: Any) -> Any:
            if len(args) > 1:  # cursor(name, cursor_factory, ...)
                kwargs["cursor_factory"], args = args[1], (args[0], *args[2:])
            factory = kwargs.get("cursor_factory") or self.cursor_factory
            if factory is None and plain:  # the class psycopg2 itself would use
                factory = extensions.cursor
            if isinstance(factory, type) and not issubclass(factory, _Watched):
                kwargs["cursor_factory"] = watched_cursor(factory)
            made = super().cursor(*args, **kwargs)
            if not isinstance(made, _Watched):  # the class chose one of its own
                self.sandbox_unwatched = True
                _tell(made, None)  # its statements will not be: the run is told so
            return made

    WatchedConnection.__name__ = base.__name__
    WatchedConnection.__qualname__ = base.__qualname__
    return WatchedConnection


def is_watched_factory(factory: Any) -> bool:
    return isinstance(factory, type) and issubclass(factory, _WatchedConnection)


def is_watched(connection: Any) -> bool:
    """Whether every cursor ``connection`` made is watched (it was opened watched, and
    its class never chose an unwatched cursor of its own)."""
    return isinstance(connection, _WatchedConnection) and not getattr(
        connection, "sandbox_unwatched", False
    )


def watch(connection: Any, default: type) -> None:
    """Make ``connection``'s cursors watched (``default``: psycopg2's cursor class, used
    when the connection names none and its class makes its cursors as psycopg2 does; one
    that chooses its own, ``LoggingConnection``, is left to choose it)."""
    factory: Any = connection.cursor_factory
    if factory is None and _plain(type(connection)):
        factory = default
    if isinstance(factory, type) and not issubclass(factory, _Watched):
        connection.cursor_factory = watched_cursor(factory)


def watch_connections(psycopg2: Any, extensions: Any) -> None:
    """Watch the connections open now and those ``psycopg2.connect`` opens from now on;
    once a process (a scan of the objects the garbage collector tracks)."""
    global _scanned
    with _lock:
        if _scanned:
            return
        _scanned = True
    connect, default = psycopg2.connect, extensions.cursor

    def watched_connect(*args: Any, **kwargs: Any) -> Any:
        if len(args) < 2:  # connect(dsn, connection_factory, ...) is left as it is
            with contextlib.suppress(Exception):
                watched_factory(kwargs, extensions.connection)
        connection = connect(*args, **kwargs)
        with contextlib.suppress(Exception):  # capture fails open
            watch(connection, default)  # after connect set the cursor_factory it was given
        return connection

    functools.update_wrapper(watched_connect, connect)
    psycopg2.connect = watched_connect
    for connection in instances_of(extensions.connection):
        with contextlib.suppress(Exception):  # a closed connection: left as it is
            watch(connection, default)


def install(seen: Seen) -> Callable[[], None]:
    """Route the watched cursors' statements to ``seen`` until the returned undo."""
    with _lock:
        _hooks.append(seen)

    def undo() -> None:
        with _lock:
            if seen in _hooks:
                _hooks.remove(seen)

    return undo
