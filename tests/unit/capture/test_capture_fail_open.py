"""Capture fails open: an error of the capture's own (an unwritable store, a full disk) never
reaches the agent. Its result or exception is unchanged, the error is one warning on stderr,
and the run, where it could be written at all, is marked damaged (never sealed complete)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox import capture
from sandbox.capture.run import DAMAGE_LABEL
from sandbox.snapshot.store import DirectoryStore

WARNING = "sandbox: capture of run"


@capture.tool
def produce(n: int) -> str:
    return f"{n}:" + "z" * 400_000  # a blob: more than the full disk holds


@capture.tool
def small(n: int) -> int:
    return n * 2


class AgentError(Exception):
    pass


def _warnings(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line.startswith(WARNING)]


def test_a_store_that_is_a_file_leaves_the_agents_result_unchanged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "store"
    path.write_text("not a folder")
    with capture.run("x", store=path, services="none") as rec:
        assert small(2) == 4
        rec.set_result({"answer": 4})
        rec.mark_failed("noted")  # does nothing, raises nothing
    assert len(_warnings(capsys)) == 1
    assert rec.damaged is not None
    assert path.read_text() == "not a folder"


def test_a_store_that_is_a_file_leaves_the_agents_exception_unchanged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "store"
    path.write_text("not a folder")
    raised = AgentError("the agent's own")
    with pytest.raises(AgentError) as caught, capture.run("x", store=path, services="none"):
        small(1)
        raise raised
    assert caught.value is raised
    assert len(_warnings(capsys)) == 1


def test_a_decorated_function_returns_its_value_with_an_unwritable_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "store"
    path.write_text("")

    @capture.run("decorated", store=path, services="none")
    def agent(n: int) -> int:
        return small(n) + 1

    assert agent(3) == 7
    assert len(_warnings(capsys)) == 1


def test_a_full_disk_during_the_run_is_one_warning_and_a_damaged_run(
    full_disk: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = DirectoryStore(full_disk / "store")
    with capture.run("full", store=store, services="none") as rec:
        out = produce(1)
        assert out.startswith("1:") and len(out) == 400_002
        assert produce(2).startswith("2:")
        assert small(5) == 10
    assert len(_warnings(capsys)) == 1
    manifest = store.load_manifest(rec.run_id)
    assert manifest.status == "damaged"
    assert (
        "No space left" in manifest.labels[DAMAGE_LABEL]
        or "full" in (manifest.labels[DAMAGE_LABEL])
    )


def test_a_full_disk_never_becomes_the_runs_failure(
    full_disk: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The agent's own exception goes on unchanged; the run is not sealed complete and its
    recorded failure is the agent's error, not the store's."""
    store = DirectoryStore(full_disk / "store")
    raised = AgentError("after the disk filled")
    with pytest.raises(AgentError) as caught, capture.run("full", store=store, services="none"):
        produce(1)
        raise raised
    assert caught.value is raised
    assert len(_warnings(capsys)) == 1
    (manifest,) = store.list()
    assert manifest.status == "damaged"
    assert manifest.failure is not None and manifest.failure.error is not None
    assert manifest.failure.error.type.endswith("AgentError")
