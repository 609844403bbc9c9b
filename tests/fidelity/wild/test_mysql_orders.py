"""An agent that keeps its orders in MariaDB through PyMySQL (and reads them back through a
SQLAlchemy ``mysql+pymysql`` engine) and places one order twice (its retry writes again),
captured both ways (:mod:`tests.fidelity.wild.corpus`, one MariaDB container for both):
zero-code with ``--fail-if 'sql:mysql=...'``, checked by the kind's own driver; and with
``@capture.run`` on its ``main``, which marks the run failed with the same
``capture.SQLInvariant`` when it sees the duplicate. The capture finds the server through
the client hooks and captures it, the replay (model calls recorded, the database restored
in a sandbox container) reproduces it, the fixed agent replays gone, and a crash before the
order is placed is inconclusive and named."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import pymysql
import pytest

from sandbox.containers import RestoreSpec, bring_up
from sandbox.services.mysql.endpoint import Endpoint
from tests.fidelity import harness
from tests.fidelity.wild.corpus import STYLES, assert_gone, assert_inconclusive, captured, edit

pytestmark = pytest.mark.docker

AGENT = "orders_agent"
SOURCE = textwrap.dedent(
    """
    import os, pymysql, sqlalchemy
    from urllib.parse import urlsplit
    from openai import OpenAI

    URL = urlsplit(os.environ["MYSQL_URL"])


    def main():
        db = pymysql.connect(
            host=URL.hostname, port=URL.port, user=URL.username, database=URL.path[1:],
            autocommit=True,
        )
        answer = OpenAI().chat.completions.create(
            model="scripted-1", messages=[{"role": "user", "content": "Order 2 lamps for ada?"}]
        )
        decision = answer.choices[0].message.content
        for attempt in range(2):  # the retry writes again
            if decision.startswith("order"):
                with db.cursor() as cur:
                    cur.execute("INSERT INTO orders (ref, qty) VALUES ('ada-lamps', 2)")
        url = os.environ["MYSQL_URL"].replace("mysql://", "mysql+pymysql://")
        with sqlalchemy.create_engine(url).connect() as conn:
            placed = conn.execute(sqlalchemy.text("SELECT count(*) FROM orders")).scalar()
        print(decision, placed)


    if __name__ == "__main__":
        main()
    """
)
QUERY = "SELECT ref FROM orders GROUP BY ref HAVING count(*) > 1"
MARK = f"""
with db.cursor() as cur:
    cur.execute({QUERY!r})
    twice = cur.fetchall()
if twice:
    invariant = capture.SQLInvariant(service="mysql", query={QUERY!r})
    capture.mark_failed(f"orders placed twice: {{twice}}", invariant)
"""


@pytest.fixture(scope="module")
def mysql_url() -> Iterator[str]:
    """A live MariaDB with database ``shop``."""
    with bring_up([RestoreSpec("live", "mysql", database="shop")]) as live:
        yield live.services["live"].url


@pytest.mark.parametrize("style", STYLES)
def test_a_mysql_agent_reproduces_then_is_gone_once_fixed(
    tmp_path: Path, mysql_url: str, style: str
) -> None:
    ep = Endpoint.parse(mysql_url)
    conn = pymysql.connect(host=ep.host, port=ep.port, user=ep.user, database="shop")
    with conn.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS orders")
        cur.execute("CREATE TABLE orders (id int AUTO_INCREMENT PRIMARY KEY, ref text, qty int)")
    conn.commit()
    conn.close()
    (tmp_path / f"{AGENT}.py").write_text(SOURCE)
    with harness.model(lambda messages: {"content": "order placed"}) as base:
        env = harness.base_env(
            OPENAI_BASE_URL=base, OPENAI_API_KEY=harness.API_KEY, MYSQL_URL=mysql_url
        )
        run = captured(style, tmp_path, AGENT, env, fail_if=f"sql:mysql={QUERY}", mark=MARK)
    manifest = run.manifest
    assert manifest.failure is not None and manifest.failure.observed, run.output
    assert [s.kind for s in manifest.services] == ["mysql"], manifest.services
    assert "ada-lamps" in manifest.failure.reason
    # both connections (PyMySQL's, and the SQLAlchemy engine's through it) found one service
    assert [(t.kind, t.clients, t.service) for t in manifest.touched] == [
        ("mysql", ["pymysql"], "mysql")
    ]

    harness.assert_reproduced_every_time(harness.replay(run.store, run.run_id, times=2), times=2)

    edit(tmp_path, AGENT, "range(2)", "range(1)")  # the fix
    assert_gone(harness.replay(run.store, run.run_id, times=1))

    loop = "    for attempt in range(1):"
    edit(tmp_path, AGENT, loop, '    raise OSError("orders down")\n' + loop)
    assert_inconclusive(harness.replay(run.store, run.run_id, times=1), "OSError")
