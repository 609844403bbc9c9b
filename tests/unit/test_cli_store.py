"""The store commands, run in-process through ``cli.main.main`` with exit codes checked."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest
from snapshot_factory import CREATED, build_snapshot, flip

from cli.main import main
from sandbox.snapshot import DirectoryStore, Manifest


@pytest.fixture(autouse=True)
def wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.delenv("SANDBOX_STORE", raising=False)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


DEAD_PID = 5_000_000
"""Above Linux's largest possible pid_max (2**22): never alive."""


def test_list_shows_each_run_with_its_status(
    store: DirectoryStore, capsys: pytest.CaptureFixture[str]
) -> None:
    build_snapshot(store, "done-1")
    here = socket.gethostname()
    store.begin(Manifest(run_id="live-1", created=CREATED, pid=os.getpid(), host=here)).close()
    store.begin(Manifest(run_id="dead-1", created=CREATED, pid=DEAD_PID, host=here)).close()
    store.begin(Manifest(run_id="away-1", created=CREATED, pid=os.getpid(), host="elsewhere"))

    code, out, err = _run(capsys, "list", "--store", str(store.root), "--json")
    assert (code, err) == (0, "")
    rows = {row["run_id"]: row for row in json.loads(out)}
    assert {k: v["status"] for k, v in rows.items()} == {
        "done-1": "complete",
        "live-1": "running",
        "dead-1": "incomplete",
        "away-1": "incomplete",
    }
    assert rows["done-1"]["events"] == 12
    assert rows["done-1"]["entrypoint"] == "examples.shop:run"
    assert rows["done-1"]["failure"] == "order placed twice"
    assert rows["done-1"]["size"] > 1500  # run files plus the blobs it references

    code, out, _ = _run(capsys, "list", "--store", str(store.root))
    assert code == 0
    assert "done-1" in out and "complete" in out and "incomplete" in out
    assert "order placed twice" in out


def test_list_reads_the_store_from_the_environment(
    store: DirectoryStore, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    build_snapshot(store, "env-run")
    monkeypatch.setenv("SANDBOX_STORE", str(store.root))
    code, out, _ = _run(capsys, "list", "--json")
    assert code == 0
    assert [r["run_id"] for r in json.loads(out)] == ["env-run"]


def test_show_prints_the_timeline(
    store: DirectoryStore, capsys: pytest.CaptureFixture[str]
) -> None:
    build_snapshot(store)
    code, out, _ = _run(capsys, "show", "run-1", "--store", str(store.root))
    assert code == 0
    assert "duplicate order" in out
    assert "+0.060s" in out and "place_order" in out and "TimeoutError" in out
    assert "GET http://shop.test/o/1 → 200" in out

    code, out, _ = _run(capsys, "show", "run-1", "--store", str(store.root), "--json")
    data = json.loads(out)
    assert data["manifest"]["run_id"] == "run-1"
    assert [e["seq"] for e in data["events"]] == list(range(12))
    assert data["events"][9]["kind"] == "http"


def test_unknown_run_is_one_line_and_exit_2(
    store: DirectoryStore, capsys: pytest.CaptureFixture[str]
) -> None:
    build_snapshot(store)
    for command in (["show", "run-9"], ["verify", "run-9"], ["export", "run-9", "-o", "x.tgz"]):
        code, out, err = _run(capsys, *command, "--store", str(store.root))
        assert code == 2
        assert err.count("\n") == 1 and "no run 'run-9'" in err
        assert out == ""


def test_verify_exit_codes_and_problems(
    store: DirectoryStore, capsys: pytest.CaptureFixture[str]
) -> None:
    snapshot = build_snapshot(store)
    code, out, _ = _run(capsys, "verify", "run-1", "--store", str(store.root))
    assert code == 0 and ": ok (12 events, 3 blobs)" in out

    key = sorted(snapshot.blob_refs())[0]
    path = store.blob_path(key)
    path.write_bytes(flip(path.read_bytes(), 0))
    code, out, _ = _run(capsys, "verify", "run-1", "--store", str(store.root))
    assert code == 1
    assert f"problem: blobs/sha256/{key[:2]}/{key}: content does not match its SHA-256" in out

    code, out, _ = _run(capsys, "verify", "run-1", "--store", str(store.root), "--json")
    assert code == 1 and json.loads(out)["ok"] is False


def test_export_import_verify_through_the_cli(
    store: DirectoryStore,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    build_snapshot(store)
    bundle = tmp_path / "bug-123.tar.gz"
    code, out, _ = _run(capsys, "export", "run-1", "-o", str(bundle), "--store", str(store.root))
    assert code == 0 and bundle.is_file() and "exported run-1" in out

    code, out, _ = _run(capsys, "verify", str(bundle), "--store", str(store.root))
    assert code == 0 and "ok" in out

    other = tmp_path / "other"
    code, out, _ = _run(capsys, "import", str(bundle), "--store", str(other))
    assert code == 0 and "imported run-1" in out
    assert (other / "runs" / "run-1" / "events.jsonl").read_bytes() == (
        store.root / "runs" / "run-1" / "events.jsonl"
    ).read_bytes()

    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"junk")
    code, out, err = _run(capsys, "import", str(junk), "--store", str(other))
    assert code == 2 and err.startswith("sandbox: error: ") and err.count("\n") == 1
    code, out, _ = _run(capsys, "verify", str(junk), "--store", str(other))
    assert code == 1 and "problem:" in out


@pytest.mark.parametrize("command", ["list", "show", "verify", "export", "import"])
def test_every_command_has_an_example_in_its_help(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(capsys, command, "--help")
    assert code == 0
    assert "Example: " in out and f"sandbox {command}" in out
    assert "--store" in out


def test_show_pages_and_filters_by_kind(
    store: DirectoryStore, capsys: pytest.CaptureFixture[str]
) -> None:
    build_snapshot(store)
    where = ("--store", str(store.root))

    def seqs(out: str) -> list[int]:
        return [int(line.split()[0]) for line in out.splitlines() if line.strip()[:1].isdigit()]

    code, out, _ = _run(capsys, "show", "run-1", *where, "--limit", "3")
    assert code == 0 and seqs(out) == [0, 1, 2]
    assert "... more: sandbox show run-1 --start 3" in out
    code, out, _ = _run(capsys, "show", "run-1", *where, "--start", "10")
    assert seqs(out) == [10, 11] and "more:" not in out
    code, out, _ = _run(capsys, "show", "run-1", *where, "--kind", "tool")
    tools = [e.seq for e in store.load_events("run-1") if e.kind == "tool"]
    assert len(tools) >= 2 and seqs(out) == tools
    code, out, _ = _run(capsys, "show", "run-1", *where, "--kind", "tool", "--json")
    assert [e["seq"] for e in json.loads(out)["events"]] == tools
    code, out, _ = _run(capsys, "show", "run-1", *where, "--json", "--limit", "2")
    assert [e["seq"] for e in json.loads(out)["events"]] == [0, 1]
