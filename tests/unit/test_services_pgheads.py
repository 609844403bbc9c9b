"""The heads a process keeps (:class:`sandbox.services.postgres.pgheads.Heads`): at most
``kept`` of them, the least recently used dropped first; none at all with ``kept=0``."""

from __future__ import annotations

from sandbox.services.postgres.pgarchive import Layout
from sandbox.services.postgres.pgheads import Heads


def _layout(n: int) -> Layout:
    return Layout(head=bytes([n]), tables=(), compressed=True, int_size=4)


def test_the_least_recently_used_head_is_dropped_first() -> None:
    heads = Heads(kept=2)
    heads.put("a", _layout(1))
    heads.put("b", _layout(2))
    assert heads.get("a") == _layout(1)  # "a" is now the most recently used
    heads.put("c", _layout(3))
    assert heads.get("b") is None
    assert heads.get("a") == _layout(1)
    assert heads.get("c") == _layout(3)


def test_a_head_put_again_replaces_the_old_one() -> None:
    heads = Heads(kept=2)
    heads.put("a", _layout(1))
    heads.put("a", _layout(4))
    assert heads.get("a") == _layout(4)


def test_keeping_none_keeps_nothing() -> None:
    heads = Heads(kept=0)
    heads.put("a", _layout(1))
    assert heads.get("a") is None
