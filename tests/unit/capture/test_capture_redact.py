"""Planted secrets never reach the disk: events, manifest, blobs."""

from __future__ import annotations

from typing import Any

import httpx

from sandbox import capture
from sandbox.capture.redact import RedactionConfig, Redactor, placeholder
from sandbox.snapshot.events import HTTPExchange, ToolCall
from sandbox.snapshot.store import DirectoryStore

HEADER_KEY = "sk-live-HEADERSECRET0123456789abc"
ENV_SECRET = "env-only-value-9f8e7d6c"
CUSTOM = "ACME-7777-SECRET-CODE"
USER_ENV = "corp-internal-passphrase"


def test_planted_secrets_are_nowhere_on_disk(store: DirectoryStore, fake_api: Any) -> None:
    env = {
        "PATH": "/usr/bin",
        "STRIPE_SECRET": ENV_SECRET,
        "CORP_PASS": USER_ENV,
    }

    @capture.tool
    def send_email(to: str, body: str) -> str:
        return f"sent to {to}: {body}"

    config = RedactionConfig(patterns=(r"ACME-\d{4}-SECRET-CODE",), env_names=("CORP_PASS",))
    with capture.run(
        "secrets", store=store, seed=1, environ=env, redaction=config, blob_threshold=512
    ) as rec:
        with httpx.Client(headers={"Authorization": f"Bearer {HEADER_KEY}"}) as client:
            client.post(f"{fake_api.url}/echo", json={"note": f"code {CUSTOM}"})
        # The agent leaks secrets into tool arguments, and into a large output (a blob).
        send_email("a@b.c", f"key={HEADER_KEY} env={ENV_SECRET} pass={USER_ENV}")
        send_email("a@b.c", ("padding " * 100) + ENV_SECRET)
        capture.result({"leak": ENV_SECRET})

    files = [p for p in store.root.rglob("*") if p.is_file()]
    assert any("blobs" in p.parts for p in files)  # the big output went to a blob
    for path in files:
        data = path.read_bytes()
        for secret in (HEADER_KEY, ENV_SECRET, CUSTOM, USER_ENV):
            assert secret.encode() not in data, f"{secret} found in {path}"

    events = store.load_events(rec.run_id)
    http = next(e for e in events if isinstance(e, HTTPExchange))
    # Stable placeholders: the same secret reads the same everywhere.
    assert http.request_headers["authorization"] == f"Bearer {placeholder(HEADER_KEY)}"
    tool = next(e for e in events if isinstance(e, ToolCall))
    body = str(tool.args["body"])
    assert placeholder(HEADER_KEY) in body and placeholder(ENV_SECRET) in body
    assert placeholder(USER_ENV) in body
    assert placeholder(CUSTOM) in str(http.request_body)
    manifest = store.load_manifest(rec.run_id)
    assert manifest.env["STRIPE_SECRET"] == placeholder(ENV_SECRET)
    assert manifest.env["CORP_PASS"] == placeholder(USER_ENV)
    assert manifest.env["PATH"] == "/usr/bin"


def test_redactor_units() -> None:
    r = Redactor(RedactionConfig(secrets=('quo"te-secret',)), {"MY_TOKEN": "tok-123456", "X": "1"})
    assert r.text("use tok-123456 now") == f"use {placeholder('tok-123456')} now"
    assert r.text("sk-ant-abcdefgh12345") == placeholder("sk-ant-abcdefgh12345")
    # A secret with a quote is found inside JSON text too, with the same placeholder.
    assert (
        r.bytes(b'{"a":"quo\\"te-secret"}')
        == b'{"a":"' + placeholder('quo"te-secret').encode() + b'"}'
    )
    assert r.headers([("Cookie", "a=b"), ("Accept", "json")]) == {
        "cookie": placeholder("a=b"),
        "accept": "json",
    }
    assert r.bytes(b"nothing here") == b"nothing here"
    assert r.environ({"X": "1", "MY_TOKEN": "t"}) == {"MY_TOKEN": placeholder("t"), "X": "1"}
