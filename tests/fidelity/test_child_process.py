"""A child Python process making the HTTP call (``subprocess.run([sys.executable,
"fetch_rate.py"])``): it is captured into the same run under its own task id, and replayed
with its call served from the recording (the rates service is gone). The rate comes back
with a decimal comma, and ``float()`` in the parent fails on it."""

from __future__ import annotations

from sandbox.snapshot.events import HTTPExchange
from sandbox.snapshot.store import DirectoryStore
from tests.fidelity import harness


def rates(path: str, body: dict[str, object]) -> tuple[int, object]:
    return 200, {"currency": body["currency"], "rate": "0,9214"}


def calls(store: DirectoryStore, run_id: str) -> list[tuple[str, str]]:
    return [
        (e.task, e.url.rsplit("/", 1)[-1])
        for e in store.load_events(run_id)
        if isinstance(e, HTTPExchange)
    ]


def test_child_process_http_call_is_captured_and_replayed(store: DirectoryStore) -> None:
    with harness.service(rates, "rates") as url:
        run = harness.capture(store, "invoice_totals", harness.base_env(RATES_URL=url))
    assert run.manifest.failure is not None, run.output
    assert "could not convert string to float: '0,9214'" in run.manifest.failure.reason
    assert calls(store, run.run_id) == [("child-1", "rates")]

    result = harness.replay(store, run.run_id)

    harness.assert_reproduced_every_time(result)
    for replayed in result.report["replays"]:
        assert calls(store, replayed) == [("child-1", "rates")]
