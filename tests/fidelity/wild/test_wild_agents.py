"""Agents written by someone else, captured as a user does (:mod:`tests.fidelity.wild.corpus`):
the script is copied into a folder of its own, run as ``sandbox capture --name N -- python
agent.py`` there (or as ``python agent.py`` when it opens ``capture.run`` itself), and
replayed with ``sandbox replay RUN --json`` from another folder, with the model server
stopped and the agent's own SQLite files changed since. A fix is an edit to the script; so
is a crash."""

from __future__ import annotations

import ast
import json
import sqlite3
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from examples._model import last_tool_results
from sandbox.snapshot.store import DirectoryStore
from tests.fidelity import harness
from tests.fidelity.wild.corpus import (
    STYLES,
    assert_gone,
    assert_inconclusive,
    capture,
    captured,
    edit,
    model_env,
)

# --- pydantic-ai: a reminder booked in the past ------------------------------------------


def reminders_model(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """Looks the trial up, then books the reminder three days before it ends."""
    done = last_tool_results(messages)
    if not done:
        return {"tool_calls": [{"name": "trial_ends", "arguments": {"account_id": 42}}]}
    ends = date.fromisoformat(done[-1].strip('"'))
    day = str(ends - timedelta(days=3))
    return {"tool_calls": [{"name": "final_result", "arguments": {"account_id": 42, "day": day}}]}


def test_pydantic_ai_agent_captured_as_a_command_replays_its_reminder_in_the_past(
    tmp_path: Path,
) -> None:
    """The trial of account 42 ends tomorrow: three days before is in the past. pydantic-ai
    builds its schemas for ``datetime`` as it is imported, under the replay's frozen clock;
    the account's row in ``accounts.db`` is extended after the capture, and the replay reads
    the captured one."""
    with sqlite3.connect(tmp_path / "accounts.db") as conn:
        conn.execute("CREATE TABLE accounts (id INTEGER PRIMARY KEY, trial_ends TEXT)")
        conn.execute("INSERT INTO accounts VALUES (42, ?)", (str(date.today() + timedelta(1)),))
    conn.close()
    with harness.model(reminders_model) as base:
        run = capture(tmp_path, "reminders", model_env(base))
    assert run.exit_code == 1 and run.manifest.failure is not None, run.output
    assert "is in the past" in run.manifest.failure.reason
    with sqlite3.connect(tmp_path / "accounts.db") as conn:
        conn.execute("UPDATE accounts SET trial_ends = ?", (str(date.today() + timedelta(30)),))
    conn.close()

    harness.assert_reproduced_every_time(harness.replay(run.store, run.run_id))

    edit(
        tmp_path,
        "reminders",
        "    if reminder.day < date.today():",
        "    reminder.day = max(reminder.day, date.today())\n    if reminder.day < date.today():",
    )
    assert_gone(harness.replay(run.store, run.run_id, times=1))

    crash = '    raise OSError("mailer down")\n    reminder.day = max('
    edit(tmp_path, "reminders", "    reminder.day = max(", crash)
    assert_inconclusive(harness.replay(run.store, run.run_id, times=1), "OSError")


# --- OpenAI Agents SDK: a refund on top of an earlier one --------------------------------


def refunds_model(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """Looks the order up, then refunds its total (forgetting what was refunded already)."""
    done = last_tool_results(messages)
    if not done:
        return {"tool_calls": [{"name": "order", "arguments": {"order_id": 7}}]}
    total = ast.literal_eval(done[-1])["total"]  # the SDK hands the model str(dict)
    return {"content": json.dumps({"order_id": 7, "amount": total})}


def test_agents_sdk_agent_captured_as_a_command_replays_its_refund_over_the_total(
    tmp_path: Path,
) -> None:
    """Order 7 (40.00) had 25.00 refunded already; the agent refunds the whole total again.
    The payments code refuses it. The earlier refund is tool-side state: the live ``shop.db``
    has it undone after the capture, and the replay reads the captured one."""
    with sqlite3.connect(tmp_path / "shop.db") as conn:
        conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, total REAL, refunded REAL)")
        conn.execute("INSERT INTO orders VALUES (7, 40.0, 25.0)")
    conn.close()
    with harness.model(refunds_model) as base:
        run = capture(tmp_path, "refunds", model_env(base))
    assert run.exit_code == 1 and run.manifest.failure is not None, run.output
    assert "exceeds what is left to refund (15.00)" in run.manifest.failure.reason
    with sqlite3.connect(tmp_path / "shop.db") as conn:
        conn.execute("UPDATE orders SET refunded = 0")
    conn.close()

    harness.assert_reproduced_every_time(harness.replay(run.store, run.run_id))

    edit(
        tmp_path,
        "refunds",
        "        if refunded + refund.amount > total:",
        "        refund.amount = min(refund.amount, total - refunded)\n"
        "        if refunded + refund.amount > total:",
    )
    assert_gone(harness.replay(run.store, run.run_id, times=1))

    signature = "def issue(refund: Refund) -> None:\n"
    edit(tmp_path, "refunds", signature, signature + '    raise OSError("ledger down")\n')
    assert_inconclusive(harness.replay(run.store, run.run_id, times=1), "OSError")


# --- settings read at import, before capture.run -----------------------------------------


@pytest.mark.parametrize("style", STYLES)
def test_settings_read_at_import_are_replayed_and_a_redacted_one_is_supplied_with_env(
    tmp_path: Path, style: str
) -> None:
    """``triage.py`` reads ``AGENT_MODEL`` (and, through ``OpenAI()``, the API key) as it
    starts: with ``@capture.run`` on its ``main``, before the capture opens. The replay
    restores the model's name; the key was redacted, and ``--env`` supplies it."""

    with harness.model(lambda messages: {"content": "Payments"}) as base:
        run = captured(style, tmp_path, "triage", {**model_env(base), "AGENT_MODEL": "scripted-1"})
    store, run_id, manifest = run.store, run.run_id, run.manifest
    assert manifest.failure is not None, run.output
    assert manifest.env["AGENT_MODEL"] == "scripted-1"
    assert manifest.env["OPENAI_API_KEY"] != harness.API_KEY

    harness.assert_reproduced_every_time(harness.replay(store, run_id, times=2), times=2)

    no_key = harness.base_env()
    refused = harness.run_cli(["replay", run_id, "--store", str(store.root)], no_key)
    assert refused.returncode == 2 and "needs OPENAI_API_KEY" in refused.stderr, refused.stderr
    given = harness.replay(
        store, run_id, no_key, "--env", f"OPENAI_API_KEY={harness.API_KEY}", times=1
    )
    harness.assert_reproduced_every_time(given, times=1)


def test_env_that_is_not_name_equals_value_is_one_error_line(store: DirectoryStore) -> None:
    done = harness.run_cli(
        ["replay", "any-run", "--store", str(store.root), "--env", "AGENT_MODEL"],
        harness.base_env(),
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "sandbox: error: --env 'AGENT_MODEL': write NAME=VALUE, e.g. AGENT_MODEL=gpt-4o"
    ]


# --- a live MCP server under the replay's clock -------------------------------------------


@pytest.mark.parametrize("style", STYLES)
def test_a_live_mcp_server_runs_on_the_frozen_clock_with_seeded_ids(
    tmp_path: Path, style: str
) -> None:
    """The desk's MCP server stamps each visit with SQLite's ``datetime('now')`` and a
    ``uuid4``. Made live on replay (``--live mcp:front-desk``), its stamps are the captured
    time, not the replay's, and both replays draw the same id."""
    with sqlite3.connect(tmp_path / "visits.db") as conn:
        conn.execute("CREATE TABLE visits (id TEXT, customer TEXT, at TEXT)")
        conn.execute("INSERT INTO visits VALUES ('earlier', 'ada', datetime('now'))")
    conn.close()
    run = captured(style, tmp_path, "front_desk", harness.base_env())
    assert run.exit_code == 1 and run.manifest.failure is not None, run.output
    assert "no welcome gift" in run.manifest.failure.reason
    clock = run.manifest.clock
    assert clock is not None
    captured_until = max(e.wall for e in run.events)
    while time.time() < captured_until + 3:  # the real clock is now 3 s past the capture
        time.sleep(0.2)
    before = _visits(tmp_path)

    result = harness.replay(run.store, run.run_id, None, "--live", "mcp:front-desk", times=2)

    harness.assert_reproduced_every_time(result, times=2)
    replayed = [row for row in _visits(tmp_path) if row not in before]
    assert len(replayed) == 2, replayed
    for _, at in replayed:
        stamp = datetime.fromisoformat(at).replace(tzinfo=UTC).timestamp()
        assert clock.start.timestamp() - 1 <= stamp <= captured_until + 1, (at, clock.start)
    assert replayed[0][0] == replayed[1][0]  # the same seeded uuid4 in both replays


def _visits(folder: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(folder / "visits.db") as conn:
        rows = conn.execute("SELECT id, at FROM visits WHERE customer = 'ada'").fetchall()
    conn.close()
    return [(str(a), str(b)) for a, b in rows]
