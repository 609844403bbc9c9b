"""A client the capture does not record says so at capture time, in one stderr line naming
it and its version: aiohttp's ``ClientSession`` sending a body it streams, urllib3's own
pools, also in a decorated function; the sandbox's own requests (the Docker engine's) say
nothing; google-genai's async client (over aiohttp), against the scripted model, is
recorded, says nothing and replays."""

from __future__ import annotations

import asyncio
import importlib.metadata
import os
from pathlib import Path

import aiohttp
import openai
import pytest
import requests
from google import genai
from google.genai import types

from examples import _refunds
from examples._model import serve_model
from sandbox import capture
from sandbox.capture import http
from sandbox.replay import replay
from sandbox.snapshot.events import HTTPExchange
from sandbox.snapshot.manifest import Entrypoint
from sandbox.snapshot.store import DirectoryStore


@pytest.fixture(autouse=True)
def _unwarned(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http._PATCH, "warned", set())


def _client(url: str) -> genai.Client:
    return genai.Client(api_key="k", http_options=types.HttpOptions(base_url=url))


GENAI_URL = "GENAI_TEST_URL"


async def _ask_twice() -> None:
    client = _client(os.environ[GENAI_URL])
    for _ in range(2):
        reply = await client.aio.models.generate_content(
            model="gemini-2.5-flash", contents="Refund window for order 17?"
        )
        assert reply.candidates


def ask_twice() -> None:
    """The agent: two model calls with google-genai's async client; it fails on any."""
    asyncio.run(_ask_twice())
    raise ValueError("asked twice")


def test_genai_async_client_is_recorded_at_aiohttp_and_replays_with_the_model_stopped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """google-genai's async client runs on aiohttp: its calls are recorded as ``http``
    events there (aiohttp's capture: ``test_capture_aiohttp.py``), nothing named; with
    the model stopped the replay answers both from the recording, 1/1 with no
    divergence."""
    url, stop = serve_model(_refunds.script)
    monkeypatch.setenv(GENAI_URL, url)
    store = DirectoryStore(tmp_path)
    entry = Entrypoint(kind="callable", target=f"{__name__}:ask_twice")
    try:
        with (
            pytest.raises(ValueError, match="asked twice"),
            capture.run("genai-aio", store=store, entrypoint=entry, packages=False) as rec,
        ):
            ask_twice()
    finally:
        stop()
    assert not [x for x in capsys.readouterr().err.splitlines() if x.startswith("sandbox:")]
    posts = [e for e in store.load_events(rec.run_id) if isinstance(e, HTTPExchange)]
    assert [e.url.rsplit(":", 1)[-1] for e in posts] == ["generateContent"] * 2
    assert all(e.status == 200 and e.response_body for e in posts)
    report = replay(rec.run_id, store=store, times=1)
    assert report.verdict.reproduced == 1, report.describe()
    assert report.divergences == [None], report.describe()


def test_an_aiohttp_body_from_a_file_is_named_once_with_aiohttp_version(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """aiohttp's requests are recorded but one whose body aiohttp streams (a file)."""
    url, stop = serve_model(_refunds.script)
    (tmp_path / "question.json").write_text('{"q": "refund?"}')

    async def post() -> None:
        async with aiohttp.ClientSession() as session:
            for _ in range(2):  # the second says nothing more
                with (tmp_path / "question.json").open("rb") as body:
                    async with session.post(url, data=body) as response:
                        await response.read()

    try:
        asyncio.run(post())  # outside a run: nothing to say
        assert "sandbox:" not in capsys.readouterr().err
        with capture.run("aiohttp", store=DirectoryStore(tmp_path / "store"), packages=False):
            asyncio.run(post())
    finally:
        stop()
    version = importlib.metadata.version("aiohttp")
    lines = [x for x in capsys.readouterr().err.splitlines() if x.startswith("sandbox:")]
    assert lines == [
        f"sandbox: aiohttp {version} with a body from a file, a generator or a form, or a "
        "websocket is not captured: its calls will be refused on replay; send the body as "
        "bytes or JSON"
    ]


def test_a_urllib3_call_in_a_decorated_run_is_named_with_its_version(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """urllib3's own requests are not recorded (``requests``' and botocore's, which go
    through it, are: ``test_capture_requests.py``, ``test_capture_botocore.py``)."""
    import urllib3

    url, stop = serve_model(_refunds.script)
    pool = urllib3.PoolManager()

    def post() -> None:
        pool.request("POST", f"{url}/v1/chat/completions", json={"messages": []}, timeout=10)

    @capture.run("urllib3", store=DirectoryStore(tmp_path), packages=False)
    def main() -> None:
        for _ in range(2):  # the second call says nothing more
            post()

    try:
        post()
        assert "sandbox:" not in capsys.readouterr().err  # outside a run: nothing to say
        main()
    finally:
        stop()
    version = importlib.metadata.version("urllib3")
    lines = [x for x in capsys.readouterr().err.splitlines() if x.startswith("sandbox:")]
    assert lines == [
        f"sandbox: urllib3 {version} is not captured: its calls will be refused on replay; "
        "use httpx"
    ]


def test_the_sandboxs_own_requests_say_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A request made by code of the sandbox's (the Docker SDK's, an object store's: here a
    function of a module named ``sandbox.*``) inside a run is not the run's."""
    url, stop = serve_model(_refunds.script)
    own: dict[str, object] = {"__name__": "sandbox.containers.own", "requests": requests}
    exec("def ping(url):\n    return requests.get(url, timeout=10)\n", own)
    try:
        with capture.run("own", store=DirectoryStore(tmp_path), packages=False):
            own["ping"](url)  # type: ignore[operator]
    finally:
        stop()
    assert "sandbox:" not in capsys.readouterr().err


def test_the_openai_aiohttp_transport_is_captured_and_says_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``DefaultAioHttpClient`` runs on aiohttp too, but its exchanges are recorded."""
    url, stop = serve_model(_refunds.script)

    async def ask() -> None:
        async with openai.AsyncOpenAI(
            base_url=f"{url}/v1", api_key="k", http_client=openai.DefaultAioHttpClient()
        ) as client:
            await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "Refund window for order 17?"}]
            )

    store = DirectoryStore(tmp_path)
    try:
        with capture.run("openai-aiohttp", store=store, packages=False) as rec:
            asyncio.run(ask())
    finally:
        stop()
    assert [e.kind for e in store.load_events(rec.run_id)].count("llm") == 1
    assert "sandbox:" not in capsys.readouterr().err
