"""Entry-point groups through which kinds (and their client hooks) are added, and the
built-in ones.

A service kind is a package (``sandbox/services/<kind>/``) that a distribution names in the
``sandbox_replayer.services`` group (``mysql = "my_pkg.mysql:KIND"``); a hook that sees its
clients connect at capture is named in ``sandbox_replayer.clients``. The built-in ones are
listed here as well, so that they load even where this project's own entry points are not
installed (a source checkout on ``PYTHONPATH``). A module with no imports of the layers: the
capture layer reads its group without importing the services.
"""

from __future__ import annotations

from importlib.metadata import EntryPoint, entry_points

SERVICES_GROUP = "sandbox_replayer.services"
"""Entry points naming a service kind object (see :class:`sandbox.services.base.ServiceKind`)."""
CLIENTS_GROUP = "sandbox_replayer.clients"
"""Entry points naming a :class:`sandbox.seam.clients.ClientHook`."""

BUILTIN: dict[str, dict[str, str]] = {
    SERVICES_GROUP: {
        "files": "sandbox.services.files:KIND",
        "postgres": "sandbox.services.postgres:KIND",
        "redis": "sandbox.services.redis:KIND",
        "sqlite": "sandbox.services.sqlite:KIND",
        "mysql": "sandbox.services.mysql:KIND",
    },
    CLIENTS_GROUP: {
        "psycopg": "sandbox.services.postgres.clients:PSYCOPG",
        "psycopg2": "sandbox.services.postgres.clients:PSYCOPG2",
        "asyncpg": "sandbox.services.postgres.clients:ASYNCPG",
        "sqlalchemy+psycopg2": "sandbox.services.postgres.clients:SQLALCHEMY_PSYCOPG2",
        "redis": "sandbox.services.redis.clients:REDIS",
        "redis.asyncio": "sandbox.services.redis.clients:REDIS_ASYNCIO",
        "redis.client": "sandbox.services.redis.clients:REDIS_COMMANDS",
        "redis.asyncio.client": "sandbox.services.redis.clients:REDIS_ASYNCIO_COMMANDS",
        "sqlite3": "sandbox.services.sqlite.clients:SQLITE3",
        "pymysql": "sandbox.services.mysql.clients:PYMYSQL",
    },
}
"""The project's own entry points (as ``pyproject.toml`` declares them)."""


def plugin_entry_points(group: str) -> list[EntryPoint]:
    """The built-in entry points of ``group``, then those of installed distributions (one
    of the same name as a built-in one replaces it)."""
    found = {name: EntryPoint(name, value, group) for name, value in BUILTIN.get(group, {}).items()}
    for point in entry_points(group=group):
        found[point.name] = point
    return list(found.values())
