"""A scripted model behind two OpenAI wire formats and Gemini's, on 127.0.0.1 (port 0): chat
completions (``POST /v1/chat/completions``), the Responses API (``POST /v1/responses``, plain
or streamed as server-sent events, the Responses API's events written by its module,
:mod:`sandbox.seam.apis.openai_responses`) and Gemini's ``POST
/v1beta/models/MODEL:generateContent`` (and ``:streamGenerateContent?alt=sse``).

The agents talk to it with the real ``openai`` client, so nothing about the HTTP exchange is
faked: capture records it at the transport as it would record a provider. The script is a
function from the conversation so far (as chat messages, whichever API carried it) to the
next assistant message; each wire format reads its request into that conversation and
renders the script's reply in its own shape.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from sandbox.seam.apis import gemini, openai_responses

MODEL = "scripted-1"
Script = Callable[[list[dict[str, Any]]], dict[str, Any]]
"""Messages -> ``{"content": str}`` or ``{"tool_calls": [{"name", "arguments"}]}``."""
RECEIVED: list[dict[str, Any]] = []
"""Every request body the scripted models of this process were sent, in order (what a test
checks a live model call against)."""


class _Server(ThreadingHTTPServer):
    request_queue_size = 128
    """Connections waiting to be accepted (the default, 5, refuses a burst of clients)."""


def completion(reply: dict[str, Any], turn: int) -> dict[str, Any]:
    calls = [
        {
            "id": f"call_{turn}_{i}",
            "type": "function",
            "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])},
        }
        for i, c in enumerate(reply.get("tool_calls") or [])
    ]
    message: dict[str, Any] = {"role": "assistant", "content": reply.get("content")}
    if calls:
        message["tool_calls"] = calls
    return {
        "id": f"chatcmpl-{turn}",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": MODEL,
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def responses_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    """A Responses API request (``instructions`` and ``input`` items) as the chat messages the
    script reads, as the Responses API's module reads them."""
    api = openai_responses.API
    return api.chat_messages(api.parse_request("", body).messages)


def response(reply: dict[str, Any], turn: int) -> dict[str, Any]:
    """The script's reply as a Responses API response: a ``message`` output item for its
    text, a ``function_call`` item for each tool call."""
    output: list[dict[str, Any]] = []
    if reply.get("content"):
        text = {"type": "output_text", "text": reply["content"], "annotations": []}
        output.append(openai_responses.message_item(f"msg_{turn}", [text]))
    for i, c in enumerate(reply.get("tool_calls") or []):
        arguments = json.dumps(c["arguments"])
        output.append(
            openai_responses.function_call_item(
                f"fc_{turn}_{i}", f"call_{turn}_{i}", c["name"], arguments
            )
        )
    return {
        "id": f"resp_{turn}",
        "object": "response",
        "created_at": 1_700_000_000,
        "model": MODEL,
        "status": "completed",
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": 10,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 15,
        },
    }


def gemini_messages(path: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """A Gemini request as the chat messages the script reads (a function's ``{"result": x}``
    response as the tool message ``x``)."""
    api = gemini.API
    messages: list[dict[str, Any]] = api.chat_messages(api.parse_request(path, body).messages)
    for message in messages:
        if message.get("role") == "tool":
            answer = json.loads(message["content"])
            if isinstance(answer, dict) and set(answer) == {"result"}:
                message["content"] = json.dumps(answer["result"])
    return messages


def gemini_response(reply: dict[str, Any], turn: int) -> dict[str, Any]:
    """The script's reply as a Gemini response: one candidate, a ``text`` part for its text,
    a ``functionCall`` part for each tool call."""
    parts: list[dict[str, Any]] = [{"text": reply["content"]}] if reply.get("content") else []
    parts += [
        {"functionCall": {"name": c["name"], "args": c["arguments"]}}
        for c in reply.get("tool_calls") or []
    ]
    return {
        "candidates": [
            {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
        "modelVersion": MODEL,
        "responseId": f"gemini-{turn}",
    }


def _answer(path: str, body: dict[str, Any], script: Script) -> tuple[str, bytes]:
    """The scripted answer to a request on ``path``: its content type and body."""
    route = path.split("?", 1)[0]
    if gemini.ENDPOINT.search(route):
        messages = gemini_messages(route, body)
        answer = gemini_response(script(messages), _turn_of(messages))
        if ":streamGenerateContent" in route:
            return "text/event-stream", gemini.API.stream_text(answer).encode()
        return "application/json", json.dumps(answer).encode()
    if path.rstrip("/").endswith("/responses"):
        messages = responses_messages(body)
        reply, turn = script(messages), _turn_of(messages)
        if body.get("stream"):
            stream = openai_responses.API.stream_text(response(reply, turn))
            return "text/event-stream", stream.encode()
        return "application/json", json.dumps(response(reply, turn)).encode()
    messages = body.get("messages", [])
    return "application/json", json.dumps(completion(script(messages), _turn_of(messages))).encode()


def _turn_of(messages: list[dict[str, Any]]) -> int:
    return sum(1 for m in messages if m.get("role") == "assistant")


def serve_model(script: Script, port: int = 0) -> tuple[str, Callable[[], None]]:
    """Serve ``script`` on 127.0.0.1 (on ``port``, 0: any free one); return its base URL and
    the function that stops it."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            RECEIVED.append(body)
            content_type, data = _answer(self.path, body, script)
            self.send_response(200)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            return None

    server = _Server(("127.0.0.1", port), Handler)
    thread = threading.Thread(target=server.serve_forever, name="scripted-model", daemon=True)
    thread.start()

    def stop() -> None:
        server.shutdown()
        server.server_close()

    return f"http://127.0.0.1:{server.server_address[1]}", stop


@contextmanager
def scripted_model(script: Script) -> Iterator[Any]:
    """Serve ``script``; yield an ``openai.OpenAI`` client pointed at it."""
    import openai

    url, stop = serve_model(script)
    try:
        yield openai.OpenAI(
            base_url=f"{url}/v1", api_key="sk-local-scripted-model-key", max_retries=0
        )
    finally:
        stop()


def tool_spec(name: str, description: str, properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": list(properties),
            },
        },
    }


def last_tool_results(messages: list[dict[str, Any]]) -> list[str]:
    """Contents of the tool messages after the last assistant message."""
    out: list[str] = []
    for message in reversed(messages):
        if message.get("role") != "tool":
            break
        out.append(str(message.get("content")))
    return list(reversed(out))


def serve_http(
    handler: Callable[[str, dict[str, Any]], tuple[int, dict[str, Any]]],
    name: str,
    port: int = 0,
) -> tuple[str, Callable[[], None]]:
    """A tiny JSON service on 127.0.0.1 (a stand-in for a production dependency), on
    ``port`` (0: any free one); returns its base URL and the function that stops it."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            status, payload = handler(self.path, body)
            data = json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except OSError:  # the client gave up (a timeout)
                pass

        def log_message(self, format: str, *args: Any) -> None:
            return None

    server = _Server(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, name=name, daemon=True).start()

    def stop() -> None:
        server.shutdown()
        server.server_close()

    return f"http://127.0.0.1:{server.server_address[1]}", stop


def agent_loop(
    client: Any,
    system: str,
    user: str,
    tools: list[dict[str, Any]],
    impls: dict[str, Callable[..., Any]],
    *,
    concurrent: bool = False,
    max_turns: int = 8,
) -> str:
    """The usual loop: ask the model, run the tool calls it makes (in threads named
    ``worker-1``, ``worker-2`` ... when ``concurrent``), hand back the results, until it
    answers in text."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": system},
        {"role": "user", "content": user},
    ]
    for _ in range(max_turns):
        response = client.chat.completions.create(
            model=MODEL, messages=messages, tools=tools, temperature=0
        )
        message = response.choices[0].message
        if not message.tool_calls:
            return str(message.content or "")
        messages.append(
            {
                "role": "assistant",
                "content": message.content,
                "tool_calls": [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.function.name, "arguments": c.function.arguments},
                    }
                    for c in message.tool_calls
                ],
            }
        )
        calls = [
            (c.id, c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls
        ]
        results = run_tools([(name, args) for _, name, args in calls], impls, concurrent)
        for (call_id, _, _), result in zip(calls, results, strict=True):
            messages.append(
                {"role": "tool", "tool_call_id": call_id, "content": json.dumps(result)}
            )
    return ""


def run_tools(
    calls: list[tuple[str, dict[str, Any]]],
    impls: dict[str, Callable[..., Any]],
    concurrent: bool,
) -> list[Any]:
    """Run tool calls in order, or each in its own named thread; re-raise the first error."""
    results: list[Any] = [None] * len(calls)
    errors: list[BaseException | None] = [None] * len(calls)

    def run(i: int) -> None:
        name, args = calls[i]
        try:
            results[i] = impls[name](**args)
        except BaseException as exc:
            errors[i] = exc

    if concurrent:
        threads = [
            threading.Thread(target=run, args=(i,), name=f"worker-{i + 1}")
            for i in range(len(calls))
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    else:
        for i in range(len(calls)):
            run(i)
    for error in errors:
        if error is not None:
            raise error
    return results
