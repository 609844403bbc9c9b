"""An agent that keeps its orders in MariaDB through PyMySQL (and reads them back through a
SQLAlchemy ``mysql+pymysql`` engine) and places one order twice (its retry writes again):
the capture finds the server through the client hooks and captures it, ``--fail-if
'sql:mysql=...'`` is checked by the kind's own driver, the replay (model calls recorded,
the database restored in a sandbox container) reproduces it, and the fixed agent replays
gone."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pymysql
import pytest

from sandbox.containers import RestoreSpec, bring_up
from sandbox.services.mysql.endpoint import Endpoint
from sandbox.snapshot.store import DirectoryStore
from tests.fidelity import harness

pytestmark = pytest.mark.docker

AGENT = textwrap.dedent(
    """
    import os, pymysql, sqlalchemy
    from urllib.parse import urlsplit
    from openai import OpenAI

    url = urlsplit(os.environ["MYSQL_URL"])
    db = pymysql.connect(
        host=url.hostname, port=url.port, user=url.username, database=url.path[1:],
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
    engine = sqlalchemy.create_engine(os.environ["MYSQL_URL"].replace("mysql://", "mysql+pymysql://"))
    with engine.connect() as conn:
        placed = conn.execute(sqlalchemy.text("SELECT count(*) FROM orders")).scalar()
    print(decision, placed)
    """
)
DUPLICATES = "sql:mysql=SELECT ref FROM orders GROUP BY ref HAVING count(*) > 1"


def test_a_mysql_agent_reproduces_then_is_gone_once_fixed(
    tmp_path: Path, store: DirectoryStore
) -> None:
    agent = tmp_path / "orders_agent.py"
    agent.write_text(AGENT)
    with bring_up([RestoreSpec("live", "mysql", database="shop")]) as live:
        url = live.services["live"].url
        ep = Endpoint.parse(url)
        conn = pymysql.connect(host=ep.host, port=ep.port, user=ep.user, database="shop")
        with conn.cursor() as cur:
            cur.execute(
                "CREATE TABLE orders (id int AUTO_INCREMENT PRIMARY KEY, ref text, qty int)"
            )
        conn.commit()
        conn.close()
        with harness.model(lambda messages: {"content": "order placed"}) as base:
            env = harness.base_env(
                OPENAI_BASE_URL=base, OPENAI_API_KEY=harness.API_KEY, MYSQL_URL=url
            )
            run = harness.capture(
                store,
                "mysql_orders",
                env,
                command=[sys.executable, str(agent)],
                extra=("--fail-if", DUPLICATES),
            )
    manifest = run.manifest
    assert manifest.failure is not None and manifest.failure.observed, run.output
    assert [s.kind for s in manifest.services] == ["mysql"], manifest.services
    assert "ada-lamps" in manifest.failure.reason
    # both connections (PyMySQL's, and the SQLAlchemy engine's through it) found one service
    assert [(t.kind, t.clients, t.service) for t in manifest.touched] == [
        ("mysql", ["pymysql"], "mysql")
    ]

    reproduced = harness.replay(store, run.run_id, times=2)
    harness.assert_reproduced_every_time(reproduced, times=2)

    agent.write_text(AGENT.replace("range(2)", "range(1)"))  # the fix
    gone = harness.replay(store, run.run_id, times=2)
    assert gone.exit_code == 0, gone.output
    assert gone.report["verdict"]["gone"] == 2, gone.output
