"""Masking a MySQL/MariaDB capture (see :mod:`sandbox.services.masking`): restored into a
scratch database beside the endpoint's, each ``table.column`` target's values changed by
``UPDATE``, captured again and the scratch database dropped."""

from __future__ import annotations

from typing import Any

from sandbox.errors import ServiceError
from sandbox.services.base import CapturedState
from sandbox.services.masking import Masker, MaskRule, masked_state
from sandbox.services.mysql import dump as mysqldump
from sandbox.services.mysql.endpoint import Endpoint, quote_name

SCRATCH_SUFFIX = "_sbx_mask"


def _mask_column(cur: Any, rule: MaskRule, m: Masker) -> None:
    table, _, column = rule.target.rpartition(".")
    if not table:
        raise ServiceError(f"mask target {rule.target!r}: expected table.column")
    t, c = quote_name(table), quote_name(column)
    cur.execute(f"SELECT DISTINCT {c} FROM {t} WHERE {c} IS NOT NULL")
    for (value,) in cur.fetchall():
        text = value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else value
        cur.execute(
            f"UPDATE {t} SET {c} = %s WHERE {c} = %s", (m.apply(rule.method, str(text)), value)
        )


def mask_mysql(
    endpoint: str, state: CapturedState, rules: list[MaskRule], m: Masker, capture: Any
) -> CapturedState:
    """``state`` masked in ``<db>_sbx_mask`` on the endpoint's server, captured by
    ``capture`` (the kind's)."""
    ep = Endpoint.parse(endpoint)
    scratch = ep.with_database(ep.database[:50] + SCRATCH_SUFFIX)
    mysqldump.restore(scratch, mysqldump.parse(state.data))
    try:
        conn = scratch.connect()
        try:
            with conn.cursor() as cur:
                for rule in rules:
                    _mask_column(cur, rule, m)
        except ServiceError:
            raise
        except Exception as exc:
            raise ServiceError(f"masking mysql {ep.database}: {exc}") from None
        finally:
            conn.close()
        masked: CapturedState = capture(scratch.url())
    finally:
        conn = ep.connect(database=False)
        try:
            with conn.cursor() as cur:
                cur.execute(f"DROP DATABASE IF EXISTS {quote_name(scratch.database)}")
        finally:
            conn.close()
    return masked_state(masked, rules, database=ep.database)
