"""The JSON fingerprints are taken of and the JSON requests are read with stay what they were
with ``json``: ``canonical_json`` (the C encoder made once) writes the bytes ``json.dumps``
with sorted keys and no spaces writes; ``read_json`` (pydantic-core's reader, ``json``'s for
what pydantic-core refuses) reads every text to what ``json.loads`` reads it to, the same
types and values (floats to the bit, integers of any size, any string), and refuses what
``json.loads`` refuses with a ``ValueError``. So the request fingerprints of recordings made
before stay the same."""

from __future__ import annotations

import enum
import hashlib
import json
import math
import struct
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from sandbox.snapshot.hashing import canonical_json, read_json
from sandbox.snapshot.normalize import normalize, request_fingerprint


def _same(a: Any, b: Any) -> bool:
    """Equal, of the same types all the way down; floats equal to the bit (NaN included)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return struct.pack("<d", a) == struct.pack("<d", b) or (math.isnan(a) and math.isnan(b))
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    return bool(a == b)


def _outcome(data: bytes) -> tuple[str, Any]:
    try:
        return "value", json.loads(data)
    except ValueError:
        return "error", None


def _check(data: bytes) -> None:
    kind, expected = _outcome(data)
    if kind == "error":
        with pytest.raises(ValueError):
            read_json(data)
    else:
        assert _same(read_json(data), expected), data


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(10**40), max_value=10**40)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=30,
)


@settings(max_examples=400, deadline=None)
@given(value=JSON, ascii_only=st.booleans(), indent=st.sampled_from([None, 0, 2]))
def test_json_texts_read_to_what_json_reads(value: Any, ascii_only: bool, indent: Any) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only, indent=indent)
    _check(text.encode("utf-8", "surrogatepass"))


@settings(max_examples=400, deadline=None)
@given(number=st.from_regex(r"\A-?(0|[1-9][0-9]{0,30})(\.[0-9]{1,30})?([eE][-+]?[0-9]{1,3})?\Z"))
def test_numbers_read_to_the_same_value(number: str) -> None:
    _check(number.encode())


@settings(max_examples=400, deadline=None)
@given(data=st.binary(max_size=40) | st.text(max_size=40).map(str.encode))
def test_any_bytes_are_read_or_refused_as_json_does(data: bytes) -> None:
    _check(data)


@pytest.mark.parametrize(
    "data",
    [
        b'"\\ud800"',  # a lone surrogate: pydantic-core refuses it, json reads it
        b'{"a": "\\udc00x"}',
        b'\xef\xbb\xbf{"a": 1}',  # a byte-order mark
        '{"a": "é"}'.encode("utf-16"),
        '{"a": [1.5]}'.encode("utf-32"),
        b"[" * 300 + b"]" * 300,  # deeper than pydantic-core's limit
        b'{"a": 1, "a": 2}',
        b"[NaN, Infinity, -Infinity, 1e400, -0.0, 5e-324]",
        b"123456789012345678901234567890",
        b'{"a": 1,}',
        b"[1] [2]",
        b'"\xff"',
        b'"a\nb"',
        b"",
    ],
)
def test_edge_cases_read_or_refused_as_json_does(data: bytes) -> None:
    _check(data)


@settings(max_examples=400, deadline=None)
@given(value=JSON)
def test_canonical_json_is_what_json_dumps_writes(value: Any) -> None:
    expected = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert canonical_json(value) == expected.encode()


@pytest.mark.parametrize(
    "value",
    ["plain", "é\x00\u2028", 1.5, 1e-05, math.nan, -math.inf, 2**80, [1, (2, 3)], None, True],
)
def test_canonical_json_of_scalars_and_tuples(value: Any) -> None:
    expected = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert canonical_json(value) == expected.encode()


def _former_fingerprint(kind: str, name: str, request: Any) -> str:
    """How request fingerprints were taken before pydantic-core wrote the plain ones."""
    return hashlib.sha256(
        canonical_json({"kind": kind, "name": name, "request": normalize(request)})
    ).hexdigest()


class _Flavour(enum.StrEnum):
    SWEET = "sweet"


REQUEST = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
    | st.just(_Flavour.SWEET),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(st.text(max_size=8) | st.integers(-3, 3), inner, max_size=4)
        | st.dictionaries(st.sampled_from(["Date", "TS", "x-request-id", "keep"]), inner)
    ),
    max_leaves=20,
)


@settings(max_examples=600, deadline=None)
@given(request=REQUEST, name=st.text(max_size=20))
@example(request={"temperature": 1e-05, "n": [1e16, 5e-324, 0.5]}, name="POST x")
@example(request={"when": _Flavour.SWEET, 1: "one", "1": "un"}, name="")
def test_request_fingerprints_are_what_they_were(request: Any, name: str) -> None:
    """Requests of only strings, integers, booleans and nulls are hashed as pydantic-core
    writes them, the others as before: every fingerprint is the one taken before, so a
    replay matches recordings made with the former code."""
    assert request_fingerprint("http", name, request) == _former_fingerprint("http", name, request)
