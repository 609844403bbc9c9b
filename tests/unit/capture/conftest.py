"""A local server that speaks the OpenAI and Anthropic wire formats (JSON and SSE), a local
echo server, and a full disk."""

from __future__ import annotations

import gzip
import itertools
import json
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class FakeAPI:
    url: str
    requests: list[Seen] = field(default_factory=list)


def _openai_chat(body: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "chatcmpl-42",
        "object": "chat.completion",
        "created": 1700000000,
        "model": body["model"],
        "system_fingerprint": "fp_test_123",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": "The order ships Tuesday.",
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "lookup_order", "arguments": '{"id": 7}'},
                        }
                    ],
                },
                "finish_reason": "tool_calls",
                "logprobs": None,
            }
        ],
        "usage": {"prompt_tokens": 11, "completion_tokens": 5, "total_tokens": 16},
    }


def _openai_chunks(body: dict[str, Any]) -> list[bytes]:
    base = {
        "id": "chatcmpl-43",
        "object": "chat.completion.chunk",
        "created": 1700000001,
        "model": body["model"],
        "system_fingerprint": "fp_stream_9",
    }
    deltas: list[dict[str, Any]] = [
        {"role": "assistant", "content": ""},
        {"content": "Hel"},
        {"content": "lo "},
        {"content": "world"},
        {
            "tool_calls": [
                {
                    "index": 0,
                    "id": "call_9",
                    "type": "function",
                    "function": {"name": "refund", "arguments": '{"amount"'},
                }
            ]
        },
        {"tool_calls": [{"index": 0, "function": {"arguments": ": 5}"}}]},
    ]
    out = []
    for i, delta in enumerate(deltas):
        finish = "tool_calls" if i == len(deltas) - 1 else None
        chunk = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        out.append(f"data: {json.dumps(chunk)}\n\n".encode())
    usage = {
        **base,
        "choices": [],
        "usage": {"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13},
    }
    out.append(f"data: {json.dumps(usage)}\n\n".encode())
    out.append(b"data: [DONE]\n\n")
    return out


def _anthropic_message(body: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": body["model"],
        "content": [
            {"type": "text", "text": "Refund issued."},
            {"type": "tool_use", "id": "toolu_1", "name": "refund", "input": {"amount": 5}},
        ],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 20, "output_tokens": 7},
    }


def _anthropic_events(body: dict[str, Any]) -> list[bytes]:
    events: list[tuple[str, dict[str, Any]]] = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_02",
                    "type": "message",
                    "role": "assistant",
                    "model": body["model"],
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 12, "output_tokens": 1},
                },
            },
        ),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "Bon"},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "jour"},
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 3},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return [f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events]


def make_handler(api: FakeAPI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _body(self) -> Any:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                return json.loads(raw) if raw else None
            except ValueError:
                return raw.decode()

        def _json(self, data: Any, status: int = 200) -> None:
            raw = json.dumps(data).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(raw)))
            self.send_header("set-cookie", "session=topsecretcookievalue")
            self.end_headers()
            self.wfile.write(raw)

        def _sse(self, chunks: list[bytes]) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            for chunk in chunks:
                self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")

        def do_GET(self) -> None:
            api.requests.append(Seen("GET", self.path, dict(self.headers), None))
            self._json({"path": self.path, "ok": True})

        def do_POST(self) -> None:
            body = self._body()
            api.requests.append(Seen("POST", self.path, dict(self.headers), body))
            path = self.path.split("?")[0]
            if path.endswith("/chat/completions"):
                if body.get("stream"):
                    self._sse(_openai_chunks(body))
                else:
                    self._json(_openai_chat(body))
            elif path.endswith("/messages"):
                if body.get("stream"):
                    self._sse(_anthropic_events(body))
                else:
                    self._json(_anthropic_message(body))
            else:
                self._json({"echo": body})

    return Handler


@pytest.fixture(scope="session")
def fake_api() -> Iterator[FakeAPI]:
    api = FakeAPI(url="")
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(api))
    server.daemon_threads = True
    api.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield api
    server.shutdown()
    server.server_close()


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A 128 KiB tmpfs: room for a run's folder, none for a large output."""
    where = tmp_path / "disk"
    where.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=128k", "tmpfs", str(where)],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=False)


_ANSWERS = itertools.count(1)


class _EchoHandler(BaseHTTPRequestHandler):
    """Answers a POST with its JSON body echoed (and its ``x-trace`` header), numbered in
    ``x-answer``; ``/gzip`` compressed, ``/big`` padded with 400 kB."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = json.loads(self.rfile.read(length) or b"null")
        answer: dict[str, Any] = {"echo": body, "trace": self.headers.get("x-trace")}
        if self.path == "/big":
            answer["padding"] = "p" * 400_000
        raw = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("x-answer", str(next(_ANSWERS)))
        if self.path == "/gzip":
            raw = gzip.compress(raw)
            self.send_header("content-encoding", "gzip")
        self.send_header("content-length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)


@pytest.fixture
def url() -> Iterator[str]:
    """A local echo server (:class:`_EchoHandler`)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _EchoHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
