"""``sandbox replay`` in-process: exit code = the verdict's, JSON output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.main import main
from sandbox.snapshot.store import DirectoryStore


def test_replay_cli_exit_code_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from test_replay_engine import _capture

    store = DirectoryStore(tmp_path)
    run_id = _capture(store)
    code = main(["replay", run_id, "--times", "2", "--json", "--store", str(tmp_path)])
    assert code == 1
    data = json.loads(capsys.readouterr().out)
    assert data["verdict"]["reproduced"] == 2 and data["exit_code"] == 1
    code = main(["replay", run_id, "--recorded", "tool", "--store", str(tmp_path)])
    assert code == 1
    assert "failure reproduced: 1/1" in capsys.readouterr().out
    assert main(["replay", "no-such-run", "--store", str(tmp_path)]) == 2
