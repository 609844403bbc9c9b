"""SQLite file databases seen at capture and routed on replay: ``sqlite3.connect``
(SQLAlchemy's ``sqlite://`` engines connect through it), named in the
``sandbox_replayer.clients`` entry-point group (:class:`~sandbox.seam.clients.ClientHook`)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from sandbox.seam.clients import ClientHook, Connect, Router, patch_attribute, route
from sandbox.services.sqlite.filepath import sqlite_path
from sandbox.services.sqlite.frozennow import frozen_now


def _sqlite(router: Router, undo: list[Callable[[], None]]) -> None:
    sqlite3 = importlib.import_module("sqlite3")
    dbapi2 = importlib.import_module("sqlite3.dbapi2")
    original = sqlite3.connect

    def connect(database: Any, *args: Any, **kwargs: Any) -> Any:
        path = sqlite_path(database, bool(kwargs.get("uri")))
        if path is not None:
            target = route(router, Connect("sqlite", "sqlite3", path, str(database)))
            if target != path:
                database = target
                kwargs.pop("uri", None)
        return original(database, *args, **kwargs)

    for owner in {sqlite3, dbapi2}:
        patch_attribute(owner, "connect", lambda _o: connect, undo)


SQLITE3 = ClientHook(module="sqlite3", patch=_sqlite, kind="sqlite", frozen_now=frozen_now)
