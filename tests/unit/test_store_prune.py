"""``sandbox gc --runs``: pruning a store by age and by size, with the blobs only the pruned
runs referenced, and one clear error line for what it cannot take."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta

import pytest
from snapshot_factory import publish_after_the_last_listing

from cli.main import main
from sandbox.errors import SandboxError
from sandbox.sizes import human_size, parse_size
from sandbox.snapshot import DirectoryStore, Manifest, Snapshot
from sandbox.snapshot.events import HTTPExchange
from sandbox.snapshot.manifest import ServiceState
from sandbox.snapshot.prune import parse_age, prune

NOW = datetime(2026, 12, 1, tzinfo=UTC)
SHARED = b"CREATE TABLE orders (id int);\n" * 400  # every run's state before: one blob


def _run(store: DirectoryStore, run_id: str, days_old: int, *, publishing: bool = False) -> str:
    """A run captured ``days_old`` days before NOW: its manifest references the shared blob,
    its event log a page of its own; returns the page's blob key. Its blobs were written
    when it was captured, unless it is ``publishing`` (now)."""
    before = store.put_blob(SHARED, "application/sql")
    page = store.put_blob(f"<html>{run_id}</html>".encode() * 200, "text/html")
    created = NOW - timedelta(days=days_old)
    if not publishing:
        for blob in (before, page):
            os.utime(store.blob_path(blob.sha256), (created.timestamp(), created.timestamp()))
    manifest = Manifest(
        run_id=run_id,
        name="refund",
        created=created,
        status="complete",
        services=[ServiceState(name="db", kind="postgres", before=before)],
    )
    exchange = HTTPExchange(seq=0, wall=1.0, mono=0.0, method="GET", url="http://x/", status=200)
    store.save(Snapshot(manifest, [exchange.model_copy(update={"response_blob": page})]))
    return page.sha256


@pytest.fixture
def three(store: DirectoryStore) -> dict[str, str]:
    """Runs 10, 5 and 1 days old, by id -> the key of their own page blob."""
    return {run_id: _run(store, run_id, days) for run_id, days in (("a", 10), ("b", 5), ("c", 1))}


def test_runs_older_than_an_age_go_with_the_blobs_only_they_referenced(
    store: DirectoryStore, three: dict[str, str]
) -> None:
    pruned = prune(store, older_than=parse_age("7d"), now=NOW.timestamp())
    assert pruned.runs == ("a",) and pruned.remaining == 2 and pruned.blobs == 1
    assert store.run_ids() == ["b", "c"]
    assert not store.has_blob(three["a"])  # its own page
    for run_id in ("b", "c"):  # what is left is whole: its shared state and its page
        assert store.has_blob(three[run_id])
        assert store.load(run_id).manifest.services[0].before is not None
        assert store.get_verified_blob(store.load(run_id).manifest.services[0].before.sha256)


def test_a_size_cap_removes_the_oldest_runs_until_the_store_fits(
    store: DirectoryStore, three: dict[str, str]
) -> None:
    whole = prune(store, max_bytes=10**9, dry_run=True)
    assert whole.runs == () and whole.size > 0
    one_run = prune(store, max_bytes=1, dry_run=True)  # nothing fits: every run would go
    assert one_run.runs == ("a", "b", "c") and one_run.size == 0
    cap = whole.size - 1  # one byte too many: the oldest run goes, the shared blob stays
    dry = prune(store, max_bytes=cap, dry_run=True)
    assert dry.runs == ("a",) and store.run_ids() == ["a", "b", "c"]  # nothing removed
    pruned = prune(store, max_bytes=cap)
    assert pruned == dry and pruned.size <= cap
    assert store.run_ids() == ["b", "c"] and not store.has_blob(three["a"])
    on_disk = sum(store.run_bytes(r) for r in store.run_ids()) + sum(
        store.blob_path(key).stat().st_size for key in store.iter_blobs()
    )
    assert pruned.size == on_disk  # what is left: the runs' files and the blobs they hold


def test_the_last_run_holding_a_shared_blob_takes_it_with_it(
    store: DirectoryStore, three: dict[str, str]
) -> None:
    shared = store.load("a").manifest.services[0].before
    assert shared is not None
    prune(store, older_than=parse_age("3d"), now=NOW.timestamp())
    assert store.has_blob(shared.sha256)  # run c still holds it
    prune(store, older_than=parse_age("12h"), now=NOW.timestamp())
    assert store.run_ids() == [] and not store.has_blob(shared.sha256)
    assert list(store.iter_blobs()) == []


@pytest.mark.parametrize(
    ("text", "seconds"), [("7d", 7 * 86400), ("12h", 43200), ("30m", 1800), ("2w", 1209600)]
)
def test_ages(text: str, seconds: float) -> None:
    assert parse_age(text) == seconds


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("4096", 4096),
        ("500M", 500 * 1024**2),
        ("10G", 10 * 1024**3),
        ("1.5GiB", int(1.5 * 1024**3)),
    ],
)
def test_sizes(text: str, size: int) -> None:
    assert parse_size(text) == size
    assert parse_size(human_size(size).replace(" ", "")) == size  # read back as written


def test_the_command_prunes_and_says_what_went_in_json(
    store: DirectoryStore, three: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    age = f"{(datetime.now(UTC) - NOW).days + 3}d"  # a and b are older than this, c is not
    assert main(["gc", "--runs", "--older-than", age, "--store", str(store.root), "--json"]) == 0
    told = json.loads(capsys.readouterr().out)
    assert told["ok"] and told["runs"] == ["a", "b"] and told["remaining"] == 1
    assert told["claimed"] == 0  # every blob was written when its run was captured
    assert store.run_ids() == ["c"]


def test_the_command_says_which_blobs_it_kept_for_a_run_still_publishing(
    store: DirectoryStore, three: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    os.utime(store.blob_path(three["a"]), None)  # a's page, reused a moment ago
    age = f"{(datetime.now(UTC) - NOW).days + 7}d"  # a is older than this, b and c are not
    assert main(["gc", "--runs", "--older-than", age, "--store", str(store.root)]) == 0
    said = " ".join(capsys.readouterr().err.split())
    assert "removed 1 run(s) and 0 blob(s)" in said and "kept 1 blob(s)" in said
    assert store.has_blob(three["a"])


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["gc", "--older-than", "7d"], "add --runs"),
        (["gc", "--runs"], "say which runs go"),
        (["gc", "--runs", "--older-than", "7x"], "expected a number and a unit"),
        (["gc", "--runs", "--max-size", "lots"], "expected bytes or a number"),
        (["gc", "--runs", "--max-size", "1", "--claimed-within", "soon"], "--claimed-within"),
    ],
)
def test_what_the_command_cannot_take_is_one_line_and_exit_2(
    store: DirectoryStore,
    three: dict[str, str],
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    says: str,
) -> None:
    assert main([*args, "--store", str(store.root)]) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and len(err.splitlines()) == 1
    assert store.run_ids() == ["a", "b", "c"]  # nothing lost


def test_parse_errors_are_the_projects() -> None:
    with pytest.raises(SandboxError):
        parse_age("")


def test_a_run_published_while_pruning_keeps_the_blobs_it_shares_with_the_pruned(
    store: DirectoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run that appears after the store was listed (a kept run published meanwhile) and
    references a blob only the pruned runs held before: the blob stays, the run is whole."""
    page = _run(store, "old", 10)
    real_delete = store.delete

    def delete_while_a_run_arrives(run_id: str) -> None:
        real_delete(run_id)
        _run(store, "new", 0, publishing=True)  # its state is the shared blob, as the old's

    monkeypatch.setattr(store, "delete", delete_while_a_run_arrives)
    pruned = prune(store, older_than=parse_age("7d"), now=NOW.timestamp())
    assert pruned.runs == ("old",) and store.run_ids() == ["new"]
    before = store.load("new").manifest.services[0].before
    assert before is not None and store.has_blob(before.sha256)  # shared: kept
    assert not store.has_blob(page)  # the old run's own page: gone


def test_a_blob_a_run_reuses_after_the_last_listing_stays(
    store: DirectoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run being published reuses a blob that only the pruned run referenced, after the
    pruning listed the store for the last time and before it removes the blob (the run
    appears after that listing): the blob stays, so the run is whole; the old run's own page
    goes. Without the claim, the blob was removed under the new run."""
    page = _run(store, "old", 10)
    publish_after_the_last_listing(
        monkeypatch, store, lambda: _run(store, "new", 0, publishing=True)
    )
    pruned = prune(store, older_than=parse_age("7d"), now=NOW.timestamp())
    assert pruned.runs == ("old",) and pruned.blobs == 1 and pruned.claimed == 1
    assert store.run_ids() == ["new"]
    before = store.load("new").manifest.services[0].before
    assert before is not None and store.get_verified_blob(before.sha256) == SHARED
    assert not store.has_blob(page)


@pytest.mark.parametrize(("claimed_within", "stays"), [(3600.0, True), (0.0, False)])
def test_a_blob_claimed_within_the_grace_stays_and_is_counted(
    store: DirectoryStore, claimed_within: float, stays: bool
) -> None:
    """A blob only the pruned run referenced, reused a moment before the pruning (by a run
    still being published): kept and counted within the grace, removed with none."""
    page = _run(store, "old", 10)
    os.utime(store.blob_path(page), None)
    pruned = prune(
        store, older_than=parse_age("7d"), now=NOW.timestamp(), claimed_within=claimed_within
    )
    assert pruned.runs == ("old",) and store.has_blob(page) is stays
    assert (pruned.claimed, pruned.blobs) == ((1, 1) if stays else (0, 2))
