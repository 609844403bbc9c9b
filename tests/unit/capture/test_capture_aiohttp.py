"""aiohttp's ``ClientSession`` captured in a middleware of the sandbox's against a real local
server: exchanges recorded (redacted, decoded, streamed bodies as read) and replayed as
``ClientResponse`` objects with the server stopped; a body aiohttp streams named once on
stderr and not recorded."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from sandbox import capture
from sandbox.capture import http
from sandbox.snapshot.events import HTTPExchange, ToolCall
from sandbox.snapshot.manifest import Entrypoint
from sandbox.snapshot.store import DirectoryStore
from tests import weather_server
from tests.replayed import bytes_on_disk, reproduced_then_gone

SECRET = "wx-live-aio-7f6e5d4c3b2a1908"
URL_ENV = "AIOHTTP_TEST_URL"
FIXED = {"on": False}


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ThreadingHTTPServer]:
    with weather_server.serving() as (srv, url):
        monkeypatch.setenv(URL_ENV, url)
        yield srv


@pytest.fixture(autouse=True)
def _unwarned(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http._PATCH, "warned", set())


@capture.tool
async def book(city: str) -> dict[str, Any]:
    """A tool (run live on replay): its request is recorded inside its call."""
    base = os.environ[URL_ENV]
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{base}/book", json={"city": city}, headers={"x-agent": "trip"}) as answer,
    ):
        answer.raise_for_status()
        found: dict[str, Any] = await answer.json()
        return found


async def _trip() -> dict[str, Any]:
    base = os.environ[URL_ENV]
    auth = {"Authorization": f"Bearer {SECRET}"}
    async with aiohttp.ClientSession(headers=auth) as session:
        async with session.get(f"{base}/v1/paris") as answer:
            paris = await answer.json()
        async with session.get(f"{base}/v1/gz/oslo") as answer:
            oslo = await answer.json()
        hours = []
        async with session.get(f"{base}/v1/stream/oslo") as answer:
            async for line in answer.content:
                hours.append(json.loads(line))
        booked = await book("paris")
    coldest = min(h["temp_c"] for h in hours)
    if oslo["temp_c"] < 0 and coldest < 0 and not FIXED["on"]:
        raise ValueError(f"no advice below zero ({oslo['temp_c']}, {coldest})")
    return {"paris": paris["temp_c"], "booked": booked["booked"]}


def trip() -> dict[str, Any]:
    """The agent: the weather of two cities (one gzipped), the hours streamed, a booking;
    it fails below zero."""
    return asyncio.run(_trip())


def test_aiohttp_exchanges_are_recorded_and_replay_with_the_server_stopped(
    tmp_path: Path, server: ThreadingHTTPServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """Four exchanges recorded (the gzipped body decoded, the streamed one whole, the
    bearer token a placeholder and on disk nowhere, the last inside a tool's call), nothing
    named on stderr; with the server stopped the replay answers each from the recording:
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
        ("GET", "oslo", 200),
        ("POST", "book", 200),
    ]
    assert exchanges[1].response_body == {"city": "oslo", "temp_c": -3}
    assert "content-encoding" not in exchanges[1].response_headers
    assert isinstance(exchanges[2].response_body, str)
    assert len(exchanges[2].response_body.splitlines()) == 3
    assert exchanges[0].request_headers["authorization"].startswith("Bearer <redacted:")
    assert exchanges[3].request_body == {"city": "paris"}
    (tool,) = [e for e in store.load_events(rec.run_id) if isinstance(e, ToolCall)]
    assert exchanges[3].parent_span == tool.span
    assert SECRET.encode() not in bytes_on_disk(tmp_path / "store")
    assert not [x for x in capsys.readouterr().err.splitlines() if x.startswith("sandbox:")]
    reproduced_then_gone(rec.run_id, store, FIXED)


def test_a_session_made_before_the_run_is_recorded_inside_it_only(
    tmp_path: Path, server: ThreadingHTTPServer
) -> None:
    """A session made as a service starts (no run yet) is recorded in the run that uses
    it, not outside; a body left unread is recorded at the run's end as read so far, with
    the error that says so."""
    store = DirectoryStore(tmp_path / "store")
    base = os.environ[URL_ENV]

    async def serve() -> str:
        async with aiohttp.ClientSession() as session:
            async with session.get(f"{base}/v1/paris") as answer:  # outside any run
                await answer.read()
            with capture.run("shared", store=store, packages=False) as rec:
                async with session.get(f"{base}/v1/oslo") as answer:
                    assert (await answer.json())["temp_c"] == -3
                unread = await session.get(f"{base}/v1/stream/oslo")
                await unread.content.readline()
            unread.release()
            return rec.run_id

    run_id = asyncio.run(serve())
    exchanges = [e for e in store.load_events(run_id) if isinstance(e, HTTPExchange)]
    assert [e.url.rsplit("/", 2)[-2:] for e in exchanges] == [["v1", "oslo"], ["stream", "oslo"]]
    assert exchanges[0].error is None and exchanges[0].response_body == {
        "city": "oslo",
        "temp_c": -3,
    }
    unread = exchanges[1]
    assert unread.error is not None and unread.error.type == "IncompleteRead"
    assert str(unread.response_body).startswith('{"hour": 0')
