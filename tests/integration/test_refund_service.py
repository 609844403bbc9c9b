"""The refund service under load, captured with ``keep="failed"``: only the requests that
paid twice are kept, and a kept request replays (model server stopped, live services gone)
and reproduces; with the idempotency key it is gone."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from examples import refund_load, refund_service
from sandbox import capture
from sandbox.containers import RestoreSpec, bring_up
from sandbox.replay import replay
from sandbox.snapshot.store import DirectoryStore

pytestmark = pytest.mark.docker

REQUESTS, CLIENTS = 40, 10


@dataclass
class Captured:
    store: DirectoryStore
    slow: set[str]
    """The orders the gateway answered late (over the client's timeout) on the first charge."""
    paid_twice: set[str]
    """The orders the database says were refunded twice, once the load was over."""


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Captured]:
    store = tmp_path_factory.mktemp("refund-store")
    specs = [
        RestoreSpec(name="db", kind="postgres", env="DATABASE_URL"),
        RestoreSpec(name="cache", kind="redis", env="REDIS_URL"),
    ]
    url, stop = refund_load.gateway(refund_service.GATEWAY_TIMEOUT * 2)
    names = ("DATABASE_URL", "REDIS_URL", "PAYMENTS_URL")
    saved = {k: os.environ.get(k) for k in names}
    try:
        with bring_up(specs) as env:
            os.environ.update(
                DATABASE_URL=env.services["db"].url,
                REDIS_URL=env.services["cache"].url,
                PAYMENTS_URL=url,
            )
            refund_service.setup(os.environ["DATABASE_URL"], REQUESTS)
            orders = [f"o-{i}" for i in range(1, REQUESTS + 1)]
            with refund_load.serve(refund_service.create_app(store=str(store))) as base:
                result = refund_load.load(base, orders, CLIENTS)
            assert capture.flush(), "the kept runs were not written in time"
            with psycopg.connect(env.services["db"].url) as conn:
                paid_twice = {
                    str(order)
                    for (order,) in conn.execute(
                        "SELECT order_id FROM refunds GROUP BY order_id HAVING count(*) > 1"
                    ).fetchall()
                }
        # the model server and the live Postgres, Redis and gateway are all gone from here on
    finally:
        stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    assert result.statuses == {200: REQUESTS}
    slow = {o for o in orders if refund_load.is_slow(o)}
    yield Captured(DirectoryStore(Path(store)), slow, paid_twice)


def test_only_the_requests_that_paid_twice_are_kept(captured: Captured) -> None:
    """Every slow order paid twice (its retry after the timeout charged again), and the runs
    kept are exactly the requests of the orders the database says paid twice. (On a starved
    machine another charge can overrun the client's timeout too: it really pays twice, and
    its request is kept as well.)"""
    assert len(captured.slow) == 4 and captured.slow <= captured.paid_twice
    kept = captured.store.list()
    assert sorted(m.labels["http.path"] for m in kept) == sorted(
        f"/refunds/{order}" for order in captured.paid_twice
    )
    for manifest in kept:
        assert manifest.name == "POST /refunds/{order_id}"
        assert manifest.failure is not None and "refunded twice" in manifest.failure.reason
        assert manifest.entrypoint is not None
        assert manifest.entrypoint.target == "examples.refund_service:replay"


def test_a_kept_request_reproduces_and_its_fix_is_gone(captured: Captured) -> None:
    store = captured.store
    run_id = store.list()[0].run_id
    report = replay(run_id, store=store, times=2)
    assert report.verdict.reproduced == 2 and report.verdict.total == 2, report.describe()
    assert report.divergences == [None, None], report.describe()  # it did what it did
    # the original's end state holds the other requests' refunds: the report says so
    assert any("other run(s) of its process" in note for note in report.notes), report.notes
    assert report.exit_code == 1
    fixed = replay(run_id, store=store, times=2, entrypoint="examples.refund_service:replay_fixed")
    assert fixed.mismatch is None, fixed.describe()
    assert fixed.verdict.reproduced == 0 and fixed.verdict.total == 2, fixed.describe()
    assert fixed.exit_code == 0
