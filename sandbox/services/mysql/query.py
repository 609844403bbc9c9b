"""SQL invariants against MySQL/MariaDB, confined (see
:class:`~sandbox.services.base.SQLQuery`).

Everywhere: the text must be one statement that only reads
(:func:`~sandbox.services.sqlquery.read_statement`); PyMySQL sends it without multi-statement
support (the server itself refuses a second statement), in a ``READ ONLY`` transaction under a
statement time limit (``max_statement_time``, MySQL's ``max_execution_time``), and the
transaction is rolled back. That is all a live database gets: nothing is created on it.

In a sandbox's own server the statement also runs as :data:`USER`, a user with ``SELECT`` on
the database alone (no ``FILE``, no ``PROCESS``, no other database): ``SELECT ... INTO
OUTFILE`` or ``LOAD_FILE`` are refused by the server whatever the text says. The user is made
the first time an invariant is checked there; its grant covers the tables the run created.
"""

from __future__ import annotations

import contextlib
from typing import Any

from sandbox.errors import QueryRefusedError, ServiceError
from sandbox.services.mysql.endpoint import Endpoint, quote_name
from sandbox.services.sqlquery import TIMEOUT_S, read_statement

USER = "sbx_invariant"
"""The user a sandbox's invariants run as."""

_WRITE = {1792}  # ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION
_TIMEOUT = {1969, 3024}  # MariaDB's ER_STATEMENT_TIMEOUT, MySQL's ER_QUERY_TIMEOUT
_PRIVILEGE = {1044, 1045, 1142, 1143, 1227, 1370}


def confine(ep: Endpoint) -> Endpoint:
    """Make :data:`USER` (once) with ``SELECT`` on the endpoint's database, through ``ep``
    (an administrator's); the endpoint as that user."""
    conn = ep.connect(database=False)
    try:
        with conn.cursor() as cur:
            cur.execute(f"CREATE USER IF NOT EXISTS '{USER}'@'%'")
            cur.execute(f"GRANT SELECT ON {quote_name(ep.database)}.* TO '{USER}'@'%'")
    finally:
        conn.close()
    return ep.with_user(USER)


def run_query(ep: Endpoint, text: str, limit: int) -> list[tuple[Any, ...]]:
    """The first ``limit`` rows of ``text`` at ``ep``, confined as the module says."""
    import pymysql

    statement, _ = read_statement(text)
    conn = ep.connect(autocommit=False, read_timeout=int(TIMEOUT_S) + 10)
    try:
        with conn.cursor() as cur:
            try:
                cur.execute(f"SET SESSION max_statement_time = {TIMEOUT_S:g}")
            except pymysql.err.MySQLError:
                cur.execute(f"SET SESSION max_execution_time = {int(TIMEOUT_S * 1000)}")
            cur.execute("START TRANSACTION READ ONLY")
            cur.execute(statement)  # no arguments: the text is sent as it is, never formatted
            if cur.description is None:
                raise QueryRefusedError("the statement returns no rows to check")
            return [tuple(row) for row in cur.fetchmany(limit)]
    except pymysql.err.MySQLError as exc:
        code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else None
        message = str(exc.args[1]) if len(exc.args) > 1 else str(exc)
        if code in _WRITE:
            raise QueryRefusedError(f"it tried to write: {message}") from None
        if code in _TIMEOUT:
            raise QueryRefusedError(f"it ran past its time limit ({TIMEOUT_S:g} s)") from None
        if code in _PRIVILEGE:
            raise QueryRefusedError(f"it needs a privilege it is not given: {message}") from None
        raise ServiceError(f"mysql at {ep.where}: {type(exc).__name__}: {message}") from None
    finally:
        with contextlib.suppress(Exception):
            conn.rollback()
        conn.close()
