"""The ``postgres`` service kind: a database captured with ``pg_dump``, restored with
``pg_restore``, hashed inside the server, and reset fast from a template database.

Endpoint: ``postgresql://user[:password]@host:port/dbname``. The password, when there is one,
reaches the client tools through ``PGPASSWORD``, never their command line.

The captured data is an *envelope*: one header line naming the format, its version, the
server version the dump came from and the digests of its tables, then ``pg_dump
--format=custom`` bytes (compression level :data:`DEFAULT_COMPRESSION` unless
:data:`COMPRESSION_ENV` says otherwise, the archive's creation time fixed so that an
unchanged database gives the same bytes and the store keeps one blob)::

    sandbox-replayer/postgres-dump
    {"database":"app","dump_format":"custom","format_version":1,"hash_version":2,...}
    PGDMP...

so that a restore can refuse a dump from a newer major version with a clear message before
``pg_restore`` fails deep inside. A schema this process dumped before is not dumped again:
the archive's head is filled with the rows read by ``COPY`` (:mod:`.pgheads`). The database
is restored with ``--no-owner --no-privileges``: roles are cluster-wide and not part of a
database dump, so objects end up owned by the endpoint's user.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Collection, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, closing, contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import quote

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from pydantic import JsonValue

from sandbox.errors import ServiceError, ServiceVersionError
from sandbox.services import pinshare
from sandbox.services.base import (
    DESCRIBE_LIMIT,
    TIMEZONE_META,
    TRUNCATED,
    CapturedState,
    register,
    table_parts,
)
from sandbox.services.descriptor import (
    ContainerSpec,
    ImageBuild,
    KindBinding,
    Storage,
    database_in_url,
)
from sandbox.services.dumptext import Place
from sandbox.services.postgres import (
    pgarchive,
    pgheads,
    pgquery,
    pgreach,
    pgreaders,
    pgschema,
    pgseen,
    pgtouched,
    pgtrack,
)
from sandbox.services.postgres.pgstate import (
    HASH_VERSION,
    RELATIONS,
    SESSION,
    Baseline,
    database_oid,
    end_sessions,
    known_tables,
    logical_state,
    make_baseline,
    sequence_values,
    set_sequences,
    state_fingerprint,
    table_digests,
)
from sandbox.services.sqlquery import read_statement
from sandbox.snapshot.hashing import canonical_json, sha256_bytes

if TYPE_CHECKING:
    from sandbox.services.masking import Masker, MaskRule

MAGIC = b"sandbox-replayer/postgres-dump\n"
FORMAT_VERSION = 1
MEDIA_TYPE = "application/vnd.sandbox-replayer.postgres-dump"
RESTORE_POINT_SUFFIX = "_sbx_rp"
PARKING_SUFFIX = "_sbx_mv"
"""Suffix of the name a database is renamed to, and back, to wait for its sessions to exit."""
EXPECTED_SUFFIX = "_sbx_expected"
"""Suffix of the scratch database that :meth:`PostgresKind.describe_data` restores into."""
FALLBACK_IMAGE = "sandbox-replayer/postgres:15"
"""Image whose client tools run the dump when the host has no ``pg_dump``/``pg_restore``."""

DEFAULT_COMPRESSION = 1
"""``pg_dump`` compression level: 1 costs a third of the default's time for about 3% more
bytes on text."""
COMPRESSION_ENV = "SANDBOX_PG_COMPRESSION"

_MAX_IDENTIFIER = 63
_TIMEOUT_S = 600


# --- endpoint ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Endpoint:
    params: dict[str, Any]

    @classmethod
    def parse(cls, endpoint: str) -> _Endpoint:
        return _parse_endpoint(endpoint)

    @classmethod
    def _parse(cls, endpoint: str) -> _Endpoint:
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

    @functools.cached_property
    def pin_key(self) -> str:
        """The endpoint without its password, as the pins of it are known (worked out once:
        a run per request asks for it each time)."""
        return self.conninfo(password=False)

    @functools.cached_property
    def seen_address(self) -> str:
        """``host:port/dbname`` as :mod:`~sandbox.services.postgres.pgseen` keys statements."""
        params = self.params
        return pgseen.address(params.get("host"), params.get("port"), params.get("dbname"))

    @property
    def maintenance_db(self) -> str:
        """A database to connect to while ``dbname`` is dropped and created."""
        return "template1" if self.dbname == "postgres" else "postgres"

    @property
    def restore_point_db(self) -> str:
        return self.sibling_db(RESTORE_POINT_SUFFIX, "a restore point")

    @property
    def parking_db(self) -> str:
        return self.sibling_db(PARKING_SUFFIX, "a rename")

    def sibling_db(self, suffix: str, what: str) -> str:
        name = self.dbname + suffix
        if len(name.encode()) > _MAX_IDENTIFIER:
            raise ServiceError(
                f"database name {self.dbname!r} is too long for {what} "
                f"({name!r} exceeds {_MAX_IDENTIFIER} bytes)"
            )
        return name

    def tool_env(self) -> dict[str, str]:
        env = os.environ.copy()
        if "password" in self.params:
            env["PGPASSWORD"] = str(self.params["password"])
        return env


@functools.lru_cache(maxsize=64)
def _parse_endpoint(endpoint: str) -> _Endpoint:
    """An endpoint parsed once (a run per request parses the same one each time)."""
    return _Endpoint._parse(endpoint)


def _open(ep: _Endpoint, dbname: str | None = None, **options: Any) -> psycopg.Connection[Any]:
    try:
        return psycopg.connect(ep.conninfo(dbname), autocommit=True, connect_timeout=10, **options)
    except psycopg.Error as exc:
        db = dbname or ep.dbname
        raise ServiceError(
            f"cannot connect to postgres at {ep.where} (database {db}): {exc}"
        ) from None


@contextmanager
def _errors(ep: _Endpoint) -> Iterator[None]:
    """A driver error inside as one :class:`ServiceError` line naming the server."""
    try:
        yield
    except psycopg.Error as exc:
        raise ServiceError(f"postgres at {ep.where}: {exc}") from None


@contextmanager
def _connect(ep: _Endpoint, dbname: str | None = None) -> Iterator[psycopg.Connection[Any]]:
    with closing(_open(ep, dbname)) as conn, _errors(ep):
        yield conn


@contextmanager
def _reader(ep: _Endpoint) -> Iterator[psycopg.Connection[Any]]:
    """:func:`_connect` for a short read of the state, on a connection kept open between
    such reads (:mod:`.pgreaders`; nothing prepared on it: its transactions roll back; a
    server gone silent while it sat idle fails its first statement within
    :data:`~.pgreaders.UNANSWERED_MS`, not at the network's own timeout)."""
    opener = functools.partial(
        _open, ep, prepare_threshold=None, tcp_user_timeout=pgreaders.UNANSWERED_MS
    )
    with pgreaders.READERS.connection(ep.conninfo(), opener) as conn, _errors(ep):
        yield conn


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


# --- logical hash (see sandbox.services.postgres.pgstate) ------------------------------------


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
    for stmt in SESSION:
        conn.execute(stmt)
    tables: dict[str, Any] = {}
    sequences: dict[str, Any] = {}
    truncated: dict[str, int] = {}
    rows = sorted(conn.execute(RELATIONS).fetchall(), key=lambda r: (r[1], r[2]))
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
    """A read-only repeatable-read transaction: one consistent view of the database,
    rolled back (what was set in it is undone)."""
    conn.autocommit = False
    try:
        with conn.transaction(force_rollback=True):
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            yield
    finally:
        conn.rollback()
        conn.autocommit = True


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


def _compression() -> int:
    """The ``pg_dump`` compression level: :data:`DEFAULT_COMPRESSION`, or the
    :data:`COMPRESSION_ENV` variable (0-9)."""
    raw = os.environ.get(COMPRESSION_ENV, "").strip()
    if not raw:
        return DEFAULT_COMPRESSION
    if not raw.isdigit() or int(raw) > 9:
        raise ServiceError(f"{COMPRESSION_ENV}={raw!r}: expected a compression level 0-9")
    return int(raw)


def _comment(conn: psycopg.Connection[Any], dbname: str) -> str | None:
    row = conn.execute(
        "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s",
        (dbname,),
    ).fetchone()
    return None if row is None or row[0] is None else str(row[0])


def _dump_and_hash(
    ep: _Endpoint,
    conn: psycopg.Connection[Any],
    snapshot: str,
    *,
    empty: Collection[str] = (),
    sequences: Mapping[str, list[Any]] | None = None,
) -> CapturedState:
    """Dump the exported ``snapshot`` (the rows of the tables in ``empty`` left out) while
    ``conn``, inside that snapshot's transaction, hashes the same state (``empty`` tables
    as if they had no rows). ``sequences``: their values when the snapshot was taken (a
    dump reads them as they are now; by default, read now), kept in the header and set
    again by a restore.

    When an archive of the same schema with the same tables left empty was dumped before,
    its head is filled with the rows read through ``conn`` (:mod:`.pgheads`); else
    ``pg_dump`` runs beside the hash, and its head is kept for the next dumps."""
    version = _server_version(conn)
    encoding = str((conn.execute("SHOW server_encoding").fetchone() or ("UTF8",))[0])
    zone = conn.execute("SHOW TimeZone").fetchone()
    size = conn.execute("SELECT pg_database_size(current_database())").fetchone()
    level = _compression()
    schema = pgschema.fingerprint(conn)
    key = (ep.conninfo(), schema, frozenset(empty), level)
    head = pgheads.HEADS.usable(conn, key) if schema is not None else None
    if sequences is None:  # a restore sets them (a head's are an older dump's)
        sequences = sequence_values(conn)
    if head is not None:
        state = logical_state(conn, empty=frozenset(empty), sequences=sequences)
        dump = pgheads.dump(conn, head, encoding, level)
    else:
        args = [
            "--format=custom",
            f"--compress={level}",
            f"--snapshot={snapshot}",
            *pgtouched.exclusions(empty),
            f"--dbname={ep.conninfo(password=False)}",
        ]
        with ThreadPoolExecutor(1, thread_name_prefix="sbx-dump") as pool:
            dumping = pool.submit(_run_tool, "pg_dump", args, ep)
            try:
                state = logical_state(conn, empty=frozenset(empty), sequences=sequences)
            finally:
                dump = pgarchive.stabilize(dumping.result())
        if schema is not None:
            dump = pgheads.HEADS.learn(conn, key, dump, level)
    header = {
        "format_version": FORMAT_VERSION,
        "dump_format": "custom",
        "database": ep.dbname,
        "server_version": version,
        "encoding": encoding,
        "hash_version": HASH_VERSION,
        "tables": table_digests(state),
        "dump_sha256": sha256_bytes(dump),
        "sequences": dict(sequences),
    }
    return CapturedState(
        data=pack_dump(header, dump),
        state_hash=state_fingerprint(state),
        version=version,
        media_type=MEDIA_TYPE,
        meta={
            "database": ep.dbname,
            "dump_format": "custom",
            "state_bytes": int(size[0]) if size else 0,
            **({TIMEZONE_META: str(zone[0])} if zone else {}),
        },
    )


def _export(conn: psycopg.Connection[Any]) -> str:
    row = conn.execute("SELECT pg_export_snapshot()").fetchone()
    assert row is not None
    return str(row[0])


def _capture(ep: _Endpoint, empty: Collection[str] = ()) -> CapturedState:
    """The state now, the rows of the tables in ``empty`` left out."""
    with _reader(ep) as conn, _snapshot(conn):
        return _dump_and_hash(ep, conn, _export(conn), empty=empty)


@contextmanager
def _in_snapshot(ep: _Endpoint, snapshot_id: str) -> Iterator[psycopg.Connection[Any]]:
    """A short read-only transaction of its own in an exported snapshot: what it reads, and
    the locks that takes, end with it, never with the transaction that holds the snapshot."""
    with _reader(ep) as conn, _snapshot(conn):
        conn.execute(sql.SQL("SET TRANSACTION SNAPSHOT {}").format(sql.Literal(snapshot_id)))
        yield conn


class _Pin:
    """The state before the runs sharing it, pinned by an open transaction whose snapshot is
    exported (see :mod:`sandbox.services.pinshare`). The transaction holds the snapshot and
    no lock on any table: what it reads at the start is read in a subtransaction rolled back
    (which lets go of the locks it took), and kept runs are dumped from the snapshot by
    transactions of their own (:func:`_in_snapshot`), so the application's DDL and
    ``TRUNCATE`` never wait for a pin."""

    def __init__(self, ep: _Endpoint) -> None:
        self._stack = ExitStack()
        conn = self._stack.enter_context(_reader(ep))  # given back when the pin is let go
        self.conn = conn
        try:
            self._stack.enter_context(_snapshot(conn))
            # The transaction stays idle while the run goes on: a server-wide idle timeout
            # must not end it (set for it alone: the connection serves other reads after).
            conn.execute("SET LOCAL idle_in_transaction_session_timeout = 0")
            self.taken = time.monotonic()  # the snapshot is taken at this time or after
            self.snapshot_id = _export(conn)
            with conn.transaction(force_rollback=True):
                self.why = pgtouched.untrackable(conn)
                self.since = (conn.execute("SELECT clock_timestamp()").fetchone() or (None,))[0]
                self.counters = pgtouched.counters(conn)
                self.sequences = sequence_values(conn)
        except BaseException:
            self._stack.close()
            raise
        self.told: dict[frozenset[str], set[str]] = {}
        """The tables the statements of runs sharing this pin reach (foreign keys
        followed), by the runs' distinct statements: runs of one endpoint send the same."""
        self.dumped: tuple[frozenset[str], CapturedState] | None = None
        """The last state before the runs dumped from this pin, with the tables it left
        empty: runs kept together that touched the same tables share it."""

    def state(self, ep: _Endpoint, empty: frozenset[str]) -> CapturedState:
        """The state in this pin's snapshot, the rows of ``empty`` left out, dumped once for
        the runs that ask for the same tables left empty (:attr:`dumped`); call it holding
        the lock of a share of the pin."""
        if self.dumped is not None and self.dumped[0] == empty:
            return self.dumped[1]
        state = _dump_pinned(ep, self, empty)
        self.dumped = (empty, state)
        return state

    def close(self) -> None:
        """End the transaction (the pinned state is released)."""
        self._stack.close()


PINS: pinshare.PinPool[_Pin] = pinshare.PinPool()
"""The pins open in this process, shared by the runs that start together."""

_ends: dict[str, tuple[frozenset[str], float, CapturedState]] = {}
"""By endpoint: the last end state captured for a kept run, the tables it left empty and
when its capture began (monotonic)."""
_ends_lock = threading.Lock()


def _dump_pinned(ep: _Endpoint, pin: _Pin, empty: frozenset[str]) -> CapturedState:
    """The state in ``pin``'s snapshot, the rows of ``empty`` left out (call it holding the
    lock of a share of the pin)."""
    with _in_snapshot(ep, pin.snapshot_id) as reader:
        return _dump_and_hash(ep, reader, pin.snapshot_id, empty=empty, sequences=pin.sequences)


def _end_state(ep: _Endpoint, empty: frozenset[str], ended: float) -> CapturedState:
    """The state after a run that ended at ``ended`` (monotonic), the rows of ``empty``
    left out. Any state taken after a run's end holds all it did, so it is, in order: the
    last one captured when it began after the run ended (runs kept together share it);
    else the state of the newest pin taken after the run ended, which the runs sharing
    that pin and kept share as their state before (one dump for both); else a new one."""
    key = ep.conninfo()
    with _ends_lock:
        found = _ends.get(key)
    if found is not None and found[0] == empty and ended <= found[1]:
        return found[2]
    share = PINS.newest(ep.pin_key, lambda pin: pin.taken >= ended)
    if share is not None:
        try:
            with share.lock:
                state = share.hold.state(ep, empty)
        finally:
            share.release()
        began = share.hold.taken
    else:
        began = time.monotonic()
        state = _capture(ep, empty=empty)
    with _ends_lock:
        _ends[key] = (empty, began, state)
    return state


class PinnedPostgres:
    """A run's share of the state pinned before it (see :mod:`sandbox.services.pinshare`)
    and the statements it sends (:mod:`sandbox.services.postgres.pgseen`); :meth:`finish`
    captures the state before and after it, each with the rows of the tables it touched
    only (see :mod:`sandbox.services.postgres.pgtouched`)."""

    def __init__(self, ep: _Endpoint) -> None:
        from sandbox.seam import boundary

        self._ep = ep
        self.seen = pgseen.Seen(ep.seen_address)
        self.ended: float | None = None
        self._share = PINS.share(ep.pin_key, lambda: _Pin(ep))
        self.seen.bind(boundary.current())

    def bind(self) -> None:
        """Keep the statements of the run serving the current context."""
        from sandbox.seam import boundary

        self.seen.bind(boundary.current())

    def unbind(self) -> None:
        """The run is over: its context's statements are no longer its own."""
        self.seen.unbind()
        if self.ended is None:
            self.ended = time.monotonic()

    def _told(self, pin: _Pin) -> tuple[set[str] | None, dict[str, Any]]:
        """The tables the run touched (before the foreign-key closure) and how that was
        told, or ``None`` and why it could not be (then the whole state is captured)."""
        why: str
        statements = self.seen.statements()
        if self.seen.overflow:
            why = f"the run sent more than {pgseen.MAX_STATEMENTS} distinct statements"
        elif self.seen.unseen:
            clients = ", ".join(sorted(self.seen.unseen))
            why = f"the run connected through {clients}, whose statements are not seen"
        elif statements is None:
            why = "a statement of the run cannot be read as text"
        elif not statements:
            why = "no statement of the run was seen (a client whose statements are not seen?)"
        else:
            key = frozenset(statements)
            found = pin.told.get(key)
            try:
                if found is None:
                    with _in_snapshot(self._ep, pin.snapshot_id) as reader:
                        reached = pgreach.reached(reader, statements)
                        found = pgtouched.captured_tables(reader, reached)
                    if len(pin.told) < 64:
                        pin.told[key] = found
                return set(found), {pgtouched.TOLD_META: "statements"}
            except pgreach.Unknown as unknown:
                why = str(unknown)
        told = {pgtouched.TOLD_META: "counters", pgtouched.STATEMENTS_NOTE_META: why}
        with _connect(self._ep) as watch:
            note = pin.why or pgtouched.settle(
                watch,
                pin.since,
                {watch.info.backend_pid} | pgreaders.READERS.pids(),  # the pins' among them
                limit=pgtouched.wait_limit(),
            )
            after_counters = pgtouched.counters(watch)
        if note is not None:
            return None, {**told, pgtouched.NOTE_META: note}
        with _in_snapshot(self._ep, pin.snapshot_id) as reader:
            rows = pgtouched.captured_tables(
                reader, pgtouched.touched(pin.counters, after_counters)
            )
        return rows, told

    def finish(self) -> tuple[CapturedState, CapturedState]:
        """The state before the run (as of the pin) and after it, then the share is
        released. When the touched tables cannot be told, both are whole and their meta
        says why."""
        self.unbind()
        ended = self.ended if self.ended is not None else time.monotonic()
        pin = self._share.hold
        pinned = {pgtouched.PINNED_AT_META: pin.since.isoformat()} if pin.since is not None else {}
        try:
            rows, told = self._told(pin)
            others = frozenset(set(pin.counters) - rows) if rows is not None else frozenset()
            with self._share.lock:
                # tables not told: the whole state, dumped for this run alone
                before = (
                    pin.state(self._ep, others)
                    if rows is not None
                    else _dump_pinned(self._ep, pin, others)
                )
        finally:
            self.close()
        after = _end_state(self._ep, others, ended)
        meta = {**told, **pinned}
        if rows is not None:
            meta.update(pgtouched.partial_meta(rows, len(pin.counters)))
        return replace(before, meta={**before.meta, **meta}), replace(
            after, meta={**after.meta, **meta}
        )

    def close(self) -> None:
        """Release this run's share (the last one ends the transaction)."""
        self.seen.unbind()
        self._share.release()


# --- the kind --------------------------------------------------------------------------------


def _postgres_url(host: str, port: int, database: str) -> str:
    return f"postgresql://postgres@{host}:{port}/{quote(database, safe='')}"


def _postgres_ready(url: str) -> bool:
    """A real connection and a query: ``pg_isready`` would say yes during recovery too."""
    import psycopg

    # The maintenance database exists from initdb on; the target one may not exist yet.
    base = url.rsplit("/", 1)[0] + "/postgres"
    try:
        with psycopg.connect(base, connect_timeout=2) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error:
        return False
    return True


def _postgres_create_database(url: str) -> None:
    """Create the endpoint's database when it does not exist (no state to restore)."""
    import psycopg
    from psycopg import sql

    base, _, database = url.rpartition("/")
    with psycopg.connect(base + "/postgres", autocommit=True, connect_timeout=5) as conn:
        found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,))
        if found.fetchone() is None:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))


class PostgresKind:
    """Capture with ``pg_dump``, restore with ``pg_restore``, reset from a template."""

    name: ClassVar[str] = "postgres"
    binding: ClassVar[KindBinding] = KindBinding(env="DATABASE_URL")
    container: ClassVar[ContainerSpec | None] = ContainerSpec(
        image="postgres",
        build=ImageBuild("sandbox-replayer/postgres:15", "postgres"),
        port=5432,
        user="postgres",
        server_major=15,
        default_database="postgres",
        url=_postgres_url,
        ready=_postgres_ready,
        prepare_empty=_postgres_create_database,
        database_of=database_in_url,
        # The cluster is made at start (the entrypoint runs initdb, with fsync and full page
        # writes off) on a tmpfs sized to the database: database copies for reset avoid the
        # overlay filesystem (about 6x faster resets). The image gives the postgres user
        # uid/gid 999 (images/postgres/Dockerfile).
        storage=Storage(path="/var/lib/postgresql", owner=(999, 999), copies=3, memory_mib=512),
        # A restore in one transaction writes no WAL for the tables it creates, and the
        # WAL stays small whatever the database's size.
        command=tuple(
            f"-c{setting}"
            for setting in (
                "wal_level=minimal",
                "max_wal_senders=0",
                "max_wal_size=64MB",
                "min_wal_size=32MB",
            )
        ),
        pids_limit=256,
        # The socket and lock file, and temporary files: the only places besides the
        # data tmpfs where the server writes (read-only root filesystem).
        tmpfs={
            "/var/run/postgresql": "rw,size=1m,uid=999,gid=999,mode=0775",
            "/tmp": "rw,size=64m,mode=1777",
        },
    )

    dump_media_types: ClassVar[frozenset[str]] = frozenset({MEDIA_TYPE})

    def mask(
        self, endpoint: str, state: CapturedState, rules: list[MaskRule], masker: Masker
    ) -> CapturedState:
        """Mask in a scratch database beside ``endpoint`` (see
        :mod:`sandbox.services.postgres.masking`); the dump keeps the database's name."""
        from sandbox.services.masking import masked_state
        from sandbox.services.postgres.masking import mask_in_scratch

        masked, database = mask_in_scratch(self, endpoint, state, rules, masker)
        header, dump = unpack_dump(masked.data)
        header["database"] = database
        return masked_state(masked, rules, pack_dump(header, dump), database=database)

    part_label: ClassVar[str] = "table "

    def parts(self, description: Mapping[str, Any]) -> list[str]:
        return table_parts(description)

    def remove_parts(self, endpoint: str, names: Sequence[str]) -> None:
        """Delete the rows of the tables (``schema.table``) in one transaction: a row another
        table still references stops it, the constraint named."""
        try:
            with psycopg.connect(endpoint, connect_timeout=10) as conn, conn.transaction():
                for name in names:
                    schema, _, table = name.rpartition(".")
                    ident = sql.Identifier(schema or "public", table)
                    conn.execute(sql.SQL("DELETE FROM {}").format(ident))
        except psycopg.Error as exc:
            raise ServiceError(f"cannot remove rows of {', '.join(names)}: {exc}") from None

    def dump_places(self, media_type: str, data: bytes) -> Iterator[Place]:
        """The values of a capture by table, column and row (read by ``pg_restore``)."""
        from sandbox.services.postgres.dumptext import postgres_places

        _, dump = unpack_dump(data)
        return postgres_places(dump, pg_tool("pg_restore"))

    def __init__(self) -> None:
        self._restored: dict[str, Baseline] = {}
        """The baseline :meth:`restore` made of the restored database (from the dump's
        header), by endpoint, for :meth:`mark_restore_point`: only the tables changed since
        are hashed again."""

    def capture(self, endpoint: str) -> CapturedState:
        """Dump and hash the same snapshot, side by side: ``pg_dump --snapshot`` imports the
        snapshot of the transaction that hashes the tables inside the server."""
        return _capture(_Endpoint.parse(endpoint))

    def pin(self, endpoint: str) -> PinnedPostgres:
        """Pin the state before a run, to capture only the tables it touches (see
        :mod:`sandbox.services.postgres.pgtouched`)."""
        return PinnedPostgres(_Endpoint.parse(endpoint))

    def captured_parts(self, meta: Mapping[str, Any]) -> list[str] | None:
        """The tables whose rows a touched capture holds (see
        :mod:`sandbox.services.postgres.pgtouched`)."""
        rows = meta.get(pgtouched.ROWS_META)
        if meta.get(pgtouched.STATE_META) != "touched" or not isinstance(rows, list):
            return None
        return [str(r) for r in rows]

    def describe_capture(self, meta: Mapping[str, Any]) -> str | None:
        return pgtouched.describe_meta(meta)

    def outside_capture(self, endpoint: str, captured: Collection[str]) -> list[str]:
        """The tables of the restore point outside ``captured`` that the run since read or
        wrote, described (its sessions are ended first, so that their counters are
        flushed). With no restore point, every table outside ``captured`` counts."""
        return [m.describe() for m in self._moved_since_restore(endpoint, captured)[0]]

    def used_since_restore(self, endpoint: str) -> list[str]:
        """The restored tables the replayed run read or wrote (``"read table public.users"``),
        told by their statistics counters as :meth:`outside_capture` tells them; none
        without a restore point (services brought up by someone else: their counters may
        have moved before the run)."""
        moved, restored = self._moved_since_restore(endpoint, ())
        return [m.used() for m in moved] if restored else []

    def _moved_since_restore(
        self, endpoint: str, captured: Collection[str]
    ) -> tuple[list[pgtouched.Outside], bool]:
        """The tables of the restore point outside ``captured`` whose counters moved since
        the restore (its sessions are ended first, so that their counters are flushed), and
        whether there is a restore point. With none, every table outside ``captured``
        counts."""
        ep = _Endpoint.parse(endpoint)
        with _connect(ep, ep.maintenance_db) as conn:
            comment = _comment(conn, ep.restore_point_db)
            end_sessions(conn, ep.dbname, ep.parking_db)
        with _connect(ep) as conn:
            now = pgtouched.counters(conn)
        if comment is not None:  # tables the run created are its own, not restored state
            existed = set((json.loads(comment) or {}).get("tables") or {})
            now = {k: v for k, v in now.items() if k in existed}
        return pgtouched.outside(now, captured), comment is not None

    def restore(self, endpoint: str, data: bytes) -> None:
        ep = _Endpoint.parse(endpoint)
        header, dump = unpack_dump(data)
        dumped = str(header["server_version"])
        with _connect(ep, ep.maintenance_db) as maint:
            target = _server_version(maint)
            if _major(dumped) > _major(target):
                raise ServiceVersionError(
                    f"the postgres dump comes from server version {dumped} (major "
                    f"{_major_str(dumped)}) but the target {ep.where} runs {target} (major "
                    f"{_major_str(target)}): restore it into a postgres {_major_str(dumped)} "
                    "or newer image"
                )
            _drop_database(maint, ep.dbname)
            encoding = str(header.get("encoding") or "UTF8")
            maint.execute(
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
            sequences = header.get("sequences")
            if isinstance(sequences, dict) and sequences:
                with _connect(ep) as conn:
                    try:
                        set_sequences(conn, sequences)
                    except (TypeError, ValueError):
                        raise ServiceError(
                            "postgres capture header has unreadable sequences"
                        ) from None
            learnt = self._baseline(ep, maint, *_restored_digests(header, dump))
        self._restored[ep.conninfo()] = learnt

    def _baseline(
        self,
        ep: _Endpoint,
        maint: psycopg.Connection[Any],
        version: int,
        known: dict[str, Any],
    ) -> Baseline:
        """The baseline of the database now, its statistics counters reset (its sessions are
        ended through ``maint``, a connection to the maintenance database): the tables in
        ``known`` (digests and columns, from a dump header or an older baseline whose tables
        did not change since) are taken as they are, the others are hashed."""
        end_sessions(maint, ep.dbname, ep.parking_db)
        with _connect(ep) as conn:
            with _snapshot(conn):
                state = logical_state(conn, version=version, known=known)
            digests = table_digests(state)
            by_record = [k for k, v in digests.items() if v["rows"].get("by") == "record"]
            tracked = pgtrack.install(conn, by_record) if version == HASH_VERSION else set()
            baseline = make_baseline(conn, version, digests, tracked)
            conn.execute("SELECT pg_stat_reset()")
        return baseline

    def state_hash(self, endpoint: str) -> str:
        """The hash of the logical state. Below a restore point, only the tables changed
        since it are scanned (see :mod:`sandbox.services.postgres.pgstate`); the sessions on the
        database are ended first, so that their statistics are flushed."""
        ep = _Endpoint.parse(endpoint)
        baseline: Baseline | None = None
        with _connect(ep, ep.maintenance_db) as conn:
            comment = _comment(conn, ep.restore_point_db)
            if comment is not None:
                baseline = json.loads(comment)
                end_sessions(conn, ep.dbname, ep.parking_db)
        with _connect(ep) as conn, _snapshot(conn):
            if baseline is None:
                return state_fingerprint(logical_state(conn))
            known = known_tables(conn, baseline)
            version = int(baseline.get("hash_version", HASH_VERSION))
            return state_fingerprint(logical_state(conn, version=version, known=known))

    def describe(self, endpoint: str, *, limit: int = DESCRIBE_LIMIT) -> dict[str, JsonValue]:
        """See :func:`describe_state`."""
        ep = _Endpoint.parse(endpoint)
        with _connect(ep) as conn, _snapshot(conn):
            return describe_state(conn, limit)

    def query(
        self, endpoint: str, text: str, *, limit: int, sandboxed: bool
    ) -> list[tuple[Any, ...]]:
        """Check an invariant, confined (see :mod:`sandbox.services.postgres.pgquery`); in a
        sandbox as the unprivileged :data:`~sandbox.services.postgres.pgquery.ROLE`."""
        read_statement(text)  # refused before anything is made on the server
        ep = _Endpoint.parse(endpoint)
        conninfo = ep.conninfo()
        if sandboxed:
            with _connect(ep) as conn:
                pgquery.confine(conn)
            conninfo = pgquery.as_role(conninfo)
        return pgquery.run_query(conninfo, text, limit, ep.where)

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
            self._restored.pop(ep.conninfo(scratch), None)
            with _connect(ep, ep.maintenance_db) as conn:
                _drop_database(conn, scratch)

    def mark_restore_point(self, endpoint: str) -> None:
        """Copy the database to ``<db>_sbx_rp`` (a template that refuses connections) whose
        comment holds the baseline of its tables (see :mod:`sandbox.services.postgres.pgstate`), and
        reset the database's statistics counters. Sessions connected to the database are
        ended: ``CREATE DATABASE ... TEMPLATE`` needs the source to be idle."""
        ep = _Endpoint.parse(endpoint)
        rp = ep.restore_point_db
        learnt = self._restored.pop(ep.conninfo(), None)
        with _connect(ep, ep.maintenance_db) as maint:
            _drop_database(maint, rp)
            baseline: Baseline | None = None
            if learnt is None:
                baseline = self._baseline(ep, maint, HASH_VERSION, {})
            else:
                end_sessions(maint, ep.dbname, ep.parking_db)
                with _connect(ep) as conn:
                    same = database_oid(conn) == learnt.get("database_oid")
                    known = known_tables(conn, learnt) if same else {}
                    if same and _untouched(conn, learnt, known):  # nothing ran since restore
                        conn.execute("SELECT pg_stat_reset()")
                        baseline = learnt
                if baseline is None:
                    baseline = self._baseline(ep, maint, int(learnt["hash_version"]), known)
            _terminate(maint, ep.dbname)
            _copy_database(maint, ep.dbname, rp, f"cannot mark a restore point of {ep.where}")
            maint.execute(
                sql.SQL("ALTER DATABASE {} WITH IS_TEMPLATE true ALLOW_CONNECTIONS false").format(
                    sql.Identifier(rp)
                )
            )
            maint.execute(
                sql.SQL("COMMENT ON DATABASE {} IS {}").format(
                    sql.Identifier(rp), sql.Literal(json.dumps(baseline))
                )
            )

    def reset(self, endpoint: str) -> None:
        """Drop the database and copy it again from the restore point, file by file: the
        copy starts with fresh statistics counters and the restore point's file numbers."""
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
            _copy_database(conn, rp, ep.dbname, f"cannot reset {ep.where} from {rp}")


def _untouched(conn: psycopg.Connection[Any], baseline: Baseline, known: dict[str, Any]) -> bool:
    """Whether every table of ``baseline`` is in ``known`` as it was (no row counted since,
    no change summed by its triggers), so the baseline still holds."""
    tables = baseline.get("tables") or {}
    if set(known) != set(tables) or any(known[k] is not tables[k] for k in tables):
        return False
    return not pgtrack.changes_recorded(conn)


def _copy_database(conn: psycopg.Connection[Any], source: str, target: str, what: str) -> None:
    """``CREATE DATABASE target TEMPLATE source``, copying the files (``STRATEGY FILE_COPY``:
    one checkpoint instead of writing every page to the WAL) where the server has it."""
    strategy = " STRATEGY FILE_COPY" if conn.info.server_version >= 150000 else ""
    try:
        conn.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}" + strategy).format(
                sql.Identifier(target), sql.Identifier(source)
            )
        )
    except psycopg.Error as exc:
        raise ServiceError(f"{what}: {exc}") from None


def _restored_digests(header: dict[str, Any], dump: bytes) -> tuple[int, dict[str, Any]]:
    """What a dump's header says of the restored tables: its hash version (1 for captures
    older than table digests) and, when the header's digest of the dump matches the dump
    (so the dump was not rewritten since, e.g. masked), the tables' digests and columns."""
    version = header.get("hash_version", 1)
    if not isinstance(version, int) or version not in (1, HASH_VERSION):
        raise ServiceError(f"postgres capture has an unknown hash version {version!r}")
    tables = header.get("tables")
    if isinstance(tables, dict) and header.get("dump_sha256") == sha256_bytes(dump):
        return version, tables
    return version, {}


KIND = register(PostgresKind())
