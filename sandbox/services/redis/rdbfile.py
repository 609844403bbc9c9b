"""Redis RDB files: fetched from a server over its replication protocol, made byte-stable,
built from ``DUMP`` payloads, and read back as keys with their logical values.

- :func:`fetch` asks the server for a snapshot the way ``redis-cli --rdb`` does (``REPLCONF
  rdb-only 1``, then ``SYNC``): the server forks and streams its own RDB, so a million keys
  cost what the server's serializer costs, not a round trip each.
- :func:`stable` drops the header's volatile auxiliary fields (creation time, memory used,
  replication id and offset) and zeroes the trailing checksum, which Redis reads as "not
  checked": two snapshots of an unchanged keyspace are then the same bytes.
- :func:`from_dumps` writes an RDB from ``DUMP`` payloads (a payload is an RDB value: its
  type byte and body, then a 2-byte RDB version and an 8-byte CRC).
- :func:`keys` reads an RDB with the ``rdb-py`` parser (in memory: a ``memfd``, never a file
  on disk) and yields each key of one database with its logical value.

The layout (``rdb.c`` in Redis): ``REDIS`` and a 4-digit version, opcodes ``0xFA`` (aux
field: two strings), ``0xFE`` (select database), ``0xFB`` (resize hints), ``0xFC`` (expiry
in ms, 8 bytes little-endian) before a key's type byte, ``0xFF`` then the CRC64 at the end.
"""

from __future__ import annotations

import os
import socket
import ssl
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, NamedTuple
from urllib.parse import unquote, urlsplit

from sandbox.errors import ServiceError

OP_AUX, OP_SELECTDB, OP_EXPIRETIME_MS, OP_EOF = 0xFA, 0xFE, 0xFC, 0xFF
STABLE_AUX = frozenset({b"redis-ver", b"redis-bits"})
"""Auxiliary fields kept by :func:`stable`: the others change from one snapshot to the
next."""
_TIMEOUT_S = 120.0
_CHUNK = 1 << 20


class SyncRefused(ServiceError):
    """The server did not hand over a snapshot (``SYNC`` refused or unavailable)."""


# --- fetching ------------------------------------------------------------------------------


def _command(*args: bytes) -> bytes:
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%b\r\n" % (len(a), a) for a in args)


@contextmanager
def _connection(endpoint: str) -> Iterator[tuple[socket.socket, Any]]:
    parts = urlsplit(endpoint)
    host, port = parts.hostname or "localhost", parts.port or 6379
    try:
        sock: socket.socket = socket.create_connection((host, port), timeout=_TIMEOUT_S)
        if parts.scheme == "rediss":
            sock = ssl.create_default_context().wrap_socket(sock, server_hostname=host)
    except OSError as exc:
        raise SyncRefused(f"cannot connect to redis at {host}:{port}: {exc}") from None
    try:
        reader = sock.makefile("rb", buffering=_CHUNK)
        if parts.password is not None:
            user = unquote(parts.username) if parts.username else None
            auth = [b"AUTH", *([user.encode()] if user else []), unquote(parts.password).encode()]
            sock.sendall(_command(*auth))
            _expect_ok(reader, "AUTH")
        yield sock, reader
    except OSError as exc:
        raise SyncRefused(f"redis at {host}:{port}: {exc}") from None
    finally:
        sock.close()


def _expect_ok(reader: Any, what: str) -> bytes:
    line = bytes(reader.readline())
    if not line.startswith((b"+", b":", b"$", b"*")):
        raise SyncRefused(f"{what}: {line.decode(errors='replace').strip() or 'no answer'}")
    return line


def fetch(endpoint: str, *, diskless: bool, sink: Callable[[bytes], None] | None = None) -> bytes:
    """The server's RDB snapshot of every database. ``diskless``: offer to take it straight
    from the forked child (``REPLCONF capa eof``); a server configured with a diskless sync
    delay then waits that long, so capture asks for it only where the delay is 0. ``sink``
    is given the snapshot's bytes in order as they come (the hash walks them meanwhile)."""
    feed = sink if sink is not None else _ignore
    with _connection(endpoint) as (sock, reader):
        if diskless:
            sock.sendall(_command(b"REPLCONF", b"capa", b"eof"))
            reader.readline()
        sock.sendall(_command(b"REPLCONF", b"rdb-only", b"1"))
        reader.readline()  # an error before Redis 7: the server then streams on, ignored
        sock.sendall(_command(b"SYNC"))
        line = b"\n"
        while line in (b"\n", b"\r\n"):  # the server sends newlines while it saves
            line = bytes(reader.readline())
        if line.startswith(b"$EOF:"):
            return _read_until(reader, line[5:45], feed)
        if not line.startswith(b"$"):
            raise SyncRefused(f"SYNC: {line.decode(errors='replace').strip() or 'no answer'}")
        return _read_size(reader, int(line[1:]), feed)


def _ignore(chunk: bytes) -> None:
    pass


def _read_size(reader: Any, size: int, feed: Callable[[bytes], None]) -> bytes:
    chunks, left = [], size
    while left:
        chunk = reader.read1(min(left, _CHUNK))
        if not chunk:
            raise SyncRefused("SYNC: the snapshot was cut short")
        feed(chunk)
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _read_until(reader: Any, mark: bytes, feed: Callable[[bytes], None]) -> bytes:
    """The bytes before ``mark``; each chunk is fed once the mark cannot start in it."""
    buf = bytearray()
    fed = 0
    while not buf.endswith(mark):
        chunk = reader.read1(_CHUNK)
        if not chunk:
            raise SyncRefused("SYNC: the snapshot was cut short")
        buf += chunk
        ready = len(buf) - len(mark)
        if ready > fed:
            feed(bytes(buf[fed:ready]))
            fed = ready
    del buf[-len(mark) :]
    if len(buf) > fed:
        feed(bytes(buf[fed:]))
    return bytes(buf)


# --- bytes ---------------------------------------------------------------------------------


def encode_length(n: int) -> bytes:
    if n < 1 << 6:
        return bytes([n])
    if n < 1 << 14:
        return bytes([0x40 | n >> 8, n & 0xFF])
    if n < 1 << 32:
        return b"\x80" + n.to_bytes(4, "big")
    return b"\x81" + n.to_bytes(8, "big")


def skip_string(data: bytes, at: int) -> tuple[bytes | None, int]:
    """The raw string at ``at`` (``None`` for an integer or compressed one) and the offset
    after it."""
    first = data[at]
    kind = first >> 6
    if kind == 0:
        return data[at + 1 : at + 1 + first], at + 1 + first
    if kind == 1:
        n = (first & 0x3F) << 8 | data[at + 1]
        return data[at + 2 : at + 2 + n], at + 2 + n
    if kind == 2:
        width = 4 if first == 0x80 else 8
        n = int.from_bytes(data[at + 1 : at + 1 + width], "big")
        start = at + 1 + width
        return data[start : start + n], start + n
    special = first & 0x3F
    if special in (0, 1, 2):  # an 8, 16 or 32-bit integer
        return None, at + 1 + (1, 2, 4)[special]
    if special == 3:  # LZF: compressed length, length, the compressed bytes
        packed, after = read_length(data, at + 1)
        _, after = read_length(data, after)
        return None, after + packed
    raise ServiceError(f"RDB string with an unknown encoding {first:#x}")


def read_length(data: bytes, at: int) -> tuple[int, int]:
    """The RDB length at ``at`` and the offset after it."""
    first = data[at]
    kind = first >> 6
    if kind == 0:
        return first, at + 1
    if kind == 1:
        return (first & 0x3F) << 8 | data[at + 1], at + 2
    if first not in (0x80, 0x81):
        raise ServiceError(f"RDB length with an unknown encoding {first:#x}")
    width = 4 if first == 0x80 else 8
    return int.from_bytes(data[at + 1 : at + 1 + width], "big"), at + 1 + width


def stable(rdb: bytes) -> bytes:
    """``rdb`` without its volatile auxiliary fields and with a zero checksum."""
    if len(rdb) < 18 or not rdb.startswith(b"REDIS") or rdb[-9] != OP_EOF:
        raise ServiceError("not an RDB snapshot (no REDIS header or EOF marker)")
    at, kept = 9, [rdb[:9]]
    try:
        while rdb[at] == OP_AUX:
            key, after = skip_string(rdb, at + 1)
            _, after = skip_string(rdb, after)
            if key in STABLE_AUX:
                kept.append(rdb[at:after])
            at = after
    except IndexError:
        raise ServiceError("RDB snapshot cut short in its header") from None
    kept.append(rdb[at:-8])
    kept.append(bytes(8))
    return b"".join(kept)


@dataclass(frozen=True)
class Entry:
    """One key for :func:`from_dumps`: its ``DUMP`` payload and absolute expiry (ms)."""

    key: bytes
    payload: bytes
    expires_ms: int | None = None


def from_dumps(db: int, entries: list[Entry]) -> bytes:
    """An RDB holding ``entries`` in database ``db`` (checksum zero: not checked)."""
    version = max((int.from_bytes(e.payload[-10:-8], "little") for e in entries), default=9)
    out = [b"REDIS%04d" % version, bytes([OP_SELECTDB]), encode_length(db)]
    for e in entries:
        if e.expires_ms is not None:
            out.append(bytes([OP_EXPIRETIME_MS]) + e.expires_ms.to_bytes(8, "little"))
        out += [e.payload[:1], encode_length(len(e.key)), e.key, e.payload[1:-10]]
    out.append(bytes([OP_EOF]) + bytes(8))
    return b"".join(out)


# --- reading -------------------------------------------------------------------------------


class Key(NamedTuple):
    """A key of an RDB and its logical value: ``string`` (bytes), ``list`` (list of bytes),
    ``set`` (list of bytes), ``hash`` (dict), ``zset`` (list of (member, score))."""

    db: int
    key: bytes
    type: str
    value: Any
    expires_ms: int | None


_TYPES = {"string": "string", "list": "list", "set": "set", "hash": "hash", "sorted_set": "zset"}


class Unreadable(ServiceError):
    """The RDB holds keys the parser skips (streams, module types)."""


@contextmanager
def _in_memory(data: bytes) -> Iterator[str]:
    fd = os.memfd_create("sandbox-rdb", os.MFD_CLOEXEC)
    try:
        os.write(fd, data) if len(data) < (1 << 30) else _write_all(fd, data)
        yield f"/proc/self/fd/{fd}"
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def keys(rdb: bytes, db: int | None = None, *, expected: int | None = None) -> Iterator[Key]:
    """The keys of database ``db`` (every database when ``None``) in file order. Raises
    :class:`Unreadable` when a database holds keys the parser skips: the database's resize
    hint (or ``expected``, for an RDB without hints) counts more keys than it yielded."""
    import rdb as rdbpy  # rdb-py: a Rust RDB parser

    with _in_memory(rdb) as path:
        try:
            decoder = rdbpy.RdbDecoder(path)
            current, counted, hinted = -1, 0, expected
            for found in decoder:
                item: Any = found
                kind = item["type"]
                if kind == "string":
                    counted += 1
                    if db is None or current == db:
                        yield Key(current, item["key"], kind, item["value"], item["expiry"])
                elif kind in _TYPES:
                    counted += 1
                    if db is None or current == db:
                        yield Key(current, item["key"], _TYPES[kind], _value(item), item["expiry"])
                elif kind == "select_db":
                    _check_count(current, counted, hinted)
                    current, counted, hinted = int(item["db"]), 0, expected
                elif kind == "resize_db":
                    hinted = int(item["db_size"])
            _check_count(current, counted, hinted)
        except ValueError as exc:
            raise ServiceError(f"unreadable RDB snapshot: {exc}") from None


def _check_count(db: int, counted: int, hinted: int | None) -> None:
    if db >= 0 and hinted is not None and counted != hinted:
        raise Unreadable(
            f"database {db} of the RDB snapshot holds {hinted} keys, {counted} of them "
            "readable (streams and module types are not)"
        )


def _value(item: Any) -> Any:
    kind = item["type"]
    if kind == "string":
        return item["value"]
    if kind == "set":
        return item["members"]
    if kind == "sorted_set":
        return [(member, score) for score, member in item["values"]]
    return item["values"]
