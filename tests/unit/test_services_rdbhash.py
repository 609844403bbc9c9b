"""The walked hash (:mod:`sandbox.services.redis.rdbhash`) of RDBs built from ``DUMP``-shaped
string payloads equals the parser's, however the file is cut; what the walk has no rule
for goes to the parser whole."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sandbox.errors import ServiceError
from sandbox.services.redis import rdbfile, rdbhash, redisstate


def _payload(value: bytes) -> bytes:
    return (
        b"\x00" + rdbfile.encode_length(len(value)) + value + (10).to_bytes(2, "little") + bytes(8)
    )


def _rdb(pairs: dict[bytes, bytes], expiring: set[bytes]) -> bytes:
    entries = [
        rdbfile.Entry(k, _payload(v), 1_700_000_000_000 if k in expiring else None)
        for k, v in pairs.items()
    ]
    return rdbfile.from_dumps(0, entries)


@given(
    st.dictionaries(st.binary(max_size=80), st.binary(max_size=300), max_size=12),
    st.sets(st.binary(max_size=80), max_size=4),
    st.integers(min_value=1, max_value=200),
)
def test_walked_hash_equals_the_parsers_however_cut(
    pairs: dict[bytes, bytes], expiring: set[bytes], size: int
) -> None:
    rdb = _rdb(pairs, expiring)
    expected = redisstate.summarize(rdbfile.keys(rdb, 0, expected=len(pairs)), 0)
    walk = rdbhash.Walk(0)
    for at in range(0, len(rdb), size):
        walk.feed(rdb[at : at + size])
    assert walk.result(rdb) == expected
    assert walk.walked


def test_an_opcode_without_a_rule_hands_the_file_to_the_parser() -> None:
    """A function library (opcode 0xF5) before the keys: the walk stops, the parser reads
    the file and its error is the one raised."""
    rdb = _rdb({b"a": b"1"}, set())
    odd = rdb[:9] + b"\xf5" + rdb[9:]
    walk = rdbhash.Walk(0)
    walk.feed(odd)
    with pytest.raises(ServiceError):
        walk.result(odd)
    assert not walk.walked
