"""A kind's client hook comes through the ``sandbox_replayer.clients`` entry-point group: an
installed distribution's hook patches its client when the agent imports it, routes its
connections and lends its default port to endpoint keys; a hook that cannot be loaded is
left out with a warning (capture fails open)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox import plugins
from sandbox.capture import clients
from sandbox.capture.clients import Connect

HOOK_MODULE = """
from sandbox.capture.clients import ClientHook, Connect, patch_attribute, route

def _patch(router, undo):
    import note_client

    def make(original):
        def connect(url):
            return original(route(router, Connect("note", "note_client", url)))
        return connect

    patch_attribute(note_client, "connect", make, undo)

HOOK = ClientHook(module="note_client", patch=_patch, kind="note", default_port=7777)
"""
CLIENT_MODULE = """
def connect(url):
    return "connected to " + url
"""


def _distribution(root: Path, value: str) -> None:
    (root / "note_hook.py").write_text(HOOK_MODULE)
    (root / "note_client.py").write_text(CLIENT_MODULE)
    info = root / "note_hook-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: note-hook\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{plugins.CLIENTS_GROUP}]\nnote = {value}\n")


@pytest.fixture
def fresh_hooks(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(clients, "_hooks", None)
    yield
    for name in ("note_hook", "note_client"):
        sys.modules.pop(name, None)


def test_an_installed_hook_routes_its_clients_connections(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_hooks: None
) -> None:
    _distribution(tmp_path, "note_hook:HOOK")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen: list[Connect] = []

    def router(connect: Connect) -> str:
        seen.append(connect)
        return "note://sandbox:1/x"

    undo = clients.install(router)
    try:
        import note_client  # imported by the agent after capture started

        assert note_client.connect("note://live/x") == "connected to note://sandbox:1/x"
    finally:
        undo()
    assert [(c.kind, c.client, c.endpoint) for c in seen] == [
        ("note", "note_client", "note://live/x")
    ]
    assert note_client.connect("note://live/x") == "connected to note://live/x"  # undone
    assert clients.endpoint_key("note", "note://live/x") == "note://live:7777/x"


def test_a_hook_that_cannot_be_loaded_is_left_out_with_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_hooks: None
) -> None:
    _distribution(tmp_path, "note_hook:NO_SUCH_HOOK")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.warns(RuntimeWarning, match=r"client hook 'note' \(note_hook:NO_SUCH_HOOK\)"):
        hooks = clients.client_hooks()
    # the built-in ones still load
    assert {h.kind for h in hooks} == {"postgres", "redis", "sqlite", "mysql"}


BROKEN_HOOK_MODULE = """
from sandbox.seam.clients import ClientHook

def _patch(router, undo):
    raise LookupError("no such event")

HOOK = ClientHook(module="note_client", patch=_patch, kind="note")
"""


def test_a_hook_that_fails_as_its_client_is_imported_leaves_the_import_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_hooks: None
) -> None:
    """A hook that raises while patching its client (as one installed before a library's
    events exist would) warns once; the agent's import of the client goes on."""
    _distribution(tmp_path, "note_hook:HOOK")
    (tmp_path / "note_hook.py").write_text(BROKEN_HOOK_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    undo = clients.install(lambda connect: connect.endpoint)
    try:
        with pytest.warns(RuntimeWarning, match=r"client hook for 'note_client'.*no such event"):
            import note_client  # imported by the agent after capture started
    finally:
        undo()
    assert note_client.connect("note://live/x") == "connected to note://live/x"


CHILD = """
import sqlite3, sys
sys.path.insert(0, sys.argv[1])
import _sandbox_report
_sandbox_report.watch_sqlite3(sys.argv[2])
sqlite3.connect(sys.argv[3]).execute("create table t (x)")
print(sorted(m for m in sys.modules if m.split(".")[0] == "sandbox"))
"""


def test_a_foreign_interpreter_reports_its_sqlite_files_with_the_kinds_path_rule(
    tmp_path: Path,
) -> None:
    """The child-side reporter (standard library only, for an interpreter where the package
    cannot be imported) finds the file an ``sqlite3.connect`` names with the sqlite kind's
    own rule, and connects where the capture answers."""
    import json
    import socket
    import subprocess
    import threading

    import sandbox.capture._site as site

    sock_path = str(tmp_path / "s.sock")
    moved = tmp_path / "moved.db"
    seen: list[dict[str, str]] = []
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(sock_path)
    server.listen(1)

    def answer() -> None:
        conn, _ = server.accept()
        with conn:
            seen.append(json.loads(conn.makefile("rb").readline()))
            conn.sendall(json.dumps({"endpoint": str(moved)}).encode() + b"\n")

    thread = threading.Thread(target=answer)
    thread.start()
    try:
        out = subprocess.run(
            [sys.executable, "-I", "-c", CHILD, site.__path__[0], sock_path, "asked.db"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
    finally:
        thread.join(timeout=60)
        server.close()
    assert out.stdout.strip() == "[]"  # nothing of the package imported
    assert [(s["kind"], s["client"], s["endpoint"]) for s in seen] == [
        ("sqlite", "sqlite3", str(tmp_path / "asked.db"))
    ]
    assert moved.exists() and not (tmp_path / "asked.db").exists()
