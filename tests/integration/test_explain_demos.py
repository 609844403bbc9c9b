"""``explain`` on the four demo agents: each names the condition its bug is about and lets
the others go, within 40 replays (2 per trial).

The live side of each released condition is real: the model is the demos' local scripted
server (the agent starts it), the payment gateway and the pricing service are healthy
services started here on the address the run recorded (today's dependencies, with no
latency spike), clocks are the real clock, and a released part of a service's state is
removed from the restored container or folder.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import pytest

from examples import _model
from examples.billing import _month_end
from sandbox.explain import Explanation, explain, load_explanation
from sandbox.snapshot.events import HTTPExchange
from sandbox.snapshot.store import DirectoryStore

pytestmark = pytest.mark.docker

TIMES = 2
BUDGET = 40


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DirectoryStore]:
    yield DirectoryStore(tmp_path_factory.mktemp("explain-store"))


@contextlib.contextmanager
def current_service(store: DirectoryStore, run_id: str, path: str, answer: dict[str, Any]):
    """A healthy service on the loopback port the run reached ``path`` at."""
    url = next(
        e.url
        for e in store.load_events(run_id)
        if isinstance(e, HTTPExchange) and urlsplit(e.url).path == path
    )
    _, stop = _model.serve_http(lambda _p, _b: (200, answer), "current", urlsplit(url).port or 0)
    try:
        yield
    finally:
        stop()


def verdicts(found: Explanation) -> dict[str, str]:
    return {c.key: c.verdict for c in found.conditions}


def check_explained(store: DirectoryStore, run_id: str, found: Explanation) -> None:
    assert found.status == "explained", found.describe()
    assert found.replays <= BUDGET
    assert found.replays == TIMES * len(found.trials)
    assert load_explanation(store, run_id) == found
    print(f"\n{found.describe()}")
    assert "the failure needs: " in found.describe()


def test_orders_needs_the_timeout_after_the_commit(store: DirectoryStore) -> None:
    from examples.capture_demo import capture_orders

    run_id = capture_orders(store)
    lines: list[tuple[str, int]] = []
    with current_service(store, run_id, "/charge", {"status": "charged"}):
        found = explain(
            run_id,
            store=store,
            times=TIMES,
            budget=BUDGET,
            progress=lambda line, done, _total: lines.append((line, done)),
        )
    check_explained(store, run_id, found)
    # one bring-up per clock mode (frozen, live), reset between the trials
    assert sum(1 for line, _ in lines if line.startswith("network ")) == 2
    done = [d for _, d in lines]
    assert done == sorted(done) and done[-1] == found.replays
    assert verdicts(found) == {
        "clock": "not needed",
        "faults": "needed",
        "llm:scripted-1": "not needed",
        "http:http://127.0.0.1": "not needed",
    }, found.describe()
    (faults,) = found.of("needed")
    assert "after its work committed" in faults.held


def test_inventory_needs_the_enforced_interleaving(store: DirectoryStore) -> None:
    from examples.capture_demo import capture_inventory

    run_id = capture_inventory(store)
    with current_service(store, run_id, "/quote", {"price": 9.5}):
        found = explain(run_id, store=store, times=TIMES, budget=BUDGET)
    check_explained(store, run_id, found)
    assert verdicts(found) == {
        "clock": "not needed",
        "order": "needed",
        # without the stock row the agent cannot run at all: kept, never called unneeded
        "state:db:table stock": "unjudged",
        "llm:scripted-1": "not needed",
        "http:http://127.0.0.1": "not needed",
    }, found.describe()


def _bug_hour(now: datetime) -> bool:
    return _month_end(now.date()) and now.hour == 23


def test_billing_needs_the_frozen_clock(store: DirectoryStore) -> None:
    from examples.capture_demo import capture_billing

    run_id = capture_billing(store)
    if _bug_hour(datetime.now(UTC)):
        pytest.skip("the real clock is in the bug's hour: live clocks reproduce it too")
    found = explain(run_id, store=store, times=TIMES, budget=BUDGET)
    check_explained(store, run_id, found)
    assert verdicts(found) == {"clock": "needed", "llm:scripted-1": "not needed"}, found.describe()


def test_support_needs_the_stale_document_in_the_workspace(store: DirectoryStore) -> None:
    from examples.capture_demo import capture_support

    run_id = capture_support(store)
    found = explain(run_id, store=store, times=TIMES, budget=BUDGET)
    check_explained(store, run_id, found)
    assert verdicts(found) == {
        "clock": "not needed",
        "state:docs:file returns-2023.md": "needed",
        "state:docs:file returns-2024.md": "not needed",
        "state:docs:file shipping.md": "not needed",
        "llm:scripted-1": "not needed",
    }, found.describe()
