"""Masking a SQLite capture (see :mod:`sandbox.services.masking`): each ``table.column``
target's values changed in a scratch copy, captured again."""

from __future__ import annotations

import contextlib
import sqlite3
import tempfile
from pathlib import Path

from sandbox.services.base import CapturedState, ServiceKind
from sandbox.services.masking import Masker, MaskRule, masked_state


def mask_sqlite(
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
    return masked_state(masked, rules)
