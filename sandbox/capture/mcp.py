"""Zero-code capture of MCP clients (the official ``mcp`` SDK), at the layer every client
shares: the JSON-RPC dispatcher of a client session.

:func:`patch_mcp` patches, once ``mcp`` is imported (a post-import hook: importing the SDK
costs about a second, so a run that never uses it never pays for it):

* ``JSONRPCDispatcher.send_raw_request``, through which every request of a client session
  goes, whoever drives it: ``ClientSession``'s typed requests (``initialize``,
  ``tools/list``, ``tools/call``, ``resources/read``, ``prompts/get`` ...), the
  ``server/discover`` probe, and mcp's v2 ``Client`` (which the OpenAI Agents SDK's
  ``MCPServerStdio`` connects through). Each request crosses the seam as a ``tool`` call:
  ``tools/call`` named ``mcp:SERVER/TOOL`` with the tool's arguments and its schema from the
  last ``tools/list``, every other request named ``mcp:SERVER:METHOD`` with its params (the
  protocol's ``_meta`` envelope left out). The event carries :class:`MCPInfo` (server,
  method, transport); its ``output`` is the raw result as JSON text, in the server's key
  order, which replay hands back for the SDK to validate as it validates a server's. On
  mcp 1.x, which has no dispatcher (langchain-mcp-adapters pins it), ``ClientSession``'s
  ``send_request`` is patched instead, the same way (the result recorded as JSON and
  validated again as the session's ``result_type``);
* ``ClientSession.__init__``, so that the dispatcher under a session (built from a
  transport's streams, or handed in by ``Client``) knows the transport behind it (a
  dispatcher no client session owns, a server's, is not recorded; nor is a session over a
  transport none of the patched ones opened, an in-process server's memory streams: one
  stderr line at capture says so);
* the transports ``stdio_client``, ``streamable_http_client`` and ``sse_client`` (the
  module attributes and every name already bound to them), to know which server a session
  talks to (its command, or its URL without credentials) and, on replay, to serve a
  recorded server without starting its process or reaching its URL: the boundary (see
  :class:`MCPServing`) says whether the server is recorded or live. The HTTP transports' own
  exchanges are not captured a second time as ``http`` events.

``SERVER`` is the name the server gave in its handshake (``initialize``'s ``serverInfo``, or
the ``_meta`` stamp of a ``server/discover`` answer), with characters other than letters,
digits, ``.``, ``_`` and ``-`` replaced by ``-``. A handshake request refused before the
server is named (a handshake-era server refusing ``server/discover``) is written under the
name the next answer gives.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import math
import os
import re
import shutil
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager, AbstractContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol, cast, runtime_checkable
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, JsonValue

from sandbox.capture.imports import ImportPatch, Undo
from sandbox.capture.rebind import Rebinder
from sandbox.errors import ReplayError
from sandbox.seam import boundary
from sandbox.seam.boundary import BlobReader, Call, Emitter, Outcome, RecordedError
from sandbox.snapshot.events import Event, MCPInfo, ToolCall
from sandbox.snapshot.normalize import request_fingerprint

Reach = Callable[[], AbstractContextManager[None]]
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
UNNAMED = "?"
"""The server name of a session whose handshake has not answered yet."""
HANDSHAKE = frozenset({"initialize", "server/discover"})
"""The requests whose answer names the server (``serverInfo``)."""
SERVER_INFO_META = "io.modelcontextprotocol/serverInfo"
"""Where a ``server/discover`` answer names its server (in its ``_meta``)."""


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
    """What identifies a server across machines: its command as :func:`command_match` saw it
    (an interpreter by what it is, a path by where it is in the project, other arguments
    as given), or the URL with a loopback port dropped (local servers move)."""
    if transport.get("kind") == "stdio":
        match = transport.get("match")
        if not isinstance(match, list):  # recorded before commands were matched so
            command = transport.get("command")
            match = (
                [_token(str(p), i == 0) for i, p in enumerate(command)]
                if isinstance(command, list)
                else []
            )
        return "stdio " + " ".join(str(p) for p in match)
    url = urlsplit(str(transport.get("url", "")))
    host = url.hostname or ""
    netloc = "127.0.0.1" if host in LOOPBACK else url.netloc.rpartition("@")[2]
    return "http " + urlunsplit(url._replace(netloc=netloc))


_PYTHON = re.compile(r"python[0-9.]*(\.exe)?")
PYTHON = "python"
"""How a Python interpreter (any name, venv or symlink to it) appears in a server's key."""


def _pathlike(arg: str) -> bool:
    return os.path.isabs(arg) or arg.startswith(("./", "../", "~"))


def _token(arg: str, first: bool) -> str:
    """An argument as a recorded command with no machine to resolve it on is matched: an
    interpreter by its name, an absolute or relative path by its base name."""
    if first and _PYTHON.fullmatch(os.path.basename(arg)):
        return PYTHON
    return os.path.basename(arg) if _pathlike(arg) else arg


def _is_interpreter(program: str) -> bool:
    if _PYTHON.fullmatch(os.path.basename(program)):
        return True
    found = shutil.which(program)
    return found is not None and os.path.realpath(found) == os.path.realpath(sys.executable)


def command_match(command: list[str], cwd: str | None) -> list[str]:
    """A stdio server's command as it is matched, on this machine: the program as
    ``python`` when it is a Python interpreter (by name, or because it resolves to this
    one), a path (absolute, ``./``-relative, or a file that exists from ``cwd``) resolved and
    made relative to the project (the current directory) or, outside it, cut to its base
    name; any other argument as given (``--local-timezone Asia/Tokyo``)."""
    where = os.path.join(os.getcwd(), os.path.expanduser(cwd)) if cwd else os.getcwd()
    project = os.path.realpath(os.getcwd())
    out: list[str] = []
    for i, arg in enumerate(command):
        if i == 0 and _is_interpreter(arg):
            out.append(PYTHON)
            continue
        full = os.path.join(where, os.path.expanduser(arg))
        if not (_pathlike(arg) or os.path.exists(full)) or (i == 0 and os.sep not in arg):
            out.append(arg)  # a program found on PATH keeps its name
            continue
        resolved = os.path.realpath(full)
        inside = os.path.commonpath([resolved, project]) == project
        out.append(os.path.relpath(resolved, project) if inside else os.path.basename(resolved))
    return out


def http_transport(url: str) -> dict[str, JsonValue]:
    parts = urlsplit(url)
    bare = parts._replace(netloc=parts.netloc.rpartition("@")[2])  # credentials dropped
    return {"kind": "http", "url": urlunsplit(bare)}


def stdio_transport(server: Any) -> dict[str, JsonValue]:
    """The command of ``StdioServerParameters`` (and how it is matched, see
    :func:`command_match`); of its environment only the names."""
    command = [str(server.command), *(str(a) for a in server.args)]
    cwd = getattr(server, "cwd", None)
    match: list[JsonValue] = list(command_match(command, str(cwd) if cwd else None))
    return {
        "kind": "stdio",
        "command": list(command),
        "env": sorted(server.env or {}),
        "match": match,
    }


@dataclass
class Link:
    """What a session knows about the server behind its streams."""

    transport: dict[str, JsonValue] = field(default_factory=dict)
    server: str = UNNAMED
    recorded: bool = False
    """Served from the recording: no process, no connection behind the streams."""
    schemas: dict[str, JsonValue] = field(default_factory=dict)
    unnamed: list[tuple[MCPAdapter, Call, Outcome[Any], dict[str, Any]]] = field(
        default_factory=list
    )
    """Handshake requests that failed before the server was named (a ``server/discover``
    a handshake-era server refuses): written once the server is named, under its name."""


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


def server_named(method: str, result: Any) -> str | None:
    """The server name a handshake answer gives (``initialize``'s ``serverInfo``, or the
    ``_meta`` stamp of a ``server/discover`` answer), slugged."""
    if method not in HANDSHAKE or not isinstance(result, dict):
        return None
    info = result.get("serverInfo")
    if method == "server/discover":
        meta = result.get("_meta")
        info = meta.get(SERVER_INFO_META) if isinstance(meta, dict) else None
    name = info.get("name") if isinstance(info, dict) else None
    return server_slug(str(name)) if name else None


class MCPAdapter:
    """Records one MCP request (its raw JSON-RPC result) as a ``tool`` event; replay hands
    the recorded result back, which the SDK validates as it validates a server's."""

    def __init__(self, link: Link, method: str, tool: str | None) -> None:
        self.link = link
        self.method = method
        self.tool = tool

    def record(self, call: Call, outcome: Outcome[Any], emitter: Emitter) -> Any:
        link = self.link
        fields: dict[str, Any] = {
            "args": call.request if isinstance(call.request, dict) else {},
            "started": call.started,
            "duration": outcome.duration,
        }
        named = server_named(self.method, outcome.value)
        if link.server == UNNAMED and named is not None:
            link.server = named
            for adapter, before, failed, written in link.unnamed:
                adapter._emit(before, failed, written, emitter)
            link.unnamed.clear()
        if link.server == UNNAMED and self.method in HANDSHAKE and outcome.error is not None:
            link.unnamed.append((self, call, outcome, fields))
            return None
        return self._emit(call, outcome, fields, emitter)

    def _emit(
        self, call: Call, outcome: Outcome[Any], fields: dict[str, Any], emitter: Emitter
    ) -> Any:
        link, method = self.link, self.method
        fields = dict(fields)
        if server_of(call.name) != link.server:  # named after it was sent
            name = event_name(link.server, method)
            fields["name"] = name
            fields["fingerprint"] = request_fingerprint("tool", name, call.request)
        fields["mcp"] = MCPInfo(server=link.server, method=method, transport=link.transport)
        if self.tool is not None:
            schema = link.schemas.get(self.tool)
            fields["tool_schema"] = schema if isinstance(schema, dict) else {}
        if outcome.error is not None:
            emitter.emit(ToolCall, call, error=boundary.error_info(outcome.error), **fields)
            return None
        text = result_json(outcome.value)
        if method == "tools/list":
            for tool in json.loads(text).get("tools") or []:
                link.schemas[str(tool.get("name"))] = tool
        output, blob = emitter.jsonable(text)
        emitter.emit(ToolCall, call, output=output, output_blob=blob, **fields)
        return outcome.value

    def replay(self, call: Call, event: Event, blobs: BlobReader) -> Any:
        assert isinstance(event, ToolCall)
        if event.error is not None:
            raise RecordedError(event.error)
        return recorded_result(event, blobs)


def flush_unnamed(link: Link) -> None:
    """Write the failed handshake requests of a server that was never named (``mcp:?``)."""
    seam = boundary.current()
    pending, link.unnamed = link.unnamed, []
    if not hasattr(seam, "emit"):
        return
    for adapter, call, outcome, fields in pending:
        with contextlib.suppress(Exception):  # the run is ending: capture fails open
            adapter._emit(call, outcome, fields, cast(Emitter, seam))


# --- the patches ---------------------------------------------------------------------------


def _session_patch(session_cls: Any) -> Any:
    """``ClientSession.__init__``: its dispatcher (built from the transport's streams, or
    handed in by mcp's ``Client``; on mcp 1.x the session itself) learns the link of the
    transport behind it."""
    orig_init = session_cls.__init__

    def __init__(self: Any, read_stream: Any = None, *args: Any, **kwargs: Any) -> None:
        orig_init(self, read_stream, *args, **kwargs)
        dispatcher = self.__dict__.get("_dispatcher", self)  # mcp 1.x: the session sends
        owned = getattr(dispatcher, "__dict__", None)
        if owned is None or "_sandbox_mcp" in owned:
            return
        stream = read_stream if read_stream is not None else owned.get("_read_stream")
        found = _LINKS.get(id(stream))
        owned["_sandbox_mcp"] = found[1] if found is not None else None
        if found is None:
            _warn_unlinked()

    return __init__


_WARNED: list[bool] = []
"""Whether the unlinked-session line was written (once per process)."""


def _warn_unlinked() -> None:
    """Say once per process, on stderr, that a run opened a client session over a transport
    the capture does not know (an in-process server's memory streams, a custom transport):
    its requests pass unrecorded, so a replay sends them again (to an in-process server,
    which answers as it did; anywhere else, refused). Fails open."""
    with contextlib.suppress(Exception):
        now = boundary.current()
        if _WARNED or now is None or getattr(now, "replaying", False):
            return
        _WARNED.append(True)
        from importlib.metadata import version

        sys.stderr.write(
            f"sandbox: mcp {version('mcp')} ClientSession over a transport other than "
            "stdio_client, streamable_http_client or sse_client (an in-process server, say) "
            "is not captured: its requests run again on replay\n"
        )


def _dispatcher_patch(dispatcher_cls: Any) -> Any:
    """``JSONRPCDispatcher.send_raw_request``, which every request of a client session goes
    through (``ClientSession``'s typed requests, the ``server/discover`` probe, mcp's v2
    ``Client`` and so the OpenAI Agents SDK's MCP servers): each crosses the seam as a
    ``tool`` call. A dispatcher no client session owns (a server's) passes unrecorded."""
    orig_send = dispatcher_cls.send_raw_request

    async def send_raw_request(
        self: Any, method: str, params: Any, opts: Any = None, **kw: Any
    ) -> Any:
        link: Link | None = vars(self).get("_sandbox_mcp")
        if link is None or boundary.current() is None:
            return await orig_send(self, method, params, opts, **kw)
        return await _through(
            link, method, params, lambda: orig_send(self, method, params, opts, **kw)
        )

    return send_raw_request


def _request_patch(session_cls: Any) -> Any:
    """mcp 1.x's ``ClientSession.send_request`` (there is no dispatcher: the session sends
    each typed request itself and validates the result as ``result_type``): each request
    crosses the seam as :func:`_dispatcher_patch`'s do, its result recorded as JSON and
    validated as ``result_type`` (a recorded one as well as the server's)."""
    orig_send = session_cls.send_request

    async def send_request(self: Any, request: Any, result_type: Any, *a: Any, **kw: Any) -> Any:
        link: Link | None = vars(self).get("_sandbox_mcp")
        if link is None or boundary.current() is None:
            return await orig_send(self, request, result_type, *a, **kw)
        sent = request.model_dump(by_alias=True, mode="json", exclude_none=True)
        method = str(sent.get("method"))

        async def send() -> Any:  # the result as the server sent it, as mcp 2.x hands it
            found = await orig_send(self, request, result_type, *a, **kw)
            return found.model_dump(by_alias=True, mode="json", exclude_none=True)

        return result_type.model_validate(await _through(link, method, sent.get("params"), send))

    return send_request


async def _through(link: Link, method: str, params: Any, send: Callable[[], Awaitable[Any]]) -> Any:
    """One request of a client session across the seam as a ``tool`` call (``send`` sends
    it to the server)."""
    sent: dict[str, JsonValue] = json.loads(json.dumps(dict(params or {}), default=str))
    sent.pop("_meta", None)  # the protocol's envelope, stamped by the session
    tool = str(sent.get("name")) if method == "tools/call" else None
    args = sent.get("arguments") or {} if tool is not None else sent
    name = event_name(link.server, method, tool)

    async def perform() -> Any:
        if link.recorded:
            raise ReplayError(
                f"MCP server {link.server!r} is served from the recording, which has no "
                f"answer to {name}; replay with --live mcp:{link.server} to start it"
            )
        return await send()

    adapter = MCPAdapter(link, method, tool)
    return await boundary.athrough("tool", name, args, perform, adapter)


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
            flush_unnamed(link)


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


def _keep_out(client: Any, reach: Reach) -> Any:
    """Wrap the transport of ``client`` (an httpx2 client an MCP transport sends through) so
    its requests are kept out of the capture: they are recorded as MCP requests already.
    (The transport sends each request in the context of the session's caller, so a context
    cannot tell them apart: the client's transport does.) Returns the transport it wraps."""
    import httpx2

    class Unrecorded(httpx2.AsyncBaseTransport):
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        async def handle_async_request(self, request: Any) -> Any:
            with boundary.bypassed(), reach():
                return await self.inner.handle_async_request(request)

        async def aclose(self) -> None:
            await self.inner.aclose()

    inner = client._transport
    client._transport = Unrecorded(inner)
    return inner


@asynccontextmanager
async def _unrecorded(given: Any, reach: Reach) -> AsyncIterator[Any]:
    """The HTTP client an MCP transport uses (the agent's, or the SDK's default), with its
    requests kept out of the capture (:func:`_keep_out`)."""
    from mcp.shared._httpx_utils import create_mcp_http_client

    client = given if given is not None else create_mcp_http_client()
    inner = _keep_out(client, reach)
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


def _sse_patch(original: Any) -> Any:
    """``sse_client``: the server found by its URL, the requests of the HTTP client its
    ``httpx_client_factory`` makes kept out of the capture."""
    signature = inspect.signature(original)

    @asynccontextmanager
    async def sse_client(url: str, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        if boundary.current() is None:
            async with original(url, *args, **kwargs) as streams:
                yield streams
            return
        bound = signature.bind(url, *args, **kwargs)
        bound.apply_defaults()

        @asynccontextmanager
        async def real(reach: Reach, _env: Mapping[str, str]) -> AsyncIterator[Any]:
            make = bound.arguments["httpx_client_factory"]

            def factory(**options: Any) -> Any:
                client = make(**options)
                _keep_out(client, reach)  # the client is sse_client's own: it closes it
                return client

            given = {**bound.arguments, "httpx_client_factory": factory}
            async with original(**given) as streams:
                yield streams

        async with _connect(http_transport(url), real) as s:
            yield s

    return sse_client


_EARLY = Rebinder()
"""The modules' names for the transports (``from mcp import stdio_client`` binds the
function before any patch: see :mod:`sandbox.capture.rebind`)."""


def _apply() -> Undo:
    from mcp.client import session, sse, stdio, streamable_http

    sends: tuple[Any, str, Callable[[Any], Any]]
    try:
        from mcp.shared import jsonrpc_dispatcher
    except ImportError:  # mcp 1.x: the client session sends its requests itself
        sends = (session.ClientSession, "send_request", _request_patch)
    else:
        sends = (jsonrpc_dispatcher.JSONRPCDispatcher, "send_raw_request", _dispatcher_patch)
    patched = ((session.ClientSession, "__init__", _session_patch), sends)
    originals = [(cls, attr, cls.__dict__.get(attr)) for cls, attr, _ in patched]
    undo: list[Undo] = []

    def restore() -> None:
        for step in reversed(undo):
            step()
        for cls, attr, original in originals:
            if original is None:  # inherited (mcp 1.x's ``send_request``)
                delattr(cls, attr)
            else:
                setattr(cls, attr, original)

    for cls, attr, make in patched:
        setattr(cls, attr, make(cls))
    transports: dict[Any, Any] = {}
    for module, attr, make_transport in (
        (stdio, "stdio_client", _stdio_patch),
        (streamable_http, "streamable_http_client", _http_patch),
        (sse, "sse_client", _sse_patch),
    ):
        original = getattr(module, attr, None)  # not in every SDK version
        if original is not None:
            transports[original] = make_transport(original)
    undo.append(_EARLY.rebind(transports))  # the module's own names and every other's
    return restore


PATCH = ImportPatch("mcp", _apply)


def patch_mcp() -> Undo:
    """Capture MCP client sessions from now on (at once when ``mcp`` is imported, else when
    it is); return the undo function. Patches nest (counted)."""
    return PATCH.start()
