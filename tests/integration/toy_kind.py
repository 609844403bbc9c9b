"""A toy service kind, whole in this one module: ``memo``, one text value held by a server.

It proves that adding a kind touches one module: its state operations, its binding
(``MEMO_URL``) and its container (a Redis server from the ``redis`` image, holding the value
under one key) all live here, and the sandbox brings it up from this descriptor alone.
A kind's module ends with ``register(KIND)``; this one is registered only while a test that
uses it runs (:func:`memo_registered`), so every other test sees the built-in kinds alone."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import ClassVar

import redis
from pydantic import JsonValue

from sandbox.services.base import DESCRIBE_LIMIT, CapturedState, register, unregister
from sandbox.services.descriptor import ContainerSpec, KindBinding, Storage
from sandbox.snapshot.hashing import sha256_bytes

KEY = "memo"


def _url(host: str, port: int, database: str) -> str:
    return f"redis://{host}:{port}/{database}"


def _ready(url: str) -> bool:
    client = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2)
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False
    finally:
        client.close()


def _read(endpoint: str) -> bytes | None:
    with redis.Redis.from_url(endpoint) as client:
        value = client.get(KEY)
    return None if value is None else bytes(value)


def _text(data: bytes | None) -> dict[str, JsonValue]:
    return {KEY: None if data is None else data.decode("utf-8", "replace")}


class MemoKind:
    """The memo's bytes are its dump; no memo is the empty dump."""

    name: ClassVar[str] = "memo"
    binding: ClassVar[KindBinding] = KindBinding(env="MEMO_URL")
    container: ClassVar[ContainerSpec | None] = ContainerSpec(
        image="redis",
        port=6379,
        user="redis",
        server_major=7,
        default_database="0",
        url=_url,
        ready=_ready,
        storage=Storage(path=None, copies=1, base_mib=0, memory_mib=64),
        pids_limit=32,
        tmpfs={"/tmp": "rw,size=8m,mode=1777"},
    )

    def __init__(self) -> None:
        self._points: dict[str, bytes | None] = {}

    def capture(self, endpoint: str) -> CapturedState:
        data = _read(endpoint) or b""
        return CapturedState(data=data, state_hash=sha256_bytes(data), media_type="text/plain")

    def restore(self, endpoint: str, data: bytes) -> None:
        with redis.Redis.from_url(endpoint) as client:
            if data:
                client.set(KEY, data)
            else:
                client.delete(KEY)

    def state_hash(self, endpoint: str) -> str:
        return sha256_bytes(_read(endpoint) or b"")

    def mark_restore_point(self, endpoint: str) -> None:
        self._points[endpoint] = _read(endpoint)

    def reset(self, endpoint: str) -> None:
        self.restore(endpoint, self._points[endpoint] or b"")

    def describe(self, endpoint: str, *, limit: int = DESCRIBE_LIMIT) -> dict[str, JsonValue]:
        return _text(_read(endpoint))

    def describe_data(
        self, endpoint: str, data: bytes, *, limit: int = DESCRIBE_LIMIT
    ) -> dict[str, JsonValue]:
        return _text(data or None)


KIND = MemoKind()


@contextmanager
def memo_registered() -> Iterator[MemoKind]:
    """The toy kind registered for the block."""
    register(KIND)
    try:
        yield KIND
    finally:
        unregister(KIND.name)


class MemoHarness:
    """What the service-kind contract test needs to drive the kind (one database a memo)."""

    def __init__(self, server: str) -> None:
        self.server = server
        self.dbs = iter(range(1, 16))

    def new_endpoint(self) -> str:
        endpoint = f"{self.server}/{next(self.dbs)}"
        redis.Redis.from_url(endpoint).flushdb()
        return endpoint

    def populate(self, endpoint: str) -> None:
        redis.Redis.from_url(endpoint).set(KEY, "buy milk")

    def mutate(self, endpoint: str, step: int) -> None:
        client = redis.Redis.from_url(endpoint)
        if step % 2:
            client.delete(KEY)
        else:
            client.set(KEY, "buy oat milk")
