"""Capture overhead, each figure from two sides doing the same work (both pay the run's
setup, its sealing and the flushing of every event, or neither), one warm-up each, the sides
alternating over the rounds (:func:`bench.compare.compare`). ``python -m bench.capture
[--quick]``

Capture syncs a finished run's files in a background thread (:mod:`sandbox.capture.durable`),
off the agent's path; every side that opens a run waits, inside its timed region, for them
to be synced (:func:`~sandbox.capture.durable.flush`).

1. Tool calls: ``capture.run`` around N ``@tool`` calls against ``capture.run`` around no
   call followed by the same N calls with no run (the decorator's pass-through), both runs
   synced: the difference per call is the cost of recording one event. Goal: at most 50 µs.
2. and 3. HTTP: a whole run of N requests (local server, one ``httpx.Client``), each side
   paying its setup, its save and making what it saved durable: ``capture.run`` with its
   defaults (package list, git, manifest, event log, redaction of every event) and its
   files synced, against ``vcr.use_cassette`` writing a new cassette, then the cassette and
   its folder synced the way capture syncs its files
   (:func:`~sandbox.capture.durable.sync_paths`); ratio vcrpy / ours per round, for
   N = 200 and N = 20. Ours makes and writes each exchange's event on a background
   thread (:mod:`sandbox.capture.drain`) while the requests go on, and its run waits for
   them when it ends, inside the timed region: the same work, not on the agent's thread.
   Goal: >= 1.5 (ours at most two thirds of vcrpy's time). The server
   (:mod:`bench._echo_server`) runs in a process of its own, as the services an agent calls
   do; the 200-request run is also measured last with it on a thread of this process, as this
   benchmark did before: its handling then shares the interpreter's lock with the recorder
   and counts in every side's time. Each HTTP figure is measured in a process of its own
   (:func:`_block`): vcrpy's path was far slower in a process that had run another
   figure's runs, which flattered ours. The same requests made with no
   recorder are the third side of the same alternation, for information: vcrpy / them is
   the most any recorder can reach here, the requests themselves being most of the time;
   from them, the time each recorder adds per
   exchange, their ratio, and the most a recorder may add per exchange for the goal.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from bench import _echo_server
from bench.compare import compare, compare_all, ratios, record
from sandbox import capture
from sandbox.capture import durable
from sandbox.snapshot.store import DirectoryStore

QUICK = ["--quick"]


@capture.tool
def lookup(order_id: int, region: str = "eu") -> dict[str, Any]:
    return {"id": order_id, "region": region, "items": [1, 2, 3]}


def bench_tools(root: Path, calls: int, rounds: int) -> list[float]:
    """µs per recorded tool call, one value per round."""
    store = DirectoryStore(root / "tools")
    count = itertools.count()

    def loop() -> None:
        for i in range(calls):
            lookup(i)

    def recorded() -> None:
        with capture.run(f"tools-{next(count)}", store=store, seed=1, packages=False, http=False):
            loop()
        durable.flush()

    def passed_through() -> None:
        with capture.run(f"tools-{next(count)}", store=store, seed=1, packages=False, http=False):
            pass
        loop()
        durable.flush()

    ours, base = compare(recorded, passed_through, rounds=rounds)
    return [(o - b) / calls * 1e6 for o, b in zip(ours, base, strict=True)]


@dataclass(frozen=True)
class HTTPFigures:
    """Per round, for one run of ``requests`` requests."""

    whole: list[float]
    """vcrpy / ours, whole runs (the issue's figure)."""
    ceiling: list[float]
    """vcrpy / the same requests recorded by nothing: the most any recorder reaches."""
    added: list[float]
    """The time vcrpy adds to the requests / the time ours adds."""
    ours_us: list[float]
    vcrpy_us: list[float]
    """µs each recorder adds per exchange (its setup and save spread over them)."""
    budget_us: list[float]
    """The most a recorder may add per exchange for vcrpy / it to reach 1.5."""


def bench_http_run(root: Path, requests: int, rounds: int, *, own_process: bool) -> HTTPFigures:
    """A whole ``requests``-request run recorded by ours, by vcrpy and by nothing, setup and
    save included, the three sides taking turns in one alternation, against a server in a
    process of its own or on a thread of this one."""
    import vcr

    store = DirectoryStore(root / f"runs-{requests}")
    count = itertools.count()
    with _echo_server.in_own_process() if own_process else _echo_server.in_this_process() as url:

        def work() -> None:
            with httpx.Client() as client:
                for i in range(requests):
                    client.post(url, json={"i": i, "q": "where is my order"}).json()

        def ours() -> None:
            with capture.run(f"http-{next(count)}", store=store, seed=1):
                work()
            durable.flush()

        def theirs() -> None:
            cassette = root / f"http-{next(count)}.yaml"
            with vcr.use_cassette(str(cassette), record_mode="all"):
                work()
            durable.sync_paths([cassette, cassette.parent])  # as capture syncs its files

        mine, vcrpy, bare = compare_all([ours, theirs, work], rounds=rounds)
    per = 1e6 / requests
    return HTTPFigures(
        whole=ratios(vcrpy, mine),
        ceiling=ratios(vcrpy, bare),
        added=[(v - b) / (m - b) for m, v, b in zip(mine, vcrpy, bare, strict=True)],
        ours_us=[(m - b) * per for m, b in zip(mine, bare, strict=True)],
        vcrpy_us=[(v - b) * per for v, b in zip(vcrpy, bare, strict=True)],
        budget_us=[(v / 1.5 - b) * per for v, b in zip(vcrpy, bare, strict=True)],
    )


def _block(requests: int, rounds: int, own_process: bool) -> HTTPFigures:
    """:func:`bench_http_run` in a process of its own: what one figure's runs leave behind
    (vcrpy's path was measured 10 to 60 times slower in a process that had run other
    figures' runs before) does not reach the next figure."""
    block = f"{requests}:{'own' if own_process else 'here'}"
    done = subprocess.run(
        [sys.executable, "-m", "bench.capture", "--block", block, "--rounds", str(rounds)],
        capture_output=True,
        text=True,
        cwd=str(_echo_server.ROOT),
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"bench.capture: the {requests}-request run failed:\n{done.stderr}")
    return HTTPFigures(**json.loads(done.stdout.splitlines()[-1]))


def _run_block(spec: str, rounds: int) -> int:
    """``--block REQUESTS:own|here``: one HTTP figure's runs, their values printed as JSON."""
    requests, _, where = spec.partition(":")
    with tempfile.TemporaryDirectory() as tmp:
        http = bench_http_run(Path(tmp), int(requests), rounds, own_process=where == "own")
    print(json.dumps(dataclasses.asdict(http)))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.capture")
    parser.add_argument("--quick", action="store_true", help="fewer calls and rounds")
    parser.add_argument("--block", help=argparse.SUPPRESS)
    parser.add_argument("--rounds", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    calls, big, rounds = (500, 50, 5) if args.quick else (2000, 200, 15)
    if args.block:
        return _run_block(args.block, args.rounds or rounds)
    with tempfile.TemporaryDirectory() as tmp:
        record(
            f"capture: recording one @tool call ({calls} calls)",
            bench_tools(Path(tmp), calls, rounds),
            goal="<= 50 µs",
            holds=lambda us: us <= 50,
            unit=" µs",
        )
    for requests, own_process in ((big, True), (20, True), (big, False)):
        http = _block(requests, rounds, own_process)
        where = "server in its own process" if own_process else "server in this process"
        run = f"{requests}-request run, {where}"
        record(
            f"capture: vcrpy / ours, {run} with setup and save",
            http.whole,
            goal=">= 1.5x",
            holds=lambda ratio: ratio >= 1.5,
        )
        record(f"capture: vcrpy / no recording, {run} (the most)", http.ceiling)
        record(f"capture: time vcrpy adds / time ours adds, {run}", http.added)
        record(f"capture: ours adds per exchange, {run}", http.ours_us, unit=" µs")
        record(f"capture: vcrpy adds per exchange, {run}", http.vcrpy_us, unit=" µs")
        record(
            f"capture: the most a recorder may add per exchange for 1.5x, {run}",
            http.budget_us,
            unit=" µs",
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
