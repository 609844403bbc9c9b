"""The benchmarks' comparison: every side warms up, then the sides take turns, the one that
goes first changing each round."""

from __future__ import annotations

from collections.abc import Callable

from bench.compare import compare, compare_all


def test_the_sides_take_turns_and_each_gets_one_time_per_round() -> None:
    order: list[str] = []

    def side(name: str) -> Callable[[], object]:
        return lambda: order.append(name)

    a, b, c = (side(n) for n in "abc")
    seconds = compare_all([a, b, c], rounds=3)
    assert [len(s) for s in seconds] == [3, 3, 3]
    assert order == [*"abc", *"abc", *"bca", *"cab"]  # one warm-up each, then turns


def test_two_sides_alternate_which_goes_first() -> None:
    order: list[str] = []
    compare(lambda: order.append("m"), lambda: order.append("b"), rounds=4, warmup=0)
    assert order == [*"mb", *"bm", *"mb", *"bm"]
