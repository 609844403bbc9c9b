"""``sandbox gc`` removes the temporary folders of file services (``files``, ``sqlite``) that
a killed replay left behind, and only those: a live session's folder and folders that are not
the sandbox's stay."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

from sandbox.containers.labels import Owner, process_start
from sandbox.containers.workdirs import OWNER_FILE, gc_workdirs, make_workdir


def _dead_owner() -> Owner:
    """The owner of a session whose process has exited (a killed replay)."""
    child = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    pid = int(child.stdout)
    return Owner("deadbeef", pid, None, socket.gethostname())


def test_gc_removes_only_folders_of_dead_sessions(tmp_path: Path) -> None:
    dead = make_workdir(_dead_owner(), root=str(tmp_path))
    (dead / "db").mkdir()
    (dead / "db" / "shop.db").write_bytes(b"restored copy")
    live = make_workdir(Owner.current(), root=str(tmp_path))
    stranger = tmp_path / "sbx-not-ours"
    stranger.mkdir()
    other_host = make_workdir(
        Owner("cafe", os.getpid(), process_start(os.getpid()), "elsewhere"), root=str(tmp_path)
    )
    assert json.loads((dead / OWNER_FILE).read_text())["org.sandbox-replayer.session"] == "deadbeef"

    assert gc_workdirs(root=str(tmp_path)) == [str(dead)]
    assert not dead.exists()
    assert live.exists() and stranger.exists() and other_host.exists()

    assert sorted(gc_workdirs(all=True, root=str(tmp_path))) == sorted([str(live), str(other_host)])
    assert stranger.exists()
