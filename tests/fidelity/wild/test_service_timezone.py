"""A Postgres server that runs in UTC, queried by an agent whose process runs under
``TZ=America/New_York``: each keeps its own zone on replay, so ``timestamptz`` values come
back as ``+00:00`` (as at capture), the agent sends the model the same prompt, and the run
reproduces instead of stopping at a request the recording cannot answer. Captured both ways
(:mod:`tests.fidelity.wild.corpus`, one Postgres container for both): zero-code with
``--fail-if 'exit!=0'``, and with ``@capture.run`` on its ``main`` (the ``SystemExit(3)``
escaping it is the failure). The fixed agent replays gone; a crash before the model is
asked is inconclusive and named."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from sandbox.containers import RestoreSpec, bring_up
from sandbox.services.base import TIMEZONE_META
from tests.fidelity import harness
from tests.fidelity.wild.corpus import STYLES, assert_gone, assert_inconclusive, captured, edit

pytestmark = pytest.mark.docker

AGENT = "order_age"
SOURCE = textwrap.dedent(
    """
    import os, psycopg
    from openai import OpenAI


    def main():
        with psycopg.connect(os.environ["DATABASE_URL"]) as conn:
            (placed,) = conn.execute("SELECT placed_at FROM orders WHERE id = 1").fetchone()
        answer = OpenAI().chat.completions.create(
            model="scripted-1",
            messages=[{"role": "user", "content": f"Order 1 was placed at {placed}. Late?"}],
        )
        if answer.choices[0].message.content.startswith("late"):
            raise SystemExit(3)


    if __name__ == "__main__":
        main()
    """
)
PLACED = "2024-03-01 12:00:00+00:00"


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    """A live Postgres (in UTC, as its image runs) with order 1."""
    with bring_up([RestoreSpec("live", "postgres", database="shop")]) as live:
        url = live.services["live"].url
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE orders (id int, placed_at timestamptz)")
            conn.execute("INSERT INTO orders VALUES (1, '2024-03-01 12:00:00+00')")
        yield url


@pytest.mark.parametrize("style", STYLES)
def test_postgres_in_utc_and_an_agent_in_new_york_replay_each_in_its_zone(
    tmp_path: Path, postgres_url: str, style: str
) -> None:
    (tmp_path / f"{AGENT}.py").write_text(SOURCE)
    with harness.model(lambda messages: {"content": "late: refund"}) as base:
        env = harness.base_env(
            OPENAI_BASE_URL=base,
            OPENAI_API_KEY=harness.API_KEY,
            DATABASE_URL=postgres_url,
            TZ="America/New_York",
        )
        run = captured(style, tmp_path, AGENT, env, fail_if="exit!=0")
    manifest = run.manifest
    assert run.exit_code == 3 and manifest.failure is not None, run.output
    assert manifest.clock is not None and manifest.clock.timezone == "America/New_York"
    (service,) = manifest.services
    assert service.meta.get(TIMEZONE_META) in {"UTC", "Etc/UTC"}, service.meta
    assert any(PLACED in p for p in harness.prompts(run.events)), run.events

    result = harness.replay(run.store, run.run_id, times=2)

    harness.assert_reproduced_every_time(result, times=2)
    for events in harness.replayed_runs(run.store, result):
        assert any(PLACED in p for p in harness.prompts(events))

    edit(tmp_path, AGENT, "raise SystemExit(3)", 'print("refund sent")')  # the fix
    assert_gone(harness.replay(run.store, run.run_id, times=1))

    ask = "    answer = OpenAI()"
    edit(tmp_path, AGENT, ask, '    raise OSError("orders down")\n' + ask)
    assert_inconclusive(harness.replay(run.store, run.run_id, times=1), "OSError")
