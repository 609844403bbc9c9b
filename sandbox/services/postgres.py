"""The ``postgres`` service kind: a database captured with ``pg_dump``, restored with
``pg_restore``, hashed logically, and reset fast from a template database.

Endpoint: ``postgresql://user[:password]@host:port/dbname``. The password, when there is one,
reaches the client tools through ``PGPASSWORD``, never their command line.

The captured data is an *envelope*: one header line naming the format, its version and the
server version the dump came from, then ``pg_dump --format=custom`` bytes::

    sandbox-replayer/postgres-dump
    {"database":"app","dump_format":"custom","format_version":1,"server_version":"15.18"}
    PGDMP...

so that a restore can refuse a dump from a newer major version with a clear message before
``pg_restore`` fails deep inside. The database is restored with ``--no-owner
--no-privileges``: roles are cluster-wide and not part of a database dump, so objects end up
owned by the endpoint's user.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, ClassVar

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from pydantic import JsonValue

from sandbox.errors import ServiceError, ServiceVersionError
from sandbox.services.base import DESCRIBE_LIMIT, TRUNCATED, CapturedState, register
from sandbox.snapshot.hashing import canonical_json, fingerprint, sha256_bytes

MAGIC = b"sandbox-replayer/postgres-dump\n"
FORMAT_VERSION = 1
MEDIA_TYPE = "application/vnd.sandbox-replayer.postgres-dump"
RESTORE_POINT_SUFFIX = "_sbx_rp"
EXPECTED_SUFFIX = "_sbx_expected"
"""Suffix of the scratch database that :meth:`PostgresKind.describe_data` restores into."""
FALLBACK_IMAGE = "sandbox-replayer/postgres:15"
"""Image whose client tools run the dump when the host has no ``pg_dump``/``pg_restore``."""

_MAX_IDENTIFIER = 63
_TIMEOUT_S = 600


# --- endpoint ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Endpoint:
    params: dict[str, Any]

    @classmethod
    def parse(cls, endpoint: str) -> _Endpoint:
        try:
            params = conninfo_to_dict(endpoint)
        except psycopg.ProgrammingError as exc:
            raise ServiceError(f"invalid postgres endpoint: {exc}") from None
        if not params.get("dbname"):
            raise ServiceError(
                "postgres endpoint names no database: expected postgresql://user@host:port/dbname"
            )
        return cls({k: v for k, v in params.items() if v is not None})

    @property
    def dbname(self) -> str:
        return str(self.params["dbname"])

    @property
    def where(self) -> str:
        """``host:port/dbname`` for messages (no user, no password)."""
        host = self.params.get("host", "localhost")
        return f"{host}:{self.params.get('port', 5432)}/{self.dbname}"

    def conninfo(self, dbname: str | None = None, *, password: bool = True) -> str:
        params = dict(self.params)
        if dbname is not None:
            params["dbname"] = dbname
        if not password:
            params.pop("password", None)
        return make_conninfo(**params)

    @property
    def maintenance_db(self) -> str:
        """A database to connect to while ``dbname`` is dropped and created."""
        return "template1" if self.dbname == "postgres" else "postgres"

    @property
    def restore_point_db(self) -> str:
        return self.sibling_db(RESTORE_POINT_SUFFIX, "a restore point")

    def sibling_db(self, suffix: str, what: str) -> str:
        name = self.dbname + suffix
        if len(name.encode()) > _MAX_IDENTIFIER:
            raise ServiceError(
                f"database name {self.dbname!r} is too long for {what} "
                f"({name!r} exceeds {_MAX_IDENTIFIER} bytes)"
            )
        return name

    def tool_env(self) -> dict[str, str]:
        env = dict(os.environ)
        if "password" in self.params:
            env["PGPASSWORD"] = str(self.params["password"])
        return env


@contextmanager
def _connect(ep: _Endpoint, dbname: str | None = None) -> Iterator[psycopg.Connection[Any]]:
    try:
        conn = psycopg.connect(ep.conninfo(dbname), autocommit=True, connect_timeout=10)
    except psycopg.Error as exc:
        db = dbname or ep.dbname
        raise ServiceError(
            f"cannot connect to postgres at {ep.where} (database {db}): {exc}"
        ) from None
    try:
        yield conn
    except psycopg.Error as exc:
        raise ServiceError(f"postgres at {ep.where}: {exc}") from None
    finally:
        conn.close()


def _version_string(num: int) -> str:
    if num >= 100000:
        return f"{num // 10000}.{num % 10000}"
    return f"{num // 10000}.{num // 100 % 100}.{num % 100}"


def _major(version: str) -> tuple[int, ...]:
    """``"15.18"`` -> ``(15,)``; ``"9.6.24"`` -> ``(9, 6)``."""
    try:
        parts = [int(p) for p in version.split(".")[:2]]
    except ValueError:
        raise ServiceError(f"unreadable postgres server version {version!r}") from None
    return tuple(parts[:1]) if parts[0] >= 10 else tuple(parts)


def _major_str(version: str) -> str:
    return ".".join(map(str, _major(version)))


def _server_version(conn: psycopg.Connection[Any]) -> str:
    row = conn.execute("SELECT current_setting('server_version_num')::int").fetchone()
    assert row is not None
    return _version_string(int(row[0]))


# --- client tools: the one place that decides where pg_dump and pg_restore run --------------


def pg_tool(tool: str) -> list[str]:
    """The command that runs ``tool`` (``pg_dump``, ``pg_restore``): the host binary when
    there is one, else the same tool in a transient container of :data:`FALLBACK_IMAGE` on the
    host network (so the endpoint means the same thing)."""
    path = shutil.which(tool)
    if path:
        return [path]
    docker = shutil.which("docker")
    if docker is None:
        raise ServiceError(
            f"{tool} is not installed and no docker command is available to run it from "
            f"{FALLBACK_IMAGE}: install the PostgreSQL client tools (postgresql-client)"
        )
    return [
        docker, "run", "--rm", "-i", "--network", "host", "-e", "PGPASSWORD",
        "--label", "org.sandbox-replayer.managed=true", "--entrypoint", tool, FALLBACK_IMAGE,
    ]  # fmt: skip


def _run_tool(tool: str, args: list[str], ep: _Endpoint, stdin: bytes | None = None) -> bytes:
    cmd = [*pg_tool(tool), *args]
    try:
        proc = subprocess.run(
            cmd, input=stdin, capture_output=True, env=ep.tool_env(), timeout=_TIMEOUT_S
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ServiceError(f"{tool} failed for {ep.where}: {exc}") from None
    if proc.returncode != 0:
        err = proc.stderr.decode(errors="replace").strip()
        password = ep.params.get("password")
        if password:
            err = err.replace(str(password), "***")
        tail = "\n".join(err.splitlines()[-8:])
        raise ServiceError(f"{tool} failed for {ep.where} (exit {proc.returncode}): {tail}")
    return proc.stdout


# --- envelope ------------------------------------------------------------------------------


def pack_dump(header: dict[str, Any], dump: bytes) -> bytes:
    return MAGIC + canonical_json(header) + b"\n" + dump


def unpack_dump(data: bytes) -> tuple[dict[str, Any], bytes]:
    """Split captured data into its header and the ``pg_dump`` bytes, checking the format."""
    if not data.startswith(MAGIC):
        raise ServiceError(
            "not a postgres capture made by sandbox-replayer (missing the "
            f"{MAGIC.decode().strip()!r} header)"
        )
    line, sep, dump = data[len(MAGIC) :].partition(b"\n")
    try:
        header = json.loads(line) if sep else None
    except ValueError:
        header = None
    if not isinstance(header, dict):
        raise ServiceError("postgres capture has an unreadable header line")
    version = header.get("format_version")
    if version != FORMAT_VERSION:
        raise ServiceError(
            f"postgres capture has format version {version!r}, this sandbox-replayer reads "
            f"version {FORMAT_VERSION}"
        )
    if not isinstance(header.get("server_version"), str):
        raise ServiceError("postgres capture header records no server_version")
    return header, dump


# --- logical hash --------------------------------------------------------------------------

_RELATIONS = """
SELECT c.oid, n.nspname, c.relname, c.relkind
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f')
  AND n.nspname NOT IN ('pg_catalog', 'information_schema')
  AND n.nspname !~ '^pg_(toast|temp_)'
"""
_COLUMNS = """
SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
       pg_get_expr(d.adbin, d.adrelid), a.attidentity, a.attgenerated
FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE a.attrelid = %s AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum
"""
_CONSTRAINTS = "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = %s"
_INDEXES = "SELECT pg_get_indexdef(indexrelid) FROM pg_index WHERE indrelid = %s"
_SEQUENCE = """
SELECT seqtypid::regtype::text, seqstart, seqincrement, seqmax, seqmin, seqcache, seqcycle
FROM pg_sequence WHERE seqrelid = %s
"""
_SESSION = [
    "SET TimeZone = 'UTC'",
    "SET DateStyle = 'ISO, YMD'",
    "SET IntervalStyle = 'postgres'",
    "SET extra_float_digits = 1",
    "SET bytea_output = 'hex'",
    "SET lc_monetary = 'C'",
    "SET search_path = pg_catalog",
]


def logical_state(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    """The database as plain data: extensions and, for every relation in name order, its
    schema, its rows (as a count and a hash of the sorted row digests: the same as ordering
    by all columns, but independent of collations and of types without an ordering) and, for
    a sequence, its current value."""
    for stmt in _SESSION:
        conn.execute(stmt)
    extensions = sorted(
        (str(n), str(v)) for n, v in conn.execute("SELECT extname, extversion FROM pg_extension")
    )
    relations = []
    rows = sorted(conn.execute(_RELATIONS).fetchall(), key=lambda r: (r[1], r[2]))
    for oid, schema, name, relkind in rows:
        ident = sql.Identifier(schema, name)
        rel: dict[str, Any] = {"schema": schema, "name": name, "kind": relkind}
        if relkind != "S":
            rel["columns"] = [list(r) for r in conn.execute(_COLUMNS, (oid,))]
            rel["constraints"] = sorted(list(r) for r in conn.execute(_CONSTRAINTS, (oid,)))
            rel["indexes"] = sorted(str(r[0]) for r in conn.execute(_INDEXES, (oid,)))
        if relkind in ("v", "m"):
            view = conn.execute("SELECT pg_get_viewdef(%s::oid)", (oid,)).fetchone()
            rel["definition"] = view[0] if view else None
        if relkind == "S":
            params = conn.execute(_SEQUENCE, (oid,)).fetchone()
            rel["sequence"] = [str(p) for p in params] if params else None
            value = conn.execute(sql.SQL("SELECT last_value, is_called FROM {}").format(ident))
            rel["value"] = [str(v) for v in value.fetchone() or ()]
        if relkind == "r":
            query = sql.SQL(
                "SELECT sha256(convert_to(ROW(sbx_row.*)::text, 'UTF8')) FROM ONLY {} sbx_row"
            ).format(ident)
            digests = sorted(bytes(r[0]) for r in conn.execute(query))
            rel["rows"] = {"count": len(digests), "sha256": sha256_bytes(b"".join(digests))}
        relations.append(rel)
    return {"extensions": extensions, "relations": relations}


_PRIMARY_KEY = """
SELECT a.attname FROM pg_index i
JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)
WHERE i.indrelid = %s AND i.indisprimary
ORDER BY array_position(i.indkey::int2[], a.attnum)
"""


def describe_state(conn: psycopg.Connection[Any], limit: int = DESCRIBE_LIMIT) -> dict[str, Any]:
    """The rows and sequence values as plain data: ``{"tables": {table: [row, ...]},
    "sequences": {sequence: {"last_value", "is_called"}}}``, a table named without its schema
    when that is ``public``. Rows are ``to_jsonb`` objects (timestamps as ISO strings, in
    UTC), ordered by primary key, then by their text; a table over ``limit`` rows keeps its
    first ``limit`` and is listed under ``"truncated"`` with its row count."""
    for stmt in _SESSION:
        conn.execute(stmt)
    tables: dict[str, Any] = {}
    sequences: dict[str, Any] = {}
    truncated: dict[str, int] = {}
    rows = sorted(conn.execute(_RELATIONS).fetchall(), key=lambda r: (r[1], r[2]))
    for oid, schema, name, relkind in rows:
        ident = sql.Identifier(schema, name)
        label = name if schema == "public" else f"{schema}.{name}"
        if relkind == "S":
            value = conn.execute(sql.SQL("SELECT last_value, is_called FROM {}").format(ident))
            last, called = value.fetchone() or (None, None)
            sequences[label] = {"last_value": last, "is_called": called}
        elif relkind == "r":
            keys = [str(r[0]) for r in conn.execute(_PRIMARY_KEY, (oid,))]
            order: list[sql.Composable] = [
                sql.SQL("sbx_row.{}").format(sql.Identifier(k)) for k in keys
            ]
            order.append(sql.SQL('to_jsonb(sbx_row)::text COLLATE "C"'))
            query = sql.SQL("SELECT to_jsonb(sbx_row) FROM ONLY {} sbx_row ORDER BY {} LIMIT {}")
            found = conn.execute(query.format(ident, sql.SQL(", ").join(order), limit))
            tables[label] = [r[0] for r in found]
            if len(tables[label]) >= limit:
                count = conn.execute(sql.SQL("SELECT count(*) FROM ONLY {}").format(ident))
                total = int((count.fetchone() or (0,))[0])
                if total > limit:
                    truncated[label] = total
    out: dict[str, Any] = {"tables": tables, "sequences": sequences}
    if truncated:
        out[TRUNCATED] = truncated
    return out


@contextmanager
def _snapshot(conn: psycopg.Connection[Any]) -> Iterator[None]:
    """A read-only repeatable-read transaction: one consistent view of the database."""
    conn.autocommit = False
    try:
        with conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            yield
    finally:
        conn.rollback()
        conn.autocommit = True


def _hash(conn: psycopg.Connection[Any]) -> str:
    return fingerprint({"kind": "postgres", "state": logical_state(conn)})


# --- the kind ------------------------------------------------------------------------------


def _drop_database(conn: psycopg.Connection[Any], name: str) -> None:
    """Drop ``name`` (a template too), ending its sessions first."""
    exists = conn.execute("SELECT datistemplate FROM pg_database WHERE datname = %s", (name,))
    row = exists.fetchone()
    if row is None:
        return
    ident = sql.Identifier(name)
    if row[0]:
        conn.execute(sql.SQL("ALTER DATABASE {} IS_TEMPLATE false").format(ident))
    _terminate(conn, name)
    force = sql.SQL(" WITH (FORCE)" if conn.info.server_version >= 130000 else "")
    conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}{}").format(ident, force))


def _terminate(conn: psycopg.Connection[Any], name: str) -> None:
    conn.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE datname = %s AND pid <> pg_backend_pid()",
        (name,),
    )


class PostgresKind:
    """Capture with ``pg_dump``, restore with ``pg_restore``, reset from a template."""

    name: ClassVar[str] = "postgres"

    def capture(self, endpoint: str) -> CapturedState:
        """Dump and hash the same snapshot: ``pg_dump --snapshot`` imports the snapshot of
        the transaction that computes the hash."""
        ep = _Endpoint.parse(endpoint)
        with _connect(ep) as conn:
            version = _server_version(conn)
            encoding = conn.execute("SHOW server_encoding").fetchone()
            with _snapshot(conn):
                row = conn.execute("SELECT pg_export_snapshot()").fetchone()
                assert row is not None
                args = [
                    "--format=custom",
                    f"--snapshot={row[0]}",
                    f"--dbname={ep.conninfo(password=False)}",
                ]
                dump = _run_tool("pg_dump", args, ep)
                state_hash = _hash(conn)
        header = {
            "format_version": FORMAT_VERSION,
            "dump_format": "custom",
            "database": ep.dbname,
            "server_version": version,
            "encoding": str(encoding[0]) if encoding else "UTF8",
        }
        return CapturedState(
            data=pack_dump(header, dump),
            state_hash=state_hash,
            version=version,
            media_type=MEDIA_TYPE,
            meta={"database": ep.dbname, "dump_format": "custom"},
        )

    def restore(self, endpoint: str, data: bytes) -> None:
        ep = _Endpoint.parse(endpoint)
        header, dump = unpack_dump(data)
        dumped = str(header["server_version"])
        with _connect(ep, ep.maintenance_db) as conn:
            target = _server_version(conn)
            if _major(dumped) > _major(target):
                raise ServiceVersionError(
                    f"the postgres dump comes from server version {dumped} (major "
                    f"{_major_str(dumped)}) but the target {ep.where} runs {target} (major "
                    f"{_major_str(target)}): restore it into a postgres {_major_str(dumped)} "
                    "or newer image"
                )
            _drop_database(conn, ep.dbname)
            encoding = str(header.get("encoding") or "UTF8")
            conn.execute(
                sql.SQL("CREATE DATABASE {} TEMPLATE template0 ENCODING {}").format(
                    sql.Identifier(ep.dbname), sql.Literal(encoding)
                )
            )
        _run_tool(
            "pg_restore",
            [
                "--no-owner",
                "--no-privileges",
                "--exit-on-error",
                "--single-transaction",
                f"--dbname={ep.conninfo(password=False)}",
            ],
            ep,
            stdin=dump,
        )

    def state_hash(self, endpoint: str) -> str:
        ep = _Endpoint.parse(endpoint)
        with _connect(ep) as conn, _snapshot(conn):
            return _hash(conn)

    def describe(self, endpoint: str, *, limit: int = DESCRIBE_LIMIT) -> dict[str, JsonValue]:
        """See :func:`describe_state`."""
        ep = _Endpoint.parse(endpoint)
        with _connect(ep) as conn, _snapshot(conn):
            return describe_state(conn, limit)

    def describe_data(
        self, endpoint: str, data: bytes, *, limit: int = DESCRIBE_LIMIT
    ) -> dict[str, JsonValue]:
        """Restore ``data`` into ``<db>_sbx_expected`` on the same server, describe it, drop
        it."""
        ep = _Endpoint.parse(endpoint)
        scratch = ep.sibling_db(EXPECTED_SUFFIX, "a scratch database")
        try:
            self.restore(ep.conninfo(scratch), data)
            return self.describe(ep.conninfo(scratch), limit=limit)
        finally:
            with _connect(ep, ep.maintenance_db) as conn:
                _drop_database(conn, scratch)

    def mark_restore_point(self, endpoint: str) -> None:
        """Copy the database to ``<db>_sbx_rp`` (a template that refuses connections).
        Sessions connected to the database are ended: ``CREATE DATABASE ... TEMPLATE`` needs
        the source to be idle."""
        ep = _Endpoint.parse(endpoint)
        rp = ep.restore_point_db
        with _connect(ep, ep.maintenance_db) as conn:
            _drop_database(conn, rp)
            _terminate(conn, ep.dbname)
            try:
                conn.execute(
                    sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                        sql.Identifier(rp), sql.Identifier(ep.dbname)
                    )
                )
            except psycopg.Error as exc:
                raise ServiceError(f"cannot mark a restore point of {ep.where}: {exc}") from None
            conn.execute(
                sql.SQL("ALTER DATABASE {} WITH IS_TEMPLATE true ALLOW_CONNECTIONS false").format(
                    sql.Identifier(rp)
                )
            )

    def reset(self, endpoint: str) -> None:
        ep = _Endpoint.parse(endpoint)
        rp = ep.restore_point_db
        with _connect(ep, ep.maintenance_db) as conn:
            found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (rp,)).fetchone()
            if found is None:
                raise ServiceError(
                    f"no restore point for {ep.where} (database {rp} is missing): call "
                    "mark_restore_point first"
                )
            _drop_database(conn, ep.dbname)
            try:
                conn.execute(
                    sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                        sql.Identifier(ep.dbname), sql.Identifier(rp)
                    )
                )
            except psycopg.Error as exc:
                raise ServiceError(f"cannot reset {ep.where} from {rp}: {exc}") from None


register(PostgresKind())
