"""What a fork's edits mean: parsing them, the step they fork at, the responses they put in
place of the recorded ones."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sandbox.errors import ForkError
from sandbox.replay.fork import Fork, fork_edits, parse_override, parse_param
from sandbox.replay.serving.policy import PolicySet
from sandbox.seam import llm
from sandbox.seam.apis import anthropic_messages, gemini, openai_chat, openai_responses
from sandbox.snapshot.events import Event, HTTPExchange, LLMCall, ToolCall
from sandbox.snapshot.manifest import ForkEdits, ForkOverride


def _api(name: str) -> llm.LLMApi:
    api = llm.api(name)
    assert api is not None
    return api


def _parse(name: str, body: Any, streamed: bool) -> llm.LLMResponse:
    return _api(name).parse_response(body, streamed)


def _stream(name: str, body: dict[str, Any]) -> str:
    return _api(name).stream_text(body)


def _no_blob(key: str) -> bytes:
    raise AssertionError(f"no blob expected, asked for {key}")


IDENTITY = {gemini.NAME: ("responseId", "modelVersion")}
"""The keys of a response's id and model in the APIs that do not call them ``id``, ``model``."""


def _one_call(api: str, streamed: bool, body: object) -> list[Event]:
    """One model call of ``api`` and the exchange it came from, streamed or not."""
    return [
        HTTPExchange(
            seq=0,
            wall=1.0,
            mono=0.1,
            span=0,
            name="POST http://127.0.0.1/v1/x",
            method="POST",
            url="http://127.0.0.1/v1/x",
            status=200,
            response_headers={
                "content-type": "text/event-stream" if streamed else "application/json"
            },
            response_body=body,  # type: ignore[arg-type]
            streamed=streamed,
        ),
        LLMCall(
            seq=1,
            wall=1.0,
            mono=0.1,
            parent_span=0,
            provider_meta=dict(
                zip(("api", *IDENTITY.get(api, ("id", "model"))), (api, "r-1", "m"), strict=True)
            ),
            streamed=streamed,
        ),
    ]


def _recording() -> list[Event]:
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}
        ],
    }
    return [
        *_one_call(openai_chat.NAME, False, body),
        ToolCall(seq=2, wall=2.0, mono=0.2, span=1, name="lookup", output={"ok": True}),
    ]


def _fork(edits: ForkEdits) -> Fork:
    return Fork(edits, _recording(), PolicySet(), _no_blob, lambda data, media: pytest.fail())


def test_an_override_is_json_or_a_file(tmp_path: Path) -> None:
    assert parse_override('3={"eligible": false}') == ForkOverride(
        step=3, value={"eligible": False}
    )
    assert parse_override('3="plain text"').value == "plain text"
    answer = tmp_path / "answer.json"
    answer.write_text('{"content": "no"}')
    assert parse_override(f"7={answer}") == ForkOverride(step=7, value={"content": "no"})
    text = tmp_path / "note.txt"
    text.write_text("not json at all")
    assert parse_override(f"7={text}").value == "not json at all"
    with pytest.raises(ForkError, match="neither JSON nor a file"):
        parse_override("3=nothing-here")
    with pytest.raises(ForkError, match="STEP=JSON"):
        parse_override("three=1")


def test_a_param_value_is_json_when_it_parses() -> None:
    assert parse_param("temperature=0.7") == ("temperature", 0.7)
    assert parse_param("stop=END") == ("stop", "END")
    with pytest.raises(ForkError, match="KEY=VALUE"):
        parse_param("temperature")


def test_no_edits_is_no_fork() -> None:
    assert fork_edits() is None
    assert fork_edits(until=4) == ForkEdits(until=4)


def test_the_fork_is_after_the_last_override_unless_until_says() -> None:
    assert _fork(ForkEdits(overrides=[ForkOverride(step=2, value=1)])).at == 3
    assert _fork(ForkEdits(until=1)).at == 1
    assert _fork(ForkEdits(model="other")).at == 0  # a swapped model: live from the start
    with pytest.raises(ForkError, match="must come before --until"):
        _fork(ForkEdits(until=2, overrides=[ForkOverride(step=2, value=1)]))
    with pytest.raises(ForkError, match=r"steps are 0\.\.2"):
        _fork(ForkEdits(overrides=[ForkOverride(step=9, value=1)]))


def test_a_tool_override_replaces_its_output() -> None:
    fork = _fork(ForkEdits(overrides=[ForkOverride(step=2, value={"ok": False})]))
    tool = fork.recording[2]
    assert isinstance(tool, ToolCall) and tool.output == {"ok": False}
    assert fork.overridden == {2}


def test_a_model_override_edits_the_exchange_it_is_answered_from() -> None:
    calls = [{"name": "refund", "arguments": {"order": 7}}]
    for step in (0, 1):  # the HTTP exchange or the model call: the same step
        fork = _fork(ForkEdits(overrides=[ForkOverride(step=step, value={"tool_calls": calls})]))
        assert fork.overridden == {1}
        exchange = fork.recording[0]
        assert isinstance(exchange, HTTPExchange) and isinstance(exchange.response_body, dict)
        choice = exchange.response_body["choices"][0]
        assert choice["finish_reason"] == "tool_calls"
        wire = choice["message"]["tool_calls"][0]["function"]
        assert wire["name"] == "refund" and json.loads(wire["arguments"]) == {"order": 7}
        assert exchange.response_body["id"] == "chatcmpl-1"  # the rest of the body is kept


def _answer(api: str, streamed: bool, recorded: object, value: object) -> HTTPExchange:
    fork = Fork(
        ForkEdits(overrides=[ForkOverride(step=1, value=value)]),  # type: ignore[arg-type]
        _one_call(api, streamed, recorded),
        PolicySet(),
        _no_blob,
        lambda data, media: pytest.fail(),
    )
    exchange = fork.recording[0]
    assert isinstance(exchange, HTTPExchange)
    return exchange


def test_a_responses_api_answer_is_overridden_by_a_message() -> None:
    recorded = {"id": "resp_1", "object": "response", "model": "m", "output": []}
    value = {"content": "Checking.", "tool_calls": [{"name": "refund", "arguments": {"n": 7}}]}
    exchange = _answer(openai_responses.NAME, False, recorded, value)
    assert not exchange.streamed and isinstance(exchange.response_body, dict)
    assert exchange.response_body["id"] == "resp_1"  # the rest of the body is kept
    answer = _parse(openai_responses.NAME, exchange.response_body, False).response
    assert answer["text"] == "Checking."
    assert [(c["name"], json.loads(c["arguments"])) for c in answer["tool_calls"]] == [
        ("refund", {"n": 7})
    ]


def test_a_gemini_answer_is_overridden_by_a_message_with_a_function_call() -> None:
    recorded = {"responseId": "g-1", "modelVersion": "m", "candidates": []}
    value = {"content": "Checking.", "tool_calls": [{"name": "refund", "arguments": {"n": 7}}]}
    exchange = _answer(gemini.NAME, False, recorded, value)
    assert not exchange.streamed and isinstance(exchange.response_body, dict)
    assert exchange.response_body["responseId"] == "g-1"  # the rest of the body is kept
    parts = exchange.response_body["candidates"][0]["content"]["parts"]
    assert parts == [{"text": "Checking."}, {"functionCall": {"name": "refund", "args": {"n": 7}}}]
    answer = _parse(gemini.NAME, exchange.response_body, False).response
    assert answer["text"] == "Checking."
    assert [(c["name"], c["arguments"]) for c in answer["tool_calls"]] == [("refund", {"n": 7})]


@pytest.mark.parametrize(
    "api", [openai_chat.NAME, openai_responses.NAME, anthropic_messages.NAME, gemini.NAME]
)
def test_a_streamed_answer_is_overridden_by_its_api_s_stream_of_the_override(api: str) -> None:
    """The override is served as the stream the API sends (a client reading a stream gets
    no answer out of a JSON body), and reads back as the overriding answer."""
    value = {"content": "No refund.", "tool_calls": []}
    if api == anthropic_messages.NAME:
        value = {"content": [{"type": "text", "text": "No refund."}]}
    exchange = _answer(api, True, "data: recorded\n\n", value)
    assert exchange.streamed and isinstance(exchange.response_body, str)
    assert exchange.response_headers["content-type"] == "text/event-stream"
    answer = _parse(api, exchange.response_body, True)
    assert answer.response["text"] == "No refund." and answer.response["tool_calls"] == []
    assert answer.meta.get(IDENTITY.get(api, ("id",))[0]) == "r-1"  # the recorded identity


@pytest.mark.parametrize(
    "api, body",
    [
        (
            openai_chat.NAME,
            {
                "id": "c-1",
                "model": "m",
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "tool_calls",
                        "message": {
                            "role": "assistant",
                            "content": "On it.",
                            "tool_calls": [
                                {
                                    "id": "call_1",
                                    "type": "function",
                                    "function": {"name": "refund", "arguments": '{"n": 7}'},
                                }
                            ],
                        },
                    }
                ],
                "usage": {"total_tokens": 3},
            },
        ),
        (
            openai_responses.NAME,
            {
                "id": "resp_1",
                "model": "m",
                "status": "completed",
                "output": [
                    {
                        "type": "message",
                        "id": "msg_1",
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": "On it."}],
                    },
                    {
                        "type": "function_call",
                        "id": "fc_1",
                        "call_id": "call_1",
                        "name": "refund",
                        "arguments": '{"n": 7}',
                    },
                ],
                "usage": {"total_tokens": 3},
            },
        ),
        (
            anthropic_messages.NAME,
            {
                "id": "msg_1",
                "type": "message",
                "model": "m",
                "content": [
                    {"type": "text", "text": "On it."},
                    {"type": "tool_use", "id": "call_1", "name": "refund", "input": {"n": 7}},
                ],
                "stop_reason": "tool_use",
                "usage": {"output_tokens": 3},
            },
        ),
        (
            gemini.NAME,
            {
                "responseId": "g-1",
                "modelVersion": "m",
                "candidates": [
                    {
                        "index": 0,
                        "finishReason": "STOP",
                        "content": {
                            "role": "model",
                            "parts": [
                                {"text": "On it."},
                                {
                                    "functionCall": {
                                        "id": "call_1",
                                        "name": "refund",
                                        "args": {"n": 7},
                                    }
                                },
                            ],
                        },
                    }
                ],
                "usageMetadata": {"promptTokenCount": 2, "candidatesTokenCount": 1},
            },
        ),
    ],
)
def test_a_whole_body_reads_the_same_streamed_as_plain(api: str, body: dict[str, object]) -> None:
    plain = _parse(api, body, False)
    streamed = _parse(api, _stream(api, body), True)
    assert streamed.response == plain.response
    assert streamed.meta == plain.meta and streamed.usage == plain.usage


def test_only_responses_can_be_overridden() -> None:
    recording = [*_recording(), LLMCall(seq=3, wall=3.0, mono=0.3)]
    with pytest.raises(ForkError, match="no HTTP exchange"):
        Fork(
            ForkEdits(overrides=[ForkOverride(step=3, value="x")]),
            recording,
            PolicySet(),
            _no_blob,
            lambda data, media: pytest.fail(),
        )


def test_the_model_and_params_edit_a_live_request() -> None:
    fork = _fork(ForkEdits(model="other", params={"temperature": 0.2}))
    sent = fork.request_body({"model": "m", "messages": [], "temperature": 1})
    assert sent == {"model": "other", "messages": [], "temperature": 0.2}
    assert _fork(ForkEdits(until=1)).request_body({"model": "m"}) == {"model": "m"}


def test_a_secret_typed_into_an_override_is_stored_as_a_placeholder() -> None:
    from sandbox.replay.fork import stored_edits

    secret = "sk-live-0123456789abcdefghijklmnop"
    edits = ForkEdits(overrides=[ForkOverride(step=2, value={"token": secret, "ok": True})])
    stored = stored_edits(edits, b"k" * 32)
    text = stored.model_dump_json()
    assert secret not in text
    assert stored.overrides[0].value["ok"] is True  # type: ignore[index]
    assert stored.overrides[0].step == 2
