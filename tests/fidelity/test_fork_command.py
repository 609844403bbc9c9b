"""A fork of a captured command (``sandbox replay RUN --override STEP=JSON``): the program
and its child process are replayed, the child's HTTP answer replaced. The rates service sent
``"0,9214"`` (a decimal comma) and ``float()`` failed on it; with the rate the service was
meant to send, the failure is gone; with the same comma in another body it stays; ``sandbox
diff`` names the overridden exchange."""

from __future__ import annotations

import json

from sandbox.snapshot.events import HTTPExchange
from sandbox.snapshot.store import DirectoryStore
from tests.fidelity import harness
from tests.fidelity.test_child_process import rates


def test_overriding_the_childs_http_answer_makes_the_failure_go(store: DirectoryStore) -> None:
    with harness.service(rates, "rates") as url:
        run = harness.capture(store, "invoice_totals", harness.base_env(RATES_URL=url))
    assert run.manifest.failure is not None, run.output
    step = next(e.seq for e in run.events if isinstance(e, HTTPExchange))

    body = json.dumps({"currency": "USD", "rate": "0.9214"})
    fixed = harness.replay(store, run.run_id, None, "--override", f"{step}={body}")
    assert fixed.exit_code == 0, fixed.output
    assert (fixed.reproduced, fixed.total) == (0, harness.TIMES)
    assert fixed.report["fork"]["overrides"] == [{"step": step, "value": json.loads(body)}]

    # The same decimal comma from another source: the same failure, every time.
    same = json.dumps({"currency": "USD", "rate": "0,9214", "source": "cache"})
    kept = harness.replay(store, run.run_id, None, "--override", f"{step}={same}")
    assert kept.exit_code == 1, json.dumps(kept.report["verdict"])[:1500]
    assert (kept.reproduced, kept.total) == (harness.TIMES, harness.TIMES)

    fork = fixed.report["replays"][0]
    exchanges = [e for e in store.load_events(fork) if isinstance(e, HTTPExchange)]
    assert [(e.task, e.served, e.response_body) for e in exchanges] == [
        ("child-1", "override", json.loads(body))
    ]
    done = harness.run_cli(["diff", run.run_id, fork, "--json", "--store", str(store.root)], {})
    assert done.returncode == 1, done.stderr
    assert json.loads(done.stdout)["step"] == step
