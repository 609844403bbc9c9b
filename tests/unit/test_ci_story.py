"""The CI story, walked with real captures and replays in process: a captured failure keeps CI
green while it reproduces; the fix turns CI red (gone) until the failure is marked fixed; then
CI is green on gone, and red again when the bug comes back."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from cli.main import main
from sandbox import capture
from sandbox.snapshot import DirectoryStore
from sandbox.snapshot.manifest import Entrypoint

AGENT = """
from sandbox import capture

FIXED = {fixed}


class DuplicateCharge(Exception):
    pass


@capture.tool
def charge(order_id: str) -> dict:
    return {{"charged": order_id}}


def main() -> str:
    charged = [charge("o-1")]
    if not FIXED:  # the retry that charges again
        charged.append(charge("o-1"))
    if len(charged) > 1:
        raise DuplicateCharge("o-1 charged twice")
    return "charged once"
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    monkeypatch.chdir(folder)
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.delenv("SANDBOX_STORE", raising=False)
    monkeypatch.setenv("COLUMNS", "200")
    return folder


def _write_agent(project: Path, *, fixed: bool) -> None:
    (project / "ci_story_agent.py").write_text(AGENT.format(fixed=fixed))
    sys.modules.pop("ci_story_agent", None)


def _ci(store: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, object]]:
    code = main(["ci-repro", "--store", str(store), "--json"])
    out = capsys.readouterr().out
    (check,) = json.loads(out)["checks"]
    return code, check


def test_ci_survives_a_fix_once_the_failure_is_marked_fixed(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = project / "snapshots"
    _write_agent(project, fixed=False)
    import ci_story_agent

    entry = Entrypoint(kind="callable", target="ci_story_agent:main", cwd=str(project))
    with (
        pytest.raises(ci_story_agent.DuplicateCharge),
        capture.run("ci-story", store=str(store), services="none", entrypoint=entry),
    ):
        ci_story_agent.main()
    (run_id,) = [m.run_id for m in DirectoryStore(store).list()]

    reports = project / "replay-reports"
    code = main(["ci-repro", "--store", str(store), "--report-dir", str(reports)])
    assert code == 1  # captured, still failing: green
    assert f"wrote report {reports / (run_id + '.html')}" in capsys.readouterr().err
    page = (reports / f"{run_id}.html").read_text()
    assert run_id in page and "reproduced" in page
    code, check = _ci(store, capsys)
    assert (code, check["outcome"], check["expected"]) == (1, "reproduced", "reproduced")

    _write_agent(project, fixed=True)  # the fix lands: the failure is gone, CI goes red
    code, check = _ci(store, capsys)
    assert (code, check["outcome"], check["ok"]) == (0, "gone", False)

    assert main(["mark", run_id, "--fixed", "--by", "1a2b3c4", "--store", str(store)]) == 0
    assert "fixed by 1a2b3c4" in capsys.readouterr().out
    code, check = _ci(store, capsys)  # marked fixed: green on gone
    assert (code, check["outcome"], check["expected"], check["ok"]) == (1, "gone", "gone", True)
    assert check["fixed_by"] == "1a2b3c4"

    _write_agent(project, fixed=False)  # the bug comes back: red
    code = main(["ci-repro", "--store", str(store)])
    err = capsys.readouterr().err
    assert code == 0
    assert "1 marked fixed but back" in err

    assert main(["mark", run_id, "--open", "--store", str(store), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"run": run_id, "fixed": None}
    code, check = _ci(store, capsys)  # open again: a reproduction is what CI expects
    assert (code, check["expected"], check["ok"]) == (1, "reproduced", True)


def test_only_a_captured_failure_can_be_marked_fixed(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = project / "snapshots"
    with capture.run("fine", store=str(store), services="none"):
        pass
    (run_id,) = [m.run_id for m in DirectoryStore(store).list()]
    assert main(["mark", run_id, "--fixed", "--store", str(store)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "no captured failure to mark fixed" in line
    assert DirectoryStore(store).load_manifest(run_id).fixed is None


def test_the_example_workflow_keeps_the_reports_ci_repro_writes() -> None:
    """The workflow's upload step keeps the folder its ci-repro step writes pages into."""
    import yaml

    repo = Path(__file__).resolve().parents[2]
    workflow = yaml.safe_load((repo / ".github" / "workflows" / "replay.yml").read_text())
    steps = workflow["jobs"]["ci-repro"]["steps"]
    (repro,) = [s for s in steps if "make ci-repro" in s.get("run", "")]
    reports = repro["run"].split("REPORTS=", 1)[1].split()[0]
    (keep,) = [s for s in steps if "upload-artifact" in s.get("uses", "")]
    assert keep["with"]["path"].rstrip("/") == reports
    makefile = (repo / "Makefile").read_text()
    assert "REPORTS_OPT = $(if $(REPORTS),--report-dir $(REPORTS))" in makefile
    target = makefile.split("\nci-repro:", 1)[1].split("\n\n", 1)[0]
    assert "$(REPORTS_OPT)" in target
