"""The MySQL/MariaDB service kind, whole in this package: a logical dump through PyMySQL
(:mod:`.dump`), restored and hashed the same way; SQL invariants through the same driver,
confined (:mod:`.query`); its connections seen at capture (:mod:`.clients`); and its server in
a sandbox container (``images/mariadb``: Debian's MariaDB with libfaketime).

It registers through the ``sandbox_replayer.services`` and ``sandbox_replayer.clients``
entry-point groups like any other kind. PyMySQL is the ``mysql`` extra.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import JsonValue

from sandbox.errors import ServiceError
from sandbox.services.base import DESCRIBE_LIMIT, CapturedState, register, table_parts
from sandbox.services.descriptor import (
    ContainerSpec,
    ImageBuild,
    KindBinding,
    Storage,
    database_in_url,
)
from sandbox.services.dumptext import Place
from sandbox.services.mysql import dump as mysqldump
from sandbox.services.mysql import query as mysqlquery
from sandbox.services.mysql.endpoint import Endpoint, quote_name
from sandbox.services.sqlquery import read_statement
from sandbox.snapshot.hashing import canonical_json

if TYPE_CHECKING:
    from sandbox.services.masking import Masker, MaskRule

EXPECTED_SUFFIX = "_sbx_expected"
"""The scratch database :meth:`MySQLKind.describe_data` restores a capture into."""


def _url(host: str, port: int, database: str) -> str:
    return Endpoint(host, port, "root", "", database).url()


def _ready(url: str) -> bool:
    try:
        conn = Endpoint.parse(url).connect(database=False, connect_timeout=2)
    except Exception:
        return False
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT 1")
        return True
    except Exception:
        return False
    finally:
        conn.close()


def _create_database(url: str) -> None:
    """Create the endpoint's database when it does not exist (no state to restore)."""
    ep = Endpoint.parse(url)
    conn = ep.connect(database=False)
    try:
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE IF NOT EXISTS {quote_name(ep.database)}")
    finally:
        conn.close()


class MySQLKind:
    """Capture by a logical dump, restore by replaying it, reset from a dump kept at the
    restore point."""

    name: ClassVar[str] = "mysql"
    binding: ClassVar[KindBinding] = KindBinding(env="MYSQL_URL")
    container: ClassVar[ContainerSpec | None] = ContainerSpec(
        image="mariadb",
        port=3306,
        user="mysql",
        server_major=10,
        default_database="app",
        url=_url,
        ready=_ready,
        prepare_empty=_create_database,
        database_of=database_in_url,
        # The entrypoint makes the data folder at start on a tmpfs owned by the mysql user
        # (uid/gid 999, images/mariadb/Dockerfile); the dump kept for reset lives here.
        storage=Storage(path="/var/lib/mysql", owner=(999, 999), copies=2, memory_mib=512),
        pids_limit=256,
        tmpfs={
            "/run/mysqld": "rw,size=1m,uid=999,gid=999,mode=0775",
            "/tmp": "rw,size=64m,mode=1777",
        },
        build=ImageBuild("sandbox-replayer/mariadb:10.11", "mariadb", required=False),
    )

    dump_media_types: ClassVar[frozenset[str]] = frozenset({mysqldump.MEDIA_TYPE})

    part_label: ClassVar[str] = "table "

    def parts(self, description: Mapping[str, Any]) -> list[str]:
        return table_parts(description)

    def remove_parts(self, endpoint: str, names: Sequence[str]) -> None:
        """Delete the rows of the tables in one transaction: a row another table still
        references stops it, the constraint named."""
        ep = Endpoint.parse(endpoint)
        conn = ep.connect(autocommit=False)
        try:
            with conn.cursor() as cur:
                for name in names:
                    cur.execute(f"DELETE FROM {quote_name(name)}")
            conn.commit()
        except Exception as exc:
            conn.rollback()
            raise ServiceError(f"cannot remove rows of {', '.join(names)}: {exc}") from None
        finally:
            conn.close()

    def mask(
        self, endpoint: str, state: CapturedState, rules: list[MaskRule], masker: Masker
    ) -> CapturedState:
        """See :mod:`sandbox.services.mysql.masking`."""
        from sandbox.services.mysql.masking import mask_mysql

        return mask_mysql(endpoint, state, rules, masker, self.capture)

    def dump_places(self, media_type: str, data: bytes) -> Iterator[Place]:
        """The text values of a capture by table, column and row."""
        return mysqldump.places(mysqldump.parse(data))

    def __init__(self) -> None:
        self._points: dict[str, bytes] = {}

    def capture(self, endpoint: str) -> CapturedState:
        ep = Endpoint.parse(endpoint)
        doc, version = mysqldump.dump(ep)
        meta: dict[str, JsonValue] = {"database": ep.database, "tables": len(doc["tables"])}
        if doc["not_captured"]:
            meta["not_captured"] = list(doc["not_captured"])
        return CapturedState(
            data=canonical_json(doc),
            state_hash=mysqldump.state_hash(ep),
            version=version,
            media_type=mysqldump.MEDIA_TYPE,
            meta=meta,
        )

    def restore(self, endpoint: str, data: bytes) -> None:
        mysqldump.restore(Endpoint.parse(endpoint), mysqldump.parse(data))

    def state_hash(self, endpoint: str) -> str:
        return mysqldump.state_hash(Endpoint.parse(endpoint))

    def describe(self, endpoint: str, *, limit: int = DESCRIBE_LIMIT) -> dict[str, JsonValue]:
        """See :func:`~sandbox.services.mysql.dump.describe`."""
        return mysqldump.describe(Endpoint.parse(endpoint), limit)

    def describe_data(
        self, endpoint: str, data: bytes, *, limit: int = DESCRIBE_LIMIT
    ) -> dict[str, JsonValue]:
        """Restore ``data`` into ``<db>_sbx_expected`` on the same server, describe it, drop
        it."""
        ep = Endpoint.parse(endpoint)
        scratch = ep.with_database(ep.database + EXPECTED_SUFFIX)
        try:
            mysqldump.restore(scratch, mysqldump.parse(data))
            return mysqldump.describe(scratch, limit)
        finally:
            conn = ep.connect(database=False)
            try:
                with conn.cursor() as cur:
                    cur.execute(f"DROP DATABASE IF EXISTS {quote_name(scratch.database)}")
            finally:
                conn.close()

    def mark_restore_point(self, endpoint: str) -> None:
        ep = Endpoint.parse(endpoint)
        self._points[ep.url()] = canonical_json(mysqldump.dump(ep)[0])

    def reset(self, endpoint: str) -> None:
        ep = Endpoint.parse(endpoint)
        data = self._points.get(ep.url())
        if data is None:
            raise ServiceError(
                f"no restore point for mysql database {ep.where}: call mark_restore_point first"
            )
        self.restore(endpoint, data)

    def query(
        self, endpoint: str, text: str, *, limit: int, sandboxed: bool
    ) -> list[tuple[Any, ...]]:
        """Check an invariant, confined (see :mod:`sandbox.services.mysql.query`); in a
        sandbox as the unprivileged :data:`~sandbox.services.mysql.query.USER`."""
        read_statement(text)  # refused before anything is made on the server
        ep = Endpoint.parse(endpoint)
        if sandboxed:
            ep = mysqlquery.confine(ep)
        return mysqlquery.run_query(ep, text, limit)


KIND = register(MySQLKind())
