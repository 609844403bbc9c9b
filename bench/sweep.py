"""Benchmark: a replay sweep on a local Ray instance against the same replays run one after
another in this process.

Both sides do the same work: every (run, replay) is one call of
:func:`sandbox.sweep.replay_task` (open the store, replay the run once, judge it), either
sequentially here or as Ray tasks (``sandbox sweep``'s path: task submission, scheduling on
the ``docker`` resource, results gathered as they finish). The runs are captures of the
``support`` demo (a ``files`` workspace: no container), in a folder store. Ray starts once,
before the measurements (its start-up is printed apart); one warm-up round of each side
runs first; then the sides alternate, ``--repeat`` times. Printed: the median ratio of the
sweep's wall time to the sequential one with its spread (min-max), and the overhead per task
((sweep - sequential) / tasks; on a two-core machine no speed-up is expected). With
``--workers 1`` the sweep runs one task at a time, as the sequential side does: the ratio is
then Ray's cost alone (submission, scheduling, a worker process, results).

    .venv/bin/python -m bench.sweep [--runs 2] [--times 3] [--repeat 3] [--workers 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from sandbox.snapshot.store import DirectoryStore
from sandbox.sweep import DOCKER_RESOURCE, SweepTask, replay_task, sweep

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.sweep")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--times", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2, help="Ray's CPUs and docker units")
    args = parser.parse_args(argv)

    import ray

    from examples.capture_demo import capture_support

    cwd = os.getcwd()
    with tempfile.TemporaryDirectory() as folder:
        store = DirectoryStore(folder)
        manifests = [store.load_manifest(capture_support(store)) for _ in range(args.runs)]
        tasks = [
            SweepTask(m.run_id, i, str(store.root), str(ROOT))
            for m in manifests
            for i in range(args.times)
        ]

        def sequential() -> float:
            start = time.perf_counter()
            for task in tasks:
                replay_task(task)
            return time.perf_counter() - start

        def on_ray() -> float:
            start = time.perf_counter()
            sweep(manifests, store=str(store.root), times=args.times, project=ROOT)
            return time.perf_counter() - start

        start = time.perf_counter()
        ray.init(
            num_cpus=args.workers,
            resources={DOCKER_RESOURCE: args.workers},
            include_dashboard=False,
            logging_level="ERROR",
            log_to_driver=False,
        )
        started = time.perf_counter() - start
        try:
            sequential(), on_ray()  # warm-up: imports, worker processes, caches
            pairs = []
            for _ in range(args.repeat):
                pairs.append((sequential(), on_ray()))
        finally:
            ray.shutdown()
            os.chdir(cwd)
    ratios = [swept / seq for seq, swept in pairs]
    overheads = [(swept - seq) / len(tasks) for seq, swept in pairs]
    seq_median = statistics.median(p[0] for p in pairs)
    swept_median = statistics.median(p[1] for p in pairs)
    print(
        f"sweep of {len(tasks)} replays ({args.runs} runs x {args.times}) on a local Ray "
        f"instance of {args.workers} workers (started in {started:.1f} s, not counted)"
    )
    print(f"  sequential replay_task: median {seq_median:.2f} s")
    print(f"  sweep on Ray:           median {swept_median:.2f} s")
    print(
        f"  ratio sweep/sequential: median {statistics.median(ratios):.2f} "
        f"(spread {min(ratios):.2f}-{max(ratios):.2f}, {args.repeat} alternated pairs)"
    )
    print(
        f"  overhead per task:      median {statistics.median(overheads) * 1000:+.0f} ms "
        f"(spread {min(overheads) * 1000:+.0f} to {max(overheads) * 1000:+.0f} ms)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
