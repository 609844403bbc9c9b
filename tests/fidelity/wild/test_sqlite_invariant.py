"""An agent that keeps its ledger in SQLite and records a refund twice (its retry writes
again), captured both ways (:mod:`tests.fidelity.wild.corpus`): zero-code with ``--fail-if
'sql:sqlite=...'``, checked by sqlite3 at capture; and with ``@capture.run`` on its
``main``, which marks the run failed with the same ``capture.SQLInvariant`` when its ledger
shows the duplicate. The replay reproduces it (also from an empty database, ``--empty
sqlite``), the fixed agent replays gone, and a crash before the ledger is written is
inconclusive and named."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.fidelity import harness
from tests.fidelity.wild.corpus import STYLES, assert_gone, assert_inconclusive, captured, edit

pytestmark = pytest.mark.docker  # the sandbox asks the engine even for a file service

AGENT = "ledger_agent"
SOURCE = textwrap.dedent(
    """
    import os, sqlite3
    from openai import OpenAI


    def main():
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


    if __name__ == "__main__":
        main()
    """
)
QUERY = "SELECT order_id FROM refunds GROUP BY order_id HAVING count(*) > 1"
MARK = f"""
twice = db.execute({QUERY!r}).fetchall()
if twice:
    invariant = capture.SQLInvariant(service="sqlite", query={QUERY!r})
    capture.mark_failed(f"refunds recorded twice: {{twice}}", invariant)
"""


@pytest.mark.parametrize("style", STYLES)
def test_a_sqlite_invariant_reproduces_then_is_gone_once_fixed(tmp_path: Path, style: str) -> None:
    (tmp_path / f"{AGENT}.py").write_text(SOURCE)
    with harness.model(lambda messages: {"content": "refund approved"}) as base:
        env = harness.base_env(
            OPENAI_BASE_URL=base,
            OPENAI_API_KEY=harness.API_KEY,
            LEDGER_DB=str(tmp_path / "ledger.db"),
        )
        run = captured(style, tmp_path, AGENT, env, fail_if=f"sql:sqlite={QUERY}", mark=MARK)
    manifest = run.manifest
    assert manifest.failure is not None and manifest.failure.observed, run.output
    assert [s.kind for s in manifest.services] == ["sqlite"]
    assert "A-1" in manifest.failure.reason

    harness.assert_reproduced_every_time(harness.replay(run.store, run.run_id, times=2), times=2)

    empty = harness.replay(run.store, run.run_id, None, "--empty", "sqlite", times=1)
    assert empty.exit_code == 1, empty.output
    assert empty.reproduced == 1, empty.output

    edit(tmp_path, AGENT, "range(2)", "range(1)")  # the fix
    assert_gone(harness.replay(run.store, run.run_id, times=1))

    loop = "    for attempt in range(1):"
    edit(tmp_path, AGENT, loop, '    raise OSError("ledger down")\n' + loop)
    assert_inconclusive(harness.replay(run.store, run.run_id, times=1), "OSError")
