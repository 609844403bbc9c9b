"""The stale answer: a support agent over a ``files`` workspace, captured and replayed with
the folder restored and found again through ``SUPPORT_DOCS``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sandbox.replay import replay
from sandbox.snapshot.store import DirectoryStore

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DirectoryStore, str]]:
    from examples.capture_demo import capture_support

    store = DirectoryStore(tmp_path_factory.mktemp("support-store"))
    yield store, capture_support(store)


def test_capture_holds_the_workspace_and_the_stale_retrieval(
    captured: tuple[DirectoryStore, str],
) -> None:
    store, run_id = captured
    manifest = store.load_manifest(run_id)
    assert manifest.failure is not None and manifest.failure.predicate is not None
    assert manifest.failure.predicate.kind == "result"
    (docs,) = manifest.services
    assert docs.kind == "files" and docs.binding.env == "SUPPORT_DOCS"
    assert docs.before is not None and docs.after is not None
    assert docs.hash_before == docs.hash_after  # the agent only reads the documents
    events = store.load_events(run_id)
    (retrieval,) = [e for e in events if e.kind == "retrieval"]
    assert [d.id for d in retrieval.documents] == ["returns-2023.md"]  # type: ignore[attr-defined]
    (final,) = [e for e in events if e.kind == "result"]
    assert "30 days" in final.value["answer"]  # type: ignore[attr-defined]


def test_replayed_3_times_reproduces_3(captured: tuple[DirectoryStore, str]) -> None:
    store, run_id = captured
    report = replay(run_id, store=store, times=3)
    assert report.verdict.reproduced == 3 and report.verdict.total == 3, report.describe()
    assert report.exit_code == 1
    assert all(d is None for d in report.divergences), report.describe()


def test_fixed_retriever_makes_the_failure_go_away(captured: tuple[DirectoryStore, str]) -> None:
    store, run_id = captured
    # The fixed retriever hands the model another document, so the model's second request is
    # not in the recording: with miss "live" that call goes to the (scripted) model itself.
    report = replay(
        run_id, store=store, times=3, entrypoint="examples.support:main_fixed", miss="live"
    )
    assert report.mismatch is None, report.describe()
    assert report.verdict.reproduced == 0 and report.verdict.total == 3, report.describe()
    assert report.exit_code == 0
    assert any("the failure is gone" in note.lower() for note in report.notes), report.notes
    div = next(d for d in report.divergences if d is not None)
    assert "retrieval 'search_docs'" in div.describe()


def test_fixed_retriever_with_a_recorded_model_stops_at_its_changed_request(
    captured: tuple[DirectoryStore, str],
) -> None:
    store, run_id = captured
    report = replay(run_id, store=store, times=3, entrypoint="examples.support:main_fixed")
    assert report.mismatch is not None and report.mismatch["kind"] == "llm"
    assert report.exit_code == 2
    assert "returns-2024.md" in str(report.mismatch["diff"][0]["actual"])
