"""litellm, the client under many agent frameworks, against a scripted OpenAI-compatible
model on a local port: its async calls (``acompletion``, sent by litellm's own transport
over aiohttp) and its sync ones recorded as ``http`` and ``llm`` events, the API key on
disk nowhere, and a tool-calling agent's failure reproduced with the model stopped."""

from __future__ import annotations

import asyncio
import functools
import importlib
import json
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from examples._model import serve_model
from sandbox import capture
from sandbox.replay import replay
from sandbox.snapshot.events import HTTPExchange, LLMCall
from sandbox.snapshot.manifest import Entrypoint
from sandbox.snapshot.store import DirectoryStore
from tests.replayed import bytes_on_disk

KEY = "sk-planted-litellm-7a6b5c4d3e2f"
URL_ENV = "LITELLM_TEST_URL"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_balance",
            "description": "An account's balance.",
            "parameters": {
                "type": "object",
                "properties": {"account": {"type": "string"}},
                "required": ["account"],
            },
        },
    }
]


def _script(messages: list[dict[str, Any]]) -> dict[str, Any]:
    results = [m for m in messages if m.get("role") == "tool"]
    if not results:
        return {"tool_calls": [{"name": "get_balance", "arguments": {"account": "acme"}}]}
    return {"content": f"Balance is {results[-1]['content']}"}


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """litellm (its model prices read from its own copy, not fetched) and the scripted
    model; yields the function that stops the model."""
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    url, stop = serve_model(_script)
    monkeypatch.setenv(URL_ENV, f"{url}/v1")
    importlib.import_module("litellm")
    try:
        yield stop
    finally:
        stop()


@capture.tool
def get_balance(account: str) -> float:
    return -12.5


async def ledger(sync_first: bool) -> str:
    """The agent: a tool-calling loop over litellm, its first model call sync (from a
    worker thread) or async, the other one the other way; it fails on a negative balance."""
    import litellm

    messages: list[dict[str, Any]] = [{"role": "user", "content": "what is acme's balance?"}]
    for turn in range(2):
        settings: dict[str, Any] = {
            "model": "openai/scripted-1",
            "messages": messages,
            "tools": TOOLS,
            "api_base": os.environ[URL_ENV],
            "temperature": 0,
        }
        if (turn == 0) == sync_first:  # on a pool of its own: litellm uses asyncio's
            with ThreadPoolExecutor(max_workers=1) as pool:
                call = functools.partial(litellm.completion, **settings)
                answer = await asyncio.get_running_loop().run_in_executor(pool, call)
        else:
            answer = await litellm.acompletion(**settings)
        message = answer.choices[0].message
        if not message.tool_calls:
            break
        messages.append(message.model_dump())
        for call in message.tool_calls:
            out = get_balance(**json.loads(call.function.arguments))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps(out)})
    if "-" in str(message.content):
        raise ValueError(f"negative balance reported: {message.content}")
    return str(message.content)


def run_ledger(sync_first: bool) -> str:
    """The agent's script: its loop run in an event loop of its own."""
    return asyncio.run(ledger(sync_first))


@pytest.mark.parametrize("sync_first", [False, True], ids=["async-first", "sync-first"])
def test_litellm_calls_are_recorded_and_replay_with_the_model_stopped(
    tmp_path: Path, model: Any, sync_first: bool
) -> None:
    """Both model calls recorded (an ``http`` and an ``llm`` event each, whichever way
    they were sent), the key a placeholder on disk; with the model stopped the failure
    reproduces 2/2 with no divergence."""
    store = DirectoryStore(tmp_path / "store")
    entry = Entrypoint(kind="callable", target=f"{__name__}:run_ledger", args=[sync_first])
    with (
        pytest.raises(ValueError, match="negative balance"),
        capture.run("ledger", store=store, entrypoint=entry, packages=False) as rec,
    ):
        run_ledger(sync_first)
    model()
    events = store.load_events(rec.run_id)
    exchanges = [e for e in events if isinstance(e, HTTPExchange)]
    assert [e.url.rsplit("/", 2)[-2:] for e in exchanges] == [["chat", "completions"]] * 2
    assert [e.model for e in events if isinstance(e, LLMCall)] == ["scripted-1"] * 2
    assert KEY.encode() not in bytes_on_disk(tmp_path / "store")
    report = replay(rec.run_id, store=store, times=2)
    assert report.verdict.reproduced == 2, report.describe()
    assert report.divergences == [None, None], report.describe()
