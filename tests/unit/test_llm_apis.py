"""The model-API registry: the built-in APIs, and one a plug-in adds through the
``sandbox_replayer.llm_apis`` entry-point group (a distribution installed for the test),
which capture then reads model calls with, as it does the built-in ones."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest

from examples._model import serve_http
from sandbox import capture
from sandbox.seam import llm
from sandbox.seam.apis.openai_chat import ChatCompletions
from sandbox.snapshot.events import LLMCall
from sandbox.snapshot.store import DirectoryStore

GEMINI = "https://generativelanguage.googleapis.com"
PLUGIN = """
from sandbox.seam.apis.openai_chat import ChatCompletions


class EchoChat(ChatCompletions):
    name = "echo.chat"
    provider = "echo"
    client = None

    def recognises(self, method, url, headers):
        return method == "POST" and url.split("?")[0].endswith("/echo/complete")


API = EchoChat()
"""


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A distribution on ``sys.path`` whose entry point names the ``echo.chat`` API."""
    (tmp_path / "echo_llm_api.py").write_text(textwrap.dedent(PLUGIN))
    info = tmp_path / "echo_llm_api-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: echo-llm-api\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[{llm.ENTRY_POINT_GROUP}]\necho = echo_llm_api:API\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    llm.reload()
    yield
    monkeypatch.undo()
    llm.reload()


def test_the_built_in_apis_are_registered_each_recognising_its_own_endpoint() -> None:
    names = [a.name for a in llm.apis()]
    assert names[:3] == ["openai.chat", "openai.responses", "anthropic.messages"]
    for url, name in [
        ("https://api.openai.com/v1/chat/completions", "openai.chat"),
        ("https://api.openai.com/v1/responses", "openai.responses"),
        ("https://api.anthropic.com/v1/messages", "anthropic.messages"),
        (f"{GEMINI}/v1beta/models/gemini-2.5-flash:generateContent", "gemini.generate_content"),
        (
            f"{GEMINI}/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
            "gemini.generate_content",
        ),
    ]:
        found = llm.recognise("POST", url)
        assert found is not None and found.name == name
        assert llm.recognise("GET", url) is None
    assert llm.recognise("POST", "https://api.example.com/v1/orders") is None
    assert llm.recognise("POST", f"{GEMINI}/v1beta/models/gemini-2.5-flash:countTokens") is None
    assert all(isinstance(a, llm.LLMApi) for a in llm.apis())


class _ByHeader(ChatCompletions):
    """A chat API told apart by a header: a subclass overriding ``recognises`` without
    marking it ``url_only``."""

    name = "by.header"

    def recognises(self, method: str, url: str, headers: Mapping[str, str]) -> bool:
        return headers.get("x-api-flavour") == "by-header"


def test_an_api_reading_headers_is_asked_with_them_every_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The answers for a method and URL are remembered only while every API reads no
    headers: one that does (a subclass of a built-in one overriding ``recognises``) is
    asked with each request's headers."""
    url = "https://api.example.com/v1/anything"
    assert llm.recognise("POST", url) is None
    assert llm.recognise("POST", url) is None  # remembered: the built-in APIs are url_only
    monkeypatch.setattr(llm, "_registry", [_ByHeader(), *llm.apis()])
    found = llm.recognise("POST", url, {"x-api-flavour": "by-header"})
    assert found is not None and found.name == "by.header"
    assert llm.recognise("POST", url, {}) is None
    again = llm.recognise("POST", url, {"x-api-flavour": "by-header"})
    assert again is not None and again.name == "by.header"


def test_an_entry_point_api_is_registered_after_the_built_in_ones(plugin: None) -> None:
    names = [a.name for a in llm.apis()]
    assert names[-1] == "echo.chat" and "openai.chat" in names
    found = llm.recognise("POST", "http://127.0.0.1:9/echo/complete")
    assert found is not None and found.name == "echo.chat"
    assert llm.api("echo.chat") is found


def test_capture_reads_a_plug_in_api_s_model_calls(plugin: None, tmp_path: Path) -> None:
    def answer(path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        message = {"role": "assistant", "content": f"echo: {body['messages'][-1]['content']}"}
        return 200, {"id": "e-1", "model": body["model"], "choices": [{"message": message}]}

    url, stop = serve_http(answer, "echo-model")
    store = DirectoryStore(tmp_path / "store")
    try:
        with capture.run("echo", store=store, seed=1) as rec:
            body = {"model": "echo-1", "messages": [{"role": "user", "content": "hi"}]}
            httpx.post(f"{url}/echo/complete", json=body, timeout=10).raise_for_status()
    finally:
        stop()
    (call,) = [e for e in store.load_events(rec.run_id) if isinstance(e, LLMCall)]
    assert call.provider_meta["api"] == "echo.chat" and call.provider == "echo"
    assert call.model == "echo-1" and call.messages == body["messages"]
    assert isinstance(call.response, dict) and call.response["text"] == "echo: hi"


class _Unhashable(ChatCompletions):
    """A plug-in API that cannot be hashed (a dataclass with ``eq`` makes one)."""

    name = "un.hashable"
    __hash__ = None  # type: ignore[assignment]

    @llm.url_only
    def recognises(self, method: str, url: str, headers: Mapping[str, str]) -> bool:
        return url.endswith("/unhashable")


def test_an_api_that_cannot_be_hashed_is_still_recognised(monkeypatch: pytest.MonkeyPatch) -> None:
    """Remembering answers needs the registry hashed; with an API that cannot be, each
    request is asked about instead, with the same answers."""
    monkeypatch.setattr(llm, "_registry", [_Unhashable(), *llm.apis()])
    found = llm.recognise("POST", "https://api.example.com/unhashable")
    assert found is not None and found.name == "un.hashable"
    assert llm.recognise("POST", "https://api.example.com/v1/orders") is None
