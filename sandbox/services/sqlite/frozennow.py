"""SQLite's ``'now'`` under the replay's frozen clock: the date and time functions of the
connections ``sqlite3.connect`` opens while it is frozen read this process's ``time.time()``
(which the clock freezes); its ``CURRENT_TIMESTAMP`` keywords do not (they cannot be
overridden). The sqlite kind's client hook names :func:`frozen_now`
(:attr:`sandbox.seam.clients.ClientHook.frozen_now`)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any


class SQLiteNow:
    """SQLite's date and time functions, in the connections opened while it runs, read
    ``'now'`` (or no time value) as this process's ``time.time()``: each call is evaluated
    by SQLite itself, on a private connection, with the frozen instant in place of
    ``'now'``."""

    FUNCTIONS = {"date": 0, "time": 0, "datetime": 0, "julianday": 0, "unixepoch": 0}
    FUNCTIONS_WITH_FORMAT = {"strftime": 1}

    def __init__(self) -> None:
        self._active = False
        self._undo: list[Callable[[], None]] = []
        self._private: Any = None
        self._lock = threading.Lock()

    def start(self) -> None:
        import sqlite3
        import sqlite3.dbapi2

        self._active = True
        for owner in {sqlite3, sqlite3.dbapi2}:
            self._wrap(owner)

    def _wrap(self, owner: Any) -> None:
        original = owner.connect

        def connect(*args: Any, **kwargs: Any) -> Any:
            conn = original(*args, **kwargs)
            if self._active:
                self._freeze(conn, original)
            return conn

        owner.connect = connect

        def undo() -> None:
            if owner.connect is connect:
                owner.connect = original

        self._undo.append(undo)

    def _freeze(self, conn: Any, connect: Any) -> None:
        with self._lock:
            if self._private is None:
                self._private = connect(":memory:", check_same_thread=False)
        for name, at in {**self.FUNCTIONS, **self.FUNCTIONS_WITH_FORMAT}.items():
            conn.create_function(name, -1, self._function(name, at))

    def _function(self, name: str, at: int) -> Callable[..., Any]:
        def evaluate(*args: Any) -> Any:
            values = list(args)
            now = datetime.fromtimestamp(time.time(), UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
            if len(values) <= at:
                values.append(now)
            elif isinstance(values[at], str) and values[at].strip().lower() == "now":
                values[at] = now
            marks = ", ".join("?" * len(values))
            with self._lock:
                return self._private.execute(f"SELECT {name}({marks})", values).fetchone()[0]

        return evaluate

    def stop(self) -> None:
        self._active = False  # a wrapper someone wrapped again stays, and does nothing
        for undo in reversed(self._undo):
            undo()
        self._undo.clear()
        with self._lock:
            if self._private is not None:
                with contextlib.suppress(Exception):
                    self._private.close()
                self._private = None


def frozen_now() -> Callable[[], None]:
    """Make SQLite's ``'now'`` read ``time.time()`` in the connections opened from here on;
    return the undo."""
    now = SQLiteNow()
    now.start()
    return now.stop
