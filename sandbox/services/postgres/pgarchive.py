"""``pg_dump --format=custom`` archives, read and written: made byte-stable (the creation
time in the archive header is set to a fixed time, so two dumps of an unchanged database are
the same bytes and the store keeps one blob), and made again with other rows (the header and
TOC of an archive kept, its tables' rows read anew by ``COPY``: see :func:`layout` and
:func:`rebuild`).

The header (``WriteHead`` in PostgreSQL's ``pg_backup_archiver.c``) is ``PGDMP``, the archive
version (three bytes), the sizes of an int and an offset, the format byte, the compression
(an int before archive version 1.15, one byte from it on), then the creation time as seven
ints (``tm_sec``, ``tm_min``, ``tm_hour``, ``tm_mday``, ``tm_mon``, ``tm_year``,
``tm_isdst``). An int is a sign byte and ``int size`` little-endian bytes.
"""

from __future__ import annotations

import itertools
import zlib
from collections.abc import Iterable
from dataclasses import dataclass

from sandbox.errors import ServiceError

_MAGIC = b"PGDMP"
FIXED_TIME = (0, 0, 0, 1, 0, 100, 0)
"""2000-01-01 00:00:00, as ``struct tm`` fields."""


def _int(value: int, size: int) -> bytes:
    return bytes([1 if value < 0 else 0]) + abs(value).to_bytes(size, "little")


def stabilize(dump: bytes) -> bytes:
    """``dump`` with its creation time replaced by :data:`FIXED_TIME`."""
    if not dump.startswith(_MAGIC) or len(dump) < 11:
        raise ServiceError("pg_dump output is not a custom-format archive (no PGDMP header)")
    vmaj, vmin = dump[5], dump[6]
    int_size = dump[8]
    if not 1 <= int_size <= 8:
        raise ServiceError(f"pg_dump archive has an unreadable int size {int_size}")
    start = 11 + (1 if (vmaj, vmin) >= (1, 15) else 1 + int_size)
    fields = b"".join(_int(v, int_size) for v in FIXED_TIME)
    end = start + len(fields)
    if len(dump) < end:
        raise ServiceError("pg_dump archive is cut short inside its header")
    return dump[:start] + fields + dump[end:]


# --- an archive's layout, and the same archive with new rows --------------------------------
#
# After the header (three strings follow the creation time: the database's name, the
# server's version, ``pg_dump``'s version) comes the TOC: a count, then per entry its dump
# id, whether it had data, two strings (catalog ids), its tag, its kind ("TABLE DATA", ...),
# its section (an int), its definition, drop and COPY statements, its schema, tablespace and
# table access method, its owner, a "with oids" string, its dependencies (strings ended by
# a null one), and the custom format's data state: one byte (1: data not yet placed, 2:
# placed, 3: no data) and an offset of ``offset size`` bytes. A string is an int length
# (negative: null) and its bytes. A pipe's archive never has its offsets placed: its data
# blocks follow the TOC in the TOC's order, each the byte 1, the entry's dump id, then
# chunks (an int length and its bytes) of the rows as ``COPY ... TO STDOUT`` gives them
# followed by ``\.`` and three newlines, compressed as one zlib stream when the archive is
# compressed, ended by a length of zero.

_BLOCK_DATA = 1
_NOT_PLACED, _NO_DATA = 1, 3
_READABLE = ((1, 14),)
"""The archive versions whose TOC this reads: ``pg_dump`` 12 to 15's, the one tested (16
moved the compression into a byte of the header, 17 added a field to each TOC entry;
their archives are left to ``pg_dump``)."""
_END_OF_ROWS = b"\\.\n\n\n"
_CHUNK = 1 << 16


@dataclass(frozen=True)
class Table:
    """One data block of an archive: the entry's dump id, the table's schema and name, and
    the ``COPY`` statement that reads its rows as the archive holds them."""

    dump_id: int
    schema: str
    name: str
    copy_out: str


@dataclass(frozen=True)
class Layout:
    """An archive without its rows: the bytes before its first data block (header and
    TOC), its tables in the order of their blocks, and whether the rows are compressed."""

    head: bytes
    tables: tuple[Table, ...]
    compressed: bool
    int_size: int


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0
        self.int_size = 4

    def take(self, n: int) -> bytes:
        start = self.pos
        self.skip(n)
        return self.data[start : self.pos]

    def skip(self, n: int) -> None:
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError("cut short")
        self.pos += n

    def byte(self) -> int:
        return self.take(1)[0]

    def int(self) -> int:
        sign = self.byte()
        value = int.from_bytes(self.take(self.int_size), "little")
        return -value if sign else value

    def str(self) -> str | None:
        n = self.int()
        return None if n < 0 else self.take(n).decode("utf-8", "replace")


def rows(dump: bytes) -> list[bytes] | None:
    """The rows (``COPY`` output) of each table of a custom-format archive written to a
    pipe, in the order of :func:`layout`'s tables, or None when it has no layout.
    ``rebuild(layout(dump), ([r] for r in rows(dump)), level)`` cuts the data blocks as a
    rebuilt archive's, so an archive ``pg_dump`` made and one rebuilt from its head with the
    same rows are the same bytes."""
    try:
        found = _layout(dump, decompress=True)
    except (ValueError, IndexError, zlib.error):
        return None
    return None if found is None else found[1]


def layout(dump: bytes) -> Layout | None:
    """The layout of a custom-format archive written to a pipe (its data blocks walked
    through, not decompressed), or None when it cannot be filled again with other rows
    (another archive version or compression, data that is not a table's rows, offsets
    placed, blocks out of the TOC's order, unreadable bytes)."""
    try:
        found = _layout(dump, decompress=False)
    except (ValueError, IndexError):
        return None
    return None if found is None else found[0]


def _layout(dump: bytes, *, decompress: bool) -> tuple[Layout, list[bytes]] | None:
    r = _Reader(dump)
    if r.take(5) != _MAGIC:
        return None
    version = (r.byte(), r.byte())
    r.byte()
    r.int_size, off_size, _format = r.byte(), r.byte(), r.byte()
    if version not in _READABLE or not 1 <= r.int_size <= 8:
        return None
    compressed = r.int() != 0
    for _ in range(7):
        r.int()
    for _ in range(3):
        r.str()
    tables: list[Table] = []
    for _ in range(r.int()):
        dump_id, _had_data = r.int(), r.int()
        r.str(), r.str()
        tag, desc = r.str(), r.str()
        r.int()
        _defn, _drop, copy = r.str(), r.str(), r.str()
        schema, _tablespace, _am = r.str(), r.str(), r.str()
        r.str(), r.str()
        while r.str() is not None:
            pass
        state = r.byte()
        r.take(off_size)
        if state == _NO_DATA:
            continue
        statement = (copy or "").rstrip()
        if state != _NOT_PLACED or desc != "TABLE DATA" or not statement.endswith(" FROM stdin;"):
            return None
        copy_out = statement.removesuffix(" FROM stdin;") + " TO STDOUT"
        tables.append(Table(dump_id, schema or "public", tag or "", copy_out))
    head = dump[: r.pos]
    found: list[bytes] = []
    for table in tables:  # the blocks, in the TOC's order, end the archive
        if r.byte() != _BLOCK_DATA or r.int() != table.dump_id:
            return None
        data = bytearray()
        while (n := r.int()) != 0:
            if decompress:
                data += r.take(n)
            else:
                r.skip(n)
        if decompress:
            plain = zlib.decompress(data) if compressed else bytes(data)
            if not plain.endswith(_END_OF_ROWS):
                return None
            found.append(plain[: -len(_END_OF_ROWS)])
    if r.pos != len(dump):
        return None
    return Layout(head, tuple(tables), compressed, r.int_size), found


def rebuild(layout: Layout, rows: Iterable[Iterable[bytes]], level: int) -> bytes:
    """The archive of ``layout`` holding, for each of its tables in order, the ``COPY``
    output in ``rows`` (compressed at ``level`` when the archive is compressed). Its data
    blocks are cut every :data:`_CHUNK` bytes of what is written, so the same rows make the
    same bytes however they come."""
    size = layout.int_size
    out = [layout.head]
    for table, chunks in zip(layout.tables, rows, strict=True):
        out.append(bytes([_BLOCK_DATA]) + _int(table.dump_id, size))
        squeeze = zlib.compressobj(level) if layout.compressed else None
        written = bytearray()
        for chunk in itertools.chain(chunks, (_END_OF_ROWS,)):
            written += squeeze.compress(chunk) if squeeze else chunk
        if squeeze:
            written += squeeze.flush()
        for at in range(0, len(written), _CHUNK):
            piece = written[at : at + _CHUNK]
            out.append(_int(len(piece), size) + piece)
        out.append(_int(0, size))
    return b"".join(out)
