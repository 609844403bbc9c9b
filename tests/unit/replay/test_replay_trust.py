"""Imported runs are someone else's data: their commands and outside code never run on the
host unless trusted. Runs in-process through ``cli.main.main`` with exit codes checked."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cli.main import main
from sandbox.errors import UntrustedRunError
from sandbox.replay.engine import replay
from sandbox.replay.isolation.environment import is_hook, restored_environment
from sandbox.replay.isolation.trust import what_would_run
from sandbox.snapshot import DirectoryStore, Manifest
from sandbox.snapshot.bundle import export_bundle, import_bundle
from sandbox.snapshot.events import FinalResult, ToolCall
from sandbox.snapshot.manifest import Entrypoint, ExceptionPredicate, Failure, Provenance
from sandbox.snapshot.snapshot import Snapshot

CREATED = "2024-03-01T12:00:00+00:00"


@pytest.fixture(autouse=True)
def wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.delenv("SANDBOX_STORE", raising=False)


def _bundle(tmp_path: Path, entry: Entrypoint, run_id: str = "ticket-1") -> Path:
    """A captured failure with ``entry`` as its entrypoint, exported as a bundle."""
    source = DirectoryStore(tmp_path / "theirs")
    manifest = Manifest.model_validate(
        {
            "run_id": run_id,
            "created": CREATED,
            "status": "complete",
            "entrypoint": entry.model_dump(),
            "failure": Failure(
                reason="order placed twice", predicate=ExceptionPredicate(type="RuntimeError")
            ).model_dump(),
        }
    )
    source.save(Snapshot(manifest, [FinalResult(seq=0, wall=1.0, mono=0.0, value="done")]))
    return export_bundle(source, run_id, tmp_path / f"{run_id}.tar.gz")


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def shell_bundle(tmp_path: Path) -> tuple[Path, Path]:
    marker = tmp_path / "marker"
    entry = Entrypoint(kind="command", command=["sh", "-c", f"touch {marker}"], cwd=str(tmp_path))
    return _bundle(tmp_path, entry), marker


def test_import_marks_the_run_with_its_bundle_whatever_the_bundle_says(
    tmp_path: Path, shell_bundle: tuple[Path, Path]
) -> None:
    bundle, _ = shell_bundle
    store = DirectoryStore(tmp_path / "mine")
    import_bundle(store, bundle)
    provenance = store.load_manifest("ticket-1").provenance
    assert provenance is not None
    assert provenance.imported_from == "ticket-1.tar.gz"
    # a bundle exported from an imported run, doctored to say "captured here", is still marked
    doctored = DirectoryStore(tmp_path / "doctored")
    snap = store.load("ticket-1")
    doctored.save(Snapshot(snap.manifest.model_copy(update={"provenance": None}), snap.events))
    again = export_bundle(doctored, "ticket-1", tmp_path / "clean-looking.tar.gz")
    fresh = DirectoryStore(tmp_path / "fresh")
    import_bundle(fresh, again)
    marked = fresh.load_manifest("ticket-1").provenance
    assert marked is not None and marked.imported_from == "clean-looking.tar.gz"


def test_replay_refuses_an_imported_shell_command_without_trust(
    tmp_path: Path, shell_bundle: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    bundle, marker = shell_bundle
    store = tmp_path / "mine"
    assert _run(capsys, "import", str(bundle), "--store", str(store))[0] == 0
    code, _, err = _run(capsys, "replay", "ticket-1", "--store", str(store))
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1
    assert f"sh -c 'touch {marker}'" in lines[0]
    assert "--trust" in lines[0]
    assert not marker.exists()
    assert [m.run_id for m in DirectoryStore(store).list()] == ["ticket-1"]  # no replay run


def test_ci_repro_refuses_an_imported_shell_command_without_trust(
    tmp_path: Path, shell_bundle: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    bundle, marker = shell_bundle
    store = tmp_path / "mine"
    assert _run(capsys, "import", str(bundle), "--store", str(store))[0] == 0
    code, out, _ = _run(capsys, "ci-repro", "--store", str(store), "--json")
    assert code != 0
    (check,) = json.loads(out)["checks"]
    assert check["ok"] is False
    assert "sh -c" in check["error"] and "--trust" in check["error"]
    assert not marker.exists()


def test_with_trust_the_imported_command_does_run(
    tmp_path: Path, shell_bundle: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """The control for the two refusals above: the marker is what the command makes."""
    bundle, marker = shell_bundle
    store = tmp_path / "mine"
    assert _run(capsys, "import", str(bundle), "--store", str(store))[0] == 0
    _run(capsys, "replay", "ticket-1", "--store", str(store), "--trust")
    assert marker.exists()


def test_show_prints_the_entrypoint_first_and_the_provenance(
    tmp_path: Path, shell_bundle: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    bundle, marker = shell_bundle
    store = tmp_path / "mine"
    _run(capsys, "import", str(bundle), "--store", str(store))
    code, out, _ = _run(capsys, "show", "ticket-1", "--store", str(store))
    assert code == 0
    lines = out.splitlines()
    assert lines[1].split() == ["entrypoint", "sh", "-c", "touch", str(marker)]
    assert "imported" in lines[2] and "ticket-1.tar.gz" in lines[2] and "untrusted" in lines[2]


def _imported(target: str, tmp_path: Path) -> Manifest:
    return Manifest.model_validate(
        {
            "run_id": "r",
            "created": CREATED,
            "entrypoint": {"kind": "callable", "target": target},
            "provenance": Provenance(imported_from="b.tar.gz", bundle_sha256="0" * 64),
        }
    )


def test_module_entrypoints_outside_the_project_are_untrusted(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "shop_agents").mkdir(parents=True)
    (project / "shop_agents" / "__init__.py").write_text("")
    (project / "shop_agents" / "shop.py").write_text("def run():\n    return 1\n")
    assert what_would_run(_imported("shop_agents.shop:run", tmp_path), project) is None
    for outside in ("os:getcwd", "json:loads", "pytest:main", "nowhere_at_all:run"):
        what = what_would_run(_imported(outside, tmp_path), project)
        assert what is not None and outside in what, outside
    local = _imported("shop_agents.shop:run", tmp_path).model_copy(update={"provenance": None})
    assert what_would_run(local, tmp_path) is None  # captured here: trusted


def test_an_imported_call_with_recorded_arguments_is_refused_even_from_the_project(
    tmp_path: Path,
) -> None:
    """A decorated task's arguments are the bundle's data: handed to a function of the
    project they would choose what it does (a path to delete, a command), so an imported
    run that records some does not replay on the host untrusted; the same run captured
    here, or without arguments, does."""
    project = tmp_path / "project"
    (project / "shop_agents").mkdir(parents=True)
    (project / "shop_agents" / "__init__.py").write_text("")
    (project / "shop_agents" / "shop.py").write_text("def run(order):\n    return order\n")
    imported = _imported("shop_agents.shop:run", tmp_path)
    assert imported.entrypoint is not None
    with_args = imported.model_copy(
        update={"entrypoint": imported.entrypoint.model_copy(update={"args": ["o-1"]})}
    )
    what = what_would_run(with_args, project)
    assert what is not None and "shop_agents.shop:run" in what and "arguments" in what
    assert what_would_run(imported, project) is None
    assert what_would_run(with_args.model_copy(update={"provenance": None}), project) is None


def test_engine_refuses_before_importing_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = DirectoryStore(tmp_path / "s")
    failure = Failure(predicate=ExceptionPredicate(type="RuntimeError"))
    manifest = _imported("os:getcwd", tmp_path).model_copy(
        update={"status": "complete", "failure": failure}
    )
    store.save(Snapshot(manifest, []))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UntrustedRunError, match=r"os:getcwd .*--trust"):
        replay("r", store=store)
    # an entrypoint the user names is the user's own choice
    report = replay("r", store=store, entrypoint="os:getcwd")
    assert report.replays


def _project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str) -> Path:
    """A project folder holding ``ticket_agent.py`` with ``source``, as the working folder."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "ticket_agent.py").write_text(source)
    monkeypatch.chdir(project)
    monkeypatch.syspath_prepend(str(project))
    monkeypatch.delitem(sys.modules, "ticket_agent", raising=False)
    return project


def test_an_attribute_path_through_another_module_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``ticket_agent:os.getppid`` names a project module, but runs a stdlib function: refused
    with one line and exit 2 before anything is called; a function defined there runs."""
    _project(
        tmp_path,
        monkeypatch,
        "import os\n\nclass Desk:\n    @staticmethod\n    def run():\n"
        "        raise RuntimeError('x')\n\n"
        "def run():\n    raise RuntimeError('order placed twice')\n",
    )
    source = DirectoryStore(tmp_path / "theirs")
    store = tmp_path / "mine"
    for target in ("ticket_agent:os.getppid", "ticket_agent:os.abort", "ticket_agent:os.path.join"):
        run_id = "t-" + target.rpartition(".")[2]
        manifest = _imported(target, tmp_path).model_copy(
            update={
                "run_id": run_id,
                "status": "complete",
                "provenance": None,
                "failure": Failure(predicate=ExceptionPredicate(type="RuntimeError")),
            }
        )
        source.save(Snapshot(manifest, []))
        bundle = export_bundle(source, run_id, tmp_path / f"{run_id}.tar.gz")
        assert _run(capsys, "import", str(bundle), "--store", str(store))[0] == 0
        code, _, err = _run(capsys, "replay", run_id, "--store", str(store))
        assert code == 2, (target, err)
        (line,) = err.strip().splitlines()
        assert target in line and "--trust" in line and "nothing ran" in line
    for target in ("ticket_agent:run", "ticket_agent:Desk.run"):
        manifest = _imported(target, tmp_path).model_copy(
            update={
                "status": "complete",
                "failure": Failure(predicate=ExceptionPredicate(type="RuntimeError")),
            }
        )
        DirectoryStore(store).save(Snapshot(manifest, []), overwrite=True)
        report = replay("r", store=DirectoryStore(store))
        assert report.replays  # a function defined in the project module ran


def _audit_library(tmp_path: Path, marker: Path) -> bytes:
    """A shared library that, loaded through ``LD_AUDIT``, creates ``marker``."""
    if shutil.which("cc") is None:
        pytest.skip("needs a C compiler to build the audit library")
    source = tmp_path / "audit.c"
    source.write_text(
        "#include <fcntl.h>\n#include <unistd.h>\n"
        "unsigned int la_version(unsigned int v) {\n"
        f'  int fd = open("{marker}", O_CREAT | O_WRONLY, 0644);\n'
        "  if (fd >= 0) close(fd);\n  return v;\n}\n"
    )
    out = tmp_path / "audit.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(out), str(source)], check=True)
    return out.read_bytes()


def test_a_bundle_cannot_make_the_host_load_its_blob_through_ld_audit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bundle ships a shared library as a blob and points ``LD_AUDIT`` (and other hooks) at
    its predictable store path; the replayed agent starts a subprocess. The host marker the
    library makes when loaded must not appear (the control shows the library does make it)."""
    marker = tmp_path / "host-marker"
    library = _audit_library(tmp_path, marker)
    subprocess.run(["true"], env={**os.environ, "LD_AUDIT": str(tmp_path / "audit.so")})
    assert marker.exists()  # the control: loaded, the library leaves the marker
    marker.unlink()
    _project(
        tmp_path,
        monkeypatch,
        "import subprocess\n\ndef run():\n    subprocess.run(['true'])\n"
        "    raise RuntimeError('order placed twice')\n",
    )
    source = DirectoryStore(tmp_path / "theirs")
    ref = source.put_blob(library)
    mine = DirectoryStore(tmp_path / "mine")
    planted = str(mine.blob_path(ref.sha256))
    manifest = _imported("ticket_agent:run", tmp_path).model_copy(
        update={
            "status": "complete",
            "provenance": None,
            "env": {
                "LD_AUDIT": planted,
                "LD_PRELOAD": planted,
                "PYTHONSTARTUP": planted,
                "BASH_ENV": planted,
                "SHOP_PLUGIN": planted,
                "SHOP_REGION": "eu",
                "PYTHONHASHSEED": "7",
            },
            "failure": Failure(predicate=ExceptionPredicate(type="RuntimeError")),
        }
    )
    tool = ToolCall(seq=0, wall=1.0, mono=0.0, name="lookup", output_blob=ref)
    source.save(Snapshot(manifest, [tool]))
    bundle = export_bundle(source, "r", tmp_path / "r.tar.gz")
    import_bundle(mine, bundle)
    assert Path(planted).read_bytes() == library  # the blob is where the bundle expected
    restored = restored_environment(mine.load_manifest("r"), {}, store_root=mine.root)
    assert restored == {"SHOP_REGION": "eu", "PYTHONHASHSEED": "7"}
    monkeypatch.delenv("LD_AUDIT", raising=False)
    code, _, err = _run(capsys, "replay", "r", "--store", str(mine.root))
    assert code in (0, 1, 2), err
    assert not marker.exists()


def test_hook_variables_are_never_restored_from_a_local_run_either() -> None:
    manifest = Manifest.model_validate(
        {
            "run_id": "r",
            "created": CREATED,
            "env": {"LD_AUDIT": "/x.so", "NODE_OPTIONS": "--require /x.js", "REGION": "eu"},
        }
    )
    assert restored_environment(manifest, {}) == {"REGION": "eu"}
    for name in ("LD_AUDIT", "ld_audit", "DYLD_INSERT_LIBRARIES", "PYTHONWARNINGS", "BASH_ENV"):
        assert is_hook(name), name
    assert not is_hook("PYTHONHASHSEED") and not is_hook("OPENAI_MODEL")
