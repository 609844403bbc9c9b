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
