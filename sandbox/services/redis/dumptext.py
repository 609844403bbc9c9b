"""What a Redis dump holds, as text with the place it is at (see
:mod:`sandbox.services.dumptext`): values of a key-by-key dump are ``DUMP`` payloads (RDB
encoding) whose LZF-compressed strings are decompressed (:func:`rdb_texts`) and whose
printable runs are read; an RDB capture is read key by key with its logical values
(:func:`sandbox.services.redis.rdbfile.keys`)."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator

from sandbox.errors import ServiceError
from sandbox.services.dumptext import Place
from sandbox.services.redis.rdbfile import keys, read_length

_PRINTABLE = re.compile(rb"[\x20-\x7e]{4,}")
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
    """The keys and values of a capture of ``DUMP`` payloads; a hash's values are also read
    as ``field=value`` (a scan knows a credential by its field's name)."""
    from sandbox.services.redis.rdbfile import Entry, from_dumps

    doc = json.loads(data)
    entries: list[Entry] = []
    for entry in doc.get("keys", []):
        raw = base64.b64decode(entry["key"])
        key = raw.decode("utf-8", "replace")
        yield f"redis key {key!r}", key
        payload = base64.b64decode(entry.get("dump", ""))
        for text in rdb_texts(payload):
            yield f"redis key {key!r} value", text
        entries.append(Entry(raw, payload))
    try:
        found = [k for k in keys(from_dumps(0, entries)) if isinstance(k.value, dict)]
    except (ServiceError, ValueError, IndexError):
        return
    for k in found:
        key = k.key.decode("utf-8", "replace")
        for place, text in _fields(k.value):
            yield f"redis key {key!r} {place}", text


def redis_rdb_places(rdb: bytes, db: int) -> Iterator[Place]:
    """The keys and logical values of database ``db`` of an RDB file."""
    for found in keys(rdb, db):
        key = found.key.decode("utf-8", "replace")
        yield f"redis key {key!r}", key
        for value in _strings(found.value):
            yield f"redis key {key!r} value", value.decode("utf-8", "replace")
        if isinstance(found.value, dict):
            for place, text in _fields(found.value):
                yield f"redis key {key!r} {place}", text


def _fields(value: dict[bytes, bytes]) -> Iterator[Place]:
    """A hash's values as ``field=value`` (a scan knows a credential by its field's name)."""
    for field, item in value.items():
        name = field.decode("utf-8", "replace")
        yield f"field {name!r}", f"{name}={item.decode('utf-8', 'replace')}"


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
