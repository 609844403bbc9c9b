"""Masking inside service state: rules applied to what is captured, before it is stored.

A service declares its rules as ``ServiceSpec(..., mask={TARGET: METHOD})``, or by service
name or kind in ``RedactionConfig(masks={"postgres": {TARGET: METHOD}})`` (which also reaches
services found at capture), on the command line (``sandbox capture --mask
postgres:users.email=hash``) or in a TOML file (``--mask-file masks.toml``)::

    [mask.postgres]
    "users.email" = "hash"
    "api_keys.value" = "null"


* Postgres (and SQLite): ``"table.column"`` or ``"schema.table.column"``;
* Redis: a key glob (``"session:*"``), applied to string values and hash fields;
* files: a path glob (``"notes/*.md"``).

Methods, after PostgreSQL Anonymizer's masking functions:

* ``hash``: the value becomes ``mask_<16 hex>``, a keyed SHA-256 of it (key: the store's
  placeholder key). Equal values give equal masks, so joins and lookups still match;
* ``null``: the value is removed (SQL ``NULL``, the Redis key deleted, the file emptied);
* ``redact``: secrets and personal data inside the value are replaced by the redactor's
  placeholders, the rest is kept.

The state is masked where it can be restored and captured again with the service kind's own
``restore`` and ``capture``: a scratch database beside the Postgres one, a scratch Redis
database, a temporary folder or file. So a masked dump is an ordinary dump of the masked
state: it restores, replays and hashes like any other.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fnmatch
import hashlib
import hmac
import os
import sqlite3
import tempfile
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import JsonValue

from sandbox.errors import MaskRuleError, ServiceError, UnknownNameError
from sandbox.redaction import Redactor, sensitive_field
from sandbox.services.base import CapturedState, ServiceKind
from sandbox.services.registry import get_kind

Method = Literal["hash", "null", "redact"]
METHODS: tuple[Method, ...] = ("hash", "null", "redact")
SCRATCH_SUFFIX = "_sbx_mask"
REDIS_SCRATCH_DB = 14


@dataclass(frozen=True)
class MaskRule:
    target: str
    method: Method


@dataclass(frozen=True)
class Masker:
    """How one rule's method changes one value."""

    key: bytes

    def hashed(self, value: str) -> str:
        digest = hmac.new(self.key, value.encode("utf-8", "surrogateescape"), hashlib.sha256)
        return "mask_" + digest.hexdigest()[:16]

    def redacted(self, value: str) -> str:
        return Redactor(key=self.key).text(value)

    def apply(self, method: Method, value: str) -> str | None:
        if method == "null":
            return None
        return self.hashed(value) if method == "hash" else self.redacted(value)

    def apply_bytes(self, method: Method, value: object) -> bytes:
        """:meth:`apply` to a stored value (``b""`` for ``null``)."""
        text = value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else str(value)
        return (self.apply(method, text) or "").encode("utf-8", "surrogateescape")

    def apply_field(self, method: Method, field: bytes | str, value: object) -> bytes:
        """:meth:`apply_bytes` to a hash's value; with ``redact``, the value of a credential
        field (known by its name: ``password``, ``api_key`` ...) becomes its placeholder."""
        name = field.decode("utf-8", "surrogateescape") if isinstance(field, bytes) else field
        if method != "redact" or not sensitive_field(name):
            return self.apply_bytes(method, value)
        text = value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else str(value)
        return Redactor(key=self.key).field_value(text).encode("utf-8", "surrogateescape")


def parse_mask_options(values: Iterable[str]) -> dict[str, dict[str, str]]:
    """``--mask SERVICE:TARGET=METHOD`` options as rules by service name or kind."""
    out: dict[str, dict[str, str]] = {}
    for value in values:
        service, sep, rule = value.partition(":")
        target, eq, method = rule.rpartition("=")
        if not (sep and eq and service and target and method):
            raise MaskRuleError(
                f"--mask {value!r}: expected SERVICE:TARGET=METHOD, as postgres:users.email=hash"
            )
        parse_rules({target: method})
        out.setdefault(service, {})[target] = method
    return out


def load_mask_file(path: str | os.PathLike[str]) -> dict[str, dict[str, str]]:
    """Masking rules from a TOML file: a ``[mask.SERVICE]`` table per service name or kind,
    ``"TARGET" = "METHOD"`` in it."""
    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except OSError as exc:
        raise MaskRuleError(
            f"cannot read the mask file {os.fspath(path)}: {exc.strerror}"
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise MaskRuleError(f"{os.fspath(path)}: not valid TOML ({exc})") from None
    tables = doc.get("mask", {})
    if not isinstance(tables, dict) or not all(isinstance(t, dict) for t in tables.values()):
        raise MaskRuleError(f"{os.fspath(path)}: expected [mask.SERVICE] tables")
    out: dict[str, dict[str, str]] = {}
    for service, rules in tables.items():
        checked = {str(t): str(m) for t, m in rules.items()}
        parse_rules(checked)
        out[str(service)] = checked
    return out


def parse_rules(mask: Mapping[str, str]) -> list[MaskRule]:
    rules = []
    for target, name in mask.items():
        method = next((m for m in METHODS if m == name), None)
        if method is None:
            raise UnknownNameError("masking method", name, list(METHODS))
        rules.append(MaskRule(target, method))
    return rules


def capture_masked(
    kind_name: str, endpoint: str, mask: Mapping[str, str], key: bytes
) -> CapturedState:
    """Capture the service behind ``endpoint``, with ``mask`` applied to what is captured."""
    return mask_captured(kind_name, endpoint, get_kind(kind_name).capture(endpoint), mask, key)


def mask_captured(
    kind_name: str, endpoint: str, state: CapturedState, mask: Mapping[str, str], key: bytes
) -> CapturedState:
    """``state``, captured from ``endpoint``, with ``mask`` applied (the kind's own meta
    kept)."""
    if not mask:
        return state
    kind = get_kind(kind_name)
    rules = parse_rules(mask)
    apply = _APPLY.get(kind_name)
    if apply is None:
        raise UnknownNameError("service kind with masking", kind_name, sorted(_APPLY))
    masked = apply(kind, endpoint, state, rules, Masker(key))
    return dataclasses.replace(masked, meta={**state.meta, **masked.meta})


def _result(
    masked: CapturedState, rules: list[MaskRule], data: bytes | None = None, **meta: JsonValue
) -> CapturedState:
    """The capture of the masked state, saying which targets were masked."""
    targets: list[JsonValue] = [r.target for r in sorted(rules, key=lambda r: r.target)]
    return CapturedState(
        data=masked.data if data is None else data,
        state_hash=masked.state_hash,
        version=masked.version,
        media_type=masked.media_type,
        meta={**masked.meta, **meta, "masked": targets},
    )


# --- postgres -------------------------------------------------------------------------------


def _mask_postgres(
    kind: ServiceKind, endpoint: str, state: CapturedState, rules: list[MaskRule], m: Masker
) -> CapturedState:
    import psycopg
    from psycopg import sql
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    from sandbox.services.postgres import pack_dump, unpack_dump

    params = {k: str(v) for k, v in conninfo_to_dict(endpoint).items() if v is not None}
    database = str(params["dbname"])
    scratch = make_conninfo(**{**params, "dbname": database[:50] + SCRATCH_SUFFIX})
    maintenance = make_conninfo(
        **{**params, "dbname": "template1" if database == "postgres" else "postgres"}
    )
    kind.restore(scratch, state.data)
    try:
        with psycopg.connect(scratch, autocommit=True) as conn:
            for rule in rules:
                *table, column = rule.target.split(".")
                if not table:
                    raise ServiceError(f"mask target {rule.target!r}: expected table.column")
                where = sql.Identifier(*table)
                col = sql.Identifier(column)
                rows = conn.execute(
                    sql.SQL("SELECT DISTINCT {c}::text FROM {t} WHERE {c} IS NOT NULL").format(
                        c=col, t=where
                    )
                ).fetchall()
                for (value,) in rows:
                    conn.execute(
                        sql.SQL("UPDATE {t} SET {c} = %s WHERE {c}::text = %s").format(
                            t=where, c=col
                        ),
                        (m.apply(rule.method, value), value),
                    )
        masked = kind.capture(scratch)
    except psycopg.Error as exc:
        raise ServiceError(f"masking postgres {database}: {exc}") from None
    finally:
        with contextlib.suppress(psycopg.Error), psycopg.connect(maintenance, autocommit=True) as c:
            c.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                    sql.Identifier(database[:50] + SCRATCH_SUFFIX)
                )
            )
    header, dump = unpack_dump(masked.data)
    header["database"] = database
    return _result(masked, rules, pack_dump(header, dump), database=database)


# --- redis ----------------------------------------------------------------------------------


def _mask_redis(
    kind: ServiceKind, endpoint: str, state: CapturedState, rules: list[MaskRule], m: Masker
) -> CapturedState:
    import redis

    base = endpoint.rsplit("/", 1)[0] if endpoint.count("/") > 2 else endpoint.rstrip("/")
    scratch = f"{base}/{REDIS_SCRATCH_DB}"
    if scratch == endpoint:
        raise ServiceError(f"redis database {REDIS_SCRATCH_DB} is the masking scratch database")
    kind.restore(scratch, state.data)
    client: redis.Redis = redis.Redis.from_url(scratch, decode_responses=False)
    try:
        for rule in rules:
            for raw in client.scan_iter(match=rule.target.encode()):
                kind_of = client.type(raw)
                if rule.method == "null":
                    client.delete(raw)
                elif kind_of == b"string":
                    new = m.apply_bytes(rule.method, client.get(raw))
                    client.set(raw, new, keepttl=True)
                elif kind_of == b"hash":
                    for field, value in client.hgetall(raw).items():
                        client.hset(raw, field, m.apply_field(rule.method, field, value))
        masked = kind.capture(scratch)
    finally:
        with contextlib.suppress(redis.RedisError):
            client.flushdb()
        client.close()
    return _result(masked, rules)


# --- files and sqlite -----------------------------------------------------------------------


def _mask_files(
    kind: ServiceKind, endpoint: str, state: CapturedState, rules: list[MaskRule], m: Masker
) -> CapturedState:
    with tempfile.TemporaryDirectory(prefix="sandbox-mask-") as tmp:
        root = Path(tmp) / "workspace"
        kind.restore(str(root), state.data)
        for path in sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()):
            rel = path.relative_to(root).as_posix()
            for rule in rules:
                if fnmatch.fnmatchcase(rel, rule.target):
                    path.write_bytes(m.apply_bytes(rule.method, path.read_bytes()))
        masked = kind.capture(str(root))
    return _result(masked, rules)


def _mask_sqlite(
    kind: ServiceKind, endpoint: str, state: CapturedState, rules: list[MaskRule], m: Masker
) -> CapturedState:
    with tempfile.TemporaryDirectory(prefix="sandbox-mask-") as tmp:
        path = Path(tmp) / "masked.sqlite"
        kind.restore(str(path), state.data)
        with contextlib.closing(sqlite3.connect(path)) as conn:
            for rule in rules:
                table, _, column = rule.target.rpartition(".")
                t = '"' + table.replace('"', '""') + '"'
                c = '"' + column.replace('"', '""') + '"'
                values = conn.execute(f"SELECT DISTINCT {c} FROM {t} WHERE {c} IS NOT NULL")
                for (value,) in values.fetchall():
                    new = m.apply(rule.method, str(value))
                    conn.execute(f"UPDATE {t} SET {c} = ? WHERE {c} = ?", (new, value))
            conn.commit()
        masked = kind.capture(str(path))
    return _result(masked, rules)


_APPLY: dict[
    str, Callable[[ServiceKind, str, CapturedState, list[MaskRule], Masker], CapturedState]
] = {
    "postgres": _mask_postgres,
    "redis": _mask_redis,
    "files": _mask_files,
    "sqlite": _mask_sqlite,
}
