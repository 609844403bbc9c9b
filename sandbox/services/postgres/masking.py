"""Masking a Postgres capture (see :mod:`sandbox.services.masking`): restored into a scratch
database beside the endpoint, each ``table.column`` target's values changed by ``UPDATE``,
captured again and the scratch database dropped."""

from __future__ import annotations

import contextlib

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from sandbox.errors import ServiceError
from sandbox.services.base import CapturedState, ServiceKind
from sandbox.services.masking import Masker, MaskRule

SCRATCH_SUFFIX = "_sbx_mask"


def mask_in_scratch(
    kind: ServiceKind, endpoint: str, state: CapturedState, rules: list[MaskRule], m: Masker
) -> tuple[CapturedState, str]:
    """The capture of ``state`` masked in a scratch database beside ``endpoint``, and the
    name of the endpoint's database."""
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
    return masked, database
