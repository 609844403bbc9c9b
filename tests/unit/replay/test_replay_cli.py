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


def test_policy_rules_apply_in_the_order_typed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from test_replay_engine import WRITES, _capture

    store = DirectoryStore(tmp_path)
    run_id = _capture(store)
    WRITES.clear()
    argv = ["replay", run_id, "--json", "--store", str(tmp_path)]
    # The whole-kind rule typed last wins over the glob typed before it: tools run live.
    code = main([*argv, "--recorded", "tool:wr*", "--policy", "spy=llm", "--live", "tool"])
    assert code == 1
    data = json.loads(capsys.readouterr().out)
    assert data["policies"].endswith("rules (last wins): recorded=tool:wr*, spy=llm, live=tool")
    assert WRITES == ["order", "order"]
    WRITES.clear()
    assert main([*argv, "--live", "tool", "--recorded", "tool:wr*"]) == 1
    capsys.readouterr()
    assert WRITES == []  # typed the other way round: the write tool is served recorded


def test_ordered_policies_without_a_known_order() -> None:
    from cli.policy_order import ordered_policies

    rules = ordered_policies([], {"live": ["tool"], "policy": ["recorded=tool:pay*"]}).rules
    assert [str(r) for r in rules] == ["live=tool", "recorded=tool:pay*"]
    assert main(["replay", "x", "--policy", "live"]) == 2  # no '=': a one-line error


def test_an_internal_error_exits_3_naming_the_traceback_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An exception that is not a SandboxError (here the store cannot create the replay's
    run: its scratch folder is a file) is a bug: exit 3, one line, the traceback in a file.
    Never 1, which means "reproduced"."""
    import shutil

    from test_replay_engine import _capture

    store = DirectoryStore(tmp_path)
    run_id = _capture(store)
    shutil.rmtree(tmp_path / ".tmp")
    (tmp_path / ".tmp").write_text("not a folder")
    assert main(["replay", run_id, "--store", str(tmp_path)]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("sandbox: internal error (a bug): ")
    traceback_file = Path(err[0].rsplit("traceback in ", 1)[1])
    try:
        text = traceback_file.read_text()
        assert text.startswith("Traceback") and "FileExistsError" in text
        assert "store.py" in text and "in begin" in text
    finally:
        traceback_file.unlink()


def test_fork_and_diff_from_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--override`` makes the run a fork stored with its edits; ``sandbox diff`` names the
    overridden step; a step the run lacks is one error line and exit 2."""
    from test_replay_engine import _capture

    store = DirectoryStore(tmp_path)
    run_id = _capture(store)
    step = next(e.seq for e in store.load_events(run_id) if e.kind == "tool")
    args = ["--store", str(tmp_path)]
    code = main(["replay", run_id, "--override", f'{step}="edited"', "--json", *args])
    data = json.loads(capsys.readouterr().out)
    assert code == 1 and data["exit_code"] == 1  # two writes still: the retry is unchanged
    assert data["fork"] == {
        "until": None,
        "overrides": [{"step": step, "value": "edited"}],
        "model": None,
        "params": {},
    }
    fork_id = data["replays"][0]
    assert store.load_manifest(fork_id).replay_of == run_id
    assert main(["diff", run_id, fork_id, "--json", *args]) == 1
    diff = json.loads(capsys.readouterr().out)
    assert diff["step"] == step and diff["relation"].startswith("B is a fork of A")
    assert main(["diff", run_id, run_id, *args]) == 0
    assert "no difference" in capsys.readouterr().out
    assert main(["replay", run_id, "--override", "999=1", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "step 999 is not in the run" in err[0]
    assert main(["diff", run_id, "no-such-run", *args]) == 2
