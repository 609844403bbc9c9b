"""``@capture.run(..., keep="failed")`` on a real RQ task, run by a real ``rq worker`` against
a real Redis container. RQ runs each job in a work horse it forks, which ends with
``os._exit`` as soon as the job's outcome is stored: the failing jobs' runs, finished in the
background, must still reach the store, each holding its own job's calls and Redis keys."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import redis
import rq
from rq.registry import FailedJobRegistry, FinishedJobRegistry
from test_services_containers import redis_server

from sandbox.services.redis.touched import KEYS_META
from sandbox.snapshot.store import DirectoryStore

pytestmark = pytest.mark.docker

JOBS = """
import os

import redis

from sandbox import capture

CACHE = os.environ["TRIAL_REDIS"]


@capture.tool
def charge(order_id: str) -> str:
    return f"charged {order_id}"


@capture.run(
    "refund-task",
    store=os.environ["TRIAL_STORE"],
    keep="failed",
    services=[capture.ServiceSpec("cache", "redis", CACHE, env="TRIAL_REDIS")],
)
def refund(order_id: str) -> str:
    client = redis.Redis.from_url(CACHE)
    client.set(f"order:{order_id}", "seen")
    done = charge(order_id)
    if int(order_id.rpartition("-")[2]) % 2:
        raise RuntimeError(f"gateway refused {order_id}")
    return done
"""


def test_the_failing_jobs_of_an_rq_worker_are_kept_whole(tmp_path: Path) -> None:
    """Of six jobs, the three that raise are kept: complete runs, each with its own
    ``charge`` call and only its own order's key; the three that succeed leave nothing."""
    (tmp_path / "trial_jobs.py").write_text(textwrap.dedent(JOBS))
    store = tmp_path / "store"
    repo = Path(__file__).resolve().parents[2]
    with redis_server() as server:
        env = {
            **os.environ,
            "TRIAL_STORE": str(store),
            "TRIAL_REDIS": f"{server}/1",
            "PYTHONPATH": os.pathsep.join([str(tmp_path), str(repo)]),
        }
        enqueue = (
            "import sys, redis, rq, trial_jobs\n"
            "q = rq.Queue(connection=redis.Redis.from_url(sys.argv[1]))\n"
            "for i in range(6):\n"
            "    q.enqueue(trial_jobs.refund, f'o-{i}')\n"
        )
        queue_url = f"{server}/0"
        subprocess.run([sys.executable, "-c", enqueue, queue_url], env=env, check=True, timeout=60)
        worker = subprocess.run(
            [sys.executable, "-m", "rq.cli", "worker", "--burst", "--url", queue_url],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert worker.returncode == 0, worker.stderr[-2000:]
        queue = rq.Queue(connection=redis.Redis.from_url(queue_url))
        # the jobs' own outcomes, unchanged by the capture
        assert FailedJobRegistry(queue=queue).count == 3
        assert FinishedJobRegistry(queue=queue).count == 3

    runs = DirectoryStore(store).list()
    assert len(runs) == 3, worker.stderr[-2000:]
    charged = {}
    for manifest in runs:
        assert manifest.status == "complete"
        assert manifest.failure is not None and manifest.failure.error is not None
        events = [
            json.loads(line)
            for line in (DirectoryStore(store).run_dir(manifest.run_id) / "events.jsonl")
            .read_text()
            .splitlines()
        ]
        (order,) = [e["args"]["order_id"] for e in events if e.get("kind") == "tool"]
        assert order in manifest.failure.error.message
        (cache,) = [s for s in manifest.services if s.name == "cache"]
        assert cache.meta.get(KEYS_META) == [f"order:{order}"], cache.meta
        charged[order] = manifest.run_id
    assert sorted(charged) == ["o-1", "o-3", "o-5"]
