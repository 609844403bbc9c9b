"""An OpenAI Agents SDK agent whose async tool calls a rates API over aiohttp (the way
async code calls a service), captured both ways (:mod:`tests.fidelity.wild.corpus`) and
replayed with ``sandbox replay RUN --json`` from another folder, the model and the rates
API stopped: before aiohttp's client was captured, the tool's call was refused on replay
and the run could not be judged."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest

from examples._model import last_tool_results
from sandbox.snapshot.events import HTTPExchange
from tests.fidelity import harness
from tests.fidelity.wild.corpus import STYLES, assert_gone, captured, edit, model_env

AGENT = "agents_aiohttp_fx"
KEY = "fx-live-0a1b2c3d4e5f60718293"
FIX = (
    "    if invoice.total_usd < invoice.total_eur:\n",
    "    if invoice.total_usd < 0:\n",
)


def invoice_model(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """Asks for the EUR/USD rate, then converts the total with it the wrong way round (the
    rate given is USD per EUR: it divides)."""
    done = last_tool_results(messages)
    if not done:
        return {"tool_calls": [{"name": "fx_rate", "arguments": {"base": "EUR", "quote": "USD"}}]}
    rate = ast.literal_eval(done[-1])["rate"]  # the SDK hands the model str(dict)
    return {"content": json.dumps({"total_eur": 250.0, "total_usd": round(250.0 / rate, 2)})}


def rates(path: str, body: dict[str, Any]) -> tuple[int, Any]:
    return 200, {"base": "EUR", "quote": "USD", "rate": 1.08}


@pytest.mark.parametrize("style", STYLES)
def test_an_async_tool_over_aiohttp_replays_with_the_rates_api_stopped(
    tmp_path: Path, style: str
) -> None:
    """The tool's POST is recorded (its key a placeholder, on disk nowhere); with the model
    and the rates API stopped, two replays reproduce the booking's failure with no
    divergence and every recorded call made; the fixed check makes it go."""
    with harness.model(invoice_model) as base, harness.service(rates, "rates") as url:
        env = {**model_env(base), "FX_URL": url, "FX_KEY": KEY}
        run = captured(style, tmp_path, AGENT, env)
    assert run.exit_code == 1 and run.manifest.failure is not None, run.output
    assert "250.0 EUR booked as only 231.48 USD" in run.manifest.failure.reason
    (post,) = [e for e in run.events if isinstance(e, HTTPExchange) and e.url.endswith("/rate")]
    assert post.request_body == {"base": "EUR", "quote": "USD"}
    assert post.response_body == {"base": "EUR", "quote": "USD", "rate": 1.08}
    assert post.request_headers["authorization"].startswith("Bearer <redacted:")
    on_disk = b"".join(p.read_bytes() for p in (tmp_path / "snapshots").rglob("*") if p.is_file())
    assert KEY.encode() not in on_disk

    keys = harness.base_env(OPENAI_API_KEY=harness.API_KEY, FX_KEY=KEY)  # the user's own
    result = harness.replay(run.store, run.run_id, keys, times=2)
    harness.assert_reproduced_every_time(result, times=2)
    assert result.report["divergences"] == [None, None], result.output
    coverage = result.report["verdict"]["coverage"]
    assert coverage["made"] == coverage["recorded"], result.output

    edit(tmp_path, AGENT, *FIX)
    assert_gone(harness.replay(run.store, run.run_id, keys, times=1))
