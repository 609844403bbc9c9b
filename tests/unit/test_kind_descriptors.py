"""Every registered service kind carries its whole descriptor, and the sandbox's tables are
read from it (no table of kinds elsewhere)."""

from __future__ import annotations

import pytest

from sandbox.containers.images import IMAGES
from sandbox.containers.specs import container_spec, is_path_kind, server_kinds
from sandbox.errors import UnknownNameError
from sandbox.services import get_kind, kind_names


@pytest.mark.parametrize("name", kind_names())
def test_a_kind_runs_in_a_container_or_on_a_path_never_both(name: str) -> None:
    kind = get_kind(name)
    on_path = kind.binding.path is not None
    assert on_path != (kind.container is not None)
    assert is_path_kind(name) == on_path
    if kind.container is not None:
        assert kind.binding.env, "a server kind names the variable agents read it from"
        assert kind.container.image in IMAGES
        assert container_spec(name) is kind.container


def test_the_built_in_kinds_are_where_they_were() -> None:
    assert server_kinds() == ["mysql", "postgres", "redis"]
    assert [n for n in kind_names() if is_path_kind(n)] == ["files", "sqlite"]
    assert get_kind("postgres").binding.env == "DATABASE_URL"
    assert get_kind("redis").binding.env == "REDIS_URL"
    assert get_kind("sqlite").binding.path == "file"
    assert get_kind("files").binding.path == "folder"


def test_a_path_kind_has_no_container_and_the_error_names_the_server_kinds() -> None:
    with pytest.raises(UnknownNameError, match="mysql, postgres, redis"):
        container_spec("sqlite")
    with pytest.raises(UnknownNameError, match="service kind"):
        container_spec("mongo")
