"""``sandbox capture -- python agent.py``: an unmodified program, captured."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from cli.main import main
from sandbox.snapshot.events import HTTPExchange, LLMCall, RandomDraw
from sandbox.snapshot.manifest import ExitCodePredicate
from sandbox.snapshot.store import DirectoryStore

AGENT = textwrap.dedent(
    """
    import sys, uuid
    import openai

    client = openai.OpenAI(api_key="sk-proj-childsecret0123456789", base_url=sys.argv[1] + "/v1")
    reply = client.chat.completions.create(
        model="gpt-child", messages=[{"role": "user", "content": "hi"}], temperature=0.7
    )
    print("agent says:", reply.choices[0].message.content, uuid.uuid4())
    if sys.argv[2] == "raise":
        raise RuntimeError("order 7 charged twice")
    sys.exit(int(sys.argv[2]))
    """
)


@pytest.fixture
def agent(tmp_path: Path) -> Path:
    path = tmp_path / "agent.py"
    path.write_text(AGENT)
    return path


def _capture(store: DirectoryStore, agent: Path, api: Any, mode: str, seed: int = 5) -> int:
    return main(
        [
            "capture",
            "--name",
            "child",
            "--store",
            str(store.root),
            "--seed",
            str(seed),
            "--",
            sys.executable,
            str(agent),
            api.url,
            mode,
        ]
    )


def test_successful_program(
    store: DirectoryStore, agent: Path, fake_api: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    assert _capture(store, agent, fake_api, "0") == 0
    out, err = capfd.readouterr()
    assert "agent says: The order ships Tuesday." in out
    assert "captured run child-" in err and "(ok, exit code 0)" in err
    (manifest,) = store.list()
    assert manifest.status == "complete" and manifest.exit_code == 0 and manifest.failure is None
    assert manifest.entrypoint is not None and manifest.entrypoint.command[-1] == "0"
    assert manifest.seeds["random"] == 5
    events = store.load_events(manifest.run_id)
    assert manifest.event_count == len(events)
    kinds = [e.kind for e in events]
    assert kinds.count("http") == 1 and kinds.count("llm") == 1
    llm = next(e for e in events if isinstance(e, LLMCall))
    assert llm.model == "gpt-child" and llm.params["temperature"] == 0.7
    drawn = [str(e.value) for e in events if isinstance(e, RandomDraw) and e.source == "uuid4"]
    assert out.split()[-1] in drawn  # the id the program printed is a recorded draw
    assert b"childsecret" not in (store.run_dir(manifest.run_id) / "events.jsonl").read_bytes()


def test_same_seed_same_ids(
    store: DirectoryStore, agent: Path, fake_api: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    _capture(store, agent, fake_api, "0", seed=11)
    _capture(store, agent, fake_api, "0", seed=11)
    first, second = (
        [
            str(e.value)
            for e in store.load_events(m.run_id)
            if isinstance(e, RandomDraw) and e.source == "uuid4"
        ]
        for m in store.list()
    )
    assert first == second and first


def test_exception_becomes_the_failure(
    store: DirectoryStore, agent: Path, fake_api: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    assert _capture(store, agent, fake_api, "raise") == 1
    err = capfd.readouterr().err
    assert "RuntimeError: order 7 charged twice" in err  # the child's traceback is kept
    (manifest,) = store.list()
    assert manifest.exit_code == 1 and manifest.failure is not None
    assert manifest.failure.predicate is not None
    assert manifest.failure.predicate.kind == "exception"
    assert manifest.failure.predicate.type == "RuntimeError"  # type: ignore[union-attr]
    assert manifest.failure.predicate.message_contains == "order 7 charged twice"  # type: ignore[union-attr]
    assert any(isinstance(e, HTTPExchange) for e in store.load_events(manifest.run_id))


def test_exit_code_is_kept_and_marks_failure_judged_by_that_code(
    store: DirectoryStore, agent: Path, fake_api: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    """A command that failed by its exit code alone records a predicate of that code, so a
    replay has something to judge by."""
    assert _capture(store, agent, fake_api, "3") == 3
    (manifest,) = store.list()
    assert manifest.exit_code == 3 and manifest.failure is not None
    assert manifest.failure.reason == "exit code 3"
    assert manifest.failure.predicate == ExitCodePredicate(op="eq", value=3)


def test_missing_command_is_one_line_error(
    store: DirectoryStore, capfd: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(["capture", "--name", "x", "--store", str(store.root), "--", "no-such-program-xyz"])
        == 127
    )
    assert (
        main(["capture", "--name", "x", "--store", str(store.root)]) == 125
    )  # capture's own failure (as docker run)


def test_a_captured_command_keeps_the_versions_of_packages_named_like_credentials(
    store: DirectoryStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command's manifest is redacted whole at its end: a distribution whose name reads
    like a credential field still keeps its version there."""
    (tmp_path / "site" / "detect_secrets-1.5.0.dist-info").mkdir(parents=True)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    assert main(["capture", "--name", "pk", "--store", str(store.root), "--", "true"]) == 0
    (manifest,) = store.list()
    assert manifest.runtime is not None
    assert manifest.runtime.packages["detect-secrets"] == "1.5.0"
