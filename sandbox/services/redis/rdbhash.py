"""The version-2 state hash (:mod:`sandbox.services.redis.redisstate`) read straight from an RDB's
bytes, without building a Python object per key.

A walk over the file hashes each plain string key where it lies (the common case: a raw or
integer-encoded key and value, the record built from two slices). Every other key (lists,
sets, hashes, sorted sets in any encoding, compressed strings) is only skipped over; those
entries are copied into a small RDB of their own and read by the ``rdb-py`` parser
(:func:`sandbox.services.redis.rdbfile.keys`), their records hashed as before. The sum, the count
and the expiry times are then those of :func:`sandbox.services.redis.redisstate.summarize` over
the whole file. Whatever the walk does not know (an opcode or type it has no rule for, a
file cut short) makes it hand the whole file to that parser instead: the walk is a faster
path to the same hash, never a different one.
"""

from __future__ import annotations

import xxhash

from sandbox.errors import ServiceError
from sandbox.services.redis import rdbfile, redisstate
from sandbox.services.redis.rdbfile import (
    OP_EOF,
    OP_EXPIRETIME_MS,
    OP_SELECTDB,
    encode_length,
    read_length,
    skip_string,
)

_OP_IDLE, _OP_FREQ, _OP_AUX, _OP_RESIZEDB = 0xF8, 0xF9, 0xFA, 0xFB
_STRING = 0
_ONE_BLOB = frozenset({9, 10, 11, 12, 13, 16, 17, 20})
"""Types whose value is one string (ziplist, listpack, intset, zipmap encodings)."""
_MIN_FEED = 1 << 16
_UNREADABLE = frozenset({6, 7, 15, 19, 21})
"""Module types and streams: the parser skips them, so no version-2 hash exists."""


class _Fallback(Exception):
    """The walk met something it has no rule for."""


class _ForeignKey(Exception):
    """A key of another database (the summary is ``None``)."""


def _string(data: bytes, at: int) -> tuple[bytes | None, int]:
    """The string at ``at`` as its logical bytes (an integer in decimal; ``None`` when
    compressed) and the offset after it."""
    first = data[at]
    if 0xC0 <= first <= 0xC2:  # an 8, 16 or 32-bit integer
        width = 1 << (first - 0xC0)
        number = int.from_bytes(data[at + 1 : at + 1 + width], "little", signed=True)
        return b"%d" % number, at + 1 + width
    return skip_string(data, at)


def _skip(data: bytes, at: int) -> int:
    return _string(data, at)[1]


def _skip_value(data: bytes, kind: int, at: int) -> int:
    """The offset after the value of type ``kind`` starting at ``at``."""
    if kind in _ONE_BLOB:
        return _skip(data, at)
    n, at = read_length(data, at)
    if kind in (1, 2, 14):  # list, set, quicklist of ziplists: n strings
        for _ in range(n):
            at = _skip(data, at)
    elif kind == 4:  # hash: n field/value pairs
        for _ in range(2 * n):
            at = _skip(data, at)
    elif kind == 3:  # sorted set, scores as strings (253-255: nan, +inf, -inf)
        for _ in range(n):
            at = _skip(data, at)
            at += 1 + (data[at] if data[at] < 253 else 0)
    elif kind == 5:  # sorted set, scores as 8-byte doubles
        for _ in range(n):
            at = _skip(data, at) + 8
    elif kind == 18:  # quicklist of listpacks: container kind, then the listpack
        for _ in range(n):
            at = _skip(data, read_length(data, at)[1])
    else:
        raise _Fallback
    return at


class _Short(Exception):
    """The step needs bytes that have not come yet."""


class Walk:
    """The hash of a database read from an RDB as it comes: :meth:`feed` its bytes in
    order, then :meth:`result`. A step (an opcode or a key) is taken only once all its
    bytes are there, so the hash is the same however the file is cut."""

    def __init__(self, db: int, *, strict: bool = True) -> None:
        self.db, self.strict = db, strict
        self._buf = b""
        self._at = 0
        self._pending: list[bytes] = []
        self._pending_size = 0
        self._header = b""
        self._done = False
        self._foreign = False
        self._unreadable: rdbfile.Unreadable | None = None
        self._current = -1
        self._hinted: int | None = None
        self._counted = 0
        """Keys of the current database (every key of it, fast or slow)."""
        self._kept = 0
        """Keys of ``db``."""
        self._total = 0
        self._current_is_db = False
        self._expiries: list[int] = []
        self._others: list[bytes] = []
        self.walked = False
        """Set by :meth:`result`: the walk read the whole file (the parser read only the
        keys the walk set aside); else the parser read it all."""

    def feed(self, chunk: bytes) -> None:
        """Walk on with the next bytes of the file."""
        if self._done or self._foreign or self._unreadable is not None:
            return
        self._pending.append(chunk)
        self._pending_size += len(chunk)
        if self._pending_size < max(len(self._buf) - self._at, _MIN_FEED):
            return  # a step waiting for a large value: walk again when twice as much came
        self._buf = b"".join([self._buf[self._at :], *self._pending])
        self._at = 0
        self._pending, self._pending_size = [], 0
        self._walk()

    def result(self, rdb: bytes) -> redisstate.Summary | None:
        """The summary once the whole file, ``rdb``, was fed (see :func:`summarize`)."""
        self._buf = b"".join([self._buf[self._at :], *self._pending])
        self._at, self._pending = 0, []
        if not self._done and not self._foreign and self._unreadable is None:
            self._walk()
        if self._unreadable is not None:
            raise self._unreadable
        if self._foreign:
            return None
        self.walked = self._done and len(self._buf) - self._at == 8
        if not self.walked:
            keys = rdbfile.keys(rdb) if self.strict else rdbfile.keys(rdb, self.db)
            return redisstate.summarize(keys, self.db)
        count, total = self._kept, self._total
        if self._others:
            mini = rdb[:9] + bytes([OP_SELECTDB]) + encode_length(self.db)
            mini += b"".join(self._others) + bytes([OP_EOF]) + bytes(8)
            keys = rdbfile.keys(mini, self.db, expected=len(self._others))
            rest = redisstate.accumulate(keys, self.db)
            assert rest is not None  # the keys of ``mini`` are those of ``db``
            total += rest[0]
        return redisstate.finish(total, count, self._expiries)

    def _walk(self) -> None:
        try:
            if not self._header:
                if len(self._buf) < 9:
                    raise _Short
                if not self._buf.startswith(b"REDIS"):
                    raise _Fallback
                self._header, self._at = self._buf[:9], 9
            self._loop()
            self._done = True
        except _ForeignKey:
            self._foreign = True
        except rdbfile.Unreadable as exc:
            self._unreadable = exc
        except (_Short, _Fallback, ServiceError, IndexError):
            pass  # the next bytes finish the step; at the end, the whole file goes to rdb-py

    def _loop(self) -> None:
        data, db = self._buf, self.db
        size = len(data)
        h = xxhash.xxh3_128_intdigest
        total = fast = 0
        at = self._at
        try:
            while True:
                # The fast loop: a string key without expiry, both raw with 6-bit lengths.
                if self._current_is_db and data[at] == _STRING:
                    n = data[at + 1]
                    if n < 0x40:
                        end = at + 2 + n
                        m = data[end]
                        if m < 0x40:
                            after = end + 1 + m
                            if after > size:
                                raise _Short
                            total += h(
                                b"%d:%bst0%b" % (n, data[at + 2 : end], data[end + 1 : after])
                            )
                            fast += 1
                            at = after
                            continue
                if data[at] == OP_EOF:
                    self._check(fast)
                    at += 1
                    return
                if data[at] == OP_SELECTDB:
                    self._check(fast)
                self._total += total
                self._kept += fast
                self._counted += fast
                total = fast = 0
                at = self._step(at)
                self._current_is_db = self._current == db
        finally:
            self._total += total
            self._kept += fast
            self._counted += fast
            self._at = at

    def _check(self, fast: int) -> None:
        counted = self._counted + fast
        if self._current >= 0 and self._hinted is not None and counted != self._hinted:
            raise rdbfile.Unreadable(
                f"database {self._current} of the RDB snapshot holds {self._hinted} keys, "
                f"{counted} of them readable (streams and module types are not)"
            )

    def _step(self, at: int) -> int:
        """One opcode or key at ``at``; the offset after it."""
        data = self._buf
        op = data[at]
        if op == _OP_AUX:
            return self._within(_skip(data, _skip(data, at + 1)))
        if op == OP_SELECTDB:  # the loop has checked the count of the database before
            current, at = read_length(data, at + 1)
            self._current, self._counted, self._hinted = current, 0, None
            return self._within(at)
        if op == _OP_RESIZEDB:
            hinted, at = read_length(data, at + 1)
            at = self._within(read_length(data, at)[1])
            self._hinted = hinted
            return at
        expires = None
        start = at
        if op == OP_EXPIRETIME_MS:
            expires = int.from_bytes(data[at + 1 : at + 9], "little")
            at += 9
        while data[at] in (_OP_IDLE, _OP_FREQ):
            at = at + 2 if data[at] == _OP_FREQ else read_length(data, at + 1)[1]
        return self._key(at, start, expires)

    def _within(self, end: int) -> int:
        """``end``, once every byte before it has come (then every read before it was
        whole)."""
        if end > len(self._buf):
            raise _Short
        return end

    def _key(self, at: int, start: int, expires: int | None) -> int:
        data = self._buf
        kind = data[at]
        if kind in _UNREADABLE:
            raise rdbfile.Unreadable(
                f"database {self._current} of the RDB snapshot holds a stream or module type"
            )
        name, after = _string(data, at + 1)
        if kind == _STRING:
            value, end = _string(data, after)
        else:
            value, end = None, _skip_value(data, kind, after)
        self._within(end)
        self._counted += 1
        if not self._current_is_db:
            if self.strict:
                raise _ForeignKey
            return end
        self._kept += 1
        if expires is not None:
            self._expiries.append(expires)
        if name is None or value is None:
            head = b"" if expires is None else data[start : start + 9]
            self._others.append(head + data[at:end])
        else:
            record = b"%d:%bst%d%b" % (len(name), name, expires is not None, value)
            self._total += xxhash.xxh3_128_intdigest(record)
        return end


def summarize(rdb: bytes, db: int, *, strict: bool = True) -> redisstate.Summary | None:
    """:func:`sandbox.services.redis.redisstate.summarize` of database ``db`` of ``rdb``.
    ``strict``: ``None`` when another database holds keys; else those keys are left out.
    Raises :class:`~sandbox.services.redis.rdbfile.Unreadable` as
    :func:`~sandbox.services.redis.rdbfile.keys` does."""
    walk = Walk(db, strict=strict)
    walk.feed(rdb)
    return walk.result(rdb)
