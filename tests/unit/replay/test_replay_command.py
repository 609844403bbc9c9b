"""A run captured from a command (``sandbox capture -- python agent.py``), replayed by
running the command again with the replay hook: ``sandbox replay RUN`` in-process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest
from replay_json_server import json_server

from cli.main import main
from sandbox.replay.command import child_environment
from sandbox.replay.session import ReplayOptions
from sandbox.snapshot.events import HTTPExchange, RandomDraw, ToolCall
from sandbox.snapshot.store import DirectoryStore

AGENT = textwrap.dedent(
    """
    import sys, uuid
    import httpx
    from sandbox import capture

    @capture.tool
    def reserve(sku: str) -> dict:
        return {"sku": sku, "held": True}

    held = reserve("sku-9")
    price = httpx.get(sys.argv[1] + "/price").json()["cents"]
    order = uuid.uuid4()
    print("order", order, "price", price, "held", held["held"])
    raise RuntimeError(f"order {order} charged twice at {price} cents")
    """
)


@pytest.fixture
def prices() -> Iterator[ThreadingHTTPServer]:
    with json_server(lambda path, sent: {"cents": 1999}) as server:
        yield server


def _draws(store: DirectoryStore, run_id: str) -> list[str]:
    return [
        str(e.value)
        for e in store.load_events(run_id)
        if isinstance(e, RandomDraw) and e.source == "uuid4"
    ]


def test_command_run_replays_with_http_served_from_the_recording(
    tmp_path: Path, prices: ThreadingHTTPServer, capfd: pytest.CaptureFixture[str]
) -> None:
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    store = DirectoryStore(tmp_path / "store")
    url = f"http://127.0.0.1:{prices.server_address[1]}"
    root = ["--store", str(store.root)]
    code = main(
        ["capture", "--name", "cmd", *root, "--seed", "11", "--", sys.executable, str(agent), url]
    )
    assert code == 1
    (original,) = store.list()
    assert original.failure is not None and original.failure.predicate is not None
    assert original.entrypoint is not None and original.entrypoint.kind == "command"
    recorded_ids = _draws(store, original.run_id)
    assert len(recorded_ids) == 1
    capfd.readouterr()

    prices.shutdown()  # the price server is gone: a live HTTP call would fail to connect
    prices.server_close()

    code = main(["replay", original.run_id, "--times", "2", "--json", *root])
    out, err = capfd.readouterr()
    report = json.loads(out[out.index("{\n") :])
    assert code == 1, err
    assert report["verdict"]["reproduced"] == 2 and report["verdict"]["total"] == 2
    assert report["divergences"] == [None, None], report
    assert report["entrypoint"].endswith(f"agent.py {url}")
    assert f"order {recorded_ids[0]} price 1999" in out  # the program printed the same id
    for replay_id in report["replays"]:
        replayed = store.load_manifest(replay_id)
        assert replayed.replay_of == original.run_id and replayed.status == "complete"
        assert replayed.exit_code == 1
        assert replayed.entrypoint is not None and replayed.entrypoint.kind == "command"
        assert _draws(store, replay_id) == recorded_ids
        events = store.load_events(replay_id)
        (exchange,) = [e for e in events if isinstance(e, HTTPExchange)]
        assert exchange.status == 200 and exchange.error is None
        (tool,) = [e for e in events if isinstance(e, ToolCall)]
        assert tool.output == {"sku": "sku-9", "held": True}
        result = events[-1]
        assert result.kind == "result" and result.error is not None
        assert recorded_ids[0] in result.error.message


def test_a_command_replayed_from_another_folder_says_where_it_ran(
    tmp_path: Path,
    prices: ThreadingHTTPServer,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The command runs in its recorded working directory when that still exists; replayed
    from another folder (a copy of the project beside it, say), the report says so, and
    from the same folder it says nothing of it."""
    project, elsewhere = tmp_path / "project", tmp_path / "copy"
    project.mkdir()
    elsewhere.mkdir()
    (project / "agent.py").write_text(AGENT)
    store = ["--store", str(tmp_path / "store")]
    url = f"http://127.0.0.1:{prices.server_address[1]}"
    monkeypatch.chdir(project)
    assert main(["capture", "--name", "cmd", *store, "--", sys.executable, "agent.py", url]) == 1
    (original,) = DirectoryStore(tmp_path / "store").list()
    notes = {}
    for folder in (project, elsewhere):
        monkeypatch.chdir(folder)
        capfd.readouterr()
        assert main(["replay", original.run_id, "--json", *store]) == 1
        out = capfd.readouterr().out
        notes[folder] = json.loads(out[out.index("{\n") :])["notes"]
    said = f"The recorded command ran in its recorded working directory {project}, not in"
    assert not any(note.startswith(said) for note in notes[project])
    assert [note for note in notes[elsewhere] if note.startswith(said)] == [
        f"{said} {elsewhere}: the code replayed is the one there (replay from that folder, "
        "or give an --entrypoint, to replay another copy)."
    ]


def test_a_child_that_dies_without_reporting_is_an_error(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    agent = tmp_path / "agent.py"
    flag = tmp_path / "die"
    agent.write_text(
        "import os, sys\n"
        "if os.path.exists(sys.argv[1]):\n"
        "    os._exit(1)\n"
        "raise RuntimeError('boom')\n"
    )
    store = DirectoryStore(tmp_path / "store")
    root = ["--store", str(store.root)]
    assert (
        main(["capture", "--name", "dies", *root, "--", sys.executable, str(agent), str(flag)]) == 1
    )
    (original,) = store.list()
    flag.touch()
    capfd.readouterr()
    assert main(["replay", original.run_id, *root]) == 2
    assert "the replay did not start in the recorded command" in capfd.readouterr().err


def test_the_hook_never_runs_a_program_unreplayed(tmp_path: Path) -> None:
    env = child_environment(
        os.environ,
        store=DirectoryStore(tmp_path / "empty"),
        original="no-such-run",
        run_id="no-such-replay",
        options=ReplayOptions(),
        result=tmp_path / "served.json",
    )
    done = subprocess.run(
        [sys.executable, "-c", "print('ran live')"], env=env, capture_output=True, text=True
    )
    assert done.returncode == 70
    assert "ran live" not in done.stdout
    assert "replay could not start" in done.stderr
