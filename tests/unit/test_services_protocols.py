"""``provides``: a protocol's ``isinstance`` told once for each class, as ``isinstance`` tells."""

from __future__ import annotations

from sandbox.services import get_kind
from sandbox.services.base import RunBound, TouchedCapture, provides, run_bound
from sandbox.services.registry import kinds


class _Observing:
    def bind(self) -> None: ...

    def unbind(self) -> None: ...


class _Half:
    def bind(self) -> None: ...


def test_provides_tells_what_isinstance_tells_for_every_kind_and_pinned_state() -> None:
    for name in kinds():
        kind = get_kind(name)
        for _ in range(2):  # told, then remembered
            assert provides(kind, TouchedCapture) == isinstance(kind, TouchedCapture)
    assert provides(get_kind("postgres"), TouchedCapture)
    observing, half = _Observing(), _Half()
    assert run_bound(observing) is observing and run_bound(observing) is observing
    assert run_bound(half) is None and run_bound(half) is None
    assert not provides(half, RunBound)
