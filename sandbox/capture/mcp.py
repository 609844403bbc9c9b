"""Zero-code capture of MCP clients (the official ``mcp`` SDK), at ``ClientSession`` level.

:func:`patch_mcp` patches, once ``mcp`` is imported (a post-import hook: importing the SDK
costs about a second, so a run that never uses it never pays for it):

* ``ClientSession.send_request``, through which every typed request goes (``initialize``,
  ``tools/list``, ``tools/call``, ``resources/read``, ``prompts/get`` ...). Each request
  crosses the seam as a ``tool`` call: ``tools/call`` named ``mcp:SERVER/TOOL`` with the
  tool's arguments and its schema from the last ``tools/list``, every other request named
  ``mcp:SERVER:METHOD`` with its params. The event carries :class:`MCPInfo` (server,
  method, transport); its ``output`` is the result as JSON text, in the server's key order
  (see :func:`result_json`), which replay validates back into the SDK's result type;
* the transports ``stdio_client`` and ``streamable_http_client`` (the module attributes
  and every name already bound to them), to know which server a session talks to (its
  command, or its URL without credentials) and, on replay, to serve a recorded server
  without starting its process or reaching its URL: the boundary (see :class:`MCPServing`)
  says whether the server is recorded or live. The HTTP transport's own exchanges are not
  captured a second time as ``http`` events.

``SERVER`` is the ``serverInfo.name`` the server gave at ``initialize``, with characters
other than letters, digits, ``.``, ``_`` and ``-`` replaced by ``-``.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import re
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, AbstractContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, JsonValue, TypeAdapter

from sandbox.capture.imports import ImportPatch, Undo
from sandbox.errors import ReplayError
from sandbox.seam import boundary
from sandbox.seam.boundary import BlobReader, Call, Emitter, Outcome, RecordedError
from sandbox.snapshot.events import Event, MCPInfo, ToolCall
from sandbox.snapshot.normalize import request_fingerprint

Reach = Callable[[], AbstractContextManager[None]]
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
UNNAMED = "?"
"""The server name of a session whose ``initialize`` has not answered yet."""


@runtime_checkable
class MCPServing(Protocol):
    """A boundary that decides how an MCP server is reached (replay implements it)."""

    def mcp_server(self, transport: dict[str, JsonValue]) -> tuple[str, bool]:
        """The recorded server reached through ``transport``: its name, and whether it is
        served from the recording (``True``: nothing is started or connected)."""
        ...

    def mcp_reach(self, server: str) -> AbstractContextManager[None]:
        """Entered around each exchange with the live ``server`` over the network (a replay
        lets it through its network guard)."""
        ...

    def mcp_process_env(self, server: str) -> Mapping[str, str]:
        """Variables added to the environment of the live ``server``'s process, when the
        agent starts one (a replay: its frozen clock and seeded entropy)."""
        ...


def server_slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "-", name) or "server"


def event_name(server: str, method: str, tool: str | None = None) -> str:
    """``mcp:SERVER/TOOL`` for a tool call, ``mcp:SERVER:METHOD`` for any other request."""
    return f"mcp:{server}/{tool}" if tool is not None else f"mcp:{server}:{method}"


def server_of(name: str) -> str | None:
    """The server of an event named by :func:`event_name` (``None`` for other names)."""
    if not name.startswith("mcp:"):
        return None
    return re.split(r"[/:]", name[4:], maxsplit=1)[0]


def transport_key(transport: dict[str, JsonValue]) -> str:
    """What identifies a server across machines: the command with paths cut to their base
    names, or the URL with a loopback port dropped (local servers move)."""
    if transport.get("kind") == "stdio":
        command = transport.get("command")
        parts = command if isinstance(command, list) else []
        return "stdio " + " ".join(os.path.basename(str(p)) for p in parts)
    url = urlsplit(str(transport.get("url", "")))
    host = url.hostname or ""
    netloc = "127.0.0.1" if host in LOOPBACK else url.netloc.rpartition("@")[2]
    return "http " + urlunsplit(url._replace(netloc=netloc))


def http_transport(url: str) -> dict[str, JsonValue]:
    parts = urlsplit(url)
    bare = parts._replace(netloc=parts.netloc.rpartition("@")[2])  # credentials dropped
    return {"kind": "http", "url": urlunsplit(bare)}


def stdio_transport(server: Any) -> dict[str, JsonValue]:
    """The command of ``StdioServerParameters``; of its environment only the names."""
    return {
        "kind": "stdio",
        "command": [str(server.command), *(str(a) for a in server.args)],
        "env": sorted(server.env or {}),
    }


@dataclass
class Link:
    """What a session knows about the server behind its streams."""

    transport: dict[str, JsonValue] = field(default_factory=dict)
    server: str = UNNAMED
    recorded: bool = False
    """Served from the recording: no process, no connection behind the streams."""
    schemas: dict[str, JsonValue] = field(default_factory=dict)


_LINKS: dict[int, tuple[object, Link]] = {}
"""Links by ``id`` of the read stream a transport yielded (the stream is kept alive)."""


def result_json(value: object) -> str:
    """A result as the JSON text the server sent (its key order kept: an agent that dumps
    ``structured_content`` into the next model request must send the same bytes on replay,
    and event lines sort their keys)."""
    from sandbox.capture.recorder import jsonable_value

    if isinstance(value, BaseModel):
        return value.model_dump_json(by_alias=True, exclude_none=True)
    return json.dumps(jsonable_value(value))


def recorded_result(event: ToolCall, blobs: BlobReader) -> Any:
    """The result JSON of a recorded MCP request, parsed (key order kept)."""
    raw = blobs(event.output_blob.sha256).decode() if event.output_blob else event.output
    return json.loads(raw) if isinstance(raw, str) else raw


class MCPAdapter:
    """Records one MCP request as a ``tool`` event; replay validates the recorded result
    into the type the SDK expects."""

    def __init__(self, link: Link, method: str, tool: str | None, result_type: Any) -> None:
        self.link = link
        self.method = method
        self.tool = tool
        self.result_type = result_type

    def record(self, call: Call, outcome: Outcome[Any], emitter: Emitter) -> Any:
        fields: dict[str, Any] = {
            "args": call.request if isinstance(call.request, dict) else {},
            "started": call.started,
            "duration": outcome.duration,
        }
        if self.method == "initialize" and outcome.value is not None:
            info = getattr(outcome.value, "server_info", None)
            self.link.server = server_slug(str(getattr(info, "name", "") or ""))
            name = event_name(self.link.server, self.method)
            fields["name"] = name
            fields["fingerprint"] = request_fingerprint("tool", name, call.request)
        fields["mcp"] = MCPInfo(
            server=self.link.server, method=self.method, transport=self.link.transport
        )
        if self.tool is not None:
            schema = self.link.schemas.get(self.tool)
            fields["tool_schema"] = schema if isinstance(schema, dict) else {}
        if outcome.error is not None:
            emitter.emit(ToolCall, call, error=boundary.error_info(outcome.error), **fields)
            return None
        text = result_json(outcome.value)
        if self.method == "tools/list":
            for tool in json.loads(text).get("tools") or []:
                self.link.schemas[str(tool.get("name"))] = tool
        output, blob = emitter.jsonable(text)
        emitter.emit(ToolCall, call, output=output, output_blob=blob, **fields)
        return outcome.value

    def replay(self, call: Call, event: Event, blobs: BlobReader) -> Any:
        assert isinstance(event, ToolCall)
        if event.error is not None:
            raise RecordedError(event.error)
        raw = recorded_result(event, blobs)
        if isinstance(self.result_type, TypeAdapter):
            return self.result_type.validate_python(raw, by_name=False)
        return self.result_type.model_validate(raw, by_name=False)


# --- the patches ---------------------------------------------------------------------------


def _session_patches(session_cls: Any) -> dict[str, Any]:
    orig_init = session_cls.__init__
    orig_send = session_cls.send_request

    def __init__(self: Any, read_stream: Any = None, *args: Any, **kwargs: Any) -> None:
        orig_init(self, read_stream, *args, **kwargs)
        found = _LINKS.get(id(read_stream))
        self.__dict__["_sandbox_mcp"] = found[1] if found is not None else Link()

    async def send_request(self: Any, request: Any, result_type: Any, *a: Any, **kw: Any) -> Any:
        if boundary.current() is None:
            return await orig_send(self, request, result_type, *a, **kw)
        link: Link = self.__dict__.setdefault("_sandbox_mcp", Link())
        data = request.model_dump(by_alias=True, mode="json", exclude_none=True)
        method = str(data.get("method"))
        params: dict[str, JsonValue] = data.get("params") or {}
        tool = str(params.get("name")) if method == "tools/call" else None
        args = params.get("arguments") or {} if tool is not None else params
        name = event_name(link.server, method, tool)

        async def perform() -> Any:
            if link.recorded:
                raise ReplayError(
                    f"MCP server {link.server!r} is served from the recording, which has no "
                    f"answer to {name}; replay with --live mcp:{link.server} to start it"
                )
            return await orig_send(self, request, result_type, *a, **kw)

        adapter = MCPAdapter(link, method, tool, result_type)
        return await boundary.athrough("tool", name, args, perform, adapter)

    return {"__init__": __init__, "send_request": send_request}


@asynccontextmanager
async def _connect(
    transport: dict[str, JsonValue],
    open_real: Callable[[Reach, Mapping[str, str]], AbstractAsyncContextManager[Any]],
) -> AsyncIterator[Any]:
    """Reach the server as the boundary says: the real transport (``open_real(reach, env)``,
    ``env`` the variables for a server process it starts), or (a recorded server on replay)
    a pair of streams with nothing behind them."""
    import anyio

    seam = boundary.current()
    link = Link(transport=transport)
    reach: Reach = contextlib.nullcontext
    env: Mapping[str, str] = {}
    if isinstance(seam, MCPServing):
        link.server, link.recorded = seam.mcp_server(transport)
        reach = functools.partial(seam.mcp_reach, link.server)
        if not link.recorded:
            env = seam.mcp_process_env(link.server)
    if link.recorded:
        feed, read = anyio.create_memory_object_stream[Any](0)
        write, sink = anyio.create_memory_object_stream[Any](math.inf)
        _LINKS[id(read)] = (read, link)
        try:
            yield read, write
        finally:
            _LINKS.pop(id(read), None)
            for stream in (feed, read, write, sink):
                stream.close()
        return
    async with open_real(reach, env) as streams:
        _LINKS[id(streams[0])] = (streams[0], link)
        try:
            yield streams
        finally:
            _LINKS.pop(id(streams[0]), None)


def _stdio_patch(original: Any) -> Any:
    @asynccontextmanager
    async def stdio_client(server: Any, errlog: Any = sys.stderr) -> AsyncIterator[Any]:
        if boundary.current() is None:
            async with original(server, errlog) as streams:
                yield streams
            return

        def real(_: Reach, env: Mapping[str, str]) -> AbstractAsyncContextManager[Any]:
            opened: AbstractAsyncContextManager[Any] = original(_with_env(server, env), errlog)
            return opened

        async with _connect(stdio_transport(server), real) as s:
            yield s

    return stdio_client


def _with_env(server: Any, env: Mapping[str, str]) -> Any:
    """``StdioServerParameters`` whose process also gets ``env`` and the hook that applies it
    (a Python server; another program is started as it is)."""
    from sandbox.capture.children import hook_environment, is_python

    if not env or not is_python([server.command, *server.args]):
        return server
    from mcp.client.stdio import get_default_environment

    base = dict(server.env) if server.env is not None else get_default_environment()
    return server.model_copy(update={"env": hook_environment({**base, **env})})


@asynccontextmanager
async def _unrecorded(given: Any, reach: Reach) -> AsyncIterator[Any]:
    """The HTTP client an MCP transport uses (the agent's, or the SDK's default), with its
    requests kept out of the capture: they are recorded as MCP requests already. (The
    transport sends each request in the context of the session's caller, so a context
    cannot tell them apart: the client's transport does.)"""
    import httpx2
    from mcp.shared._httpx_utils import create_mcp_http_client

    class Unrecorded(httpx2.AsyncBaseTransport):
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        async def handle_async_request(self, request: Any) -> Any:
            with boundary.bypassed(), reach():
                return await self.inner.handle_async_request(request)

        async def aclose(self) -> None:
            await self.inner.aclose()

    client = given if given is not None else create_mcp_http_client()
    inner = client._transport
    client._transport = Unrecorded(inner)
    try:
        if given is None:
            async with client:
                yield client
        else:
            yield client
    finally:
        client._transport = inner


def _http_patch(original: Any) -> Any:
    @asynccontextmanager
    async def streamable_http_client(
        url: str, *, http_client: Any = None, **kwargs: Any
    ) -> AsyncIterator[Any]:
        if boundary.current() is None:
            async with original(url, http_client=http_client, **kwargs) as streams:
                yield streams
            return

        @asynccontextmanager
        async def real(reach: Reach, _env: Mapping[str, str]) -> AsyncIterator[Any]:
            async with (
                _unrecorded(http_client, reach) as client,
                original(url, http_client=client, **kwargs) as streams,
            ):
                yield streams

        async with _connect(http_transport(url), real) as s:
            yield s

    return streamable_http_client


def _rebind(original: object, replacement: object) -> Undo:
    """Point every loaded module's name for ``original`` at ``replacement`` (``from mcp
    import stdio_client`` binds the function before any patch); return the undo."""
    bound: list[tuple[object, str]] = []
    for module in list(sys.modules.values()):
        names = getattr(module, "__dict__", None)
        if not isinstance(names, dict):
            continue
        for attr, value in list(names.items()):
            if value is original:
                setattr(module, attr, replacement)
                bound.append((module, attr))

    def undo() -> None:
        for module, attr in bound:
            if getattr(module, attr, None) is replacement:
                setattr(module, attr, original)

    return undo


def _apply() -> Undo:
    from mcp.client import session, stdio, streamable_http

    cls = session.ClientSession
    originals = {attr: cls.__dict__[attr] for attr in ("__init__", "send_request")}
    undo: list[Undo] = []

    def restore() -> None:
        for step in reversed(undo):
            step()
        for attr, original in originals.items():
            setattr(cls, attr, original)

    for attr, patched in _session_patches(cls).items():
        setattr(cls, attr, patched)
    for module, attr, make in (
        (stdio, "stdio_client", _stdio_patch),
        (streamable_http, "streamable_http_client", _http_patch),
    ):
        original = getattr(module, attr, None)  # not in every SDK version
        if original is not None:
            undo.append(_rebind(original, make(original)))
    return restore


PATCH = ImportPatch("mcp", _apply)


def patch_mcp() -> Undo:
    """Capture MCP client sessions from now on (at once when ``mcp`` is imported, else when
    it is); return the undo function. Patches nest (counted)."""
    return PATCH.start()
