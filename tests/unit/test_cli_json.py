"""``--json`` on the commands that print a result: one JSON object on stdout, the exit code
the command has without it, an error as an object too; and ``sandbox capture``'s exit codes
(the program's when it ran, 125 for capture's own failure, 126 cannot execute, 127 not
found)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from snapshot_factory import build_snapshot

from cli.main import main
from sandbox.snapshot import DirectoryStore


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code = main(list(argv))
    out = capsys.readouterr().out
    result = json.loads(out)  # the whole of stdout is one object
    assert isinstance(result, dict)
    return code, result


def test_export_and_import_print_their_result_as_json(
    store: DirectoryStore, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    build_snapshot(store)
    bundle = tmp_path / "bug.tar.gz"
    code, out = _json(
        capsys, "export", "run-1", "-o", str(bundle), "--store", str(store.root), "--json"
    )
    assert code == 0
    assert out == {
        "ok": True,
        "run_id": "run-1",
        "path": str(bundle),
        "bytes": bundle.stat().st_size,
    }
    other = tmp_path / "other"
    code, out = _json(capsys, "import", str(bundle), "--store", str(other), "--json")
    assert (code, out) == (0, {"ok": True, "run_id": "run-1", "store": str(other)})


def test_an_error_with_json_is_an_object_and_the_same_exit_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"junk")
    code = main(["import", str(junk), "--store", str(tmp_path / "s"), "--json"])
    out, err = capsys.readouterr()
    assert code == 2
    result = json.loads(out)
    assert result["ok"] is False and result["exit_code"] == 2
    assert result["error"] == err.strip() and err.startswith("sandbox: error: ")


def test_push_and_pull_print_the_blobs_copied_as_json(
    store: DirectoryStore, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    build_snapshot(store)
    team, desk = tmp_path / "team", tmp_path / "desk"
    code, out = _json(capsys, "push", "run-1", str(team), "--store", str(store.root), "--json")
    assert code == 0
    assert out == {
        "ok": True,
        "run_id": "run-1",
        "from": str(store.root),
        "to": str(team),
        "blobs": 3,
    }
    code, out = _json(capsys, "pull", "run-1", str(team), "--store", str(desk), "--json")
    assert (code, out["to"], out["blobs"]) == (0, str(desk), 3)
    code, out = _json(capsys, "pull", "nope", str(team), "--store", str(desk), "--json")
    assert code == 2 and out["ok"] is False and "nope" in out["error"]


def test_pytest_prints_the_file_it_wrote_as_json(
    store: DirectoryStore, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    build_snapshot(store)
    test = tmp_path / "test_run_1.py"
    code, out = _json(
        capsys, "pytest", "run-1", "-o", str(test), "--store", str(store.root), "--json"
    )
    assert (code, out) == (0, {"ok": True, "run_id": "run-1", "path": str(test), "warning": None})
    assert test.is_file()
    code, out = _json(
        capsys, "pytest", "run-1", "-o", str(test), "--store", str(store.root), "--json"
    )
    assert code == 2 and out["ok"] is False and "--force" in out["error"]


def test_gc_without_an_engine_is_a_json_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent-sandbox-test/docker.sock")
    code, out = _json(capsys, "gc", "--json")
    assert code == 2 and out["ok"] is False and out["exit_code"] == 2


def _capture(store: DirectoryStore, *argv: str) -> int:
    return main(["capture", "--name", "c", "--store", str(store.root), *argv])


def test_capture_json_is_the_only_stdout_and_the_programs_exit_code_passes_through(
    store: DirectoryStore, capfd: pytest.CaptureFixture[str]
) -> None:
    code = _capture(store, "--json", "--", sys.executable, "-c", "print('hi'); raise SystemExit(3)")
    out, err = capfd.readouterr()
    assert code == 3
    result = json.loads(out)
    (manifest,) = store.list()
    assert result == {
        "ok": True,
        "run_id": manifest.run_id,
        "exit_code": 3,
        "failed": True,
        "failure": "exit code 3",
        "not_run": None,
        "store": str(store.root),
    }
    assert "hi" in err  # the program's stdout went to stderr


def test_capture_exits_125_for_its_own_failure_126_and_127_when_the_program_cannot_run(
    store: DirectoryStore, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    assert _capture(store, "--state", "some", "--", "true") == 125  # bad option
    assert main(["capture", "--store", str(store.root), "--", "true"]) == 125  # no --name
    assert _capture(store) == 125  # no program
    capfd.readouterr()
    assert _capture(store, "--", "no-such-program-xyz") == 127
    assert "sandbox: no program 'no-such-program-xyz'" in capfd.readouterr().err
    plain = tmp_path / "notes.txt"
    plain.write_text("not a program")
    assert _capture(store, "--", str(plain)) == 126
    assert "cannot execute" in capfd.readouterr().err
    reasons = sorted(m.failure.reason for m in store.list() if m.failure is not None)
    assert reasons[0].startswith("exit code 126: cannot execute")
    assert reasons[1] == "exit code 127: no program 'no-such-program-xyz'"
    code, out = 0, ""
    code = _capture(store, "--json", "--state", "some", "--", "true")
    out = capfd.readouterr().out
    assert code == 125 and json.loads(out)["exit_code"] == 125
