"""A store in object storage (``s3://``), against moto's S3 server started by the tests:
runs appear whole or not at all, a capture killed mid-upload is sent by the next start, and
a blob already there is never sent again."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path

import boto3
import pytest
from snapshot_factory import build_snapshot, publish_after_the_last_listing

from cli.main import main
from sandbox import capture
from sandbox.capture.run import ServiceSpec
from sandbox.errors import IntegrityError, StoreError, UnknownRunError
from sandbox.snapshot.objstore import S3Location
from sandbox.snapshot.snapshot import Snapshot
from sandbox.snapshot.spool import SpooledStore
from sandbox.snapshot.store import DirectoryStore, Store, open_store
from tests.conftest import S3Server

ROOT = Path(__file__).resolve().parents[2]


@capture.tool
def lookup(n: int) -> int:
    return n


def reader(url: str, tmp_path: Path) -> SpooledStore:
    """A second host's view of the store: an empty spool of its own, no uploader."""
    return SpooledStore(url, tmp_path / f"reader-{time.monotonic_ns()}", background=False)


def keys(url: str) -> list[str]:
    loc = S3Location.parse(url)
    listing = boto3.session.Session().client("s3").list_objects_v2(Bucket=loc.bucket)
    return sorted(item["Key"] for item in listing.get("Contents", ()))


def test_open_store_reads_s3_urls_and_the_environment(
    s3_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SANDBOX_SPOOL", str(tmp_path / "spool"))
    monkeypatch.setenv("SANDBOX_STORE", s3_url)
    store = open_store()
    assert isinstance(store, SpooledStore)
    assert store.root == tmp_path / "spool" and store.url == s3_url
    store.close()


def test_a_run_appears_only_when_complete_and_its_manifest_is_written_last(
    s3_url: str, s3: S3Server, tmp_path: Path
) -> None:
    store = SpooledStore(s3_url, tmp_path / "spool", background=False)
    other = reader(s3_url, tmp_path)
    with capture.run("s3-demo", store=store, run_id="s3-demo-1", cwd=str(tmp_path)):
        lookup(1)
        assert store.flush() == []  # still running: nothing is sent
        assert other.run_ids() == [] and not other.exists("s3-demo-1")
    assert store.flush() == ["s3-demo-1"]
    assert other.run_ids() == ["s3-demo-1"]
    assert other.load("s3-demo-1") == store.load("s3-demo-1")
    assert other.load_manifest("s3-demo-1").status == "complete"
    puts = [p.rsplit("/", 1)[-1] for p in s3.puts()]
    assert puts[-2:] == ["events.jsonl", "manifest.json"]
    assert store.flush() == []  # sent once: unchanged since


def test_listing_reads_manifests_only(s3_url: str, s3: S3Server, tmp_path: Path) -> None:
    store = SpooledStore(s3_url, tmp_path / "spool", background=False)
    for n in range(3):
        build_snapshot(store, f"run-{n}")
    store.flush()
    s3.log.write_text("")
    listed = reader(s3_url, tmp_path).list()
    assert [m.run_id for m in listed] == ["run-0", "run-1", "run-2"]
    gets = [r for r in s3.requests() if r.startswith("GET ") and "/runs/" in r]
    assert gets and all(r.endswith("/manifest.json") for r in gets)


def test_reading_a_run_pulls_its_blobs_and_checks_them(s3_url: str, tmp_path: Path) -> None:
    store = SpooledStore(s3_url, tmp_path / "spool", background=False)
    snapshot = build_snapshot(store, "run-1")
    store.flush()
    other = reader(s3_url, tmp_path)
    loaded = other.load("run-1")
    assert loaded.events == snapshot.events
    for key in snapshot.blob_refs():
        assert other.blob_path(key).read_bytes() == store.get_blob(key)
    with pytest.raises(UnknownRunError, match="no run 'nope'"):
        other.load("nope")


def test_a_tampered_blob_is_refused(s3_url: str, tmp_path: Path) -> None:
    store = SpooledStore(s3_url, tmp_path / "spool", background=False)
    snapshot = build_snapshot(store, "run-1")
    store.flush()
    key = sorted(snapshot.blob_refs())[0]
    loc = S3Location.parse(s3_url)
    client = boto3.session.Session().client("s3")
    client.put_object(Bucket=loc.bucket, Key=store.remote.blob_key(key), Body=b"evil")
    with pytest.raises(IntegrityError, match="does not match its SHA-256"):
        reader(s3_url, tmp_path).load_events("run-1")


def test_delete_removes_the_run_everywhere(s3_url: str, tmp_path: Path) -> None:
    store = SpooledStore(s3_url, tmp_path / "spool", background=False)
    build_snapshot(store, "run-1")
    store.flush()
    store.delete("run-1")
    assert not reader(s3_url, tmp_path).exists("run-1") and store.run_ids() == []
    assert not any("/runs/" in k for k in keys(s3_url))


def test_an_outage_keeps_runs_spooled(s3_url: str, s3: S3Server, tmp_path: Path) -> None:
    store = SpooledStore(s3_url, tmp_path / "spool", background=False)
    build_snapshot(store, "run-1")
    s3.down()
    with pytest.raises(StoreError, match="cannot"):
        store.flush()
    assert store.pending() == ["run-1"]
    s3.down(False)
    assert SpooledStore(s3_url, tmp_path / "spool", background=False).flush() == ["run-1"]


KILLED = textwrap.dedent(
    """
    import sys
    from sandbox import capture

    @capture.tool
    def step(n: int) -> int:
        return n

    with capture.run("spooled", store=sys.argv[1], run_id="spooled-1", packages=False):
        for n in range(5):
            step(n)
    print("captured", flush=True)
    """
)


@pytest.mark.timeout(120)
def test_a_capture_killed_mid_upload_leaves_no_half_run_and_the_next_start_sends_it(
    s3_url: str, s3: S3Server, tmp_path: Path
) -> None:
    spool = tmp_path / "spool"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SANDBOX_SPOOL": str(spool)}
    s3.hold("/runs/spooled-1/manifest.json", "PUT")  # the last write of the upload never lands
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED, s3_url],
        stdout=subprocess.PIPE,
        env=env,
        text=True,
        cwd=tmp_path,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "captured"  # the agent did not wait on uploads
    deadline = time.monotonic() + 60
    while not any(r.startswith("HELD PUT") for r in s3.requests()):
        assert time.monotonic() < deadline, s3.requests()
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    s3.release()

    # The event log is in the bucket, the manifest is not: no one sees a half run.
    assert any(k.endswith("/runs/spooled-1/events.jsonl") for k in keys(s3_url))
    assert not any(k.endswith("/runs/spooled-1/manifest.json") for k in keys(s3_url))
    assert reader(s3_url, tmp_path).run_ids() == []
    with pytest.raises(UnknownRunError):
        reader(s3_url, tmp_path).load_manifest("spooled-1")

    # The next start of any command on this spool sends what is left.
    listed = subprocess.run(
        [sys.executable, "-m", "cli.main", "list", "--store", s3_url],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert listed.returncode == 0, listed.stderr
    assert "spooled-1" in listed.stdout
    other = reader(s3_url, tmp_path)
    assert other.run_ids() == ["spooled-1"]
    run = other.load("spooled-1")
    assert run.manifest.status == "complete"
    assert [e.output for e in run.events if e.kind == "tool"] == list(range(5))
    spooled = SpooledStore(s3_url, spool, background=False)
    assert run == spooled.load("spooled-1") and spooled.pending() == []


@capture.tool
def count_items(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        count: int = conn.execute("SELECT count(*) FROM items").fetchone()[0]
    conn.close()
    return count


def test_100_runs_over_one_unchanged_database_upload_its_state_once(
    s3_url: str, s3: S3Server, tmp_path: Path
) -> None:
    db = tmp_path / "shop.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT)")
        conn.executemany("INSERT INTO items (name) VALUES (?)", [(f"item {i}",) for i in range(50)])
    conn.close()
    store = SpooledStore(s3_url, tmp_path / "spool", background=False)
    spec = ServiceSpec(name="shop", kind="sqlite", endpoint=str(db), env="SHOP_DB")
    states = set()
    for n in range(100):
        with capture.run(
            "reader", store=store, run_id=f"reader-{n}", services=[spec], cwd=str(tmp_path)
        ):
            count_items(db)
        assert store.flush() == [f"reader-{n}"]
        state = store.load_manifest(f"reader-{n}").services[0]
        assert state.before is not None and state.after is not None
        states |= {state.before.sha256, state.after.sha256}
    assert len(states) == 1  # one unchanged database: one state
    (key,) = states
    assert len(s3.puts(f"/blobs/sha256/{key[:2]}/{key}")) == 1
    assert len(s3.puts("/manifest.json")) == 100


def test_push_and_pull_move_a_run_between_a_folder_and_s3(
    s3_url: str,
    s3: S3Server,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("SANDBOX_SPOOL", str(tmp_path / "spool"))
    laptop = DirectoryStore(tmp_path / "laptop")
    snapshot = build_snapshot(laptop, "run-1")
    assert main(["push", "run-1", s3_url, "--store", str(laptop.root)]) == 0
    assert f"pushed run-1 to {s3_url} (3 blob(s) copied)" in capsys.readouterr().out
    assert reader(s3_url, tmp_path).load("run-1").events == snapshot.events
    assert len([p for p in s3.puts() if "/blobs/" in p]) == 3

    # Pushed again under another id: every blob is there already, none is sent.
    other = DirectoryStore(tmp_path / "other")
    build_snapshot(other, "run-2")
    assert main(["push", "run-2", s3_url, "--store", str(other.root)]) == 0
    assert len([p for p in s3.puts() if "/blobs/" in p]) == 3
    assert main(["push", "run-1", s3_url, "--store", str(laptop.root)]) == 2
    assert "already exists" in capsys.readouterr().err

    desk = DirectoryStore(tmp_path / "desk")
    monkeypatch.setenv("SANDBOX_SPOOL", str(tmp_path / "desk-spool"))
    assert main(["pull", "run-1", s3_url, "--store", str(desk.root)]) == 0
    assert desk.load("run-1") == laptop.load("run-1")
    assert desk.read_events_bytes("run-1") == laptop.read_events_bytes("run-1")
    assert main(["pull", "nope", s3_url, "--store", str(desk.root)]) == 2
    assert "no run 'nope'" in capsys.readouterr().err


def run_cli(args: list[str], spool: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """A ``sandbox`` command in a process of its own on ``spool`` (its uploader's last flush
    at exit included)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SANDBOX_SPOOL": str(spool)}
    return subprocess.run(
        [sys.executable, "-m", "cli.main", *args],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_run_spooled_for_one_store_is_never_listed_or_sent_by_another(
    s3_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another prefix of the bucket, or the same one at another endpoint, is another store."""
    spool = tmp_path / "shared-spool"
    loc = S3Location.parse(s3_url)
    other_url = f"s3://{loc.bucket}/another/prefix"
    mine = SpooledStore(s3_url, spool, background=False)
    build_snapshot(mine, "run-1")
    other = SpooledStore(other_url, spool, background=False)
    assert other.run_ids() == [] and not other.exists("run-1")
    assert other.pending() == [] and other.flush() == []
    assert not any("/another/prefix/runs/" in k for k in keys(s3_url))
    with pytest.raises(StoreError, match=r"spooled .* for s3://.* not for s3://.*another"):
        other.save(build_snapshot(other, "run-1", save=False))
    with monkeypatch.context() as env:
        env.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9")
        assert SpooledStore(s3_url, spool, background=False).pending() == []
    assert mine.flush() == ["run-1"]
    assert reader(s3_url, tmp_path).run_ids() == ["run-1"]


@pytest.mark.timeout(300)
def test_a_push_to_a_missing_bucket_spools_nothing_another_store_could_publish(
    s3_url: str, s3: S3Server, tmp_path: Path
) -> None:
    spool = tmp_path / "shared-spool"
    laptop = DirectoryStore(tmp_path / "laptop")
    build_snapshot(laptop, "run-1")
    missing = "s3://no-such-bucket-here/team"
    failed = run_cli(["push", "run-1", missing, "--store", str(laptop.root)], spool, tmp_path)
    assert failed.returncode == 2
    assert "no-such-bucket-here" in failed.stderr and len(failed.stderr.splitlines()) == 1

    # A plain listing of another store on the same spool publishes nothing into it.
    listed = run_cli(["list", "--store", s3_url], spool, tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert not any("/runs/" in k for k in keys(s3_url))

    # The push to the right bucket is a push like any other: said and done.
    pushed = run_cli(["push", "run-1", s3_url, "--store", str(laptop.root)], spool, tmp_path)
    assert pushed.returncode == 0, pushed.stderr
    assert f"pushed run-1 to {s3_url}" in pushed.stdout
    assert reader(s3_url, tmp_path).load("run-1") == laptop.load("run-1")


@pytest.mark.timeout(300)
def test_a_push_finding_the_run_in_the_bucket_says_so_and_uploads_nothing(
    s3_url: str, s3: S3Server, tmp_path: Path
) -> None:
    spool = tmp_path / "shared-spool"

    def ours(store: Store) -> Snapshot:
        snapshot = build_snapshot(store, "run-1", save=False)
        return replace(snapshot, manifest=snapshot.manifest.model_copy(update={"name": "ours"}))

    # A copy of run-1 waits in the spool for this bucket (a push during an outage) ...
    spooled = SpooledStore(s3_url, spool, background=False)
    spooled.save(ours(spooled))
    # ... while another host publishes its own run-1 there.
    theirs = SpooledStore(s3_url, tmp_path / "their-spool", background=False)
    snapshot = build_snapshot(theirs, "run-1")
    assert theirs.flush() == ["run-1"]
    s3.log.write_text("")

    laptop = DirectoryStore(tmp_path / "laptop")
    laptop.save(ours(laptop))
    pushed = run_cli(["push", "run-1", s3_url, "--store", str(laptop.root)], spool, tmp_path)
    assert pushed.returncode == 2
    assert "already exists" in pushed.stderr and len(pushed.stderr.splitlines()) == 1
    assert not [p for p in s3.puts() if "/runs/run-1/" in p]
    assert reader(s3_url, tmp_path).load_manifest("run-1").name == snapshot.manifest.name


def test_pruning_an_s3_store_removes_the_runs_and_their_blobs_there(
    s3_url: str, tmp_path: Path
) -> None:
    """``sandbox gc --runs`` on an ``s3://`` store: the pruned run's objects and its blobs
    (none shared with the run that stays) are gone from the bucket, not only the spool."""
    from sandbox.snapshot.prune import prune

    store = SpooledStore(s3_url, tmp_path / "spool", background=False)
    build_snapshot(store, "run-old")
    store.flush()
    blobs = [k for k in keys(s3_url) if "/blobs/" in k]
    assert blobs and [k for k in keys(s3_url) if "run-old" in k]
    time.sleep(1.1)  # the bucket's times are whole seconds: the blobs were written before it
    pruned = prune(reader(s3_url, tmp_path), max_bytes=0, claimed_within=0.0)
    assert pruned.runs == ("run-old",) and pruned.blobs == len(blobs) and pruned.claimed == 0
    assert not [k for k in keys(s3_url) if "run-old" in k or "/blobs/" in k]


def test_an_s3_blob_a_run_reuses_while_pruning_stays_in_the_bucket(
    s3_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run published to the bucket after the pruning's last listing reuses every blob of
    the pruned run: a reuse marks the blob in use (a copy onto itself; here at every reuse,
    in a service at most every few minutes), so the pruning leaves them and the new run
    reads whole from another host."""
    from sandbox.snapshot import objstore
    from sandbox.snapshot.prune import prune

    monkeypatch.setattr(objstore, "CLAIM_REFRESH", 0.0)
    store = SpooledStore(s3_url, tmp_path / "spool", background=False)
    build_snapshot(store, "run-old")
    store.flush()
    blobs = [k for k in keys(s3_url) if "/blobs/" in k]
    time.sleep(1.1)  # the bucket's times are whole seconds: the blobs were written before it
    pruning = reader(s3_url, tmp_path)

    def publish() -> None:
        other = SpooledStore(s3_url, tmp_path / "other-spool", background=False)
        build_snapshot(other, "run-new")
        other.flush()

    publish_after_the_last_listing(monkeypatch, pruning, publish)
    pruned = prune(pruning, max_bytes=0, claimed_within=0.0)
    assert pruned.runs == ("run-old",) and pruned.claimed == len(blobs) and pruned.blobs == 0
    assert [k for k in keys(s3_url) if "/blobs/" in k] == blobs
    fresh = reader(s3_url, tmp_path)
    assert fresh.run_ids() == ["run-new"]
    for ref in fresh.load("run-new").blob_refs():
        assert fresh.get_verified_blob(ref)
