"""RDB bytes without a server: built from ``DUMP``-shaped payloads, read back by the RDB
parser, made byte-stable, hashed logically; bad input is one clear error."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sandbox.errors import ServiceError
from sandbox.services.redis import RDB_MAGIC, pack_rdb, rdbfile, redisstate, unpack_rdb


def _string_payload(value: bytes) -> bytes:
    """A ``DUMP`` payload of a string: type 0, the RDB string, RDB version 10, a CRC."""
    return (
        b"\x00" + rdbfile.encode_length(len(value)) + value + (10).to_bytes(2, "little") + bytes(8)
    )


def _rdb(pairs: dict[bytes, bytes], db: int = 0, expires: int | None = None) -> bytes:
    entries = [rdbfile.Entry(k, _string_payload(v), expires) for k, v in pairs.items()]
    return rdbfile.from_dumps(db, entries)


@given(st.dictionaries(st.binary(max_size=40), st.binary(max_size=20_000), max_size=8))
def test_keys_built_from_payloads_read_back(pairs: dict[bytes, bytes]) -> None:
    found = list(rdbfile.keys(_rdb(pairs, db=3), 3, expected=len(pairs)))
    assert {k.key: k.value for k in found} == pairs
    assert all(k.type == "string" and k.db == 3 and k.expires_ms is None for k in found)


def test_keys_of_another_database_are_left_out_and_expiry_is_read() -> None:
    rdb = _rdb({b"a": b"1"}, db=2, expires=1_700_000_000_000)
    assert list(rdbfile.keys(rdb, 0)) == []
    (key,) = rdbfile.keys(rdb, 2)
    assert key.expires_ms == 1_700_000_000_000


def test_fewer_keys_read_than_counted_is_unreadable() -> None:
    with pytest.raises(rdbfile.Unreadable, match="holds 2 keys, 1 of them readable"):
        list(rdbfile.keys(_rdb({b"a": b"1"}), 0, expected=2))


def test_hash_ignores_order_and_sees_values_and_ttl_presence() -> None:
    one = _rdb({b"a": b"1", b"b": b"2"})
    other = _rdb({b"b": b"2", b"a": b"1"})
    changed = _rdb({b"a": b"1", b"b": b"3"})
    with_ttl = _rdb({b"a": b"1", b"b": b"2"}, expires=1)

    def digest(rdb: bytes) -> str:
        summary = redisstate.summarize(rdbfile.keys(rdb, 0), 0)
        assert summary is not None
        return summary.state_hash

    assert digest(one) == digest(other)
    assert len({digest(one), digest(changed), digest(with_ttl)}) == 3


def test_canonical_records_of_aggregates() -> None:
    def key(kind: str, value: object) -> rdbfile.Key:
        return rdbfile.Key(0, b"k", kind, value, None)

    assert redisstate.record(key("set", [b"b", b"a"])) == redisstate.record(
        key("set", [b"a", b"b"])
    )
    assert redisstate.record(key("list", [b"b", b"a"])) != redisstate.record(
        key("list", [b"a", b"b"])
    )
    assert redisstate.record(key("zset", [(b"x", 2.0), (b"y", 1.0)])) == redisstate.record(
        key("zset", [(b"y", 1.0), (b"x", 2.0)])
    )
    assert redisstate.record(key("hash", {b"f": b"1", b"g": b"2"})) == redisstate.record(
        key("hash", {b"g": b"2", b"f": b"1"})
    )


def test_stable_drops_volatile_aux_fields_and_the_checksum() -> None:
    body = _rdb({b"a": b"1"})[9:-8]

    def aux(name: bytes, value: bytes) -> bytes:
        return b"\xfa" + rdbfile.encode_length(len(name)) + name + value

    def snapshot(ctime: bytes, crc: bytes) -> bytes:
        ver = aux(b"redis-ver", b"\x067.0.15")
        return (
            b"REDIS0010" + ver + aux(b"ctime", ctime) + aux(b"used-mem", b"\xc0\x05") + body + crc
        )

    first = rdbfile.stable(snapshot(b"\xc2\x01\x02\x03\x04", b"\x01" * 8))
    second = rdbfile.stable(snapshot(b"\xc2\x09\x09\x09\x09", b"\x02" * 8))
    assert first == second and b"redis-ver" in first and b"ctime" not in first
    assert first.endswith(bytes(8))
    assert [k.value for k in rdbfile.keys(first, 0)] == [b"1"]


@pytest.mark.parametrize("data", [b"", b"PGDMP" + bytes(20), b"REDIS0010" + bytes(20)])
def test_not_an_rdb_is_a_clear_error(data: bytes) -> None:
    with pytest.raises(ServiceError):
        rdbfile.stable(data)
    with pytest.raises(ServiceError):
        list(rdbfile.keys(data, 0))


@pytest.mark.parametrize(
    ("header", "match"),
    [
        (b"not json", "unreadable header"),
        (b'{"format_version": 7, "db": 0}', "format version 7"),
        (b'{"format_version": 2, "db": "x"}', "invalid database"),
        (b'{"format_version": 2, "db": 0, "captured_ms": "soon"}', "invalid capture time"),
    ],
)
def test_bad_rdb_capture_header_is_a_clear_error(header: bytes, match: str) -> None:
    with pytest.raises(ServiceError, match=match):
        unpack_rdb(RDB_MAGIC + header + b"\nREDIS")


def test_envelope_round_trip() -> None:
    header = {"format_version": 2, "db": 1, "captured_ms": None}
    assert unpack_rdb(pack_rdb(header, b"REDIS0010")) == (header, b"REDIS0010")


@given(st.binary(max_size=300))
def test_any_bytes_after_an_rdb_header_read_or_fail_clearly(tail: bytes) -> None:
    """A bundle's RDB is untrusted: whatever follows the header, reading it yields keys or
    raises :class:`ServiceError` (lengths claiming gigabytes included)."""
    try:
        for found in rdbfile.keys(b"REDIS0010\xfe\x00" + tail, 0):
            assert isinstance(found.key, bytes)
    except ServiceError:
        pass
