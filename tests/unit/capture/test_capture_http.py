"""What an HTTP exchange's event holds, with a real httpx client against a local server: a
compressed body decoded, each request's own headers (a client sending changed headers, a
server answering with others), and a body left unread written once, when the run ends, as
cut short."""

from __future__ import annotations

import httpx

from sandbox import capture
from sandbox.snapshot.events import HTTPExchange
from sandbox.snapshot.store import DirectoryStore


def _exchanges(store: DirectoryStore, run_id: str) -> list[HTTPExchange]:
    return [e for e in store.load_events(run_id) if isinstance(e, HTTPExchange)]


def test_a_compressed_body_is_recorded_decoded(store: DirectoryStore, url: str) -> None:
    with capture.run("gzip", store=store, seed=1) as rec, httpx.Client() as client:
        assert client.post(f"{url}/gzip", json={"n": 1}).json()["echo"] == {"n": 1}
    (event,) = _exchanges(store, rec.run_id)
    assert event.response_headers["content-encoding"] == "gzip"
    assert event.response_body == {"echo": {"n": 1}, "trace": None}


def test_each_request_records_its_own_headers(store: DirectoryStore, url: str) -> None:
    """A client's headers changed between two requests, and the server's answer headers
    changing each time, are each recorded as that exchange sent and got them."""
    with capture.run("headers", store=store, seed=1) as rec, httpx.Client() as client:
        for trace in ("first", "second", "first"):
            client.post(f"{url}/echo", json={}, headers={"x-trace": trace})
    events = _exchanges(store, rec.run_id)
    assert [e.request_headers["x-trace"] for e in events] == ["first", "second", "first"]
    assert [e.response_body["trace"] for e in events] == ["first", "second", "first"]  # type: ignore[index]
    answers = [int(e.response_headers["x-answer"]) for e in events]
    assert answers == sorted(answers) and len(set(answers)) == 3


def test_a_body_left_unread_is_written_once_when_the_run_ends(
    store: DirectoryStore, url: str
) -> None:
    with httpx.Client() as client:
        with capture.run("unread", store=store, seed=1) as rec:
            request = client.build_request("POST", f"{url}/echo", json={"n": 2})
            response = client.send(request, stream=True)
        response.read()  # after the run: recorded already, not again
        response.close()
    (event,) = _exchanges(store, rec.run_id)
    assert event.error is not None and event.error.type == "IncompleteRead"
    assert event.status == 200 and event.request_body == {"n": 2}
