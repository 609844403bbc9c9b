"""Touched-state capture for Redis: only the keys a run touched, each as it was at the run's
first touch of it, so that a run against a database of a million keys keeps three.

At capture (the kind's :meth:`~sandbox.services.redis.RedisKind.pin`, with ``--state
touched`` or ``keep="failed"``) the pin opens nothing on the server: it registers the run
(by its context, :func:`sandbox.seam.boundary.current`) for the database. The redis-py
client hooks (:mod:`sandbox.services.redis.commands`) hand it each command the run sends,
before it is sent; the pin finds the command's keys (the server's own command table,
``COMMAND GETKEYS`` for the commands whose keys move) and, for a key it has not seen yet,
reads its ``DUMP`` payload and ``PTTL`` in one transaction on a connection of its own. A key
that did not exist is kept as absent. Runs sharing one client each keep their own keys:
a command is attributed to the run in whose context it is sent.

When the run is kept, :meth:`PinnedRedis.finish` gives the state before the run (the first
touches, a key-by-key capture: :data:`~sandbox.services.redis.FORMAT`, TTLs as they
remained at first touch) and the end state (the same keys as they are now). A run not kept
cost one ``DUMP``/``PTTL`` per key it touched, nothing else.

On replay the sandbox restores exactly those keys (TTLs run from the restore, on the
sandbox's frozen clock) and confines the server's ``default`` user to them
(:func:`lock`): an ACL key pattern per kept key, and the commands that read the whole
keyspace (:data:`WIDE`) denied. The kind's own connections use a user of their own. A
replayed command that reaches any other key is refused by the server, which logs it; the
replay is then inconclusive with the key named (:func:`outside`), never a silent miss.
"""

from __future__ import annotations

import base64
import contextvars
import secrets
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import redis
from redis._parsers import CommandsParser

from sandbox.errors import ServiceError

STATE_META = "state"
"""Key of the meta saying how the state was captured: ``"touched"``."""
KEYS_META = "keys_of"
"""Key of the meta listing the keys kept (text, or ``base64:...``), at most
:data:`LISTED`."""
COUNT_META = "touched_keys"
"""Key of the meta counting the keys kept."""
WIDE_META = "wide"
"""Key of the meta listing the keyspace-wide commands the run sent (``SCAN`` ...)."""
LISTED = 1000
DOC_KEY = "touched"
"""Key of a key-by-key capture document marking it as a touched capture: ``{"keys": [base64
...], "wide": [...]}`` (the keys kept, present or absent)."""

WIDE = ("keys", "scan", "randomkey", "dbsize", "flushdb", "flushall", "swapdb")
"""Commands whose answer or effect reaches every key: a touched capture cannot keep what
they read, so on replay they are refused (and the replay is inconclusive)."""
ADMIN_USER = "sandbox-replayer"

_inside = contextvars.ContextVar("sandbox_redis_touch_inside", default=False)
"""Set while a pin reads first touches: its own commands are not touches."""


def label(key: bytes) -> str:
    """A key as text, or ``base64:...`` when it is not UTF-8."""
    try:
        return key.decode("utf-8")
    except UnicodeDecodeError:
        return "base64:" + base64.b64encode(key).decode("ascii")


def address(host: object, port: object, db: object) -> str:
    """``host:port/db`` of a database, loopback names folded (the key of the pins)."""
    name = str(host or "localhost").lower()
    if name in ("localhost", "::1", "[::1]"):
        name = "127.0.0.1"
    return f"{name}:{int(str(port or 6379))}/{int(str(db or 0))}"


def _as_bytes(value: object) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, memoryview | bytearray):
        return bytes(value)
    return str(value).encode("utf-8")


class PinnedRedis:
    """One run's first touches of one database (see the module documentation)."""

    def __init__(self, endpoint: str, owner: object | None) -> None:
        self.endpoint = endpoint
        self._server = _server(endpoint)
        self._client = self._server.client
        self.address = self._server.address
        self._lock = threading.Lock()
        self.first: dict[bytes, tuple[bytes | None, int | None]] = {}
        """Key -> its ``DUMP`` payload (``None``: absent) and PTTL at first touch."""
        self.unread: dict[bytes, str] = {}
        """Keys whose first touch could not be read, and why (left out: unkept)."""
        self.wide: list[str] = []
        self._owner = owner
        _register(self)

    def bind(self, owner: object | None) -> None:
        """Take the commands of the run ``owner`` from now on (instead of the one before)."""
        _unregister(self)
        self._owner = owner
        _register(self)

    def unbind(self) -> None:
        """Take no more commands (the run is over)."""
        _unregister(self)

    # --- first touches ------------------------------------------------------------------

    def touch_command(self, args: Sequence[object]) -> None:
        """Note the keys of one command (its name first) before it is sent."""
        if not args:
            return
        token = _inside.set(True)
        try:
            with self._lock:
                name = _as_bytes(args[0]).decode("utf-8", "replace").lower()
                if name in WIDE and name not in self.wide:
                    self.wide.append(name)
                keys = self._keys(args)
                fresh = [k for k in dict.fromkeys(keys) if k not in self.first]
                if fresh:
                    self._read(fresh)
        finally:
            _inside.reset(token)

    @property
    def version(self) -> str:
        return self._server.version

    @property
    def client(self) -> redis.Redis:
        """A client on the pool the pins of this database share (the capture's own)."""
        return self._client

    def _keys(self, args: Sequence[object]) -> list[bytes]:
        parser = self._server.parser()
        words = [_as_bytes(a).decode("utf-8", "surrogateescape") for a in args[:1]]
        found = parser.get_keys(self._client, *words, *args[1:])  # type: ignore[no-untyped-call]
        return [_as_bytes(k) for k in found or ()]

    def _read(self, keys: list[bytes]) -> None:
        try:
            pipe = self._client.pipeline(transaction=True)  # a key's DUMP and PTTL agree
            for key in keys:
                pipe.dump(key)
                pipe.pttl(key)
            answers = pipe.execute()
        except redis.RedisError as exc:
            for key in keys:
                self.unread.setdefault(key, str(exc))
            return
        for i, key in enumerate(keys):
            payload, pttl = answers[2 * i], int(answers[2 * i + 1])
            if payload is None or pttl == -2:
                self.first[key] = (None, None)
            else:
                self.first[key] = (bytes(payload), pttl if pttl >= 0 else None)

    # --- the end of the run ---------------------------------------------------------------

    def now(self) -> dict[bytes, tuple[bytes | None, int | None]]:
        """The kept keys as they are now."""
        keys = list(self.first)
        out: dict[bytes, tuple[bytes | None, int | None]] = {}
        token = _inside.set(True)
        try:
            for start in range(0, len(keys), 500):
                batch = keys[start : start + 500]
                pipe = self._client.pipeline(transaction=True)
                for key in batch:
                    pipe.dump(key)
                    pipe.pttl(key)
                answers = pipe.execute()
                for i, key in enumerate(batch):
                    payload, pttl = answers[2 * i], int(answers[2 * i + 1])
                    present = payload is not None and pttl != -2
                    out[key] = (
                        (bytes(payload), pttl if pttl >= 0 else None)
                        if present
                        else (
                            None,
                            None,
                        )
                    )
        except redis.RedisError as exc:
            raise ServiceError(f"redis at {self.address}: {exc}") from None
        finally:
            _inside.reset(token)
        return out

    def meta(self) -> dict[str, Any]:
        keys = [label(k) for k in self.first]
        out: dict[str, Any] = {
            STATE_META: "touched",
            COUNT_META: len(keys),
            KEYS_META: keys[:LISTED],
        }
        if self.wide:
            out[WIDE_META] = list(self.wide)
        if self.unread:
            out["unread"] = sorted(label(k) for k in self.unread)[:LISTED]
        return out

    def close(self) -> None:
        _unregister(self)


POOL_SIZE = 4
"""Connections the pins of one database share (first touches are read on them)."""


class _Server:
    """What the pins of one database share: a small pool of connections of the capture's
    own, and the server's command table (read once: ``COMMAND`` answers a few hundred
    kilobytes)."""

    def __init__(self, endpoint: str) -> None:
        try:
            pool = redis.BlockingConnectionPool.from_url(
                endpoint, max_connections=POOL_SIZE, timeout=30, socket_timeout=30
            )
        except ValueError as exc:
            raise ServiceError(f"invalid redis endpoint: {exc}") from None
        self.client = redis.Redis(connection_pool=pool)
        kwargs = pool.connection_kwargs
        self.address = address(kwargs.get("host"), kwargs.get("port"), kwargs.get("db"))
        self.version = "unknown"
        self._parser: CommandsParser | None = None
        self._lock = threading.Lock()

    def parser(self) -> CommandsParser:
        with self._lock:
            if self._parser is None:
                token = _inside.set(True)
                try:
                    parser = CommandsParser(self.client)  # type: ignore[no-untyped-call]
                    info: Any = self.client.info("server")
                finally:
                    _inside.reset(token)
                self.version = str(info.get("redis_version", "unknown"))
                self._parser = parser
            return self._parser


_servers: dict[str, _Server] = {}
_servers_lock = threading.Lock()


def _server(endpoint: str) -> _Server:
    """The shared part of the pins of ``endpoint`` (made on first use, kept for the
    process)."""
    with _servers_lock:
        found = _servers.get(endpoint)
        if found is None:
            found = _servers[endpoint] = _Server(endpoint)
        return found


_pins: dict[tuple[int, str], PinnedRedis] = {}
_pins_lock = threading.Lock()


def _register(pin: PinnedRedis) -> None:
    with _pins_lock:
        _pins[(id(pin._owner), pin.address)] = pin


def _unregister(pin: PinnedRedis) -> None:
    with _pins_lock:
        key = (id(pin._owner), pin.address)
        if _pins.get(key) is pin:
            del _pins[key]


def pin_for(owner: object, where: str) -> PinnedRedis | None:
    """The pin of the run ``owner`` (its boundary) on database ``where`` (:func:`address`)."""
    return _pins.get((id(owner), where))


def own() -> contextvars.Token[bool]:
    """Mark this context's commands as the capture's own (reset with :func:`release`)."""
    return _inside.set(True)


def release(token: contextvars.Token[bool]) -> None:
    _inside.reset(token)


def inside() -> bool:
    """Whether a pin is reading first touches in this context (its commands are not)."""
    return _inside.get()


# --- replay: the server confined to the kept keys ----------------------------------------


def _pattern(key: bytes) -> bytes:
    """An ACL key pattern matching ``key`` alone (glob characters escaped)."""
    out = bytearray(b"~")
    for byte in key:
        if byte in b"*?[]\\":
            out += b"\\"
        out.append(byte)
    return bytes(out)


def lock(client: redis.Redis, keys: Iterable[bytes], password: str) -> None:
    """Confine the ``default`` user to ``keys``, deny it :data:`WIDE`, and give the kind a
    user of its own (:data:`ADMIN_USER`, ``password``) that reaches everything."""
    client.execute_command(  # type: ignore[no-untyped-call]
        "ACL", "SETUSER", ADMIN_USER, "reset", "on", f">{password}", "~*", "&*", "+@all"
    )
    client.execute_command(  # type: ignore[no-untyped-call]
        "ACL",
        "SETUSER",
        "default",
        "resetkeys",
        *(_pattern(k) for k in keys),
        *(f"-{name}" for name in WIDE),
    )
    client.execute_command("ACL", "LOG", "RESET")  # type: ignore[no-untyped-call]


def new_password() -> str:
    return secrets.token_hex(16)


def touched_keys(doc: Mapping[str, Any]) -> list[bytes] | None:
    """The keys a touched capture document kept (present or absent), or ``None`` for a
    capture of the whole database."""
    touched = doc.get(DOC_KEY)
    if not isinstance(touched, dict):
        return None
    keys = touched.get("keys")
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        raise ServiceError("redis capture: its list of touched keys is unreadable")
    try:
        return [base64.b64decode(k, validate=True) for k in keys]
    except ValueError:
        raise ServiceError("redis capture: a touched key is not valid base64") from None


def outside(client: redis.Redis) -> list[str]:
    """What the ``default`` user was refused since the last reset (the ACL log), described:
    ``"reached key 'user:9', which the capture did not keep"``, oldest first."""
    entries: Any = client.execute_command("ACL", "LOG")  # type: ignore[no-untyped-call]
    out: list[str] = []
    for raw in reversed(list(entries or [])):
        entry = _pairs(raw)
        if _text(entry.get("username")) != "default":
            continue
        reason, thing = _text(entry.get("reason")), entry.get("object")
        name = label(_as_bytes(thing)) if thing is not None else "?"
        if reason == "key":
            said = f"reached key {name!r}, which the capture did not keep"
        elif reason == "command":
            said = f"sent {name.upper()}, which reads keys the capture did not keep"
        else:
            continue
        if said not in out:
            out.append(said)
    return out


def _pairs(raw: object) -> dict[str, Any]:
    if isinstance(raw, dict):
        return {_text(k): v for k, v in raw.items()}
    items = list(raw) if isinstance(raw, list | tuple) else []
    return {_text(items[i]): items[i + 1] for i in range(0, len(items) - 1, 2)}


def _text(value: object) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def describe_meta(meta: Mapping[str, Any]) -> str | None:
    """``"partial: 3 keys the run touched (a, b, c)"`` for a touched capture, else ``None``."""
    if meta.get(STATE_META) != "touched" or COUNT_META not in meta:
        return None
    keys = [str(k) for k in meta.get(KEYS_META) or []]
    listed = ", ".join(keys[:8]) + (", ..." if len(meta.get(KEYS_META) or []) > 8 else "")
    wide = meta.get(WIDE_META)
    extra = f"; it also sent {', '.join(map(str, wide)).upper()}" if wide else ""
    return f"partial: {meta[COUNT_META]} keys the run touched ({listed}){extra}"
