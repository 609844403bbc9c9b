"""What a service dump holds, as text with the place it is at: the rows of a Postgres dump
(table, column, row), the keys and values of a Redis dump, the lines of a workspace's files,
the rows of a SQLite database. :mod:`sandbox.services.sharescan` scans these before a run is
shared.

Postgres dumps are turned into SQL by ``pg_restore --data-only`` (no server needed); Redis
values are ``DUMP`` payloads (RDB encoding): their LZF-compressed strings are decompressed
(:func:`rdb_texts`) and their printable runs read; a Redis RDB capture is read key by key
with its logical values (:func:`sandbox.services.redis.rdbfile.keys`).
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import re
import sqlite3
import subprocess
import tarfile
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from sandbox.errors import ServiceError
from sandbox.services.redis.rdbfile import read_length

Place = tuple[str, str]
"""Where a piece of text is (``table public.users column email (row 3)``), and the text."""
_COPY = re.compile(r"^COPY (?P<table>\S+) \((?P<cols>[^)]*)\) FROM stdin;$")
_PRINTABLE = re.compile(rb"[\x20-\x7e]{4,}")
_COPY_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "\\": "\\"}


def _unescape(field: str) -> str:
    return re.sub(r"\\(.)", lambda m: _COPY_ESCAPES.get(m[1], m[1]), field)


def postgres_places(data: bytes) -> Iterator[Place]:
    from sandbox.services.postgres import pg_tool, unpack_dump

    _, dump = unpack_dump(data)
    try:
        done = subprocess.run(
            [*pg_tool("pg_restore"), "--data-only", "--file=-"],
            input=dump,
            capture_output=True,
            timeout=600,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ServiceError(f"pg_restore cannot read a postgres dump: {exc}") from None
    if done.returncode != 0:
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-1:]
        raise ServiceError(f"pg_restore cannot read a postgres dump: {' '.join(tail)}")
    table: str | None = None
    columns: list[str] = []
    row = 0
    for line in done.stdout.decode("utf-8", "replace").splitlines():
        if table is None:
            match = _COPY.match(line)
            if match:
                table, row = match["table"], 0
                columns = [c.strip().strip('"') for c in match["cols"].split(",")]
            continue
        if line == "\\.":
            table = None
            continue
        row += 1
        for column, field in zip(columns, line.split("\t"), strict=False):
            if field != "\\N":
                yield f"table {table} column {column} (row {row})", _unescape(field)


_LZF_MARKER = 0xC3
"""RDB's encoding byte for an LZF-compressed string: compressed length, length, data."""
_MAX_LZF = 64 * 1024 * 1024


def lzf_decompress(data: bytes, size: int) -> bytes:
    """liblzf's format: literal runs and back references; ``size`` bytes expected."""
    out = bytearray()
    i = 0
    while i < len(data):
        ctrl = data[i]
        i += 1
        if ctrl < 32:
            out += data[i : i + ctrl + 1]
            i += ctrl + 1
            continue
        length = ctrl >> 5
        if length == 7:
            length += data[i]
            i += 1
        ref = len(out) - ((ctrl & 0x1F) << 8) - data[i] - 1
        i += 1
        if ref < 0 or len(out) + length + 2 > size:
            raise ValueError("bad LZF back reference")
        for _ in range(length + 2):
            out.append(out[ref])
            ref += 1
    if len(out) != size:
        raise ValueError("LZF data of the wrong size")
    return bytes(out)


def rdb_texts(payload: bytes) -> Iterator[str]:
    """Readable text in a ``DUMP`` payload: each LZF-compressed string decompressed, and the
    printable runs of the payload and of what was decompressed."""
    chunks = [payload]
    for pos, byte in enumerate(payload):
        if byte != _LZF_MARKER:
            continue
        try:
            packed, at = read_length(payload, pos + 1)
            size, at = read_length(payload, at)
            if size > _MAX_LZF or at + packed > len(payload):
                continue
            chunks.append(lzf_decompress(payload[at : at + packed], size))
        except (ServiceError, ValueError, IndexError):
            continue
    for chunk in chunks:
        for found in _PRINTABLE.findall(chunk):
            yield found.decode("ascii")


def redis_places(data: bytes) -> Iterator[Place]:
    doc = json.loads(data)
    for entry in doc.get("keys", []):
        key = base64.b64decode(entry["key"]).decode("utf-8", "replace")
        yield f"redis key {key!r}", key
        for text in rdb_texts(base64.b64decode(entry.get("dump", ""))):
            yield f"redis key {key!r} value", text


def redis_rdb_places(data: bytes) -> Iterator[Place]:
    from sandbox.services.redis import unpack_rdb
    from sandbox.services.redis.rdbfile import keys

    header, rdb = unpack_rdb(data)
    for found in keys(rdb, header["db"]):
        key = found.key.decode("utf-8", "replace")
        yield f"redis key {key!r}", key
        for value in _strings(found.value):
            yield f"redis key {key!r} value", value.decode("utf-8", "replace")


def _strings(value: object) -> Iterator[bytes]:
    """Every string in a logical Redis value (a hash's fields and values, a set's members)."""
    if isinstance(value, bytes):
        yield value
    elif isinstance(value, dict):
        for pair in value.items():
            yield from _strings(pair)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def files_places(data: bytes) -> Iterator[Place]:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        for member in tar:
            if not member.isfile():
                continue
            handle = tar.extractfile(member)
            if handle is None:
                continue
            yield from text_places(f"file {member.name}", handle.read())


def sqlite_places(data: bytes) -> Iterator[Place]:
    with tempfile.TemporaryDirectory(prefix="sandbox-scan-") as tmp:
        path = Path(tmp) / "db.sqlite"
        path.write_bytes(data)
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
            tables = [
                r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            ]
            for table in tables:
                cursor = conn.execute(f'SELECT * FROM "{table.replace(chr(34), chr(34) * 2)}"')
                columns = [d[0] for d in cursor.description]
                for row, values in enumerate(cursor, 1):
                    for column, value in zip(columns, values, strict=True):
                        if isinstance(value, str | bytes):
                            text = value if isinstance(value, str) else value.decode("latin-1")
                            yield f"table {table} column {column} (row {row})", text


def text_places(where: str, data: bytes) -> Iterator[Place]:
    """The lines of ``data`` when it is text (a NUL byte says it is not)."""
    if b"\0" in data[:8192]:
        return
    for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
        if line.strip():
            yield f"{where} line {number}", line


_READERS: dict[str, Callable[[bytes], Iterator[Place]]] = {
    "application/vnd.sandbox-replayer.postgres-dump": postgres_places,
    "application/vnd.sandbox-replayer.redis-dump+json": redis_places,
    "application/vnd.sandbox-replayer.redis-rdb": redis_rdb_places,
    "application/x-tar": files_places,
    "application/vnd.sqlite3": sqlite_places,
}


def dump_places(media_type: str, data: bytes) -> Iterator[Place]:
    """The text a service dump of this media type holds, with where it is."""
    reader = _READERS.get(media_type.split(";")[0].strip().lower())
    if reader is None:
        yield from text_places("blob", data)
        return
    yield from reader(data)
