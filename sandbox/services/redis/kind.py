"""The ``redis`` service kind: one database's keys, their values and TTLs.

Endpoint: ``redis://[:password@]host:port/db`` (``rediss://`` works too).

A capture is one of two formats (:func:`unpack_rdb` and :func:`parse_dump` read them):

- **RDB snapshot** (format 2, when the server hands one over by ``SYNC`` and the endpoint's
  database is the only one holding keys): a header line, then the server's own RDB made
  byte-stable (:mod:`sandbox.services.redis.rdbfile`)::

      sandbox-replayer/redis-rdb
      {"captured_ms":null,"db":0,"expiring":0,"format_version":2,"hash_version":2,...}
      REDIS0010...

  Expiry times in an RDB are absolute; ``captured_ms`` (the server's clock at capture) is
  recorded only when some key has one, so an unchanged keyspace without TTLs is the same
  blob every time. A sandbox loads the file at start (:meth:`RedisKind.load_server_file`,
  one ``DEBUG RELOAD``), then sets each TTL back to what it was at capture.
- **Key by key** (format 1: older captures, servers that refuse ``SYNC`` such as managed
  ones, databases beside others, streams and module types): a JSON document (never pickle)
  of each key's ``DUMP`` payload in base64 and its remaining TTL in ms at capture::

      {"format": "sandbox-replayer/redis-dump", "format_version": 1, "redis_version": "7.0.15",
       "keys": [{"key": "<base64>", "dump": "<base64>", "pttl": 5000}, ...]}

  restored by ``FLUSHDB`` and ``RESTORE key ttl payload`` for each key.

Either way a key that had 5 s left at capture has 5 s left after the restore.

A touched capture (``--state touched``, ``keep="failed"``: :mod:`sandbox.services.redis.touched`)
is a key-by-key one holding only the keys the run touched, each as at its first touch; its
restore confines the server to those keys, so that a replay reaching another is inconclusive.

The state hash: version 2 (:mod:`sandbox.services.redis.redisstate`) is computed from an RDB, the
server's snapshot (or one built from ``DUMP`` payloads); version 1, for captures made before
it and for databases holding streams or module types, covers, for every key in byte order,
its type, its logical value and **whether it has a TTL**, read key by key. Neither covers
the TTL itself: remaining TTLs tick, so two hashes of one state would differ.

A restore point in a sandbox server (``--enable-debug-command yes``, a writable ``dir``) is
the server's own RDB file: marking it is a ``SAVE`` (none after a load), a reset is ``DEBUG
RELOAD NOSAVE``. The keys that have a TTL are saved without it and given it back after each
load, so that no key runs out while the file waits and each reset restores the TTLs of the
restore point. Elsewhere the restore point is a capture kept in memory.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import urlsplit, urlunsplit

import redis
from pydantic import JsonValue

from sandbox.errors import ServiceError, ServiceVersionError
from sandbox.services.base import DESCRIBE_LIMIT, TRUNCATED, CapturedState, register
from sandbox.services.descriptor import ContainerSpec, ImageBuild, KindBinding, Storage
from sandbox.services.dumptext import Place
from sandbox.services.redis import rdbfile, rdbhash, redisstate, touched
from sandbox.snapshot.hashing import canonical_json, fingerprint, sha256_bytes

if TYPE_CHECKING:
    from sandbox.services.masking import Masker, MaskRule

FORMAT = "sandbox-replayer/redis-dump"
FORMAT_VERSION = 1
MEDIA_TYPE = "application/vnd.sandbox-replayer.redis-dump+json"
_BATCH = 500
SCRATCH_DB = 15
"""Database number :meth:`RedisKind.describe_data` restores into (14 when the endpoint
uses 15)."""


def _b64(data: bytes | str) -> str:
    raw = data.encode() if isinstance(data, str) else data
    return base64.b64encode(raw).decode("ascii")


def _unb64(text: object, what: str) -> bytes:
    if not isinstance(text, str):
        raise ServiceError(f"redis capture: {what} is not a base64 string")
    try:
        return base64.b64decode(text, validate=True)
    except ValueError:
        raise ServiceError(f"redis capture: {what} is not valid base64") from None


def _where(endpoint: str) -> str:
    parts = urlsplit(endpoint)
    return f"{parts.hostname}:{parts.port or 6379}{parts.path or '/0'}"


_ADMIN: dict[str, str] = {}
"""``host:port`` of a server confined to a touched capture's keys -> the password of the
kind's own user there (:data:`~sandbox.services.redis.touched.ADMIN_USER`), in memory only."""


def _server(endpoint: str) -> str:
    parts = urlsplit(endpoint)
    return f"{parts.hostname}:{parts.port or 6379}"


def _admin_url(endpoint: str) -> str:
    """``endpoint`` as the kind's own user where the server is confined, else itself."""
    password = _ADMIN.get(_server(endpoint))
    if password is None:
        return endpoint
    parts = urlsplit(endpoint)
    netloc = f"{touched.ADMIN_USER}:{password}@{parts.netloc.rpartition('@')[2]}"
    return urlunsplit(parts._replace(netloc=netloc))


@contextmanager
def _connect(endpoint: str) -> Iterator[redis.Redis]:
    try:
        client = redis.Redis.from_url(
            _admin_url(endpoint), decode_responses=False, socket_timeout=30
        )
    except ValueError as exc:
        raise ServiceError(f"invalid redis endpoint: {exc}") from None
    try:
        try:
            client.ping()
        except redis.AuthenticationError:
            if _ADMIN.pop(_server(endpoint), None) is None:
                raise
            client.close()  # a new server at the address of one confined before
            client = redis.Redis.from_url(endpoint, decode_responses=False, socket_timeout=30)
            client.ping()
        yield client
    except redis.RedisError as exc:
        raise ServiceError(f"redis at {_where(endpoint)}: {exc}") from None
    finally:
        client.close()


def _batches(keys: list[bytes]) -> Iterator[list[bytes]]:
    for i in range(0, len(keys), _BATCH):
        yield keys[i : i + _BATCH]


def _keys(client: redis.Redis) -> list[bytes]:
    return sorted(set(client.scan_iter(count=1000)))


def _server_version(client: redis.Redis) -> str:
    info: dict[str, Any] = client.info("server")
    return str(info.get("redis_version", "unknown"))


def _value(client: redis.Redis, key: bytes, kind: str) -> Any:
    """The logical value of one key as JSON-ready data (bytes in base64)."""
    # redis-py's return types are unions over its client modes; this client returns bytes.
    if kind == "string":
        value: Any = client.get(key)
        return _b64(value or b"")
    if kind == "list":
        items: Any = client.lrange(key, 0, -1)
        return [_b64(v) for v in items]
    if kind == "set":
        members: Any = client.smembers(key)
        return sorted(_b64(v) for v in members)
    if kind == "zset":
        pairs: Any = client.zrange(key, 0, -1, withscores=True)
        return [[_b64(m), repr(float(s))] for m, s in pairs]
    if kind == "hash":
        fields: Any = client.hgetall(key)
        return sorted([_b64(f), _b64(v)] for f, v in fields.items())
    if kind == "stream":
        entries: Any = client.xrange(key, "-", "+")
        return [
            [_b64(entry_id), sorted([_b64(f), _b64(v)] for f, v in body.items())]
            for entry_id, body in entries
        ]
    payload = client.dump(key)  # a module type: its serialized form is the best we have
    return sha256_bytes(payload) if isinstance(payload, bytes) else None


def logical_state(client: redis.Redis) -> list[list[Any]]:
    state: list[list[Any]] = []
    for batch in _batches(_keys(client)):
        pipe = client.pipeline(transaction=False)
        for key in batch:
            pipe.type(key)
            pipe.pttl(key)
        answers = pipe.execute()
        for i, key in enumerate(batch):
            kind = answers[2 * i].decode() if isinstance(answers[2 * i], bytes) else "none"
            if kind == "none":  # expired or deleted since the scan
                continue
            state.append([_b64(key), kind, _value(client, key, kind), answers[2 * i + 1] >= 0])
    return state


def _text(data: bytes | str) -> JsonValue:
    """Bytes as text when they are UTF-8, else as ``{"base64": ...}``."""
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": _b64(data)}


def _readable(kind: str, value: Any) -> JsonValue:
    """A :func:`_value` (base64 inside) made readable with :func:`_text`."""

    def t(item: Any) -> JsonValue:
        return _text(base64.b64decode(item))

    if kind == "string":
        return t(value)
    if kind in ("list", "set"):
        return [t(v) for v in value]
    if kind == "zset":
        return [[t(m), float(s) if math.isfinite(float(s)) else s] for m, s in value]
    if kind == "hash":
        return {str(_key_text(base64.b64decode(f))): t(v) for f, v in value}
    if kind == "stream":
        return [
            [t(entry_id), {str(_key_text(base64.b64decode(f))): t(v) for f, v in body}]
            for entry_id, body in value
        ]
    return {"sha256": value}


def _key_text(data: bytes) -> str:
    """A key or field as a dictionary key: its text, or ``base64:...`` when not UTF-8."""
    text = _text(data)
    return text if isinstance(text, str) else "base64:" + _b64(data)


def describe_state(client: redis.Redis, limit: int = DESCRIBE_LIMIT) -> dict[str, JsonValue]:
    """``{"keys": {key: {"type", "value", "has_ttl"}}}`` for the first ``limit`` keys in byte
    order; with more keys, ``"truncated": {"keys": total}``."""
    keys = _keys(client)
    out: dict[str, JsonValue] = {}
    described: dict[str, JsonValue] = {}
    for key in keys[:limit]:
        kind_raw: Any = client.type(key)
        kind = kind_raw.decode() if isinstance(kind_raw, bytes) else "none"
        if kind == "none":
            continue
        pttl: Any = client.pttl(key)
        described[_key_text(key)] = {
            "type": kind,
            "value": _readable(kind, _value(client, key, kind)),
            "has_ttl": bool(pttl >= 0),
        }
    out["keys"] = described
    if len(keys) > limit:
        out[TRUNCATED] = {"keys": len(keys)}
    return out


def _hash(client: redis.Redis) -> str:
    return fingerprint({"kind": "redis", "keys": logical_state(client)})


def parse_dump(data: bytes) -> dict[str, Any]:
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        raise ServiceError("not a redis capture: the data is not JSON") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ServiceError(f"not a redis capture made by sandbox-replayer (format {FORMAT!r})")
    if doc.get("format_version") != FORMAT_VERSION:
        raise ServiceError(
            f"redis capture has format version {doc.get('format_version')!r}, this "
            f"sandbox-replayer reads version {FORMAT_VERSION}"
        )
    if not isinstance(doc.get("keys"), list):
        raise ServiceError("redis capture has no list of keys")
    return doc


RDB_MAGIC = b"sandbox-replayer/redis-rdb\n"
RDB_FORMAT_VERSION = 2
RDB_MEDIA_TYPE = "application/vnd.sandbox-replayer.redis-rdb"


def pack_rdb(header: dict[str, Any], rdb: bytes) -> bytes:
    return RDB_MAGIC + canonical_json(header) + b"\n" + rdb


def unpack_rdb(data: bytes) -> tuple[dict[str, Any], bytes]:
    """Split an RDB capture into its header and the RDB bytes, checking the format."""
    line, sep, rdb = data[len(RDB_MAGIC) :].partition(b"\n")
    try:
        header = json.loads(line) if sep else None
    except ValueError:
        header = None
    if not isinstance(header, dict):
        raise ServiceError("redis RDB capture has an unreadable header line")
    if header.get("format_version") != RDB_FORMAT_VERSION:
        raise ServiceError(
            f"redis RDB capture has format version {header.get('format_version')!r}, this "
            f"sandbox-replayer reads version {RDB_FORMAT_VERSION}"
        )
    db, captured = header.get("db"), header.get("captured_ms")
    if not isinstance(db, int) or not 0 <= db < 1 << 16:
        raise ServiceError(f"redis RDB capture names an invalid database {db!r}")
    if captured is not None and not isinstance(captured, int):
        raise ServiceError(f"redis RDB capture has an invalid capture time {captured!r}")
    return header, rdb


def is_rdb(data: bytes) -> bool:
    return data.startswith(RDB_MAGIC)


def _db(endpoint: str) -> int:
    raw = (urlsplit(endpoint).path or "/0").strip("/") or "0"
    if not raw.isdigit():
        raise ServiceError(f"invalid redis endpoint: database {raw!r} is not a number")
    return int(raw)


def _now_ms(client: redis.Redis) -> int:
    seconds, micros = client.time()
    return int(seconds) * 1000 + int(micros) // 1000


def _config(client: redis.Redis, name: str) -> str | None:
    """A server setting, or ``None`` when ``CONFIG`` is refused (managed servers)."""
    try:
        found: Any = client.config_get(name)
    except redis.ResponseError:
        return None
    value = found.get(name.encode(), found.get(name))
    return value.decode() if isinstance(value, bytes) else value


def _diskless(client: redis.Redis) -> bool:
    """Whether ``SYNC`` can stream from the forked child at once (no save on the server's
    disk, no waiting for other replicas)."""
    return _config(client, "repl-diskless-sync") == "yes" and _config(
        client, "repl-diskless-sync-delay"
    ) in ("0",)


def _only_db(client: redis.Redis, db: int) -> bool:
    """Whether ``db`` is the only database holding keys (an RDB holds them all)."""
    info: dict[str, Any] = client.info("keyspace")
    return all(name == f"db{db}" for name in info)


def _snapshot(
    client: redis.Redis, endpoint: str, db: int, *, strict: bool
) -> tuple[bytes, redisstate.Summary | None]:
    """The server's RDB, byte-stable (:func:`rdbfile.stable`), and the summary of database
    ``db`` (:func:`rdbhash.summarize`), walked while the RDB comes."""
    walk = rdbhash.Walk(db, strict=strict)
    rdb = rdbfile.stable(
        rdbfile.fetch(_admin_url(endpoint), diskless=_diskless(client), sink=walk.feed)
    )
    return rdb, walk.result(rdb)


def _dump_entries(client: redis.Redis) -> tuple[list[dict[str, Any]], int]:
    """Every key's ``DUMP`` payload and PTTL (key by key, in byte order), and the server's
    clock when they were read."""
    entries = []
    now = _now_ms(client)
    for batch in _batches(_keys(client)):
        pipe = client.pipeline(transaction=True)  # a key's DUMP and PTTL agree
        for key in batch:
            pipe.dump(key)
            pipe.pttl(key)
        answers = pipe.execute()
        for i, key in enumerate(batch):
            payload, pttl = answers[2 * i], answers[2 * i + 1]
            if payload is None or pttl == -2:  # expired since the scan
                continue
            entries.append(
                {"key": _b64(key), "dump": _b64(payload), "pttl": pttl if pttl >= 0 else None}
            )
    return entries, now


def _entries_rdb(db: int, entries: list[dict[str, Any]], now: int) -> bytes:
    return rdbfile.from_dumps(
        db,
        [
            rdbfile.Entry(
                _unb64(e["key"], "key"),
                _unb64(e["dump"], "payload"),
                None if e["pttl"] is None else now + int(e["pttl"]),
            )
            for e in entries
        ],
    )


def _hash_v2(client: redis.Redis, endpoint: str, db: int) -> str | None:
    """The version-2 hash of the database, from the server's snapshot (or its ``DUMP``
    payloads when it refuses ``SYNC``); ``None`` when it holds keys an RDB reader skips."""
    try:
        try:
            summary = _snapshot(client, endpoint, db, strict=False)[1]
            assert summary is not None  # the keys of other databases are left out
            return summary.state_hash
        except rdbfile.SyncRefused:
            entries, now = _dump_entries(client)
            rdb = _entries_rdb(db, entries, now)
            return _digest(rdbfile.keys(rdb, db, expected=len(entries)), db)
    except rdbfile.Unreadable:
        return None


def _digest(keys: Iterator[rdbfile.Key], db: int) -> str:
    summary = redisstate.summarize(keys, db)
    assert summary is not None  # the keys are those of ``db``
    return summary.state_hash


@dataclass
class _Point:
    """A restore point kept as the server's RDB file: the keys that have a TTL (saved
    without it) and their TTL at the restore point."""

    ttls: list[tuple[bytes, int]]
    fresh: bool = False
    """Set by a load: the file is the restore point already."""


def keys_capture(
    entries: list[dict[str, Any]],
    now: int,
    db: int,
    version: str,
    meta: Mapping[str, JsonValue],
    *,
    fallback: Any = None,
    extra: Mapping[str, Any] | None = None,
) -> CapturedState:
    """A key-by-key capture (format 1) of ``entries`` read at the server time ``now``;
    ``extra`` goes into its document (a touched capture's list of keys). The version-1 hash
    (``fallback()``) stands in when an entry is one an RDB reader skips."""
    try:
        rdb = _entries_rdb(db, entries, now)
        state_hash = _digest(rdbfile.keys(rdb, db, expected=len(entries)), db)
        hash_version = redisstate.HASH_VERSION
    except rdbfile.Unreadable:
        if fallback is None:
            raise ServiceError("redis capture holds keys whose state cannot be hashed") from None
        state_hash, hash_version = str(fallback()), 1
    doc = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "redis_version": version,
        "hash_version": hash_version,
        "keys": entries,
        **(extra or {}),
    }
    return CapturedState(
        data=canonical_json(doc),
        state_hash=state_hash,
        version=version,
        media_type=MEDIA_TYPE,
        meta={**meta, "keys": len(entries)},
    )


def _entries(found: Mapping[bytes, tuple[bytes | None, int | None]]) -> list[dict[str, Any]]:
    """Key-by-key entries of the present keys of ``found`` (payload and PTTL), in byte order."""
    return [
        {"key": _b64(key), "dump": _b64(payload), "pttl": pttl}
        for key, (payload, pttl) in sorted(found.items())
        if payload is not None
    ]


class PinnedKeys:
    """A run's first touches of a database (:class:`~sandbox.services.redis.touched.PinnedRedis`)
    as the kind's :class:`~sandbox.services.base.PinnedState`."""

    def __init__(self, endpoint: str) -> None:
        from sandbox.seam import boundary

        self._endpoint = endpoint
        self.pin = touched.PinnedRedis(endpoint, boundary.current())

    def bind(self) -> None:
        """Take the commands of the run serving the current context."""
        from sandbox.seam import boundary

        self.pin.bind(boundary.current())

    def unbind(self) -> None:
        """The run is over: its context's commands are no longer its own."""
        self.pin.unbind()

    def finish(self) -> tuple[CapturedState, CapturedState]:
        """The kept keys as at their first touch, and as they are now (absent ones left out
        of both: a sandbox restores them absent)."""
        inside = touched.own()  # the capture's own commands are no touches
        try:
            db = _db(self._endpoint)
            client = self.pin.client  # the pins' own pool: no connection made per run
            try:
                version = _server_version(client)
                now_ms = _now_ms(client)
            except redis.RedisError as exc:
                raise ServiceError(f"redis at {_where(self._endpoint)}: {exc}") from None
            ended = self.pin.now()
            keys = sorted(self.pin.first)
            extra = {
                touched.DOC_KEY: {"keys": [_b64(k) for k in keys], "wide": list(self.pin.wide)}
            }
            meta: dict[str, JsonValue] = {"database": str(db), **self.pin.meta()}
            before = keys_capture(_entries(self.pin.first), now_ms, db, version, meta, extra=extra)
            after = keys_capture(_entries(ended), now_ms, db, version, meta, extra=extra)
        finally:
            touched.release(inside)
            self.close()
        return before, after

    def close(self) -> None:
        self.pin.close()


def _redis_url(host: str, port: int, database: str) -> str:
    return f"redis://{host}:{port}/{database or '0'}"


def _redis_ready(url: str) -> bool:
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2)
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False
    finally:
        client.close()


class RedisKind:
    """Capture as an RDB snapshot (else ``DUMP``/``PTTL``), restore by loading it (else
    ``RESTORE``), reset by reloading the server's RDB file."""

    name: ClassVar[str] = "redis"
    binding: ClassVar[KindBinding] = KindBinding(env="REDIS_URL")
    container: ClassVar[ContainerSpec | None] = ContainerSpec(
        image="redis",
        build=ImageBuild("sandbox-replayer/redis:7", "redis"),
        port=6379,
        user="redis",
        server_major=7,
        default_database="0",
        url=_redis_url,
        ready=_redis_ready,
        # The image preloads glibc's malloc in front of the jemalloc Debian's redis links:
        # jemalloc's start-up clock_gettime call recurses into libfaketime before it is
        # initialised, and the server never starts (images/redis/Dockerfile). Keys' TTLs are
        # restored relative to the restore, so they run out as they would have.
        faketime=True,
        # The data folder (a tmpfs sized to the state) holds the RDB file: the captured
        # snapshot is written there and loaded, and it is the restore point a reset
        # reloads (DEBUG RELOAD, hence the debug command). A SYNC (the state hash) streams
        # from the forked child at once, never touching that file. The image's redis user
        # is uid/gid 100/101.
        storage=Storage(path="/data", owner=(100, 101), copies=2, base_mib=16, memory_mib=256),
        state_file="/data/dump.rdb",
        pids_limit=64,
        tmpfs={"/tmp": "rw,size=64m,mode=1777"},
        command=(
            *("--dir", "/data", "--dbfilename", "dump.rdb"),
            *("--enable-debug-command", "yes"),
            *("--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0"),
        ),
    )

    dump_media_types: ClassVar[frozenset[str]] = frozenset({MEDIA_TYPE, RDB_MEDIA_TYPE})

    def mask(
        self, endpoint: str, state: CapturedState, rules: list[MaskRule], masker: Masker
    ) -> CapturedState:
        """See :mod:`sandbox.services.redis.masking`."""
        from sandbox.services.redis.masking import mask_redis

        kept = None if is_rdb(state.data) else parse_dump(state.data).get(touched.DOC_KEY)

        def recapture(scratch: str) -> CapturedState:
            if kept is None:
                return self.capture(scratch)
            with _connect(scratch) as client:  # a touched capture stays one, key by key
                entries, now = _dump_entries(client)
                version = _server_version(client)
            db = int(str(state.meta.get("database", 0)))
            return keys_capture(
                entries, now, db, version, state.meta, extra={touched.DOC_KEY: kept}
            )

        def restore(scratch: str, data: bytes) -> None:
            self._restore(scratch, data, confine=False)  # the live server stays as it is

        return mask_redis(
            self, endpoint, state, rules, masker, restore=restore, recapture=recapture
        )

    part_label: ClassVar[str] = "key "

    def parts(self, description: Mapping[str, Any]) -> list[str]:
        keys = description.get("keys")
        return [f"key {name}" for name in keys] if isinstance(keys, dict) else []

    def remove_parts(self, endpoint: str, names: Sequence[str]) -> None:
        """Delete the keys (a name ``base64:...`` is a key that is not text)."""
        keys = [
            base64.b64decode(n.removeprefix("base64:")) if n.startswith("base64:") else n.encode()
            for n in names
        ]
        try:
            with _connect(endpoint) as client:
                client.delete(*keys)
        except (redis.RedisError, ServiceError) as exc:
            raise ServiceError(f"cannot remove redis keys: {exc}") from None

    def dump_places(self, media_type: str, data: bytes) -> Iterator[Place]:
        """The keys of a capture and the text of their values."""
        from sandbox.services.redis import dumptext

        if media_type == RDB_MEDIA_TYPE:
            header, rdb = unpack_rdb(data)
            return dumptext.redis_rdb_places(rdb, int(header["db"]))
        return dumptext.redis_places(data)

    def __init__(self) -> None:
        self._points: dict[str, _Point | bytes] = {}
        self._hash_versions: dict[str, int] = {}
        """Hash version of the capture restored at an endpoint (1 for old captures)."""

    # --- capture ---------------------------------------------------------------------------

    def capture(self, endpoint: str) -> CapturedState:
        db = _db(endpoint)
        with _connect(endpoint) as client:
            version = _server_version(client)
            meta: dict[str, JsonValue] = {"database": str(db)}
            memory: dict[str, Any] = client.info("memory")
            meta["state_bytes"] = int(memory.get("used_memory_dataset", 0) or 0)
            if _only_db(client, db):
                found = self._capture_rdb(client, endpoint, db, version, meta)
                if found is not None:
                    return found
            return self._capture_keys(client, endpoint, db, version, meta)

    def _capture_rdb(
        self,
        client: redis.Redis,
        endpoint: str,
        db: int,
        version: str,
        meta: dict[str, JsonValue],
    ) -> CapturedState | None:
        """Format 2, or ``None`` when the server refuses ``SYNC``, another database got keys
        meanwhile, or the database holds keys an RDB reader skips."""
        now = _now_ms(client)
        try:
            rdb, summary = _snapshot(client, endpoint, db, strict=True)
        except (rdbfile.SyncRefused, rdbfile.Unreadable):
            return None
        if summary is None or not _only_db(client, db):
            return None  # another database holds keys
        expiring = len(summary.expiries)
        header = {
            "format_version": RDB_FORMAT_VERSION,
            "redis_version": version,
            "db": db,
            "hash_version": redisstate.HASH_VERSION,
            "keys": summary.keys,
            "expiring": expiring,
            "captured_ms": now if expiring else None,
            "first_expiry_ms": min(summary.expiries) if expiring else None,
        }
        return CapturedState(
            data=pack_rdb(header, rdb),
            state_hash=summary.state_hash,
            version=version,
            media_type=RDB_MEDIA_TYPE,
            meta={**meta, "keys": summary.keys},
        )

    def _capture_keys(
        self,
        client: redis.Redis,
        endpoint: str,
        db: int,
        version: str,
        meta: dict[str, JsonValue],
    ) -> CapturedState:
        entries, now = _dump_entries(client)
        return keys_capture(entries, now, db, version, meta, fallback=lambda: _hash(client))

    # --- touched state -----------------------------------------------------------------------

    def pin(self, endpoint: str) -> PinnedKeys:
        """Keep the keys the run in context touches, each at its first touch (see
        :mod:`sandbox.services.redis.touched`)."""
        return PinnedKeys(endpoint)

    def captured_parts(self, meta: Mapping[str, Any]) -> list[str] | None:
        """The keys a touched capture kept (as the meta lists them)."""
        if meta.get(touched.STATE_META) != "touched" or touched.COUNT_META not in meta:
            return None
        return [str(k) for k in meta.get(touched.KEYS_META) or []]

    def describe_capture(self, meta: Mapping[str, Any]) -> str | None:
        return touched.describe_meta(meta)

    def outside_capture(self, endpoint: str, captured: Collection[str]) -> list[str]:
        """The keys outside the touched capture that the replayed run reached (and the
        keyspace-wide commands it sent), as the confined server refused and logged them."""
        with _connect(endpoint) as client:
            return touched.outside(client)

    # --- restore ---------------------------------------------------------------------------

    def restore(self, endpoint: str, data: bytes) -> None:
        """Replace the endpoint's database with a capture, with commands (``RESTORE`` for
        format 1, ordinary writes for format 2); TTLs run from now. A touched capture then
        confines the server to its keys (:func:`~sandbox.services.redis.touched.lock`)."""
        self._restore(endpoint, data, confine=True)

    def _restore(self, endpoint: str, data: bytes, *, confine: bool) -> None:
        if is_rdb(data):
            header, rdb = unpack_rdb(data)
            keys = rdbfile.keys(rdb, header["db"], expected=header.get("keys"))
            with _connect(endpoint) as client:
                client.flushdb()
                redisstate.write(client, keys, header.get("captured_ms"))
            self._hash_versions[endpoint] = redisstate.HASH_VERSION
            return
        doc = parse_dump(data)
        entries = _restore_entries(doc)
        kept = touched.touched_keys(doc) if confine else None
        with _connect(endpoint) as client:
            client.flushdb()
            for start in range(0, len(entries), _BATCH):
                pipe = client.pipeline(transaction=False)
                for key, ttl, payload in entries[start : start + _BATCH]:
                    pipe.restore(key, ttl, payload, replace=True)
                try:
                    pipe.execute()
                except redis.ResponseError as exc:
                    raise _restore_error(client, endpoint, doc, exc) from None
            if kept is not None:
                password = _ADMIN.get(_server(endpoint)) or touched.new_password()
                try:
                    touched.lock(client, kept, password)
                except redis.ResponseError as exc:
                    raise ServiceError(
                        f"redis at {_where(endpoint)} cannot be confined to the touched "
                        f"capture's keys (ACL): {exc}"
                    ) from None
                _ADMIN[_server(endpoint)] = password
        self._hash_versions[endpoint] = int(doc.get("hash_version", 1))

    def server_file(self, data: bytes) -> bytes | None:
        """The file a sandbox server loads this capture from (its RDB), or ``None`` for a
        key-by-key capture."""
        return unpack_rdb(data)[1] if is_rdb(data) else None

    def load_server_file(self, endpoint: str, data: bytes) -> bool:
        """Load the server's RDB file, placed there from :meth:`server_file`, as the state
        and restore point; ``False`` (nothing done) when the server's clock has passed a
        key's expiry (the load would drop the key: :meth:`restore` keeps it)."""
        header, rdb = unpack_rdb(data)
        db, captured = header["db"], header.get("captured_ms")
        first = header.get("first_expiry_ms")
        with _connect(endpoint) as client:
            if isinstance(first, int) and _now_ms(client) >= first:
                return False
            _reload(client)
            ttls = []
            if captured is not None:
                keys = rdbfile.keys(rdb, db, expected=header.get("keys"))
                ttls = [(k.key, max(k.expires_ms - captured, 1)) for k in keys if k.expires_ms]
            if ttls:
                _save_point(client, ttls)
            self._points[endpoint] = _Point(ttls, fresh=True)
        self._hash_versions[endpoint] = redisstate.HASH_VERSION
        return True

    # --- hash and describe -----------------------------------------------------------------

    def state_hash(self, endpoint: str) -> str:
        """The hash, in the version of the capture restored there (2 by default)."""
        with _connect(endpoint) as client:
            if self._hash_versions.get(endpoint, redisstate.HASH_VERSION) == 1:
                return _hash(client)
            found = _hash_v2(client, endpoint, _db(endpoint))
            return found if found is not None else _hash(client)

    def describe(self, endpoint: str, *, limit: int = DESCRIBE_LIMIT) -> dict[str, JsonValue]:
        """See :func:`describe_state`."""
        with _connect(endpoint) as client:
            return describe_state(client, limit)

    def describe_data(
        self, endpoint: str, data: bytes, *, limit: int = DESCRIBE_LIMIT
    ) -> dict[str, JsonValue]:
        """Restore ``data`` into database :data:`SCRATCH_DB` of the same server, describe it,
        flush it."""
        parts = urlsplit(endpoint)
        number = SCRATCH_DB if _db(endpoint) != SCRATCH_DB else SCRATCH_DB - 1
        scratch = urlunsplit(parts._replace(path=f"/{number}"))
        versions = dict(self._hash_versions)
        try:
            self._restore(scratch, data, confine=False)
            return self.describe(scratch, limit=limit)
        finally:
            self._hash_versions = versions
            with _connect(scratch) as client:
                client.flushdb()

    # --- restore point ---------------------------------------------------------------------

    def mark_restore_point(self, endpoint: str) -> None:
        """Save the server's RDB file as the restore point where the server allows ``DEBUG
        RELOAD`` (a sandbox server), else keep a capture in memory."""
        point = self._points.get(endpoint)
        if isinstance(point, _Point) and point.fresh:
            point.fresh = False
            return
        with _connect(endpoint) as client:
            _forget_refusals(client, endpoint)
            if _config(client, "enable-debug-command") != "yes":
                entries, _ = _dump_entries(client)
                doc = {"format": FORMAT, "format_version": FORMAT_VERSION, "keys": entries}
                doc["redis_version"] = _server_version(client)
                doc["hash_version"] = self._hash_versions.get(endpoint, redisstate.HASH_VERSION)
                self._points[endpoint] = canonical_json(doc)
                return
            ttls = _ttls(client)
            _save_point(client, ttls)
            self._points[endpoint] = _Point(ttls)

    def reset(self, endpoint: str) -> None:
        point = self._points.get(endpoint)
        if point is None:
            raise ServiceError(
                f"no restore point for redis at {_where(endpoint)}: call mark_restore_point first"
            )
        if isinstance(point, bytes):
            versions = self._hash_versions.get(endpoint)
            self.restore(endpoint, point)
            if versions is not None:
                self._hash_versions[endpoint] = versions
            with _connect(endpoint) as client:
                _forget_refusals(client, endpoint)
            return
        with _connect(endpoint) as client:
            _reload(client)
            _expire(client, point.ttls)
            _forget_refusals(client, endpoint)


def _forget_refusals(client: redis.Redis, endpoint: str) -> None:
    """Empty the ACL log of a confined server: what a run is refused is its own."""
    if _server(endpoint) in _ADMIN:
        client.execute_command("ACL", "LOG", "RESET")  # type: ignore[no-untyped-call]


def _restore_entries(doc: dict[str, Any]) -> list[tuple[bytes, int, bytes]]:
    entries = []
    for i, entry in enumerate(doc["keys"]):
        if not isinstance(entry, dict):
            raise ServiceError(f"redis capture: key entry {i} is not an object")
        pttl = entry.get("pttl")
        if pttl is not None and (not isinstance(pttl, int) or pttl < 0):
            raise ServiceError(f"redis capture: key entry {i} has an invalid pttl {pttl!r}")
        # PTTL 0 means "about to expire"; RESTORE with 0 would mean "never".
        ttl = 0 if pttl is None else max(pttl, 1)
        key = _unb64(entry.get("key"), f"key entry {i}")
        entries.append((key, ttl, _unb64(entry.get("dump"), f"payload of key entry {i}")))
    return entries


def _restore_error(
    client: redis.Redis, endpoint: str, doc: dict[str, Any], exc: redis.ResponseError
) -> ServiceError:
    dumped, target = doc.get("redis_version"), _server_version(client)
    if "payload version" in str(exc):
        return ServiceVersionError(
            f"the redis capture comes from redis {dumped} but {_where(endpoint)} "
            f"runs redis {target}, which cannot read its DUMP payloads ({exc}): "
            f"restore it into a redis {dumped} or newer image"
        )
    return ServiceError(f"redis restore into {_where(endpoint)}: {exc}")


def _ttls(client: redis.Redis) -> list[tuple[bytes, int]]:
    """The keys of the client's database that have a TTL, and their TTL (ms)."""
    info: dict[str, Any] = client.info("keyspace")
    db = client.connection_pool.connection_kwargs.get("db", 0)
    if not int((info.get(f"db{db}") or {}).get("expires", 0)):
        return []
    out = []
    for batch in _batches(_keys(client)):
        pipe = client.pipeline(transaction=False)
        for key in batch:
            pipe.pttl(key)
        out += [(k, int(t)) for k, t in zip(batch, pipe.execute(), strict=True) if t > 0]
    return out


def _save_point(client: redis.Redis, ttls: list[tuple[bytes, int]]) -> None:
    """Save the RDB file with the keys in ``ttls`` persistent, then give their TTLs back."""
    for batch in _batches([k for k, _ in ttls]):
        pipe = client.pipeline(transaction=False)
        for key in batch:
            pipe.persist(key)
        pipe.execute()
    client.save()
    _expire(client, ttls)


def _reload(client: redis.Redis) -> None:
    """Load the server's RDB file again (``DEBUG RELOAD NOSAVE``: nothing is saved first)."""
    client.execute_command("DEBUG", "RELOAD", "NOSAVE")  # type: ignore[no-untyped-call]


def _expire(client: redis.Redis, ttls: list[tuple[bytes, int]]) -> None:
    for start in range(0, len(ttls), _BATCH):
        pipe = client.pipeline(transaction=False)
        for key, ttl in ttls[start : start + _BATCH]:
            pipe.pexpire(key, ttl)
        pipe.execute()


KIND = register(RedisKind())
