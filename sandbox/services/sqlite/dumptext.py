"""What a SQLite capture holds, as text: its rows' text and blob values by table, column and
row (see :mod:`sandbox.services.dumptext`)."""

from __future__ import annotations

import contextlib
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path

from sandbox.services.dumptext import Place


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
