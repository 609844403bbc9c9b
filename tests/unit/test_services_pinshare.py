"""Pins shared among runs that start together (:mod:`sandbox.services.pinshare`): a run
starting within the window of an open pin shares it, a later one opens its own, the pin is
closed when its last share is released, and a bad window is one clear error."""

from __future__ import annotations

import threading

import pytest

from sandbox.errors import ServiceError
from sandbox.services.pinshare import WINDOW_ENV, PinPool, window


class Pin:
    def __init__(self) -> None:
        self.closed = 0

    def close(self) -> None:
        self.closed += 1


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_runs_within_the_window_share_a_pin_closed_by_the_last_release() -> None:
    clock = Clock()
    pool: PinPool[Pin] = PinPool(clock)
    opened: list[Pin] = []

    def open_pin() -> Pin:
        opened.append(Pin())
        return opened[-1]

    a = pool.share("db", open_pin, within=1.0)
    clock.now += 0.5
    b = pool.share("db", open_pin, within=1.0)
    assert len(opened) == 1 and a.hold is b.hold and b.shares == 2
    clock.now += 0.6  # 1.1 s after the pin: a new one
    c = pool.share("db", open_pin, within=1.0)
    assert len(opened) == 2 and c.hold is not a.hold
    a.release()
    a.release()  # twice releases once
    assert opened[0].closed == 0
    b.release()
    assert opened[0].closed == 1
    c.release()
    assert opened[1].closed == 1 and pool.open_count() == 0


def test_a_released_pin_is_not_shared_again_and_other_endpoints_get_their_own() -> None:
    pool: PinPool[Pin] = PinPool(Clock())
    first = pool.share("db", Pin, within=1.0)
    other = pool.share("other", Pin, within=1.0)
    assert other.hold is not first.hold
    first.release()
    again = pool.share("db", Pin, within=1.0)
    assert again.hold is not first.hold and first.hold.closed == 1


def test_concurrent_starts_open_one_pin() -> None:
    pool: PinPool[Pin] = PinPool()
    opened: list[Pin] = []
    gate = threading.Barrier(10)
    shares = []

    def open_pin() -> Pin:
        opened.append(Pin())
        return opened[-1]

    def start() -> None:
        gate.wait()
        shares.append(pool.share("db", open_pin, within=5.0))

    threads = [threading.Thread(target=start) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(opened) == 1 and len(shares) == 10


def test_window_zero_shares_nothing_and_a_bad_window_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(WINDOW_ENV, "0")
    pool: PinPool[Pin] = PinPool(Clock())
    assert pool.share("db", Pin).hold is not pool.share("db", Pin).hold
    monkeypatch.setenv(WINDOW_ENV, "soon")
    with pytest.raises(ServiceError, match=WINDOW_ENV):
        window()
