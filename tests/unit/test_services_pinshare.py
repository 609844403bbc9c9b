"""Pins shared among runs that start together (:mod:`sandbox.services.pinshare`): a run
starting within the window of an open pin shares it, a later one opens its own, the pin is
closed when its last share is released, the next pin is opened ahead while runs keep
coming, and a bad window is one clear error."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from sandbox.errors import ServiceError
from sandbox.services.pinshare import REFRESH_AT, WINDOW_ENV, PinPool, window


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


def test_the_newest_pin_is_shared_past_its_window_only_when_accepted_and_never_reopened() -> None:
    """``newest`` gives a share of the newest open pin of an endpoint, whatever its age, when
    the test accepts it (the end state of runs that ended before it was taken); the share
    keeps it open like a run's. It never opens one, nor takes a released one."""
    clock = Clock()
    pool: PinPool[Pin] = PinPool(clock)
    pin = Pin()
    assert pool.newest("db", lambda held: True) is None  # none open: none opened
    first = pool.share("db", lambda: pin, within=1.0)
    clock.now += 5.0  # far past its window: no new run shares it
    assert pool.newest("db", lambda held: held is not pin) is None
    taken = pool.newest("db", lambda held: held is pin)
    assert taken is not None and taken.hold is pin and first.shares == 2
    assert pool.newest("other", lambda held: True) is None
    first.release()
    assert pin.closed == 0  # the share taken keeps it open
    taken.release()
    assert pin.closed == 1
    assert pool.newest("db", lambda held: True) is None and pool.open_count() == 0


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


def _until(done: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 10
    while not done():
        assert time.monotonic() < deadline, "not done within 10 s"
        time.sleep(0.005)


def test_the_next_pin_is_opened_ahead_off_the_runs_thread_and_closed_when_unused() -> None:
    """A run sharing a pin past :data:`REFRESH_AT` of its window has the next one opened on
    the pool's thread; the runs starting once it is open share it; a pin opened ahead that
    no run takes is closed when its window is over."""
    clock = Clock()
    pool: PinPool[Pin] = PinPool(clock)
    opened: list[tuple[Pin, int]] = []

    def open_pin() -> Pin:
        opened.append((Pin(), threading.get_ident()))
        return opened[-1][0]

    window = 0.2
    a = pool.share("db", open_pin, within=window)
    clock.now += window * (REFRESH_AT + 1) / 2  # late in the pin's window: the next is asked
    b = pool.share("db", open_pin, within=window)
    assert b.hold is a.hold
    _until(lambda: len(opened) == 2)
    ahead = opened[1][0]
    assert opened[0][1] == threading.get_ident() != opened[1][1]

    def next_share() -> bool:
        share = pool.share("db", open_pin, within=window)
        if share.hold is ahead:
            share.release()
            return True
        share.release()
        return False

    _until(next_share)  # once open, the runs that start share it
    a.release()
    b.release()
    assert opened[0][0].closed == 1 and len(opened) == 2
    _until(lambda: ahead.closed == 1)  # no run holds it: closed after its window


def test_a_pin_ahead_that_fails_to_close_leaves_the_pools_thread_serving(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A pin opened ahead whose close raises (its server gone) is one line on stderr; the
    pool's thread lives on and opens the next pin asked for ahead."""
    clock = Clock()
    pool: PinPool[Pin] = PinPool(clock)
    opened: list[Pin] = []

    class Lost(Pin):
        def close(self) -> None:
            super().close()
            raise ServiceError("postgres at db: the connection is lost")

    def open_pin() -> Pin:
        opened.append(Lost() if len(opened) == 1 else Pin())
        return opened[-1]

    window = 0.2
    first = pool.share("db", open_pin, within=window)
    clock.now += window * (REFRESH_AT + 1) / 2
    pool.share("db", open_pin, within=window).release()  # asks the next one ahead
    _until(lambda: len(opened) == 2 and opened[1].closed == 1)  # closed, raising, unused
    first.release()
    worker = pool._worker
    assert worker is not None
    time.sleep(0.05)
    assert worker.is_alive()
    assert "closing a pin failed: postgres at db: the connection is lost" in capsys.readouterr().err
    second = pool.share("other", open_pin, within=window)
    clock.now += window * (REFRESH_AT + 1) / 2
    pool.share("other", open_pin, within=window).release()
    _until(lambda: len(opened) == 4)  # the same thread opened the next one ahead
    assert pool._worker is worker
    second.release()
