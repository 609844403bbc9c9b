"""Container sizes grow with the state; a state the host cannot hold is a clear error."""

from __future__ import annotations

import pytest

from sandbox.containers.sizing import (
    DUMP_EXPANSION,
    MIB,
    Size,
    Storage,
    check_fits,
    size_for,
    state_bytes,
)
from sandbox.containers.specs import container_spec
from sandbox.errors import ResourceError

GIB = 1 << 30


def test_postgres_storage_holds_three_copies_and_memory_covers_the_tmpfs() -> None:
    storage = container_spec("postgres").storage
    size = size_for(storage, GIB)
    assert size.storage_bytes >= 256 * MIB + 3 * GIB
    assert size.memory_bytes == size.storage_bytes + 512 * MIB
    tmpfs = size.tmpfs(storage)["/var/lib/postgresql"]
    assert tmpfs.startswith("rw,uid=999,gid=999,size=")
    assert int(tmpfs.rsplit("=", 1)[1].rstrip("m")) * MIB >= size.storage_bytes
    assert size_for(storage, 0).storage_bytes == 256 * MIB


def test_a_kind_without_tmpfs_grows_its_memory_only() -> None:
    storage = Storage(path=None, copies=3, base_mib=0, memory_mib=256)
    size = size_for(storage, 100 * MIB)
    assert size.tmpfs(storage) == {}
    assert size.memory_bytes == 256 * MIB + 375 * MIB


def test_state_size_measured_or_estimated_from_the_dump() -> None:
    assert state_bytes(12345, 10) == 12345
    assert state_bytes(None, 10) == DUMP_EXPANSION * 10
    assert state_bytes("bad", None) == 0


def test_check_fits_names_the_memory_needed() -> None:
    need = {"db": (Size(3 * GIB, 4 * GIB), GIB)}
    check_fits(need, 5 * GIB)
    check_fits(need, None)
    with pytest.raises(ResourceError) as err:
        check_fits(need, 2 * GIB)
    assert str(err.value) == (
        "the sandbox needs 4.0 GB of memory (db 4.0 GB for 1.0 GB of state) but the "
        "Docker host has 2.0 GB available: free memory, or replay on a machine with at "
        "least 4.0 GB"
    )
