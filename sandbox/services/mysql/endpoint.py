"""A MySQL/MariaDB endpoint: ``mysql://user:password@host:port/database`` (``mariadb://``
and ``mysql+pymysql://`` are read the same way), and connections to it through PyMySQL."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from sandbox.errors import ServiceError

PORT = 3306
SCHEMES = ("mysql", "mariadb", "mysql+pymysql", "mariadb+pymysql")


@dataclass(frozen=True)
class Endpoint:
    host: str
    port: int
    user: str
    password: str
    database: str

    @classmethod
    def parse(cls, url: str) -> Endpoint:
        parts = urlsplit(url)
        if parts.scheme not in SCHEMES:
            raise ServiceError(f"not a mysql endpoint (mysql://user@host:port/database): {url!r}")
        database = unquote(parts.path.lstrip("/"))
        if not database:
            raise ServiceError(f"the mysql endpoint names no database: {url!r}")
        try:
            port = parts.port or PORT
        except ValueError:
            raise ServiceError(f"the mysql endpoint has a bad port: {url!r}") from None
        return cls(
            host=parts.hostname or "localhost",
            port=port,
            user=unquote(parts.username or "root"),
            password=unquote(parts.password or ""),
            database=database,
        )

    @property
    def where(self) -> str:
        """The server and database, for messages (no credentials)."""
        return f"{self.host}:{self.port}/{self.database}"

    def url(self) -> str:
        auth = quote(self.user, safe="") + (
            f":{quote(self.password, safe='')}" if self.password else ""
        )
        return f"mysql://{auth}@{self.host}:{self.port}/{quote(self.database, safe='')}"

    def with_database(self, database: str) -> Endpoint:
        return replace(self, database=database)

    def with_user(self, user: str, password: str = "") -> Endpoint:
        return replace(self, user=user, password=password)

    def connect(self, *, database: bool = True, **options: Any) -> Any:
        """A PyMySQL connection (autocommit unless told otherwise), to the database or to
        the server alone."""
        import pymysql

        kwargs: dict[str, Any] = {
            "host": self.host,
            "port": self.port,
            "user": self.user,
            "password": self.password,
            "charset": "utf8mb4",
            "connect_timeout": 10,
            "autocommit": True,
            **options,
        }
        if database:
            kwargs["database"] = self.database
        try:
            return pymysql.connect(**kwargs)
        except pymysql.err.MySQLError as exc:
            raise ServiceError(f"cannot connect to mysql at {self.where}: {exc}") from None


def quote_name(name: str) -> str:
    """An identifier quoted with backticks."""
    return "`" + name.replace("`", "``") + "`"
