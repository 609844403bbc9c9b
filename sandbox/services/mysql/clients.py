"""MySQL/MariaDB connections seen at capture and routed on replay: PyMySQL's connections
(SQLAlchemy's ``mysql+pymysql`` engines open theirs through it), named in the
``sandbox_replayer.clients`` entry-point group (:class:`~sandbox.seam.clients.ClientHook`)."""

from __future__ import annotations

import getpass
import importlib
from collections.abc import Callable
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from sandbox.seam.clients import ClientHook, Connect, Router, patch_attribute, route

_ADDRESS = ("host", "port", "user", "password", "passwd", "database", "db", "unix_socket")


def _url(kwargs: dict[str, Any]) -> str:
    user = str(kwargs.get("user") or getpass.getuser())
    password = kwargs.get("password") or kwargs.get("passwd") or ""
    host = str(kwargs.get("host") or "localhost")
    port = int(kwargs.get("port") or 3306)
    database = kwargs.get("database") or kwargs.get("db") or ""
    if isinstance(database, bytes):
        database = database.decode()
    auth = quote(user, safe="") + (f":{quote(str(password), safe='')}" if password else "")
    return f"mysql://{auth}@{host}:{port}/{quote(str(database), safe='')}"


def _target(url: str) -> dict[str, Any]:
    parts = urlsplit(url)
    return {
        "host": parts.hostname or "localhost",
        "port": parts.port or 3306,
        "user": unquote(parts.username or "root"),
        "password": unquote(parts.password or ""),
        "database": unquote(parts.path.lstrip("/")) or None,
    }


def _pymysql(router: Router, undo: list[Callable[[], None]]) -> None:
    connections = importlib.import_module("pymysql.connections")

    def make(original: Any) -> Any:
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            endpoint = _url(kwargs)
            target = route(router, Connect("mysql", "pymysql", endpoint))
            if target != endpoint:
                kwargs = {k: v for k, v in kwargs.items() if k not in _ADDRESS}
                kwargs.update(_target(target))
            original(self, *args, **kwargs)

        return __init__

    patch_attribute(connections.Connection, "__init__", make, undo)


PYMYSQL = ClientHook(module="pymysql.connections", patch=_pymysql, kind="mysql", default_port=3306)
