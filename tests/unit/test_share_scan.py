"""The scan before sharing: what redaction let through is found, named, and stops export."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli.main import main
from sandbox import capture
from sandbox.services.sharescan import Finding, scan_run
from sandbox.snapshot.store import DirectoryStore

STRIPE = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"  # not a format redaction knows; detect-secrets does


def _capture(store: DirectoryStore, workspace: Path) -> str:
    @capture.tool
    def billing_config() -> str:
        return f"stripe key: {STRIPE}"

    spec = capture.ServiceSpec("docs", "files", str(workspace), env="DOCS")
    with capture.run("leaky", store=store, seed=1, services=[spec], cwd=str(store.root)) as rec:
        billing_config()
    return rec.run_id


def test_findings_name_the_event_line_and_the_file_in_the_workspace(
    store: DirectoryStore, tmp_path: Path
) -> None:
    workspace = tmp_path / "docs"
    workspace.mkdir()
    (workspace / "contacts.md").write_text("# Contacts\nescalate to ops.lead@example.com\n")
    run = _capture(store, workspace)
    findings = scan_run(store, run)
    kinds = {(f.kind, f.where.split(" (")[-1]) for f in findings}
    assert any(
        f.kind == "Stripe Access Key" and f.where.startswith("events.jsonl line") for f in findings
    )
    assert ("e-mail address", "file contacts.md line 2)") in kinds


def test_export_refuses_names_where_and_allow_accepts(
    store: DirectoryStore, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    workspace = tmp_path / "docs"
    workspace.mkdir()
    (workspace / "contacts.md").write_text("escalate to ops.lead@example.com\n")
    run = _capture(store, workspace)
    out = tmp_path / "bug.tar.gz"
    args = ["export", run, "-o", str(out), "--store", str(store.root)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not exported" in err
    assert "Stripe Access Key in events.jsonl line" in err
    assert "e-mail address in blob" in err and "file contacts.md line 1" in err
    assert not out.exists()
    assert main([*args, "--allow", "Stripe Access Key in *"]) == 2  # the e-mail remains
    assert not out.exists()
    allow = ["--allow", "Stripe Access Key in *", "--allow", "e-mail address in *file contacts.md*"]
    assert main([*args, *allow]) == 0
    assert out.is_file()


def test_placeholders_are_not_findings(store: DirectoryStore, tmp_path: Path) -> None:
    @capture.tool
    def leak() -> str:
        return "password = 'hunter2-and-more' token sk-proj-abcdefghijklmnopqrstuvwx mail a@b.io"

    with capture.run("clean", store=store, seed=1, cwd=str(store.root)) as rec:
        leak()
    findings = scan_run(store, rec.run_id)
    assert Finding("e-mail address", "events.jsonl line 1") not in findings
    assert all(f.kind != "OpenAI Token" for f in findings)


def test_credential_fields_are_found_in_every_place_an_event_holds_text(
    store: DirectoryStore,
) -> None:
    """A run written without redaction (an old or hand-made one): the scan names the event
    line of a secret in an exception message, in a tool argument and output (JSON and a
    JSON string), in a model's tool call, and in a text blob; counts are not findings."""
    from sandbox.snapshot import Snapshot
    from sandbox.snapshot.events import ErrorInfo, LLMCall, ToolCall
    from sandbox.snapshot.manifest import Entrypoint, Manifest

    blob = store.put_blob(b"config\nAPI_SECRET=blob-opaque-41\n", "text/plain")
    events = [
        ToolCall(
            seq=0,
            wall=1.0,
            mono=0.0,
            name="login",
            args={"user": "bob", "note": "retry with passwd=arg-opaque-42"},
            error=ErrorInfo(type="RuntimeError", message="denied: password=exc-opaque-43"),
        ),
        ToolCall(
            seq=1, wall=1.1, mono=0.1, name="t", args={"q": "x"}, output='{"access_token": "o-44"}'
        ),
        LLMCall(
            seq=2,
            wall=1.2,
            mono=0.2,
            response={"tool_calls": [{"arguments": '{"api_secret": "llm-opaque-45"}'}]},
            usage={"prompt_tokens": 11, "max_tokens": "300"},
        ),
        ToolCall(seq=3, wall=1.3, mono=0.3, name="read", args={"path": "cfg"}, output_blob=blob),
    ]
    manifest = Manifest(
        run_id="hand",
        name="hand",
        created="2024-03-01T12:00:00Z",
        status="complete",
        entrypoint=Entrypoint(kind="callable", target="examples.shop:run"),
    )
    store.save(Snapshot(manifest, events))
    found = {str(f) for f in scan_run(store, "hand")}
    assert {
        "credential field (passwd) in events.jsonl line 1",
        "credential field (password) in events.jsonl line 1",
        "credential field (access_token) in events.jsonl line 2",
        "credential field (api_secret) in events.jsonl line 3",
        f"credential field (API_SECRET) in blob {blob.sha256[:12]} line 2",
    } <= found
    assert not any("tokens" in f for f in found)


def test_package_names_are_not_credential_fields_yet_their_text_is_scanned(
    store: DirectoryStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The manifest lists ``detect-secrets`` with its version: no finding (a package, not a
    credential field). A secret in another package's version is still found there."""
    (tmp_path / "site" / f"leaky_pkg-{STRIPE}.dist-info").mkdir(parents=True)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    with capture.run("packages", store=store, seed=1, cwd=str(store.root)) as rec:
        pass
    runtime = store.load_manifest(rec.run_id).runtime
    assert runtime is not None and runtime.packages["detect-secrets"][0].isdigit()
    findings = scan_run(store, rec.run_id)
    assert not any("detect-secrets" in f.kind for f in findings), findings
    assert any(
        f.kind == "Stripe Access Key" and f.where.startswith("manifest.json line") for f in findings
    ), findings
