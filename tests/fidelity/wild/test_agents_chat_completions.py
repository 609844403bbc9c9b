"""An OpenAI Agents SDK agent on the chat completions API (``set_default_openai_api
("chat_completions")``, so ``Agent(model="...")`` runs ``OpenAIChatCompletionsModel``),
captured both ways (:mod:`tests.fidelity.wild.corpus`: ``sandbox capture -- python
agents_chat_coupons.py``, and with ``@capture.run`` on its async ``main``) and replayed with
``sandbox replay RUN --json`` from another folder, with the model server stopped and the
coupon's row in ``coupons.db`` changed since."""

from __future__ import annotations

import ast
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from examples._model import last_tool_results
from sandbox.snapshot.events import HTTPExchange, LLMCall, ToolCall
from tests.fidelity import harness
from tests.fidelity.wild.corpus import (
    STYLES,
    assert_gone,
    assert_inconclusive,
    captured,
    edit,
    model_env,
)

AGENT = "agents_chat_coupons"


def coupons_model(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """Looks the coupon up, then takes its discount off (whatever uses it has left)."""
    done = last_tool_results(messages)
    if not done:
        return {"tool_calls": [{"name": "coupon", "arguments": {"code": "SPRING"}}]}
    percent = ast.literal_eval(done[-1])["percent"]  # the SDK hands the model str(dict)
    return {"content": json.dumps({"total": 80.0 * (1 - percent / 100), "coupon": "SPRING"})}


@pytest.mark.parametrize("style", STYLES)
def test_agents_sdk_on_chat_completions_replays_its_used_up_coupon(
    tmp_path: Path, style: str
) -> None:
    """Coupon SPRING (20 %) has no uses left; the assistant applies it all the same and the
    checkout refuses it. The model's calls are recorded as chat completions; the live
    ``coupons.db`` gets the coupon's uses back after the capture and the replay reads the
    captured one: reproduced every time; the fixed script (it drops a used-up coupon) makes
    it go; a crash before paying is inconclusive and named."""
    with sqlite3.connect(tmp_path / "coupons.db") as conn:
        conn.execute("CREATE TABLE coupons (code TEXT PRIMARY KEY, percent INT, uses_left INT)")
        conn.execute("INSERT INTO coupons VALUES ('SPRING', 20, 0)")
    conn.close()
    with harness.model(coupons_model) as base:
        run = captured(style, tmp_path, AGENT, model_env(base))
    assert run.exit_code == 1 and run.manifest.failure is not None, run.output
    assert "coupon SPRING has no uses left" in run.manifest.failure.reason
    store, run_id, events = run.store, run.run_id, run.events
    posts = [e.url for e in events if isinstance(e, HTTPExchange)]
    assert posts and all(url.endswith("/chat/completions") for url in posts), posts
    assert len([e for e in events if isinstance(e, LLMCall)]) == 2
    assert [e.name for e in events if isinstance(e, ToolCall)] == ["coupon"]
    with sqlite3.connect(tmp_path / "coupons.db") as conn:
        conn.execute("UPDATE coupons SET uses_left = 5")
    conn.close()

    harness.assert_reproduced_every_time(harness.replay(store, run_id, times=2), times=2)

    edit(
        tmp_path,
        AGENT,
        "        if uses_left < 1:\n",
        "        if uses_left < 1:\n"
        "            basket = Basket(total=80.0, coupon=None)  # the coupon is dropped\n"
        "        if basket.coupon is not None and uses_left < 1:\n",
    )
    assert_gone(harness.replay(store, run_id, times=1))

    signature = "def pay(basket: Basket) -> None:\n"
    edit(tmp_path, AGENT, signature, signature + '    raise OSError("payments down")\n')
    assert_inconclusive(harness.replay(store, run_id, times=1), "OSError")
