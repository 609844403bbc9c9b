"""``requests`` captured at its HTTP adapter against a real local server: exchanges recorded
(redacted, decoded) and replayed as ``requests.Response`` objects with the server stopped;
a failed connection recorded and raised again; a streamed response recorded as it is read
and streamed again on replay; what is not recorded (a body from a file) named once on
stderr; the sandbox's own requests not the run's."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import requests

from sandbox import capture
from sandbox.capture import http
from sandbox.replay import replay
from sandbox.snapshot.events import HTTPExchange
from sandbox.snapshot.manifest import Entrypoint
from sandbox.snapshot.store import DirectoryStore
from tests import weather_server
from tests.replayed import bytes_on_disk, reproduced_then_gone

SECRET = "wx-live-7f6e5d4c3b2a19085566"
URL_ENV = "REQUESTS_TEST_URL"


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ThreadingHTTPServer]:
    with weather_server.serving() as (srv, url):
        monkeypatch.setenv(URL_ENV, url)
        yield srv


@pytest.fixture(autouse=True)
def _unwarned(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http._PATCH, "warned", set())


FIXED = {"on": False}


def trip() -> dict[str, Any]:
    """The agent: the weather of two cities (one gzipped), a booking; it fails below zero."""
    base = os.environ[URL_ENV]
    auth = {"Authorization": f"Bearer {SECRET}"}
    with requests.Session() as session:
        paris = session.get(f"{base}/v1/paris", headers=auth, timeout=5).json()
        oslo = session.get(f"{base}/v1/gz/oslo", headers=auth, timeout=5).json()
        booked = requests.post(
            f"{base}/book", json={"city": "paris"}, headers={"x-agent": "trip"}, timeout=5
        ).json()
    if oslo["temp_c"] < 0 and not FIXED["on"]:
        raise ValueError(f"no advice below zero ({oslo['temp_c']})")
    return {"paris": paris["temp_c"], "booked": booked["booked"]}


def test_requests_exchanges_are_recorded_and_replay_with_the_server_stopped(
    tmp_path: Path, server: ThreadingHTTPServer
) -> None:
    """Three exchanges recorded (the gzipped body decoded, the bearer token a placeholder and
    on disk nowhere); with the server stopped the replay answers each from the recording:
    the failure reproduces 2/2 with no divergence, and is gone once fixed."""
    store = DirectoryStore(tmp_path / "store")
    entry = Entrypoint(kind="callable", target=f"{__name__}:trip")
    with (
        pytest.raises(ValueError, match="below zero"),
        capture.run("trip", store=store, entrypoint=entry, packages=False) as rec,
    ):
        trip()
    server.shutdown()
    exchanges = [e for e in store.load_events(rec.run_id) if isinstance(e, HTTPExchange)]
    assert [(e.method, e.url.rsplit("/", 1)[-1], e.status) for e in exchanges] == [
        ("GET", "paris", 200),
        ("GET", "oslo", 200),
        ("POST", "book", 200),
    ]
    assert exchanges[1].response_body == {"city": "oslo", "temp_c": -3}
    assert "content-encoding" not in exchanges[1].response_headers
    assert exchanges[0].request_headers["authorization"].startswith("Bearer <redacted:")
    assert exchanges[2].request_body == {"city": "paris"}
    assert SECRET.encode() not in bytes_on_disk(tmp_path / "store")
    reproduced_then_gone(rec.run_id, store, FIXED)


def refused() -> str:
    """The agent: a request to a port nothing listens on, its error handled."""
    try:
        requests.get(os.environ[URL_ENV] + "/v1/paris", timeout=2)
    except requests.ConnectionError as exc:
        capture.mark_failed(f"weather down: {type(exc).__name__}")
        return "down"
    return "up"


def test_a_failed_connection_is_recorded_and_raised_again_on_replay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = DirectoryStore(tmp_path / "store")
    monkeypatch.setenv(URL_ENV, "http://127.0.0.1:9")  # discard: nothing listens
    entry = Entrypoint(kind="callable", target=f"{__name__}:refused")
    with capture.run("refused", store=store, entrypoint=entry, packages=False) as rec:
        rec.offer_result(refused())  # what the replay records of the entrypoint's return
    (exchange,) = [e for e in store.load_events(rec.run_id) if isinstance(e, HTTPExchange)]
    assert exchange.error is not None and exchange.error.type.endswith("ConnectionError")
    report = replay(rec.run_id, store=store, times=1)
    assert report.verdict.reproduced == 1, report.describe()
    assert report.divergences == [None], report.describe()


def chat() -> str:
    """The agent: asks a local model (``stream=True``, its answer read line by line as it
    comes, as people call Ollama's API); it fails on a temperature below zero."""
    url = os.environ[URL_ENV] + "/api/chat"
    words = []
    with requests.post(url, json={"model": "llama", "stream": True}, stream=True) as answer:
        for line in answer.iter_lines():
            part = json.loads(line)
            if not part["done"]:
                words.append(part["message"]["content"])
    text = "".join(words)
    if "-" in text and not FIXED["on"]:
        raise ValueError(f"no advice below zero: {text}")
    return text


def test_a_streamed_response_is_recorded_as_read_and_streams_again_on_replay(
    tmp_path: Path, server: ThreadingHTTPServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """A response asked for as a stream and read line by line is recorded whole (decoded
    from its gzip, the encoding left out of its headers), nothing named on stderr; with the
    server stopped its replay streams the same lines: reproduced 2/2 with no divergence,
    gone once fixed."""
    store = DirectoryStore(tmp_path / "store")
    entry = Entrypoint(kind="callable", target=f"{__name__}:chat")
    with (
        pytest.raises(ValueError, match=r"below zero: It is -3 C in Oslo\."),
        capture.run("chat", store=store, entrypoint=entry, packages=False) as rec,
    ):
        chat()
    server.shutdown()
    (exchange,) = [e for e in store.load_events(rec.run_id) if isinstance(e, HTTPExchange)]
    assert exchange.url.endswith("/api/chat") and exchange.error is None
    assert isinstance(exchange.response_body, str)
    assert [json.loads(x)["done"] for x in exchange.response_body.splitlines()] == [
        *[False] * 6,
        True,
    ]
    assert "content-encoding" not in exchange.response_headers
    assert not [x for x in capsys.readouterr().err.splitlines() if x.startswith("sandbox:")]
    reproduced_then_gone(rec.run_id, store, FIXED)


def test_a_stream_left_unread_is_recorded_as_read_so_far_at_the_runs_end(
    tmp_path: Path, server: ThreadingHTTPServer
) -> None:
    """A streamed response read in part and never closed is recorded at the run's end with
    what was read, and the error that says the body was not read to its end."""
    store = DirectoryStore(tmp_path / "store")
    url = os.environ[URL_ENV] + "/api/chat"
    with capture.run("unread", store=store, packages=False) as rec:
        answer = requests.post(url, json={"model": "llama"}, stream=True)
        first = next(answer.iter_lines())
    answer.close()
    (exchange,) = [e for e in store.load_events(rec.run_id) if isinstance(e, HTTPExchange)]
    assert exchange.error is not None and exchange.error.type == "IncompleteRead"
    assert exchange.status == 200 and str(exchange.response_body).startswith(first.decode())


def test_a_body_from_a_file_is_named_once_and_not_recorded(
    tmp_path: Path, server: ThreadingHTTPServer, capsys: pytest.CaptureFixture[str]
) -> None:
    store = DirectoryStore(tmp_path / "store")
    url = os.environ[URL_ENV] + "/book"
    (tmp_path / "booking.json").write_text('{"city": "paris"}')
    with capture.run("file", store=store, packages=False) as rec:
        for _ in range(2):
            with (tmp_path / "booking.json").open("rb") as body:
                answer = requests.post(url, data=body, headers={"x-agent": "f"}, timeout=5)
            assert answer.json() == {"booked": "paris", "by": "f"}
    assert not [e for e in store.load_events(rec.run_id) if isinstance(e, HTTPExchange)]
    lines = [x for x in capsys.readouterr().err.splitlines() if x.startswith("sandbox:")]
    assert lines == [
        f"sandbox: requests {requests.__version__} with a body from a file or a generator is "
        "not captured: its calls will be refused on replay; send the body as bytes"
    ]


def test_the_sandboxs_own_requests_are_not_the_runs(
    tmp_path: Path, server: ThreadingHTTPServer
) -> None:
    """A request made by code of the sandbox's (a module named ``sandbox.*``: the Docker
    SDK's calls come from there) inside a run is neither recorded nor named."""
    own: dict[str, object] = {"__name__": "sandbox.containers.own", "requests": requests}
    exec("def ping(url):\n    return requests.get(url, timeout=5).status_code\n", own)
    store = DirectoryStore(tmp_path / "store")
    with capture.run("own", store=store, packages=False) as rec:
        assert own["ping"](os.environ[URL_ENV] + "/v1/paris") == 200  # type: ignore[operator]
    assert not [e for e in store.load_events(rec.run_id) if isinstance(e, HTTPExchange)]
