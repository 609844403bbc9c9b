"""An agent that keeps its ledger in SQLite and records a refund twice (its retry writes
again): ``--fail-if 'sql:sqlite=...'`` is checked by sqlite3 at capture, the replay
reproduces it, the fixed agent replays gone, and ``--empty sqlite`` replays it from an empty
database."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from sandbox.snapshot.store import DirectoryStore
from tests.fidelity import harness

pytestmark = pytest.mark.docker  # the sandbox asks the engine even for a file service

AGENT = textwrap.dedent(
    """
    import os, sqlite3
    from openai import OpenAI

    db = sqlite3.connect(os.environ["LEDGER_DB"])
    db.execute("CREATE TABLE IF NOT EXISTS refunds (order_id TEXT, amount REAL)")
    answer = OpenAI().chat.completions.create(
        model="scripted-1", messages=[{"role": "user", "content": "Refund order A-1 (42)?"}]
    )
    decision = answer.choices[0].message.content
    for attempt in range(2):  # the retry writes again
        if decision.startswith("refund"):
            db.execute("INSERT INTO refunds VALUES ('A-1', 42)")
            db.commit()
    print(decision)
    """
)
DUPLICATES = "sql:sqlite=SELECT order_id FROM refunds GROUP BY order_id HAVING count(*) > 1"


def test_a_sqlite_invariant_reproduces_then_is_gone_once_fixed(
    tmp_path: Path, store: DirectoryStore
) -> None:
    agent = tmp_path / "ledger_agent.py"
    agent.write_text(AGENT)
    with harness.model(lambda messages: {"content": "refund approved"}) as base:
        env = harness.base_env(
            OPENAI_BASE_URL=base,
            OPENAI_API_KEY=harness.API_KEY,
            LEDGER_DB=str(tmp_path / "ledger.db"),
        )
        run = harness.capture(
            store,
            "ledger",
            env,
            command=[sys.executable, str(agent)],
            extra=("--fail-if", DUPLICATES),
        )
    manifest = run.manifest
    assert manifest.failure is not None and manifest.failure.observed, run.output
    assert [s.kind for s in manifest.services] == ["sqlite"]
    assert "A-1" in manifest.failure.reason

    reproduced = harness.replay(store, run.run_id, times=2)
    assert reproduced.exit_code == 1, reproduced.output
    assert reproduced.reproduced == 2, reproduced.output

    empty = harness.replay(store, run.run_id, None, "--empty", "sqlite", times=1)
    assert empty.exit_code == 1, empty.output
    assert empty.reproduced == 1, empty.output

    agent.write_text(AGENT.replace("range(2)", "range(1)"))  # the fix
    gone = harness.replay(store, run.run_id, times=2)
    assert gone.exit_code == 0, gone.output
    assert gone.report["verdict"]["gone"] == 2, gone.output
