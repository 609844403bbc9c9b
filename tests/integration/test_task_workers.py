"""``@capture.run(..., keep="failed")`` on real tasks run by real task workers against a real
Redis container: a ``rq worker`` (each job in a work horse it forks, ended with ``os._exit``
as soon as the job's outcome is stored) and a Celery prefork worker recycling its child
after every task (``--max-tasks-per-child 1``: the child ends with ``os._exit`` too). The
failing tasks' runs, finished in the background, must still reach the store, each holding
its own task's calls and Redis keys, and the tasks' own outcomes are unchanged."""

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

TASKS = """
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

CELERY_APP = """
import os

from celery import Celery

import trial_tasks

app = Celery("trial_celery", broker=os.environ["TRIAL_BROKER"], backend=os.environ["TRIAL_BROKER"])
refund = app.task(name="refund")(trial_tasks.refund)
"""

CELERY_CLIENT = """
import trial_celery

results = [trial_celery.refund.delay(f"o-{i}") for i in range(6)]
outcomes = []
for result in results:
    try:
        outcomes.append(result.get(timeout=120))
    except RuntimeError as error:
        outcomes.append(f"raised: {error}")
print("\\n".join(outcomes))
"""


def _env(tmp_path: Path, server: str) -> dict[str, str]:
    (tmp_path / "trial_tasks.py").write_text(textwrap.dedent(TASKS))
    repo = Path(__file__).resolve().parents[2]
    return {
        **os.environ,
        "TRIAL_STORE": str(tmp_path / "store"),
        "TRIAL_REDIS": f"{server}/1",
        "TRIAL_BROKER": f"{server}/2",
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(repo)]),
    }


def _kept_whole(store: Path) -> None:
    """Exactly the three failing orders' runs: complete, failed with their own error, each
    with its own ``charge`` call and only its own order's key."""
    runs = DirectoryStore(store).list()
    charged = []
    for manifest in runs:
        assert manifest.status == "complete"
        assert manifest.failure is not None and manifest.failure.error is not None
        log = DirectoryStore(store).run_dir(manifest.run_id) / "events.jsonl"
        events = [json.loads(line) for line in log.read_text().splitlines()]
        (order,) = [e["args"]["order_id"] for e in events if e.get("kind") == "tool"]
        assert f"gateway refused {order}" in manifest.failure.error.message
        (cache,) = [s for s in manifest.services if s.name == "cache"]
        assert cache.meta.get(KEYS_META) == [f"order:{order}"], cache.meta
        charged.append(order)
    assert sorted(charged) == ["o-1", "o-3", "o-5"]


def test_the_failing_jobs_of_an_rq_worker_are_kept_whole_and_replay(tmp_path: Path) -> None:
    """Of six jobs, the three that raise are kept whole; the three that succeed leave
    nothing; RQ records three failed and three finished jobs. With the Redis server
    stopped, ``sandbox replay`` of a kept job calls the task with its recorded argument,
    its key restored in the sandbox's own Redis: the failure reproduces."""
    with redis_server() as server:
        env = _env(tmp_path, server)
        enqueue = (
            "import sys, redis, rq, trial_tasks\n"
            "q = rq.Queue(connection=redis.Redis.from_url(sys.argv[1]))\n"
            "for i in range(6):\n"
            "    q.enqueue(trial_tasks.refund, f'o-{i}')\n"
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
        assert FailedJobRegistry(queue=queue).count == 3
        assert FinishedJobRegistry(queue=queue).count == 3
    _kept_whole(tmp_path / "store")
    (kept, *_) = DirectoryStore(tmp_path / "store").list()
    store = str(tmp_path / "store")
    replayed = subprocess.run(
        [sys.executable, "-m", "cli.main", "replay", kept.run_id, "--store", store, "--json"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    verdict = json.loads(replayed.stdout)["verdict"]
    assert (verdict["outcome"], verdict["reproduced"]) == ("reproduced", 1), replayed.stdout


def test_the_failing_tasks_of_a_celery_prefork_worker_are_kept_whole(tmp_path: Path) -> None:
    """The same six tasks through Celery, two child processes, each replaced after one task:
    the callers get the tasks' own results and errors, and the three failing runs are kept
    whole."""
    (tmp_path / "trial_celery.py").write_text(textwrap.dedent(CELERY_APP))
    with redis_server() as server:
        env = _env(tmp_path, server)
        worker = subprocess.Popen(
            [
                *(sys.executable, "-m", "celery", "-A", "trial_celery", "worker"),
                *("--pool", "prefork", "--concurrency", "2", "--max-tasks-per-child", "1"),
                *("--loglevel", "WARNING", "--without-heartbeat", "--without-gossip"),
            ],
            env=env,
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            client = subprocess.run(
                [sys.executable, "-c", CELERY_CLIENT],
                env=env,
                cwd=tmp_path,
                capture_output=True,
                text=True,
                timeout=300,
            )
        finally:
            worker.terminate()  # a warm shutdown: the children still running finish
            _, errors = worker.communicate(timeout=120)
        assert client.returncode == 0, client.stderr[-2000:]
        assert client.stdout.split("\n")[:6] == [
            "charged o-0",
            "raised: gateway refused o-1",
            "charged o-2",
            "raised: gateway refused o-3",
            "charged o-4",
            "raised: gateway refused o-5",
        ]
    _kept_whole(tmp_path / "store")
    assert "sandbox:" not in errors  # no capture warning in the worker's log
