"""Redis connections seen at capture and routed on replay: redis-py's connection pools, sync
and asyncio (every client opens its connections through one), and its clients' commands
(noted before they are sent, for touched state: :mod:`.commands`), named in the
``sandbox_replayer.clients`` entry-point group (:class:`~sandbox.seam.clients.ClientHook`)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from sandbox.seam.clients import ClientHook, Connect, Router, patch_attribute, route

PORT = 6379


def _url(kwargs: dict[str, Any]) -> str:
    user = kwargs.get("username") or ""
    password = kwargs.get("password") or ""
    auth = quote(str(user), safe="") + (f":{quote(str(password), safe='')}" if password else "")
    auth = f"{auth}@" if auth else ""
    db = kwargs.get("db") or 0
    if kwargs.get("path"):
        return f"unix://{auth}{kwargs['path']}?db={db}"
    host = str(kwargs.get("host") or "localhost")
    return f"redis://{auth}{host}:{kwargs.get('port') or PORT}/{db}"


_ADDRESS = ("host", "port", "db", "username", "password", "path")
"""The connection keywords that say where a pool connects (a replay replaces them)."""


def _sent_to(kwargs: dict[str, Any], target: str) -> dict[str, Any]:
    """A pool's connection keywords ``kwargs``, with the address of ``target`` (a URL, the
    router's) instead of their own (the pool's connection class is then a plain TCP one)."""
    parse_url = importlib.import_module("redis.connection").parse_url
    parsed = dict(parse_url(target))
    parsed.pop("connection_class", None)
    return {**{k: v for k, v in kwargs.items() if k not in _ADDRESS}, **parsed}


def _redis(router: Router, undo: list[Callable[[], None]], module: str, client: str) -> None:
    conn = importlib.import_module(module)

    def make(original: Any) -> Any:
        def __init__(self: Any, connection_class: Any = None, *args: Any, **kwargs: Any) -> None:
            connection_class = connection_class or conn.Connection
            endpoint = _url(kwargs)
            target = route(router, Connect("redis", client, endpoint))
            if target != endpoint:
                kwargs = _sent_to(kwargs, target)
                connection_class = conn.Connection
            original(self, connection_class, *args, **kwargs)

        return __init__

    patch_attribute(conn.ConnectionPool, "__init__", make, undo)


def _sync(router: Router, undo: list[Callable[[], None]]) -> None:
    _redis(router, undo, "redis.connection", "redis")


def _asyncio(router: Router, undo: list[Callable[[], None]]) -> None:
    _redis(router, undo, "redis.asyncio.connection", "redis.asyncio")


REDIS = ClientHook(
    module="redis.connection", patch=_sync, kind="redis", default_port=PORT, default_path="0"
)
REDIS_ASYNCIO = ClientHook(
    module="redis.asyncio.connection",
    patch=_asyncio,
    kind="redis",
    default_port=PORT,
    default_path="0",
)


def _commands(router: Router, undo: list[Callable[[], None]], module: str, client: str) -> None:
    """The commands of redis-py's clients, noted before they are sent (touched state). A
    pool made before the router's patches (a client made at import, before a replay began)
    is routed at its first command: sent elsewhere (a replay's sandbox), it lets go of the
    connections it holds and makes its next ones there, as a pool made after them does."""
    from sandbox.services.redis.commands import patch_commands

    conn = importlib.import_module(f"{module.rsplit('.', 1)[0]}.connection")

    def seen(pool: Any) -> str:
        kwargs = pool.connection_kwargs
        endpoint = _url(dict(kwargs))
        target = route(router, Connect("redis", client, endpoint))
        if target != endpoint:
            moved = _sent_to(kwargs, target)
            kwargs.clear()
            kwargs.update(moved)
            pool.connection_class = conn.Connection
            pool.reset()  # its connections (made before, to where it pointed) are let go
        return target

    patch_commands(module, seen, undo)


REDIS_COMMANDS = ClientHook(
    module="redis.client",
    patch=lambda r, u: _commands(r, u, "redis.client", "redis"),
    kind="redis",
    default_port=PORT,
    default_path="0",
)
REDIS_ASYNCIO_COMMANDS = ClientHook(
    module="redis.asyncio.client",
    patch=lambda r, u: _commands(r, u, "redis.asyncio.client", "redis.asyncio"),
    kind="redis",
    default_port=PORT,
    default_path="0",
)
