"""Recorded values come back as recorded: a tool's output keeps its keys' order, so the
prompt built from it is the same on replay and the failure (an offer over the limit, which
the model makes for gold customers) reproduces with the CRM gone."""

from __future__ import annotations

import json

from sandbox.snapshot.store import DirectoryStore
from tests.fidelity import harness

RECORD = {"name": "Ada", "tier": "gold", "id": "C-42", "balance": 120}


def crm(path: str, body: dict[str, object]) -> tuple[int, object]:
    return 200, RECORD


def offer(messages: list[dict[str, object]]) -> dict[str, object]:
    gold = '"tier": "gold"' in str(messages[-1]["content"])
    return {"content": json.dumps({"discount": 30 if gold else 10})}


def test_tool_output_keeps_its_key_order(store: DirectoryStore) -> None:
    with harness.model(offer) as base, harness.service(crm, "crm") as url:
        env = harness.base_env(OPENAI_BASE_URL=base, OPENAI_API_KEY=harness.API_KEY, CRM_URL=url)
        run = harness.capture(store, "account_offer", env)
    assert run.manifest.failure is not None, run.output
    prompt = "Customer record: " + json.dumps(RECORD)
    assert prompt in harness.prompts(run.events)

    result = harness.replay(store, run.run_id, None, "--recorded", "tool")

    harness.assert_reproduced_every_time(result)
    for events in harness.replayed_runs(store, result):
        assert prompt in harness.prompts(events)
