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
    monkeypatch.setattr(clients, "DEFAULT_PORTS", dict(clients.DEFAULT_PORTS))
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
    assert [h.kind for h in hooks] == ["mysql"]  # the built-in ones still load
