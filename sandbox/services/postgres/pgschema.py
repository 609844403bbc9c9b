"""A fingerprint of a database's schema, read in a transaction's snapshot: it changes
whenever anything ``pg_dump`` writes besides rows and sequence values could have changed.

Every change of a catalog row (created, altered or dropped, a comment, a grant) leaves a new
row version or none, never the same one, so the set of the visible row versions (``xmin``
and ``ctid``) of the catalogs ``pg_dump`` reads names the schema. Only in-place updates
keep a row version (``VACUUM`` and ``ANALYZE`` writing statistics into ``pg_class``), and
those change nothing ``pg_dump`` writes. Roles and subscriptions are left out, their
catalogs not readable by every user: a restore takes no owner (``--no-owner``), and a change
of a subscription alone (rare in an application's database) goes unseen. About 18,000 rows
on a new database: about 6 ms of the server's time on a connection that read them before,
11 ms on a new one (most of it opening the catalogs).
"""

from __future__ import annotations

import hashlib
from typing import Any

import psycopg
from psycopg import sql

CATALOGS = (
    "pg_namespace", "pg_class", "pg_attribute", "pg_attrdef", "pg_constraint", "pg_index",
    "pg_inherits", "pg_partitioned_table", "pg_type", "pg_enum", "pg_range", "pg_proc",
    "pg_aggregate", "pg_operator", "pg_opclass", "pg_opfamily", "pg_amop", "pg_amproc",
    "pg_am", "pg_cast", "pg_collation", "pg_conversion", "pg_language", "pg_transform",
    "pg_rewrite", "pg_trigger", "pg_event_trigger", "pg_policy", "pg_extension",
    "pg_sequence", "pg_description", "pg_seclabel", "pg_init_privs", "pg_default_acl",
    "pg_statistic_ext", "pg_ts_config", "pg_ts_config_map", "pg_ts_dict", "pg_ts_parser",
    "pg_ts_template", "pg_foreign_data_wrapper", "pg_foreign_server", "pg_foreign_table",
    "pg_publication", "pg_publication_rel", "pg_publication_namespace",
    "pg_largeobject_metadata",
)  # fmt: skip

_PRESENT = (
    "SELECT relname FROM pg_catalog.pg_class "
    "WHERE relnamespace = 'pg_catalog'::regnamespace AND relname = ANY(%s)"
)
"""The catalogs of :data:`CATALOGS` this server has (some are newer than others)."""


def _query(present: list[str]) -> sql.Composed:
    return sql.SQL(" UNION ALL ").join(
        sql.SQL(
            "SELECT {name}, count(*), coalesce(sum(hashtext(xmin::text || ctid::text)), 0) "
            "FROM pg_catalog.{catalog}"
        ).format(name=sql.Literal(name), catalog=sql.Identifier(name))
        for name in present
    )


_QUERIES: dict[int, sql.Composed] = {}
"""The fingerprint's query, by server version (the catalogs it reads are the server's)."""


def fingerprint(conn: psycopg.Connection[Any]) -> str | None:
    """The schema's fingerprint in ``conn``'s transaction, or None when a catalog cannot be
    read (read in a savepoint, so the transaction goes on either way)."""
    try:
        with conn.transaction():
            query = _QUERIES.get(conn.info.server_version)
            if query is None:
                present = conn.execute(_PRESENT, (list(CATALOGS),)).fetchall()
                query = _QUERIES[conn.info.server_version] = _query(
                    sorted(str(r[0]) for r in present)
                )
            rows = conn.execute(query).fetchall()
    except psycopg.Error:
        return None
    return hashlib.sha256(repr(sorted(rows)).encode()).hexdigest()
