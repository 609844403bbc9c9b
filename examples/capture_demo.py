"""Capture the demo agents from "production" services into a snapshot store.

"Production" here is a Postgres container brought up by the sandbox (empty, then given its
schema), small local HTTP services for the payment gateway and the pricing service, and a
temporary folder of policy documents for the support agent. Each
agent runs under :func:`sandbox.capture.run` with its services captured before and after;
the capture script decides, as an operator would, whether the run shows the failure and
marks it with the predicate replay will judge by.

::

    from examples.capture_demo import capture_orders
    run_id = capture_orders(store)
"""

from __future__ import annotations

import contextlib
import os
import random
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg

from examples import _model
from sandbox import capture
from sandbox.containers import RestoreSpec, bring_up
from sandbox.snapshot.manifest import Entrypoint
from sandbox.snapshot.store import Store, open_store

Progress = Callable[[str], None]
SEED = 7
DEMO_RUN_ID = "demo-orders-duplicate"
"""The ``orders`` capture committed in ``snapshots/`` (``python -m examples.capture_demo``)."""
AGENT_ENV = ("DATABASE_URL", "PAYMENTS_URL", "PRICING_URL", "SUPPORT_DOCS", "LANG", "TZ")


def _quiet(_line: str) -> None:
    pass


@contextlib.contextmanager
def production_db(frozen_at: datetime | None = None) -> Iterator[str]:
    """An empty Postgres (its clock frozen at ``frozen_at`` if given); yields its URL."""
    with bring_up(
        [RestoreSpec(name="db", kind="postgres", env="DATABASE_URL")], frozen_at=frozen_at
    ) as env:
        yield env.services["db"].url


@contextlib.contextmanager
def environ(**values: str) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _rows(url: str, query: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return list(conn.execute(query).fetchall())  # type: ignore[arg-type]


# --- orders ----------------------------------------------------------------------------------


def capture_orders(store: Store, run_id: str | None = None, *, portable: bool = False) -> str:
    """The gateway's first charge is slow (over the client's timeout), after the order row
    committed: the retry inserts it again. ``run_id`` names the run (default: generated);
    ``portable`` leaves this machine out of the manifest (see :func:`_capture_checked`)."""
    from examples import orders

    calls = {"n": 0}
    lock = threading.Lock()

    def gateway(path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with lock:
            calls["n"] += 1
            first = calls["n"] == 1
        if first:
            time.sleep(orders.GATEWAY_TIMEOUT * 2)  # a latency spike on the first charge
        return 200, {"status": "charged"}

    base, stop = _model.serve_http(gateway, "payments-gateway")
    try:
        with production_db() as url, environ(DATABASE_URL=url, PAYMENTS_URL=base):
            orders.setup(url)
            run_id, _ = _capture_checked(
                store,
                "orders",
                "examples.orders:main",
                url,
                orders.main,
                orders.DUPLICATES,
                "the same order was inserted twice",
                run_id=run_id,
                portable=portable,
            )
    finally:
        stop()
    return run_id


def _capture_checked(
    store: Store,
    name: str,
    target: str,
    url: str,
    run: Callable[[], Any],
    invariant: capture.SQLInvariant,
    reason: str,
    run_id: str | None = None,
    portable: bool = False,
) -> tuple[str, bool]:
    """Capture ``run`` against the Postgres at ``url``; failed when ``invariant`` holds after.

    ``portable`` is for a snapshot committed to the repository: the manifest keeps only the
    agent's own variables (:data:`AGENT_ENV`) instead of this process's whole environment,
    and no working directory, commit or uncommitted diff (the commit holding the snapshot
    is its code version)."""
    with contextlib.ExitStack() as stack:
        cwd = stack.enter_context(tempfile.TemporaryDirectory()) if portable else os.getcwd()
        settings = capture.run(
            name,
            store=store,
            run_id=run_id,
            seed=SEED,
            services=[capture.ServiceSpec("db", "postgres", url, env="DATABASE_URL")],
            entrypoint=Entrypoint(kind="callable", target=target, cwd="." if portable else cwd),
            packages=False,
            cwd=cwd,
            environ={k: v for k, v in os.environ.items() if k in AGENT_ENV} if portable else None,
        )
        with settings as rec:
            value = run()
            if not rec.has_result:
                rec.set_result(value)
            failed = bool(_rows(url, invariant.query))
            if failed:
                rec.mark_failed(reason, invariant)
    return rec.run_id, failed


# --- inventory -------------------------------------------------------------------------------


def capture_inventory(store: Store, attempts: int = 15) -> str:
    """Capture until the race shows (a slow quote for worker-1 lets worker-2 read the stale
    stock); runs that did not show it are deleted."""
    from examples import inventory

    # Production latency: not the run's seeded generator, and seeded here rather than drawn
    # from os.urandom, which a capture records in every thread of this process.
    chooser = random.Random(time.time_ns())

    def pricing(path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        # slow: longer than worker-2's fraud check, so that it reads the stock meanwhile
        time.sleep(chooser.choice([0.0, inventory.FRAUD_CHECK_SECONDS + 0.3]))
        return 200, {"price": 9.5 * int(body.get("qty", 1))}

    base, stop = _model.serve_http(pricing, "pricing-service")
    try:
        with production_db() as url, environ(DATABASE_URL=url, PRICING_URL=base):
            inventory.setup(url)
            for _ in range(attempts):
                run_id, failed = _capture_checked(
                    store,
                    "inventory",
                    "examples.inventory:main",
                    url,
                    inventory.main,
                    inventory.LOST_UPDATE,
                    "a concurrent reservation's stock decrement was lost",
                )
                if failed:
                    return run_id
                store.delete(run_id)
                with psycopg.connect(url, autocommit=True) as conn:
                    conn.execute("DELETE FROM reservations; UPDATE stock SET qty = initial")
    finally:
        stop()
    raise RuntimeError(f"the race did not show in {attempts} captures")


# --- billing ---------------------------------------------------------------------------------


def capture_billing(store: Store) -> str:
    """Capture at the end of January: Python frozen with freezegun, Postgres with libfaketime."""
    import freezegun

    from examples import billing

    with production_db(frozen_at=billing.PRODUCTION_NOW) as url, environ(DATABASE_URL=url):
        billing.setup(url)
        with freezegun.freeze_time(billing.PRODUCTION_NOW):
            run_id, failed = _capture_checked(
                store,
                "billing",
                "examples.billing:main",
                url,
                billing.main,
                billing.WRONG_PERIOD,
                "the month-end invoice was filed under the next month",
            )
    if not failed:
        raise RuntimeError("the billing capture did not show the month-end failure")
    return run_id


# --- support ---------------------------------------------------------------------------------


def capture_support(store: Store) -> str:
    """Capture the support agent over a folder of policy documents (a ``files`` workspace,
    captured before and after): the stale 2023 policy wins the search, the answer says 30
    days."""
    from examples import support

    with tempfile.TemporaryDirectory(prefix="support-") as tmp:
        docs = str(support.write_documents(Path(tmp) / "support-docs"))
        with environ(**{support.DOCS_ENV: docs}):
            settings = capture.run(
                "support",
                store=store,
                seed=SEED,
                services=[capture.ServiceSpec("docs", "files", docs, env=support.DOCS_ENV)],
                entrypoint=Entrypoint(
                    kind="callable", target="examples.support:main", cwd=os.getcwd()
                ),
                packages=False,
            )
            with settings as rec:
                answer = support.main()
                failed = str(support.STALE_ANSWER.value) in answer
                if failed:
                    rec.mark_failed("the answer quotes the stale 2023 policy", support.STALE_ANSWER)
    if not failed:
        store.delete(rec.run_id)
        raise RuntimeError(f"the support capture did not show the stale answer: {answer!r}")
    return rec.run_id


def capture_all(store: Store) -> dict[str, str]:
    """Capture every demo agent; return agent name -> run id."""
    return {
        "orders": capture_orders(store),
        "inventory": capture_inventory(store),
        "billing": capture_billing(store),
        "support": capture_support(store),
    }


def main(argv: list[str] | None = None) -> int:
    """Write the committed demo snapshot: ``python -m examples.capture_demo [--store DIR]``
    captures the ``orders`` demo as :data:`DEMO_RUN_ID` (portable), replacing none."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m examples.capture_demo", description=main.__doc__
    )
    parser.add_argument("--store", default="snapshots", help="snapshot store (./snapshots)")
    args = parser.parse_args(argv)
    store = open_store(args.store)
    if store.exists(DEMO_RUN_ID):
        print(f"{DEMO_RUN_ID} is already in {args.store}; delete it first to capture it again")
        return 1
    print(capture_orders(store, DEMO_RUN_ID, portable=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
