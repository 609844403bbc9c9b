"""The background worker shared by the finisher of kept runs and the syncer."""

from __future__ import annotations

import threading
import time

from sandbox.capture import finisher
from sandbox.capture.worker import Worker


def test_items_are_handled_in_order_one_at_a_time_and_a_failure_does_not_stop_the_thread() -> None:
    """With no gathering each item is its own batch, in the order handed over; an error
    escaping the handler is passed over and the items after it are still handled."""
    seen: list[list[int]] = []

    def handle(batch: list[int]) -> None:
        seen.append(batch)
        if batch == [2]:
            raise RuntimeError("boom")

    worker: Worker[int] = Worker("test-worker", handle)
    worker.submit([1, 2, 3])
    assert worker.wait(30)
    assert seen == [[1], [2], [3]]
    assert worker.pending() == 0


def test_gathered_items_are_handled_in_one_batch_and_hurry_does_not_wait_out_the_delay() -> None:
    """With a long gathering delay, items queued together reach the handler as one batch;
    ``hurry`` returns once they are handled, long before the delay would end."""
    seen: list[list[str]] = []
    handled = threading.Event()

    def handle(batch: list[str]) -> None:
        seen.append(batch)
        handled.set()

    worker: Worker[str] = Worker("test-gather", handle, gather=3600.0)
    worker.submit(["a", "b", "c"])
    assert not worker.wait(0.05)  # still gathering
    assert worker.hurry(30)
    assert handled.is_set() and [item for batch in seen for item in batch] == ["a", "b", "c"]
    assert len(seen) == 1


def test_an_item_not_worth_gathering_is_handled_at_once() -> None:
    """With a long gathering delay, an item that ``gathers`` says is not worth the wait is
    handed over at once; one that is worth it waits for the delay (or :meth:`hurry`)."""
    seen: list[list[str]] = []

    worker: Worker[str] = Worker(
        "test-gathers", seen.append, gather=3600.0, gathers=lambda item: item.startswith("pin")
    )
    worker.submit(["plain"])
    assert worker.wait(30)
    assert seen == [["plain"]]
    worker.submit(["pinned", "plain again"])
    assert not worker.wait(0.05)  # gathering
    assert worker.hurry(30)
    assert seen == [["plain"], ["pinned", "plain again"]]


def test_the_finisher_counts_the_jobs_it_finished_and_the_cpu_it_spent_on_them() -> None:
    """:func:`finisher.spent` counts each finished job (one that raises too) and the CPU
    time of the finisher's thread while it ran them, not the time it waited."""

    def burn() -> None:
        end = time.thread_time() + 0.05
        while time.thread_time() < end:
            pass

    def idle() -> None:
        time.sleep(0.2)

    def fail() -> None:
        raise RuntimeError("boom")

    jobs, cpu = finisher.spent()
    for job in (burn, idle, fail):
        finisher.submit(job)
    assert finisher.wait(30)
    done, spent = finisher.spent()
    assert done - jobs == 3
    assert 0.05 <= spent - cpu < 0.15  # the burn, not the sleep
