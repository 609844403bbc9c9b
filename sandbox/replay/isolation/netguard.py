"""No way out of a replay: outbound connections and name lookups from the replayed agent are
refused unless they reach the sandbox or a policy names them live.

:class:`NetGuard` patches the Python socket layer for the length of a replayed run:
``socket.socket.connect``/``connect_ex`` (so requests, urllib3, aiohttp, httpx over any
transport, asyncio and raw sockets alike) and ``getaddrinfo``/``gethostbyname`` (DNS). Allowed:

* the sandbox's own services (their ``host:port``, and the addresses those names resolve to);
* servers the replayed agent itself starts listening on during the replay (a loopback
  address and a port it listened on while the guard was installed): they are part of the
  replay, unlike a server that was already running;
* any ``host:port`` that a policy serves live as ``http`` (``--live 'http:api.example.com:443'``,
  or ``--live http`` for every host);
* connections made inside a boundary crossing that a policy serves live as ``llm`` or
  ``http`` (``--live llm``: the model's client reaches its provider), or that is served live
  because the recording has no answer for it (``--miss live``: the user asked for exactly
  that). Only that crossing's connections pass: the recorded calls are still served from the
  recording, and a connection made outside a crossing is refused.

Everything else raises :class:`~sandbox.errors.NetworkRefusedError` naming the host, the port
and the policy to set, and is reported to ``on_refusal`` first, so the run is judged
inconclusive with that reason whatever the agent does with the error. Recorded responses are
served above the socket (at the httpx and aiohttp transports) and never connect. Clients
written in C (libpq under psycopg) open their own sockets: :mod:`sandbox.replay.isolation.redirect`
holds those to the sandbox at the client's API.
"""

from __future__ import annotations

import contextlib
import contextvars
import ipaddress
import socket
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any
from urllib.parse import urlsplit

from sandbox.errors import NetworkRefusedError, ReplayError
from sandbox.replay.serving.policy import Policy, PolicySet

REFUSED_EVENT = "sandbox.replay.refused"
NETWORK_KINDS = frozenset({"llm", "http"})
"""Boundary kinds whose live crossings may open connections."""

_live_crossing: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "sandbox_live_crossing", default=False
)
_LOCALHOST = {"localhost": ("127.0.0.1", "::1")}


@contextlib.contextmanager
def live_crossing(kind: str, policy: Policy | None) -> Iterator[None]:
    """Within the block, a crossing of ``kind`` that ``policy`` serves live (a live policy's,
    or miss mode live's) may open connections."""
    if kind not in NETWORK_KINDS or policy is None or not policy.calls_live:
        yield
        return
    token = _live_crossing.set(True)
    try:
        yield
    finally:
        _live_crossing.reset(token)


def endpoint_of(url: str) -> tuple[str, int] | None:
    """``(host, port)`` of a service URL (``postgresql://u@127.0.0.1:5432/db``); ``None`` for
    a path or a URL without a port."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if not parts.hostname or port is None:
        return None
    return parts.hostname.lower(), port


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        return False
    return True


class NetGuard:
    """Refuses connections and lookups outside ``allowed`` while installed; see the module
    documentation. ``install()`` returns the undo function; guards do not nest."""

    _lock = threading.Lock()
    _active: NetGuard | None = None

    def __init__(
        self,
        allowed: Iterable[tuple[str, int]],
        *,
        policies: PolicySet | None = None,
        on_refusal: Callable[[NetworkRefusedError], None] | None = None,
    ) -> None:
        self.policies = policies or PolicySet()
        self.on_refusal = on_refusal
        self._names: set[str] = set()
        self._allowed: set[tuple[str, int]] = set()
        self._own_ports: set[int] = set()
        for host, port in allowed:
            self._names.add(host.lower())
            self._allowed.add((host.lower(), port))

    # --- the rules -----------------------------------------------------------------------

    def _live_by_policy(self, host: str, port: int | str | None) -> bool:
        name = f"{host}:{port}" if port is not None else host
        return self.policies.policy_for("http", name).calls_live

    def _permits(self, host: str, port: int) -> bool:
        return (
            _live_crossing.get()
            or (host.lower(), port) in self._allowed
            or (port in self._own_ports and _is_loopback(host))
            or self._live_by_policy(host, port)
        )

    def _refuse(self, host: str, port: int | str | None, what: str) -> NetworkRefusedError:
        target = f"{host}:{port}" if port not in (None, "", 0) else host
        error = NetworkRefusedError(
            f"replay refused {what} {target}: it is outside the sandbox (not a restored "
            f"service, not served live by a policy); to reach it live, replay with "
            f"--live 'http:{target}' (or --live http for every host)",
            host=host,
            port=port,
        )
        self.note(error)
        return error

    def note(self, error: NetworkRefusedError) -> None:
        """Report a refusal (this guard's, or a refused database client's)."""
        if self.on_refusal is not None:
            self.on_refusal(error)

    def _check_address(self, family: int, address: Any) -> None:
        if family == socket.AF_UNIX:
            path = address.decode(errors="replace") if isinstance(address, bytes) else address
            if not _live_crossing.get() and not self._live_by_policy(str(path), None):
                raise self._refuse(str(path), None, "a connection to the local socket")
            return
        if family not in (socket.AF_INET, socket.AF_INET6) or not isinstance(address, tuple):
            return
        host, port = str(address[0]), int(address[1])
        if not self._permits(host, port):
            raise self._refuse(host, port, "a connection to")

    def _check_lookup(self, host: Any, port: Any) -> None:
        if host is None:
            return
        name = host.decode() if isinstance(host, bytes) else str(host)
        if _is_ip(name) or name.lower() in self._names or name.lower() in _LOCALHOST:
            return
        if _live_crossing.get() or self._live_by_policy(name, port):
            return
        raise self._refuse(name, port, "a name lookup (DNS) of")

    # --- patching ------------------------------------------------------------------------

    def _resolve_allowed(self) -> None:
        """Add the addresses the allowed names resolve to (before the lookups are patched)."""
        for host, port in list(self._allowed):
            for ip in _LOCALHOST.get(host, ()):
                self._allowed.add((ip, port))
            if _is_ip(host):
                continue
            with contextlib.suppress(OSError):
                for *_, sockaddr in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM):
                    self._allowed.add((str(sockaddr[0]).lower(), port))

    def install(self) -> Callable[[], None]:
        with NetGuard._lock:
            if NetGuard._active is not None:
                raise ReplayError(
                    "a replay is already running in this process: finish it before starting another"
                )
            NetGuard._active = self
        self._resolve_allowed()
        guard = self
        cls = socket.socket
        connect, connect_ex, listen = cls.connect, cls.connect_ex, cls.listen
        getaddrinfo, gethostbyname = socket.getaddrinfo, socket.gethostbyname
        gethostbyname_ex = socket.gethostbyname_ex

        def guarded_connect(sock: socket.socket, address: Any) -> None:
            guard._check_address(sock.family, address)
            connect(sock, address)

        def guarded_connect_ex(sock: socket.socket, address: Any) -> int:
            guard._check_address(sock.family, address)
            return connect_ex(sock, address)

        def noted_listen(sock: socket.socket, *backlog: int) -> None:
            listen(sock, *backlog)
            if sock.family in (socket.AF_INET, socket.AF_INET6):
                guard._own_ports.add(int(sock.getsockname()[1]))

        def guarded_getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
            guard._check_lookup(host, port)
            return getaddrinfo(host, port, *args, **kwargs)

        def guarded_gethostbyname(host: str) -> str:
            guard._check_lookup(host, None)
            return gethostbyname(host)

        def guarded_gethostbyname_ex(host: str) -> Any:
            guard._check_lookup(host, None)
            return gethostbyname_ex(host)

        cls.connect = guarded_connect  # type: ignore[method-assign,assignment]
        cls.connect_ex = guarded_connect_ex  # type: ignore[method-assign,assignment]
        cls.listen = noted_listen  # type: ignore[method-assign,assignment]
        socket.getaddrinfo = guarded_getaddrinfo
        socket.gethostbyname = guarded_gethostbyname
        socket.gethostbyname_ex = guarded_gethostbyname_ex

        def undo() -> None:
            cls.connect = connect  # type: ignore[method-assign]
            cls.connect_ex = connect_ex  # type: ignore[method-assign]
            cls.listen = listen  # type: ignore[method-assign]
            socket.getaddrinfo = getaddrinfo
            socket.gethostbyname = gethostbyname
            socket.gethostbyname_ex = gethostbyname_ex
            with NetGuard._lock:
                NetGuard._active = None

        return undo
