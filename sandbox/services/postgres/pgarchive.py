"""Byte-stable ``pg_dump --format=custom`` archives: the creation time in the archive header
is set to a fixed time, so two dumps of an unchanged database are the same bytes (and the
store keeps one blob).

The header (``WriteHead`` in PostgreSQL's ``pg_backup_archiver.c``) is ``PGDMP``, the archive
version (three bytes), the sizes of an int and an offset, the format byte, the compression
(an int before archive version 1.15, one byte from it on), then the creation time as seven
ints (``tm_sec``, ``tm_min``, ``tm_hour``, ``tm_mday``, ``tm_mon``, ``tm_year``,
``tm_isdst``). An int is a sign byte and ``int size`` little-endian bytes.
"""

from __future__ import annotations

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
