"""Export against import of one large run: ``sandbox export`` (the integrity check, the scan
for secrets and personal data, the bundle) of a run of 1,000,000 events, against
``sandbox import`` of the bundle it wrote (read, check, add to a new store). Goal: export
within 2x of import, so the scan stays linear. The run is written through the store's
``RunWriter`` (eight kinds of event, see :mod:`bench.events`). One warm-up of each side,
then rounds that alternate which side goes first. ``python -m bench.export`` (``--quick``:
100,000 events)."""

from __future__ import annotations

import re
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from bench.compare import compare, ratios, record
from bench.events import make_events
from sandbox.services.sharescan import export_shareable
from sandbox.snapshot import DirectoryStore, Manifest
from sandbox.snapshot.bundle import import_bundle
from sandbox.snapshot.store import dump_event

QUICK = ["--quick"]
N = 1_000_000
RUN = "big-run"
_SEQ = re.compile(rb'"seq":\d+')


def write_run(store: DirectoryStore, n: int) -> None:
    """A complete run of ``n`` events: the eight kinds of :func:`bench.events.make_events`,
    their sequence numbers renumbered, appended a thousand lines at a time."""
    lines = [dump_event(e) for e in make_events(8)]
    with store.begin(Manifest(run_id=RUN, created=datetime.now(UTC))) as writer:
        batch: list[bytes] = []
        for seq in range(n):
            batch.append(_SEQ.sub(b'"seq":%d' % seq, lines[seq % 8], count=1))
            if len(batch) == 1000:
                writer.append_raw(b"".join(batch))
                batch = []
        writer.append_raw(b"".join(batch))
        writer.finish(writer.manifest.model_copy(update={"status": "complete"}))


def main(argv: list[str] | None = None) -> int:
    quick = bool(argv)
    n = N // 10 if quick else N
    rounds = 5
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        store = DirectoryStore(root / "store")
        start = time.perf_counter()
        write_run(store, n)
        print(f"wrote a run of {n} events in {time.perf_counter() - start:.1f} s", flush=True)
        bundle = root / "run.tar.gz"
        count = 0

        def export() -> None:
            export_shareable(store, RUN, bundle)

        def import_() -> float:
            nonlocal count
            count += 1
            target = DirectoryStore(root / f"imported-{count}")
            began = time.perf_counter()
            import_bundle(target, bundle)
            took = time.perf_counter() - began
            shutil.rmtree(target.root)
            return took

        export()  # the bundle the first import reads
        ours, theirs = compare(export, import_, rounds=rounds)
    record(f"export: {n} events", ours, unit=" s")
    record(f"export: import of the same {n} events", theirs, unit=" s")
    record(
        f"export: export / import of {n} events",
        ratios(ours, theirs),
        goal="< 2x",
        holds=lambda r: r < 2,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
