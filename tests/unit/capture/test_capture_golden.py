"""What a capture writes stays the same, byte for byte, as the recorder's fast path changes.

A varied run (tools with nested arguments and defaults, errors, retries, concurrent tasks and
threads, secrets and personal data in arguments and outputs, a secret learned late) is
captured with a fixed clock, placeholder key, environment and entrypoint; its event log and
its manifest are compared with the bytes the recorder wrote before its per-call cost was cut
(``data/golden_capture``; regenerate with ``python -m tests.unit.capture.test_capture_golden``
only for a deliberate change of format). The manifest's host-dependent fields (pid, host,
code version, runtime) are compared as they are after being set to fixed values.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import threading
from pathlib import Path
from typing import Any

import tenacity

from sandbox import capture
from sandbox.capture.clock import FakeClock
from sandbox.capture.recorder import Recorder
from sandbox.snapshot.manifest import Entrypoint
from sandbox.snapshot.store import PLACEHOLDER_KEY, DirectoryStore

GOLDEN = Path(__file__).parent / "data" / "golden_capture"
HOST_FIELDS = ("pid", "host", "code", "runtime")
"""Manifest fields that depend on the machine and the checkout, not on the recorder."""
SECRET = "hunter2-very-secret"
LATE = "late-learned-token-9f8e7d"


@capture.tool
def lookup(order_id: int, region: str = "eu", *, filters: dict[str, Any] | None = None) -> Any:
    return {"id": order_id, "region": region, "filters": filters, "items": [1, [2, {"x": 3}]]}


@capture.tool("contact")
def contact(customer: dict[str, Any], note: str) -> dict[str, Any]:
    return {
        "sent_to": customer["email"],
        "phone": "+1 415-555-0132",
        "card": "4111 1111 1111 1111",
        "note": note,
        "key": "sk-proj-abcdefghijklmnopqrstuvwx",
    }


@capture.tool
def refund(order_id: int, cents: int, **extra: Any) -> str:
    if cents > 1000:
        raise ValueError(f"refund of {cents} over the limit for {order_id} ({SECRET})")
    return f"refunded {cents} on {order_id}"


@capture.tool
def varargs(*items: Any, sep: str = ",") -> str:
    return sep.join(str(i) for i in items)


@capture.tool
async def fetch(task: str, delay: int, url: str = "postgres://app:pw-in-url-42@db/x") -> Any:
    await asyncio.sleep(0)
    for _ in range(delay):
        await asyncio.sleep(0)
    return {"task": task, "url": url, "payload": ["a", {"b": None, "c": 1.5, "d": True}]}


@capture.tool
def unicode_tool(text: str) -> dict[str, str]:
    return {"echo": text, "quoted": '"é\\n\u2028"'}


def scenario(store: DirectoryStore) -> str:
    """Capture the varied run into ``store``; return its run id."""
    store.root.mkdir(parents=True, exist_ok=True)
    (store.root / PLACEHOLDER_KEY).write_text("ab" * 32)
    clock = FakeClock(start=1_700_000_000.0, tick=0.25)
    flaky = iter([True, False])

    def pay(order: int) -> str:
        lookup(order, filters={"kind": "pay", "tags": ["a", "b"]})
        if next(flaky):
            raise TimeoutError("gateway slow")
        return f"paid {order}"

    retrying = capture.retrying(
        "pay", stop=tenacity.stop_after_attempt(3), wait=tenacity.wait_fixed(1.5), sleep=clock.sleep
    )

    async def concurrent() -> list[Any]:
        async def one(name: str, delay: int) -> Any:
            with capture.task_scope(name):
                return await fetch(name, delay)

        named = [one(f"worker-{i}", 3 - i) for i in range(3)]
        unnamed = [asyncio.ensure_future(fetch(f"anon-{i}", i)) for i in range(2)]
        return list(await asyncio.gather(*named, *unnamed))

    def in_thread(i: int) -> None:
        lookup(100 + i, "us")

    with capture.run(
        "golden",
        store=store,
        seed=7,
        run_id="golden-run",
        clock=clock,
        http=False,
        packages=False,
        environ={"API_TOKEN": "tok-abcdef-123456", "HOME": "/home/agent", "TZ": "UTC"},
        cwd="/agent",
        entrypoint=Entrypoint(kind="callable", target="agent:main", cwd="/agent"),
        redaction=capture.RedactionConfig(secrets=(SECRET,), env_record=("HOME",)),
    ) as rec:
        for i in range(3):
            lookup(i)
        lookup(3, "us", filters={"nested": {"deep": [1, 2, {"k": "v"}]}, "who": "a@b.example"})
        contact({"email": "jane.doe@example.com", "name": "Jane"}, note=f"token {SECRET}")
        with contextlib.suppress(ValueError):
            refund(7, 5000, reason="late", token="tok-abcdef-123456")
        refund(8, 500)
        varargs(1, "two", [3], sep="|")
        unicode_tool('héllo \u2028 wörld "quoted" \\ back')
        assert retrying(pay, 42) == "paid 42"
        asyncio.run(concurrent())
        threads = [threading.Thread(target=in_thread, args=(i,), name=f"t{i}") for i in range(2)]
        for t in threads:
            t.start()
            t.join()
        assert isinstance(rec, Recorder)
        lookup(9, filters={"auth": LATE})
        rec.redact_headers([("Authorization", f"Bearer {LATE}")])  # learned after it was written
        lookup(10, filters={"auth": LATE})
        capture.state("done", source="working", count=12)
        capture.result({"answer": "ok", "email": "jane.doe@example.com"})
    return rec.run_id


def written(store: DirectoryStore, run_id: str) -> dict[str, bytes]:
    """The run's event log and its manifest (host-dependent fields set to fixed values)."""
    run_dir = store.run_dir(run_id)
    manifest = json.loads((run_dir / "manifest.json").read_bytes())
    fixed = {name: f"<{name}>" for name in HOST_FIELDS if name in manifest}
    raw = (run_dir / "manifest.json").read_text()
    for name in fixed:
        before = json.dumps({name: manifest[name]}, indent=2)[2:-2]
        assert raw.count(before) == 1, f"{name} not found once as written"
        raw = raw.replace(before, json.dumps({name: fixed[name]}, indent=2)[2:-2])
    return {"events.jsonl": (run_dir / "events.jsonl").read_bytes(), "manifest.json": raw.encode()}


def test_varied_run_writes_the_same_bytes_as_before(tmp_path: Path) -> None:
    """The event log and the manifest of the varied run equal the golden bytes."""
    store = DirectoryStore(tmp_path / "store")
    files = written(store, scenario(store))
    for name, data in files.items():
        assert data == (GOLDEN / name).read_bytes(), name


def test_no_secret_reaches_the_run(tmp_path: Path) -> None:
    """No secret of the varied run (declared, from the environment, in a URL, learned late)
    is in its event log or manifest."""
    store = DirectoryStore(tmp_path / "store")
    run_id = scenario(store)
    data = b"".join(
        (store.run_dir(run_id) / n).read_bytes() for n in ("events.jsonl", "manifest.json")
    )
    for secret in (SECRET, LATE, "tok-abcdef-123456", "pw-in-url-42", "sk-proj-abcdefghijkl"):
        assert secret.encode() not in data, secret
    assert b"jane.doe@example.com" not in data and b"4111 1111" not in data


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        out = DirectoryStore(Path(tmp) / "store")
        GOLDEN.mkdir(parents=True, exist_ok=True)
        for name, data in written(out, scenario(out)).items():
            (GOLDEN / name).write_bytes(data)
    sys.exit(0)
