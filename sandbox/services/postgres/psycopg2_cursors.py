"""psycopg2's statements, seen through its connections' cursor class: its cursors are C, so
their methods cannot be patched, but a connection makes its cursors with the class it holds
(``connection.cursor_factory``). A watched connection holds a subclass of the class it had
(:func:`watched_cursor`: the same behaviour, its ``execute``, ``executemany`` and
``callproc`` first telling the installed hook the statement's connection), so that a
connection opened outside the run that uses it (at import, by an earlier request, by a
worker's start) is seen by that run at its first statement, as psycopg's are
(:func:`~sandbox.services.postgres.clients._seen_by_run`).

Once a process, when the client hooks are first installed (:func:`watch_connections`),
the connections already open are watched (found by the garbage collector's list of
objects), and ``psycopg2.connect`` is wrapped to watch each connection it opens from then
on, between runs too (when runs come one at a time the hooks are undone between them; a
watched cursor then does nothing of its own). A cursor made with an explicit
``cursor_factory=`` argument is not watched.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable
from typing import Any

from sandbox.seam.clients import instances_of

Seen = Callable[[Any], None]
"""Tell the run in context that a statement goes through this connection."""

_lock = threading.Lock()
_hooks: list[Seen] = []
"""The hook of the client hooks installed now (the last installed is used); none: the
watched cursors do nothing of their own."""
_scanned = False


class _Watched:
    """Marks a watched cursor class."""


def _tell(cursor: Any) -> None:
    try:
        seen = _hooks[-1]
    except IndexError:  # no hook installed (or the last undone just now)
        return
    seen(cursor.connection)


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
            _tell(self)
            return super().execute(query, vars)

        def executemany(self, query: Any, vars_list: Any) -> Any:
            _tell(self)
            return super().executemany(query, vars_list)

        def callproc(self, procname: Any, parameters: Any = None) -> Any:
            _tell(self)
            return super().callproc(procname, parameters)

    WatchedCursor.__name__ = base.__name__
    WatchedCursor.__qualname__ = base.__qualname__
    return WatchedCursor


def watch(connection: Any, default: type) -> None:
    """Make ``connection``'s cursors watched (``default``: psycopg2's cursor class, used
    when the connection names none)."""
    factory: Any = connection.cursor_factory or default
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
