"""The real openai and anthropic SDK clients, captured unchanged at the httpx transport."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import anthropic
import httpx
import openai

from sandbox import capture
from sandbox.replay.judging.semantics import request_of
from sandbox.replay.serving.routing import legacy_llm_fingerprint
from sandbox.seam import llm
from sandbox.seam.apis import openai_responses
from sandbox.snapshot.events import HTTPExchange, LLMCall
from sandbox.snapshot.normalize import request_fingerprint
from sandbox.snapshot.store import DirectoryStore


def _api(name: str) -> llm.LLMApi:
    api = llm.api(name)
    assert api is not None
    return api


def _parse(name: str, body: Any, streamed: bool) -> llm.LLMResponse:
    return _api(name).parse_response(body, streamed)


def _stream(name: str, body: dict[str, Any]) -> str:
    return _api(name).stream_text(body)


OPENAI_KEY = "sk-proj-abcdefghijklmnopqrstuvwx0123"
ANTHROPIC_KEY = "sk-ant-api03-zyxwvutsrqponmlk9876"

TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "lookup_order",
            "parameters": {"type": "object", "properties": {"id": {"type": "integer"}}},
        },
    }
]


def _llm(store: DirectoryStore, run_id: str) -> list[LLMCall]:
    return [e for e in store.load_events(run_id) if isinstance(e, LLMCall)]


def _all_bytes(store: DirectoryStore) -> bytes:
    return b"".join(p.read_bytes() for p in store.root.rglob("*") if p.is_file())


def test_openai_chat_and_stream(store: DirectoryStore, fake_api: Any) -> None:
    client = openai.OpenAI(api_key=OPENAI_KEY, base_url=f"{fake_api.url}/v1", max_retries=0)
    with capture.run("openai", store=store, seed=1) as rec:
        reply = client.chat.completions.create(
            model="gpt-test",
            messages=[{"role": "user", "content": "Where is order 7?"}],
            temperature=0.3,
            top_p=0.9,
            seed=123,
            max_tokens=50,
            tools=TOOLS,
            tool_choice="auto",
        )
        stream = client.chat.completions.create(
            model="gpt-test",
            messages=[{"role": "user", "content": "Say hello"}],
            stream=True,
            stream_options={"include_usage": True},
            temperature=0,
        )
        pieces = [c.choices[0].delta.content or "" for c in stream if c.choices]
    # The caller got the real responses, streaming included.
    assert reply.choices[0].message.content == "The order ships Tuesday."
    assert "".join(pieces) == "Hello world"

    chat, streamed = _llm(store, rec.run_id)
    assert chat.provider == "openai" and chat.model == "gpt-test"
    # Capture and replay agree: the model call is fingerprinted under the name it is matched
    # by (the model), from the request replay rebuilds out of the live HTTP exchange.
    for event in (chat, streamed):
        assert event.name == "gpt-test"
        assert event.fingerprint == request_fingerprint("llm", event.name, request_of(event))
        assert not legacy_llm_fingerprint(event)
    assert chat.params["temperature"] == 0.3 and chat.params["top_p"] == 0.9
    assert chat.params["seed"] == 123 and chat.params["max_tokens"] == 50
    assert chat.params["tool_choice"] == "auto"
    assert chat.messages == [{"role": "user", "content": "Where is order 7?"}]
    assert chat.tools == TOOLS
    assert chat.response == {
        "text": "The order ships Tuesday.",
        "tool_calls": [{"id": "call_1", "name": "lookup_order", "arguments": '{"id": 7}'}],
        "stop_reason": "tool_calls",
    }
    assert chat.usage["total_tokens"] == 16
    assert chat.provider_meta["system_fingerprint"] == "fp_test_123"
    assert chat.provider_meta["id"] == "chatcmpl-42"
    assert not chat.streamed

    assert streamed.streamed and streamed.params["stream"] is True
    assert streamed.response == {
        "text": "Hello world",
        "tool_calls": [{"id": "call_9", "name": "refund", "arguments": '{"amount": 5}'}],
        "stop_reason": "tool_calls",
    }
    assert streamed.usage["completion_tokens"] == 4
    assert streamed.provider_meta["system_fingerprint"] == "fp_stream_9"
    # The manifest lists each model once per distinct parameters, in first-call order.
    manifest = store.load_manifest(rec.run_id)
    assert [(m.provider, m.model) for m in manifest.models] == [("openai", "gpt-test")] * 2
    assert [m.params for m in manifest.models] == [chat.params, streamed.params]
    assert manifest.event_count == len(store.load_events(rec.run_id))

    http = [e for e in store.load_events(rec.run_id) if isinstance(e, HTTPExchange)]
    assert [h.status for h in http] == [200, 200]
    assert http[1].streamed and "data: [DONE]" in str(http[1].response_body)
    assert http[0].request_body["model"] == "gpt-test"  # type: ignore[index]
    assert http[0].request_headers["authorization"].startswith("Bearer <redacted:")
    # The llm event sits under the http exchange it came from.
    assert chat.parent_span == http[0].span
    assert OPENAI_KEY.encode() not in _all_bytes(store)
    assert b"topsecretcookievalue" not in _all_bytes(store)


def test_anthropic_messages_and_stream(store: DirectoryStore, fake_api: Any) -> None:
    client = anthropic.Anthropic(api_key=ANTHROPIC_KEY, base_url=fake_api.url, max_retries=0)
    with capture.run("anthropic", store=store, seed=1) as rec:
        message = client.messages.create(
            model="claude-test",
            max_tokens=64,
            system="You are a refund bot.",
            messages=[{"role": "user", "content": "Refund 5"}],
            stop_sequences=["END"],
            tool_choice={"type": "auto"},
            metadata={"user_id": "u-1"},
            tools=[{"name": "refund", "input_schema": {"type": "object"}}],
        )
        with client.messages.stream(
            model="claude-test", max_tokens=32, messages=[{"role": "user", "content": "Hi"}]
        ) as stream:
            text = "".join(stream.text_stream)
    assert message.content[0].type == "text" and message.content[0].text == "Refund issued."
    assert text == "Bonjour"

    plain, streamed = _llm(store, rec.run_id)
    assert plain.provider == "anthropic" and plain.model == "claude-test"
    assert plain.messages[0] == {"role": "system", "content": "You are a refund bot."}
    assert plain.messages[1] == {"role": "user", "content": "Refund 5"}
    assert plain.params["max_tokens"] == 64 and plain.params["stop_sequences"] == ["END"]
    assert plain.params["tool_choice"] == {"type": "auto"}
    assert plain.params["metadata"] == {"user_id": "u-1"}
    assert plain.tools == [{"name": "refund", "input_schema": {"type": "object"}}]
    assert plain.response == {
        "text": "Refund issued.",
        "tool_calls": [{"id": "toolu_1", "name": "refund", "arguments": {"amount": 5}}],
        "stop_reason": "tool_use",
    }
    assert plain.usage == {"input_tokens": 20, "output_tokens": 7}
    assert plain.provider_meta["id"] == "msg_01"

    assert streamed.streamed
    assert streamed.response == {"text": "Bonjour", "tool_calls": [], "stop_reason": "end_turn"}
    assert streamed.usage["output_tokens"] == 3 and streamed.provider_meta["id"] == "msg_02"
    http = [e for e in store.load_events(rec.run_id) if isinstance(e, HTTPExchange)]
    # This SDK version sends the key as a bearer token; older ones used x-api-key.
    headers = http[0].request_headers
    sent = headers.get("x-api-key") or headers["authorization"]
    assert "<redacted:" in sent
    assert ANTHROPIC_KEY.encode() not in _all_bytes(store)


def test_async_clients_are_captured(store: DirectoryStore, fake_api: Any) -> None:
    async def main() -> str:
        client = openai.AsyncOpenAI(
            api_key=OPENAI_KEY, base_url=f"{fake_api.url}/v1", max_retries=0
        )
        stream = await client.chat.completions.create(
            model="gpt-async", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        out = [c.choices[0].delta.content or "" async for c in stream if c.choices]
        await client.close()
        return "".join(out)

    with capture.run("async", store=store, seed=1) as rec:
        text = asyncio.run(main())
    assert text == "Hello world"
    (call,) = _llm(store, rec.run_id)
    assert call.model == "gpt-async" and call.response["text"] == "Hello world"  # type: ignore[index]


def test_plain_httpx_is_captured_and_nothing_outside_a_run(
    store: DirectoryStore, fake_api: Any
) -> None:
    with httpx.Client() as client:
        client.get(f"{fake_api.url}/before")
        with capture.run("httpx", store=store, seed=1) as rec:
            resp = client.post(f"{fake_api.url}/echo", json={"n": 1})
        client.get(f"{fake_api.url}/after")
    assert resp.json() == {"echo": {"n": 1}}
    (event,) = store.load_events(rec.run_id)[1:]  # after the random.seed event
    assert isinstance(event, HTTPExchange)
    assert event.method == "POST" and event.url.endswith("/echo")
    assert event.request_body == {"n": 1} and event.response_body == {"echo": {"n": 1}}
    assert event.fingerprint is not None and event.duration >= 0
    raw = (store.run_dir(rec.run_id) / "events.jsonl").read_bytes()
    assert b"/before" not in raw and b"/after" not in raw
    assert json.loads(raw.splitlines()[-1])["kind"] == "http"


def test_a_responses_stream_cut_before_its_end_still_gives_the_finished_tool_calls() -> None:
    """A Responses API stream with no terminal event (the connection dropped, the client
    stopped reading): the tool calls whose output items finished and the text so far are
    read, as a cut chat-completions stream's are."""
    body = {
        "id": "resp_7",
        "model": "gpt-test",
        "status": "completed",
        "output": [
            {
                "type": "message",
                "id": "m",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Looking."}],
            },
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_1",
                "name": "lookup_order",
                "arguments": '{"id": 7}',
            },
            {
                "type": "function_call",
                "id": "fc_2",
                "call_id": "call_2",
                "name": "refund",
                "arguments": '{"id": 7}',
            },
        ],
    }
    stream = _stream(openai_responses.NAME, body)
    blocks = stream.split("\n\n")
    third = next(i for i, block in enumerate(blocks) if '"output_index": 2' in block)
    cut = "\n\n".join(blocks[:third]) + "\n\n"  # up to the third item's start
    answer = _parse(openai_responses.NAME, cut, True)
    assert answer.response == {
        "text": "Looking.",
        "tool_calls": [{"id": "call_1", "name": "lookup_order", "arguments": '{"id": 7}'}],
        "stop_reason": None,
    }
    assert answer.meta["id"] == "resp_7"
