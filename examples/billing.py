"""The month-end split: Python decides that today closes the month, SQL ``now()`` (an hour
ahead for the billing tick) files the invoice under the next month.

Captured with the "production" clock at the end of January (freezegun in this process, the
Postgres container frozen with libfaketime); replayed with frozen clocks it files the invoice
under February again; with live clocks it is not month end and no invoice is issued.

``main`` is the agent as captured; ``main_fixed`` takes the whole decision from one clock in
one timezone: the day Python read (UTC) decides both that the month closes and the period the
invoice is filed under.

Services: ``DATABASE_URL`` (Postgres).
"""

from __future__ import annotations

import calendar
import datetime as dt
import os
from typing import Any

import psycopg

from examples._model import agent_loop, last_tool_results, scripted_model, tool_spec
from sandbox import capture
from sandbox.snapshot.manifest import SQLInvariant

PRODUCTION_NOW = dt.datetime(2024, 1, 31, 23, 30, tzinfo=dt.UTC)
"""When the bad run happened (the capture freezes the clocks there)."""
SYSTEM = "You run the nightly billing. Call close_day for the account, then report."
USER = "Run tonight's billing for account acme."
SCHEMA = """
CREATE TABLE IF NOT EXISTS invoices (
    id serial PRIMARY KEY, account text NOT NULL, closing text NOT NULL, period text NOT NULL
);
"""
WRONG_PERIOD = SQLInvariant(
    service="db", query="SELECT account, closing, period FROM invoices WHERE period <> closing"
)
TOOLS = [tool_spec("close_day", "Close the billing day.", {"account": {"type": "string"}})]


def script(messages: list[dict[str, Any]]) -> dict[str, Any]:
    done = last_tool_results(messages)
    if done:
        return {"content": f"Billing done: {done[-1]}"}
    return {"tool_calls": [{"name": "close_day", "arguments": {"account": "acme"}}]}


def _month_end(today: dt.date) -> bool:
    return today.day == calendar.monthrange(today.year, today.month)[1]


@capture.tool
def close_day(account: str) -> dict[str, Any]:
    today = dt.datetime.now(dt.UTC).date()
    if not _month_end(today):
        return {"account": account, "invoice": None}
    closing = today.strftime("%Y-%m")
    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as conn:
        row = conn.execute(
            "INSERT INTO invoices (account, closing, period) "
            "VALUES (%s, %s, to_char(now() AT TIME ZONE 'UTC' + interval '1 hour', 'YYYY-MM')) "
            "RETURNING period",
            (account, closing),
        ).fetchone()
    assert row is not None
    return {"account": account, "invoice": {"closing": closing, "period": row[0]}}


@capture.tool("close_day")
def close_day_fixed(account: str) -> dict[str, Any]:
    """The fix: one clock (this process's, in UTC) decides month end and the period."""
    today = dt.datetime.now(dt.UTC).date()
    if not _month_end(today):
        return {"account": account, "invoice": None}
    period = today.strftime("%Y-%m")
    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as conn:
        row = conn.execute(
            "INSERT INTO invoices (account, closing, period) VALUES (%s, %s, %s) RETURNING period",
            (account, period, period),
        ).fetchone()
    assert row is not None
    return {"account": account, "invoice": {"closing": period, "period": row[0]}}


def setup(database_url: str) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(SCHEMA)


def _run(impl: Any) -> str:
    with scripted_model(script) as client:
        answer = agent_loop(client, SYSTEM, USER, TOOLS, {"close_day": impl})
    capture.result({"answer": answer})
    return answer


def main() -> str:
    """The agent as it ran in production (Python's clock decides, SQL's files)."""
    return _run(close_day)


def main_fixed() -> str:
    """The fix: month end and the invoice period from the same clock and timezone."""
    return _run(close_day_fixed)
