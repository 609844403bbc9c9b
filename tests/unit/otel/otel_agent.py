"""A small tool-using agent for the OpenTelemetry tests: the real ``openai`` client against
the repo's scripted model (its address in ``OTEL_AGENT_MODEL_URL``), one ``capture.tool``.

The bug: the model reads a stock of 0 and still answers that the item is in stock."""

from __future__ import annotations

import json
import os
from typing import Any

import openai

from examples._model import MODEL, agent_loop, last_tool_results, tool_spec
from sandbox import capture
from sandbox.snapshot.manifest import ResultPredicate

MODEL_URL_ENV = "OTEL_AGENT_MODEL_URL"
SYSTEM = "You answer stock questions. Use check_stock."
USER = "Is the blue kettle (sku K-7) in stock?"
TOOLS = [tool_spec("check_stock", "Units left of a sku.", {"sku": {"type": "string"}})]
FAILURE = ResultPredicate(path="answer", op="contains", value="is in stock")


def script(messages: list[dict[str, Any]]) -> dict[str, Any]:
    done = last_tool_results(messages)
    if done:
        left = json.loads(done[-1])["qty"]
        return {"content": f"Yes, K-7 is in stock ({left} left)."}
    return {"tool_calls": [{"name": "check_stock", "arguments": {"sku": "K-7"}}]}


@capture.tool
def check_stock(sku: str) -> dict[str, Any]:
    return {"sku": sku, "qty": 0}


def main() -> dict[str, str]:
    client = openai.OpenAI(
        base_url=os.environ[MODEL_URL_ENV], api_key="sk-otel-test-key", max_retries=0
    )
    answer = agent_loop(client, SYSTEM, USER, TOOLS, {"check_stock": check_stock})
    result = {"answer": answer, "model": MODEL}
    capture.result(result)
    return result
