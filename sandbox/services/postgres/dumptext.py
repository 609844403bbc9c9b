"""What a Postgres dump holds, as text with the place it is at (table, column, row): the
archive is turned into SQL by ``pg_restore --data-only`` (no server needed) and its ``COPY``
blocks are read (see :mod:`sandbox.services.dumptext`)."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator

from sandbox.errors import ServiceError
from sandbox.services.dumptext import Place

_COPY = re.compile(r"^COPY (?P<table>\S+) \((?P<cols>[^)]*)\) FROM stdin;$")
_COPY_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "\\": "\\"}


def _unescape(field: str) -> str:
    return re.sub(r"\\(.)", lambda m: _COPY_ESCAPES.get(m[1], m[1]), field)


def postgres_places(dump: bytes, pg_restore: list[str]) -> Iterator[Place]:
    """The values of a ``pg_dump`` archive (read by the ``pg_restore`` command given), by
    table, column and row."""
    try:
        done = subprocess.run(
            [*pg_restore, "--data-only", "--file=-"],
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
