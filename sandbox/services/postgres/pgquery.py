"""SQL invariants against Postgres, confined (see :class:`~sandbox.services.base.SQLQuery`).

Everywhere: the text must be one statement that only reads
(:func:`~sandbox.services.sqlquery.read_statement`); it runs through the extended query
protocol (a prepared statement: the server itself refuses a second statement), in a
``READ ONLY`` transaction with ``default_transaction_read_only`` on, under a
``statement_timeout``, and the transaction is rolled back. That is all a live database
gets (``--fail-if`` at capture): nothing is created on it.

In a sandbox's own Postgres the statement also runs as :data:`ROLE`, a role without
superuser, without ``pg_read_server_files``/``pg_write_server_files``/
``pg_execute_server_program`` and with ``SELECT`` alone on the tables: ``COPY ... TO
PROGRAM``, ``pg_read_file`` or ``lo_import`` are refused by the server whatever the text
says. The role is made the first time an invariant is checked there, and granted what
exists then, so that the tables the run created are readable too.
"""

from __future__ import annotations

import contextlib
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from sandbox.errors import QueryRefusedError, ServiceError
from sandbox.services.sqlquery import TIMEOUT_S, read_statement

ROLE = "sbx_invariant"
"""The role a sandbox's invariants run as."""

_SYSTEM_SCHEMAS = ("pg_catalog", "information_schema", "pg_toast")


def confine(conn: psycopg.Connection[Any]) -> None:
    """Make :data:`ROLE` (once) and grant it ``USAGE`` on every user schema and ``SELECT``
    on its tables and sequences, through ``conn`` (a superuser's, autocommit)."""
    found = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (ROLE,)).fetchone()
    role = sql.Identifier(ROLE)
    if found is None:
        conn.execute(
            sql.SQL(
                "CREATE ROLE {} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS"
            ).format(role)
        )
    schemas = conn.execute(
        "SELECT nspname FROM pg_namespace WHERE nspname <> ALL(%s) AND nspname NOT LIKE 'pg_%%'",
        (list(_SYSTEM_SCHEMAS),),
    ).fetchall()
    for (schema,) in schemas:
        name = sql.Identifier(schema)
        for grant in (
            "GRANT USAGE ON SCHEMA {} TO {}",
            "GRANT SELECT ON ALL TABLES IN SCHEMA {} TO {}",
            "GRANT SELECT ON ALL SEQUENCES IN SCHEMA {} TO {}",
        ):
            conn.execute(sql.SQL(grant).format(name, role))


def as_role(conninfo: str) -> str:
    """``conninfo`` for :data:`ROLE` (no password: a sandbox's Postgres trusts its network)."""
    params: dict[str, Any] = {k: v for k, v in conninfo_to_dict(conninfo).items() if v is not None}
    params.pop("password", None)
    params["user"] = ROLE
    return make_conninfo(**params)


def run_query(conninfo: str, text: str, limit: int, where: str) -> list[tuple[Any, ...]]:
    """The first ``limit`` rows of ``text`` at ``conninfo``, confined as the module says
    (``where`` names the server in errors)."""
    statement, _ = read_statement(text)
    try:
        conn = psycopg.connect(conninfo, autocommit=False, connect_timeout=10)
    except psycopg.Error as exc:
        raise ServiceError(f"cannot connect to postgres at {where}: {exc}") from None
    try:
        conn.read_only = True
        with conn.cursor() as cur:
            cur.execute(f"SET LOCAL statement_timeout = {int(TIMEOUT_S * 1000)}")
            cur.execute("SET LOCAL default_transaction_read_only = on")
            # Data from a snapshot: one prepared statement, which cannot hold two.
            cur.execute(statement, prepare=True)
            if cur.description is None:
                raise QueryRefusedError("the statement returns no rows to check")
            return list(cur.fetchmany(limit))
    except psycopg.errors.ReadOnlySqlTransaction as exc:
        raise QueryRefusedError(f"it tried to write: {_first_line(exc)}") from None
    except psycopg.errors.InsufficientPrivilege as exc:
        raise QueryRefusedError(
            f"it needs a privilege it is not given: {_first_line(exc)}"
        ) from None
    except psycopg.errors.QueryCanceled:
        raise QueryRefusedError(f"it ran past its time limit ({TIMEOUT_S:g} s)") from None
    except psycopg.Error as exc:
        raise ServiceError(
            f"postgres at {where}: {type(exc).__name__}: {_first_line(exc)}"
        ) from None
    finally:
        with contextlib.suppress(psycopg.Error):
            conn.rollback()
        conn.close()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
