"""The postgres capture envelope and version handling (no server needed)."""

from __future__ import annotations

import pytest

from sandbox.errors import ServiceError
from sandbox.services.postgres import (
    MAGIC,
    _Endpoint,
    _major,
    _version_string,
    pack_dump,
    unpack_dump,
)


def test_envelope_round_trip() -> None:
    header = {"format_version": 1, "server_version": "15.18", "database": "shop"}
    data = pack_dump(header, b"PGDMP\n\x00binary\nwith newlines")
    assert data.startswith(MAGIC)
    assert unpack_dump(data) == (header, b"PGDMP\n\x00binary\nwith newlines")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"PGDMP...", "not a postgres capture"),
        (MAGIC + b"{not json\n", "unreadable header"),
        (MAGIC + b'{"format_version": 2, "server_version": "15.1"}\n', "format version 2"),
        (MAGIC + b'{"format_version": 1}\n', "no server_version"),
        (MAGIC + b'{"format_version": 1, "server_version": "15.1"}', "unreadable header"),
    ],
)
def test_bad_envelopes(data: bytes, message: str) -> None:
    with pytest.raises(ServiceError, match=message):
        unpack_dump(data)


def test_versions() -> None:
    assert _version_string(150018) == "15.18"
    assert _version_string(90624) == "9.6.24"
    assert _major("15.18") == (15,) < _major("16.0")
    assert _major("9.6.24") == (9, 6) < _major("10.1")
    with pytest.raises(ServiceError, match="unreadable postgres server version"):
        _major("abc")


def test_endpoint_parsing_keeps_passwords_out_of_messages() -> None:
    ep = _Endpoint.parse("postgresql://app:s3cret@db.internal:6543/shop")
    assert ep.where == "db.internal:6543/shop"
    assert "s3cret" not in ep.conninfo(password=False)
    assert ep.tool_env()["PGPASSWORD"] == "s3cret"
    assert ep.restore_point_db == "shop_sbx_rp"
    assert _Endpoint.parse("postgresql://u@h/postgres").maintenance_db == "template1"
    with pytest.raises(ServiceError, match="names no database"):
        _Endpoint.parse("postgresql://u@h:5432")
    with pytest.raises(ServiceError, match="too long"):
        _ = _Endpoint.parse("postgresql://u@h/" + "d" * 60).restore_point_db
