from __future__ import annotations

from pathlib import Path

import pytest
from replay_events import clock, http, llm, tool

from sandbox.errors import ReplayMismatchError, UnknownNameError
from sandbox.replay.judging.semantics import request_of
from sandbox.replay.serving.matcher import Matcher, fingerprint_of
from sandbox.replay.serving.routing import legacy_llm_fingerprint, prepare_recording
from sandbox.seam.apis import openai_responses
from sandbox.snapshot.events import Event, LLMCall
from sandbox.snapshot.normalize import request_fingerprint
from sandbox.snapshot.store import DirectoryStore


def recording() -> list[Event]:
    return [
        llm(0, "Refund order 42 please", reply="calling refund"),
        tool(1, "refund", {"order_id": 42}, output={"ok": True}),
        tool(2, "refund", {"order_id": 42}, output={"ok": False, "error": "already refunded"}),
        llm(3, "Summarize what happened", reply="done"),
        clock(4, 1_700_000_123.0),
    ]


def test_the_nth_request_gets_the_nth_recording() -> None:
    events = recording()
    matcher = Matcher(events)
    assert matcher.match("tool", "refund", {"order_id": 42}) is events[1]
    assert matcher.match("tool", "refund", {"order_id": 42}) is events[2]
    assert matcher.match("llm", "chat", request_of(events[3])) is events[3]
    assert [e.seq for e in matcher.unused()] == [0, 4]


def test_volatile_keys_do_not_matter() -> None:
    events = [http(0, "https://api.test/x?b=2&a=1", {"X-Request-Id": "r1", "Accept": "json"})]
    matcher = Matcher(events)
    request = {
        "method": "GET",
        "url": "https://api.test/x?a=1&b=2",
        "headers": {"accept": "json", "x-request-id": "r2"},
        "body": None,
    }
    assert matcher.match("http", "GET", request) is events[0]


def test_stored_fingerprint_is_used() -> None:
    stored = request_fingerprint("tool", "search", {"q": "kettles", "page": 1})
    event = tool(0, "search", {"q": "kettle"}, output=[], fingerprint=stored)
    assert fingerprint_of(event) == stored
    assert Matcher([event]).match("tool", "search", {"page": 1, "q": "kettles"}) is event


def test_miss_shows_the_request_the_nearest_recording_and_what_differs() -> None:
    events = recording()
    matcher = Matcher(events)
    request = request_of(events[0])
    request["messages"][1]["content"] = "Refund order 43 please"
    with pytest.raises(ReplayMismatchError) as info:
        matcher.match("llm", "chat", request)
    err = info.value
    text = str(err)
    assert "no recorded llm 'chat' matches this request (call #1 of llm 'chat')" in text
    assert "nearest recorded (seq 0, 1 difference(s))" in text
    assert 'messages[1].content: "Refund order 42 please" -> "Refund order 43 please"' in text
    assert "other candidates: seq 3" in text
    # structured data for reports
    assert err.kind == "llm" and err.name == "chat"
    assert err.expected == request_of(events[0])
    assert err.actual == request
    assert err.diff == [
        {
            "path": "messages[1].content",
            "change": "changed",
            "expected": "Refund order 42 please",
            "actual": "Refund order 43 please",
        }
    ]
    assert [c["seq"] for c in err.candidates] == [0, 3]


def test_a_request_repeated_more_often_than_recorded_says_so() -> None:
    matcher = Matcher(recording())
    matcher.match("tool", "refund", {"order_id": 42})
    matcher.match("tool", "refund", {"order_id": 42})
    with pytest.raises(ReplayMismatchError, match=r"recorded 2 time.* now made a 3rd time"):
        matcher.match("tool", "refund", {"order_id": 42})


def test_unknown_name_suggests_close_ones() -> None:
    with pytest.raises(
        ReplayMismatchError, match=r"no recorded tool 'refnd'.*did you mean 'refund'"
    ):
        Matcher(recording()).match("tool", "refnd", {"order_id": 42})
    with pytest.raises(ReplayMismatchError, match="nothing of kind 'retrieval' was recorded"):
        Matcher(recording()).match("retrieval", "docs", "kettle")


def test_live_mode_falls_through() -> None:
    matcher = Matcher(recording(), on_miss="live")
    assert matcher.match("tool", "refund", {"order_id": 7}) is None
    assert matcher.match("tool", "refund", {"order_id": 42}) is not None


def test_position_mode_serves_the_same_position() -> None:
    events = recording()
    matcher = Matcher(events, on_miss="position")
    assert matcher.match("tool", "refund", {"order_id": 7}) is events[1]
    assert matcher.match("tool", "refund", {"order_id": 8}) is events[2]
    with pytest.raises(ReplayMismatchError):
        matcher.match("tool", "refund", {"order_id": 9})


def test_unknown_miss_mode() -> None:
    with pytest.raises(UnknownNameError, match="miss mode 'skip'; valid: fail, live, position"):
        Matcher([], on_miss="skip")


def test_older_snapshots_model_calls_still_match() -> None:
    """The committed demo snapshot fingerprinted its model calls under the API name."""
    store = DirectoryStore(Path(__file__).parents[3] / "snapshots")
    events = store.load_events("demo-orders-duplicate")
    calls = [e for e in events if e.kind == "llm"]
    assert calls and all(legacy_llm_fingerprint(e) for e in calls)
    prepared = [e for e in prepare_recording(events, store.get_blob) if e.kind == "llm"]
    matcher = Matcher(prepared)
    for event in prepared:
        assert matcher.match("llm", event.name, request_of(event)) is not None


def test_a_responses_call_s_instructions_are_its_system_message_not_a_parameter() -> None:
    body = {"model": "m", "instructions": "Be brief.", "input": "hi", "temperature": 0}
    read = openai_responses.API.parse_request("", body)
    assert read.messages == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
    ]
    assert read.params == {"temperature": 0}


def test_an_older_responses_call_read_with_its_instructions_as_a_parameter_still_matches() -> None:
    body = {"model": "m", "instructions": "Be brief.", "input": "hi", "temperature": 0}
    now = openai_responses.API.parse_request("", body)
    params = {**now.params, "instructions": "Be brief."}  # as older captures read it
    older = {**now.meaning(), "params": params}
    recorded = LLMCall(
        seq=0,
        wall=0.0,
        mono=0.0,
        name="m",
        model="m",
        messages=now.messages,
        params=params,
        fingerprint=request_fingerprint("llm", "m", older),
        provider_meta={"api": openai_responses.NAME},
    )
    assert Matcher([recorded], on_miss="live").match("llm", "m", now.meaning()) is None
    (prepared,) = prepare_recording([recorded], _no_blobs)
    assert prepared.params == {"temperature": 0}
    assert Matcher([prepared]).match("llm", "m", now.meaning()) is not None


def _no_blobs(sha256: str) -> bytes:
    raise AssertionError(f"no blob expected, asked for {sha256}")
