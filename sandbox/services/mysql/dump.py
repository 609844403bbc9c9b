"""A logical dump of one MySQL/MariaDB database through its own driver (PyMySQL), as
``mariadb-dump`` would make it: each base table's ``SHOW CREATE TABLE`` (its
``AUTO_INCREMENT`` counter included) and its rows, read in one consistent snapshot with the
session in UTC. The dump is JSON (values tagged by type, never code); a restore replays the
definitions and inserts the rows, and the logical state (hash and description) is read from
the server the same way, so a database and its restored copy have one hash.

Views, triggers and routines are not captured (a capture that holds one says so in its
meta); generated columns are recomputed by the server.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pydantic import JsonValue

from sandbox.errors import ServiceError
from sandbox.services.base import DESCRIBE_LIMIT, TRUNCATED
from sandbox.services.mysql.endpoint import Endpoint, quote_name
from sandbox.snapshot.hashing import fingerprint

FORMAT = "sandbox-replayer.mysql-dump/1"
MEDIA_TYPE = "application/vnd.sandbox-replayer.mysql-dump+json"
_BATCH = 500
_AUTO_INCREMENT = re.compile(r" AUTO_INCREMENT=(\d+)")


def encode(value: Any) -> JsonValue:
    """A column value as JSON: strings and numbers as they are, the others tagged."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, bytes | bytearray):
        return {"$b": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, decimal.Decimal):
        return {"$d": str(value)}
    if isinstance(value, dt.datetime):
        return {"$dt": value.isoformat()}
    if isinstance(value, dt.date):
        return {"$date": value.isoformat()}
    if isinstance(value, dt.timedelta):
        return {
            "$time": value.days * 86_400_000_000 + value.seconds * 1_000_000 + value.microseconds
        }
    if isinstance(value, set | frozenset):
        members: list[JsonValue] = [str(v) for v in sorted(str(v) for v in value)]
        return {"$set": members}
    raise ServiceError(f"mysql value of an unexpected type {type(value).__name__}")


def decode(value: JsonValue) -> Any:
    """The driver value of :func:`encode`'s JSON (a dump is data: only these tags are read)."""
    if not isinstance(value, dict):
        if isinstance(value, list):
            raise ServiceError("mysql dump holds a list where a column value belongs")
        return value
    ((tag, body),) = value.items() if len(value) == 1 else ((None, None),)
    if tag == "$b" and isinstance(body, str):
        return base64.b64decode(body)
    if tag == "$d" and isinstance(body, str):
        return decimal.Decimal(body)
    if tag == "$dt" and isinstance(body, str):
        return dt.datetime.fromisoformat(body)
    if tag == "$date" and isinstance(body, str):
        return dt.date.fromisoformat(body)
    if tag == "$time" and isinstance(body, int):
        return dt.timedelta(microseconds=body)
    if tag == "$set" and isinstance(body, list):
        return ",".join(str(v) for v in body)
    raise ServiceError(f"mysql dump holds an unknown value {value!r}")


@contextmanager
def snapshot(ep: Endpoint) -> Iterator[Any]:
    """A cursor in a consistent, read-only snapshot of the database, in UTC."""
    conn = ep.connect(autocommit=False)
    try:
        cur = conn.cursor()
        cur.execute("SET SESSION time_zone = '+00:00'")
        cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
        yield cur
    finally:
        conn.rollback()
        conn.close()


def _tables(cur: Any) -> list[str]:
    cur.execute("SHOW FULL TABLES WHERE Table_type = 'BASE TABLE'")
    return sorted(str(row[0]) for row in cur.fetchall())


def _others(cur: Any, database: str) -> list[str]:
    """Views, triggers and routines of the database (not captured)."""
    found: list[str] = []
    for query in (
        "SELECT CONCAT('view ', TABLE_NAME) FROM information_schema.VIEWS WHERE TABLE_SCHEMA = %s",
        "SELECT CONCAT('trigger ', TRIGGER_NAME) FROM information_schema.TRIGGERS"
        " WHERE TRIGGER_SCHEMA = %s",
        "SELECT CONCAT(LOWER(ROUTINE_TYPE), ' ', ROUTINE_NAME) FROM information_schema.ROUTINES"
        " WHERE ROUTINE_SCHEMA = %s",
    ):
        cur.execute(query, (database,))
        found += [str(r[0]) for r in cur.fetchall()]
    return sorted(found)


def _columns(cur: Any, database: str, table: str) -> tuple[list[str], list[str]]:
    """The stored (not generated) columns in order, and the primary key's columns."""
    cur.execute(
        "SELECT COLUMN_NAME, EXTRA, COLUMN_KEY FROM information_schema.COLUMNS"
        " WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION",
        (database, table),
    )
    rows = cur.fetchall()
    stored = [str(r[0]) for r in rows if "GENERATED" not in str(r[1]).upper()]
    cur.execute(
        "SELECT COLUMN_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = %s"
        " AND TABLE_NAME = %s AND INDEX_NAME = 'PRIMARY' ORDER BY SEQ_IN_INDEX",
        (database, table),
    )
    key = [str(r[0]) for r in cur.fetchall()]
    return stored, key


def _create(cur: Any, table: str) -> str:
    cur.execute(f"SHOW CREATE TABLE {quote_name(table)}")
    return str(cur.fetchone()[1])


def _rows(cur: Any, table: str, columns: list[str], key: list[str]) -> Iterator[list[JsonValue]]:
    """The rows in a stable order: by primary key, else by every column."""
    order = key or columns
    select = ", ".join(quote_name(c) for c in columns)
    by = ", ".join(quote_name(c) for c in order)
    cur.execute(f"SELECT {select} FROM {quote_name(table)} ORDER BY {by}")
    while batch := cur.fetchmany(_BATCH):
        for row in batch:
            yield [encode(v) for v in row]


def dump(ep: Endpoint) -> tuple[dict[str, Any], str]:
    """The dump of the database (a JSON document) and the server's version."""
    with snapshot(ep) as cur:
        cur.execute("SELECT VERSION()")
        version = str(cur.fetchone()[0])
        cur.execute(
            "SELECT DEFAULT_CHARACTER_SET_NAME, DEFAULT_COLLATION_NAME FROM"
            " information_schema.SCHEMATA WHERE SCHEMA_NAME = %s",
            (ep.database,),
        )
        found = cur.fetchone()
        if found is None:
            raise ServiceError(f"mysql database {ep.where} does not exist")
        tables = []
        for table in _tables(cur):
            columns, key = _columns(cur, ep.database, table)
            tables.append(
                {
                    "name": table,
                    "create": _create(cur, table),
                    "columns": columns,
                    "key": key,
                    "rows": list(_rows(cur, table, columns, key)),
                }
            )
        doc = {
            "format": FORMAT,
            "server_version": version,
            "charset": str(found[0]),
            "collation": str(found[1]),
            "tables": tables,
            "not_captured": _others(cur, ep.database),
        }
    return doc, version


def parse(data: bytes) -> dict[str, Any]:
    try:
        doc = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ServiceError(f"not a mysql capture: {exc}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        found = doc.get("format") if isinstance(doc, dict) else None
        raise ServiceError(f"not a mysql capture of format {FORMAT} (found {found!r})")
    return doc


def restore(ep: Endpoint, doc: dict[str, Any]) -> None:
    """Replace the database with the dump's: dropped, made again, its tables defined and
    their rows inserted, in one session in UTC."""
    conn = ep.connect(database=False, autocommit=False)
    name = quote_name(ep.database)
    try:
        cur = conn.cursor()
        cur.execute("SET SESSION time_zone = '+00:00'")
        cur.execute("SET SESSION foreign_key_checks = 0, unique_checks = 0")
        cur.execute("SET SESSION sql_mode = 'NO_AUTO_VALUE_ON_ZERO,NO_ENGINE_SUBSTITUTION'")
        cur.execute(f"DROP DATABASE IF EXISTS {name}")
        charset, collation = str(doc.get("charset", "utf8mb4")), str(doc.get("collation", ""))
        if not re.fullmatch(r"\w+", charset) or not re.fullmatch(r"\w*", collation):
            raise ServiceError("mysql capture names an unreadable character set")
        collate = f" COLLATE {collation}" if collation else ""
        cur.execute(f"CREATE DATABASE {name} CHARACTER SET {charset}{collate}")
        cur.execute(f"USE {name}")
        for table in doc.get("tables", []):
            create = str(table["create"])
            if not create.upper().startswith("CREATE TABLE "):
                raise ServiceError("mysql capture holds a definition that is not a table's")
            cur.execute(create)
            columns = [str(c) for c in table["columns"]]
            rows = [[decode(v) for v in row] for row in table["rows"]]
            if not rows:
                continue
            cols = ", ".join(quote_name(c) for c in columns)
            marks = ", ".join(["%s"] * len(columns))
            insert = f"INSERT INTO {quote_name(str(table['name']))} ({cols}) VALUES ({marks})"
            for start in range(0, len(rows), _BATCH):
                cur.executemany(insert, rows[start : start + _BATCH])
        conn.commit()
    except ServiceError:
        conn.rollback()
        raise
    except Exception as exc:
        conn.rollback()
        raise ServiceError(f"cannot restore mysql database {ep.where}: {exc}") from None
    finally:
        conn.close()


def logical_state(ep: Endpoint) -> dict[str, Any]:
    """What the hash covers: each table's definition (its counter too) and rows."""
    with snapshot(ep) as cur:
        tables: dict[str, Any] = {}
        for table in _tables(cur):
            columns, key = _columns(cur, ep.database, table)
            tables[table] = {
                "create": _create(cur, table),
                "rows": list(_rows(cur, table, columns, key)),
            }
    return {"kind": "mysql", "tables": tables}


def state_hash(ep: Endpoint) -> str:
    return fingerprint(logical_state(ep))


def describe(ep: Endpoint, limit: int = DESCRIBE_LIMIT) -> dict[str, JsonValue]:
    """``{"tables": {table: [{column: value}, ...]}, "auto_increment": {table: next}}``, rows
    by primary key; a table over ``limit`` rows keeps its first ``limit`` and is listed under
    ``"truncated"`` with its row count."""
    with snapshot(ep) as cur:
        tables: dict[str, JsonValue] = {}
        counters: dict[str, JsonValue] = {}
        truncated: dict[str, JsonValue] = {}
        for table in _tables(cur):
            columns, key = _columns(cur, ep.database, table)
            rows: list[JsonValue] = []
            count = 0
            for row in _rows(cur, table, columns, key):
                count += 1
                if count <= limit:
                    rows.append(dict(zip(columns, row, strict=True)))
            tables[table] = rows
            if count > limit:
                truncated[table] = count
            found = _AUTO_INCREMENT.search(_create(cur, table))
            if found:
                counters[table] = int(found[1])
    out: dict[str, JsonValue] = {"tables": tables, "auto_increment": counters}
    if truncated:
        out[TRUNCATED] = truncated
    return out


def places(doc: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """The text a dump holds by table, column and row (strings, and bytes read as Latin-1),
    for the scan before a run is shared."""
    for table in doc.get("tables", []):
        columns = [str(c) for c in table["columns"]]
        for row, values in enumerate(table["rows"], 1):
            for column, value in zip(columns, values, strict=False):
                found = decode(value)
                if isinstance(found, bytes):
                    found = found.decode("latin-1")
                if isinstance(found, str):
                    yield f"table {table['name']} column {column} (row {row})", found
