"""``sandbox list`` on a large store: 1,000 runs, one run of 1,000,000 events, one damaged
run (a truncated manifest) and one unreadable run (its manifest cannot be opened). Goal:
under 1 s, every run listed, the damaged and unreadable ones as ``damaged``.

Baseline, in the same script: reading and validating every ``manifest.json`` alone (what any
listing must do at least). The two sides alternate, after a warm-up; the median ratio and its
spread are printed. ``python -m bench.listing``"""

from __future__ import annotations

import contextlib
import io
import statistics
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.compare import compare, ratios, record
from cli.main import main as cli_main
from sandbox.snapshot import DirectoryStore, Manifest
from sandbox.snapshot.events import StateTransition
from sandbox.snapshot.listing import summarize_runs
from sandbox.snapshot.store import MANIFEST, dump_event, parse_manifest

RUNS = 1_000
BIG_EVENTS = 1_000_000
ROUNDS = 7


def _events(n: int) -> bytes:
    line = dump_event(StateTransition(seq=0, wall=1.0, mono=0.5, task="main", name="s", target="t"))
    head, _, tail = line.partition(b'"seq":0')
    return b"".join(head + b'"seq":%d' % i + tail for i in range(n))


def build(root: Path) -> DirectoryStore:
    store = DirectoryStore(root)
    start = datetime(2024, 3, 1, tzinfo=UTC)
    small = _events(20)
    for i in range(RUNS):
        manifest = Manifest(
            run_id=f"run-{i:04d}", name="bench", created=start + timedelta(seconds=i)
        ).model_copy(update={"status": "complete"})
        store.save_raw(manifest, small)
    big = Manifest(run_id="big-run", created=start).model_copy(update={"status": "complete"})
    store.save_raw(big, _events(BIG_EVENTS))
    for name in ("damaged-run", "unreadable-run"):
        store.save_raw(Manifest(run_id=name, created=start), small)
    damaged = store.run_dir("damaged-run") / MANIFEST
    damaged.write_bytes(damaged.read_bytes()[:30])
    unreadable = store.run_dir("unreadable-run") / MANIFEST
    unreadable.unlink()
    unreadable.symlink_to(unreadable)  # opening it fails, whoever runs the benchmark
    return store


def baseline(store: DirectoryStore) -> int:
    """Read and validate every readable manifest: the least a listing does."""
    count = 0
    for folder in sorted(store.runs_dir.iterdir()):
        with contextlib.suppress(OSError, ValueError):
            parse_manifest((folder / MANIFEST).read_bytes())
            count += 1
    return count


def cli_list(store: DirectoryStore) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli_main(["list", "--store", str(store.root)])
    assert code == 0
    return out.getvalue()


def _untimed(fn: Callable[[DirectoryStore], object], store: DirectoryStore) -> None:
    fn(store)


def main() -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        store = build(Path(tmp) / "store")
        summaries = summarize_runs(store)
        states = {s.run_id: s.state for s in summaries}
        assert len(summaries) == RUNS + 3
        assert states["damaged-run"] == "damaged" and states["unreadable-run"] == "damaged"
        big = next(s for s in summaries if s.run_id == "big-run")
        assert big.events == BIG_EVENTS
        assert "damaged" in cli_list(store)
        lists, bases = compare(
            lambda: _untimed(cli_list, store), lambda: _untimed(baseline, store), rounds=ROUNDS
        )
    median = statistics.median(lists)
    print(
        f"list: {RUNS} runs + one of {BIG_EVENTS:,} events + one damaged + one unreadable, "
        f"{ROUNDS} rounds; manifests alone median {statistics.median(bases):.3f} s"
    )
    record(
        "list: sandbox list of a large store", lists, goal="< 1 s", holds=lambda t: t < 1, unit=" s"
    )
    record("list: sandbox list / reading the manifests alone", ratios(lists, bases))
    return {"list": median, "baseline": statistics.median(bases)}


if __name__ == "__main__":
    main()
