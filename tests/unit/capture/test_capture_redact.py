"""Planted secrets and personal data never reach the disk: events, manifest, blobs."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sandbox import capture
from sandbox.capture.redact import RedactionConfig, Redactor, credential_like
from sandbox.errors import CaptureError
from sandbox.snapshot.events import HTTPExchange, ToolCall
from sandbox.snapshot.store import PLACEHOLDER_KEY, DirectoryStore

HEADER_KEY = "sk-live-HEADERSECRET0123456789abc"
ENV_SECRET = "env-only-value-9f8e7d6c"
CUSTOM = "ACME-7777-SECRET-CODE"
USER_ENV = "corp-internal-passphrase"
ODD_NAME = "Zq8t3LmW9xR2vKp7Yc4Nd"  # a credential in a variable whose name says nothing
UNREAD = "never-read-value-4711"
DB_PASSWORD = "hunter2"
LATE_TOKEN = "tok-LATE-5b1e9c0d7a"  # seen in a tool output before it is sent as a bearer
EMAIL = "jane.doe@example.org"
FORM_SECRET = "ghp_FormBodyToken0123456789abcdefABCD"
XML_SECRET = "AKIAXMLBODY0123456789"[:20]
VENDOR_SECRET = "xoxb-vendor-json-0123456789"


def _store_bytes(root: Path) -> list[tuple[Path, bytes]]:
    return [(p, p.read_bytes()) for p in root.rglob("*") if p.is_file()]


def _assert_absent(root: Path, planted: list[str]) -> None:
    for path, data in _store_bytes(root):
        if path.name == PLACEHOLDER_KEY:
            continue
        for secret in planted:
            assert secret.encode() not in data, f"{secret} found in {path}"


@pytest.mark.parametrize("keep", ["all", "failed"])
def test_planted_secrets_are_nowhere_on_disk(
    store: DirectoryStore, fake_api: Any, monkeypatch: pytest.MonkeyPatch, keep: str
) -> None:
    """Under ``keep="all"`` events are written as they happen; under ``keep="failed"`` the
    run is held in memory and written once kept: a secret learned late is redacted in both."""
    monkeypatch.setenv("STRIPE_SECRET", ENV_SECRET)
    monkeypatch.setenv("CORP_PASS", USER_ENV)
    monkeypatch.setenv("ACME_SETTING", ODD_NAME)
    monkeypatch.setenv("UNREAD_SETTING", UNREAD)
    monkeypatch.setenv("DATABASE_URL", f"postgresql://app:{DB_PASSWORD}@db:5432/shop")
    monkeypatch.setenv("PLAIN_SETTING", "blue")

    @capture.tool
    def send_email(to: str, body: str) -> str:
        return f"sent to {to}: {body}"

    @capture.tool
    def fetch_token() -> str:
        return f"your token is {LATE_TOKEN}"

    config = RedactionConfig(patterns=(r"ACME-\d{4}-SECRET-CODE",), env_names=("CORP_PASS",))
    settings: dict[str, Any] = {"redaction": config, "blob_threshold": 512, "cwd": str(store.root)}
    with capture.run("secrets", store=store, seed=1, keep=keep, **settings) as rec:
        fetch_token()  # the token is written before anything says it is secret
        db = os.environ["DATABASE_URL"]
        odd = os.getenv("ACME_SETTING", "")
        plain = os.environ.get("PLAIN_SETTING")
        with httpx.Client(headers={"Authorization": f"Bearer {HEADER_KEY}"}) as client:
            client.post(f"{fake_api.url}/echo", json={"note": f"code {CUSTOM}", "to": EMAIL})
            big = "x" * 600
            client.post(
                f"{fake_api.url}/form",
                content=f"secret={FORM_SECRET}&email={EMAIL}&pad={big}",
                headers={"content-type": "application/x-www-form-urlencoded"},
            )
            client.post(
                f"{fake_api.url}/xml",
                content=f"<a><k>{XML_SECRET}</k><m>{EMAIL}</m>{big}</a>",
                headers={"content-type": "application/xml"},
            )
            client.post(
                f"{fake_api.url}/vendor",
                content=f'{{"data":{{"k":"{VENDOR_SECRET}","m":"{EMAIL}","p":"{big}"}}}}',
                headers={"content-type": "application/vnd.api+json"},
            )
        with httpx.Client(headers={"Authorization": f"Bearer {LATE_TOKEN}"}) as client:
            client.get(f"{fake_api.url}/late")
        # The agent leaks secrets into tool arguments, and into a large output (a blob).
        send_email(EMAIL, f"key={HEADER_KEY} env={ENV_SECRET} pass={USER_ENV} db={db}")
        send_email("a@b.c", ("padding " * 100) + ENV_SECRET + odd + LATE_TOKEN)
        capture.result({"leak": ENV_SECRET, "plain": plain})
        if keep == "failed":
            rec.mark_failed("kept")
    capture.flush()  # a kept run is written in the background

    planted = [HEADER_KEY, ENV_SECRET, CUSTOM, USER_ENV, ODD_NAME, UNREAD, LATE_TOKEN, EMAIL]
    planted += [FORM_SECRET, XML_SECRET, VENDOR_SECRET, f":{DB_PASSWORD}@"]
    files = [p for p in store.root.rglob("*") if p.is_file()]
    assert sum("blobs" in p.parts for p in files) >= 4  # the big bodies and output are blobs
    _assert_absent(store.root, planted)
    assert DB_PASSWORD.encode() not in (store.run_dir(rec.run_id) / "manifest.json").read_bytes()

    redactor = Redactor(key=store.placeholder_key())
    events = store.load_events(rec.run_id)
    http = next(e for e in events if isinstance(e, HTTPExchange))
    # Stable placeholders: the same secret reads the same everywhere.
    assert http.request_headers["authorization"] == f"Bearer {redactor.placeholder(HEADER_KEY)}"
    tools = [e for e in events if isinstance(e, ToolCall)]
    assert redactor.placeholder(LATE_TOKEN) in str(tools[0].output)
    body = str(tools[1].args["body"])
    assert redactor.placeholder(HEADER_KEY) in body and redactor.placeholder(ENV_SECRET) in body
    assert redactor.placeholder(USER_ENV) in body
    assert f"postgresql://app:{redactor.placeholder(DB_PASSWORD)}@db:5432/shop" in body
    assert tools[1].args["to"] == redactor.placeholder(EMAIL, "email")
    assert redactor.placeholder(CUSTOM) in str(http.request_body)

    env = store.load_manifest(rec.run_id).env
    # Only what the run read is recorded (httpx reads its TLS settings); secrets as placeholders.
    assert set(env) - {"SSL_CERT_FILE", "SSL_CERT_DIR"} == {
        "DATABASE_URL",
        "ACME_SETTING",
        "PLAIN_SETTING",
    }
    assert env["ACME_SETTING"] == redactor.placeholder(ODD_NAME)
    assert env["PLAIN_SETTING"] == "blue"
    assert (
        env["DATABASE_URL"] == f"postgresql://app:{redactor.placeholder(DB_PASSWORD)}@db:5432/shop"
    )


def test_configured_variables_are_recorded_without_being_read(store: DirectoryStore) -> None:
    env = {"HOME": "/home/x", "OPENAI_API_KEY": "sk-abcdefghijklmnopqrstu", "OTHER": "y"}
    config = RedactionConfig(env_record=("HOME", "OPENAI_API_KEY", "MISSING"))
    with capture.run("allow", store=store, seed=1, environ=env, redaction=config) as rec:
        pass
    manifest = store.load_manifest(rec.run_id)
    assert set(manifest.env) == {"HOME", "OPENAI_API_KEY"}
    assert manifest.env["HOME"] == "/home/x"
    assert manifest.env["OPENAI_API_KEY"].startswith("<redacted:")


def test_placeholders_are_keyed_per_store(tmp_path: Path) -> None:
    one, two = DirectoryStore(tmp_path / "one"), DirectoryStore(tmp_path / "two")
    key = one.placeholder_key()
    assert key == one.placeholder_key() and len(key) == 32
    assert stat.S_IMODE((one.root / PLACEHOLDER_KEY).stat().st_mode) == 0o600
    assert key != two.placeholder_key()
    a, b = Redactor(key=key), Redactor(key=two.placeholder_key())
    assert a.placeholder("hunter2") == a.placeholder("hunter2") != b.placeholder("hunter2")
    # Not the unsalted hash: a guessed secret cannot be confirmed without the key.
    import hashlib

    assert hashlib.sha256(b"hunter2").hexdigest()[:12] not in a.placeholder("hunter2")


def test_redactor_units() -> None:
    r = Redactor(RedactionConfig(secrets=('quo"te-secret',)), {"MY_TOKEN": "tok-123456", "X": "1"})
    p = r.placeholder
    assert r.text("use tok-123456 now") == f"use {p('tok-123456')} now"
    assert r.text("sk-ant-abcdefgh12345") == p("sk-ant-abcdefgh12345")
    # A secret with a quote is found inside JSON text too, with the same placeholder.
    assert r.bytes(b'{"a":"quo\\"te-secret"}') == b'{"a":"' + p('quo"te-secret').encode() + b'"}'
    assert r.headers([("Cookie", "a=b"), ("Accept", "json")]) == {
        "cookie": p("a=b"),
        "accept": "json",
    }
    assert r.bytes(b"nothing here") == b"nothing here"
    assert r.environ({"X": "1", "MY_TOKEN": "t"}) == {"MY_TOKEN": p("t"), "X": "1"}


@pytest.mark.parametrize(
    ("text", "kind", "found"),
    [
        ("write to bob@example.com today", "email", "bob@example.com"),
        ("call +1 415-555-0132", "phone", "+1 415-555-0132"),
        ("call (415) 555-0132", "phone", "(415) 555-0132"),
        ("card 4111 1111 1111 1111 ok", "card", "4111111111111111"),
        ('{"card":"4111111111111111"}', "card", "4111111111111111"),
    ],
)
def test_personal_data_becomes_stable_placeholders(text: str, kind: str, found: str) -> None:
    r = Redactor()
    out = r.text(text)
    assert r.placeholder(found, kind) in out
    assert r.bytes(text.encode()) == out.encode()


@pytest.mark.parametrize(
    "line",
    [
        b'{"mono":0.0123456789012345,"seed":4111111111111111,"wall":1709294400.123456}',
        b'{"id":"123e4567-e89b-12d3-a456-426614174000","url":"http://127.0.0.1:8080/x"}',
        b'{"card":"4111111111111112","date":"2024-03-01T12:00:00Z","v":"1.2.3"}',
    ],
)
def test_numbers_that_are_not_personal_data_stay(line: bytes) -> None:
    assert Redactor().bytes(line) == line


def test_personal_data_kinds_are_configurable() -> None:
    off = Redactor(RedactionConfig(pii=(), pii_patterns=(("employee", r"EMP-\d{6}"),)))
    assert off.text("bob@example.com EMP-123456") == (
        f"bob@example.com {off.placeholder('EMP-123456', 'employee')}"
    )


def test_credential_like_values() -> None:
    assert credential_like(ODD_NAME) and credential_like("ZmFrZS1jcmVkZW50aWFsLXZhbHVlMQ==")
    for plain in ("/usr/bin:/bin", "en_US.UTF-8", "blue", "/root/.pyenv/versions"):
        assert not credential_like(plain)


REAL_KEYS = [
    "sk-proj-Ab12Cd34Ef56Gh78Ij90KlMn",
    "sk-ant-api03-Zx98Yw76Vu54",
    "sk-Ab12Cd34Ef56Gh78Ij90",
    "AKIAIOSFODNN7EXAMPLE",
    "ghp_Ab12Cd34Ef56Gh78Ij90KlMn",
    "xoxb-1234567890-abcdef",
]
ORDINARY_WORDS = [
    "task-lookup-0123456789abcdef",
    "desk-booking-0123456789abcdef",
    "risk-assessment-2024-quarterly-v2",
    "whisk-temperature-0123456789ab",
    "weighs_0123456789abcdefghijklmn",
    "boxoxb-1234567890-abcdef",
    "MAKIAIOSFODNN7EXAMPLE",
]


@pytest.mark.parametrize("key", REAL_KEYS)
@pytest.mark.parametrize("template", ["{}", "key={}", '{{"k":"{}"}}', "use {} now", "KEY: {}\n"])
def test_real_key_shapes_are_redacted(key: str, template: str) -> None:
    r = Redactor()
    text = template.format(key)
    assert r.text(text) == template.format(r.placeholder(key))
    assert r.bytes(text.encode()) == template.format(r.placeholder(key)).encode()


@pytest.mark.parametrize("word", ORDINARY_WORDS)
@pytest.mark.parametrize("template", ["{}", "name={}", '{{"run":"{}"}}', "see {} now"])
def test_ordinary_words_that_contain_a_key_prefix_stay(word: str, template: str) -> None:
    r = Redactor()
    text = template.format(word)
    assert r.text(text) == text
    assert r.bytes(text.encode()) == text.encode()


def test_a_run_named_like_a_task_captures_and_keeps_its_name(store: DirectoryStore) -> None:
    """A run whose name starts with ``task-`` completes; its name, id and ordinary
    ``desk-...`` text stay as written while a real key in the same run is redacted."""
    key = REAL_KEYS[0]

    @capture.tool
    def book(desk: str) -> str:
        return f"booked {desk} with {key}"

    with capture.run("task-lookup-0123456789abcdef", store=store, seed=1) as rec:
        book("desk-booking-0123456789abcdef")
    run_id = rec.writer.manifest.run_id
    assert run_id.startswith("task-lookup-0123456789abcdef-")
    manifest, events = store.load_manifest(run_id), store.load_events(run_id)
    assert manifest.name == "task-lookup-0123456789abcdef" and manifest.status == "complete"
    (call,) = [e for e in events if isinstance(e, ToolCall)]
    assert call.args == {"desk": "desk-booking-0123456789abcdef"}
    placeholder = Redactor(key=store.placeholder_key()).placeholder(key)
    assert call.output == f"booked desk-booking-0123456789abcdef with {placeholder}"


def test_a_run_id_holding_a_key_is_refused_with_one_line(store: DirectoryStore) -> None:
    run = capture.run("x", store=store, run_id=REAL_KEYS[2])
    with pytest.raises(CaptureError, match="run id holds what looks like a secret"), run:
        pass
    assert not (store.root / "runs" / REAL_KEYS[2]).exists()


FRAGMENTS = [
    *REAL_KEYS,
    *ORDINARY_WORDS,
    "jane.doe@example.org",
    "postgresql://app:hunter22@db:5432/shop",
    "http://svc.test/orders",
    "+1 415-555-0132",
    "(415) 555-0132",
    "415.555.0132",
    "+14155550132",
    "4111 1111 1111 1111",
    "4111111111111111",
    "1709294400.123456",
    "0.0123456789012345",
    "Bearer abcdefgh12345678",
    '"',
    "=",
    " ",
    "-",
    ".",
    "(",
    ")",
    "+",
    "0",
    "12",
    "1234",
    "x",
    "hunter",
    "22xx",
    "xxhunter22",
    "\u0664\u0661\u0665-\u0665\u0665\u0665-\u0660\u0661\u0663\u0662",  # Arabic-Indic digits
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=12))
def test_gated_families_redact_as_one_full_pass(parts: list[str]) -> None:
    """Searching a line (bytes or text) only with the pattern families whose cheap condition
    it meets gives the same result as one pass of the whole alternation, with and without
    literal secrets that overlap one another."""
    text = "".join(parts)
    overlapping = RedactionConfig(secrets=("hunter22xx", "xxhunter22", "22xxhunter"))
    for r in (Redactor(key=b"k" * 32), Redactor(overlapping, key=b"k" * 32)):
        r.bytes(text.encode())  # a URL's password is learned first: both passes know it
        full_text, full_bytes = r._search(tuple(range(len(r._families))))
        assert r.bytes(text.encode()) == full_bytes.sub(r._bsub, text.encode())
        assert r.text(text) == full_text.sub(r._sub, text)


def test_a_text_found_clean_is_redacted_once_it_holds_a_secret() -> None:
    """Texts remembered as holding nothing to redact are remembered per set of secrets: a
    redactor that knows a secret the text holds (from its settings, its environment, or
    learned after the text was first seen) still replaces it."""
    value = "order note hunter22xx"
    plain = Redactor(key=b"k" * 32)
    assert plain.text(value) == value
    assert plain.text(value) == value  # remembered
    configured = Redactor(RedactionConfig(secrets=("hunter22xx",)), key=b"k" * 32)
    assert "hunter22xx" not in configured.text(value)
    from_env = Redactor(env={"DB_PASSWORD": "hunter22xx"}, key=b"k" * 32)
    assert "hunter22xx" not in from_env.text(value)
    changed_env = Redactor(env={"DB_PASSWORD": "other-pass-77"}, key=b"k" * 32)
    assert changed_env.text(value) == value
    assert "other-pass-77" not in changed_env.text("x other-pass-77")
    plain.add_secret("hunter22xx")
    assert "hunter22xx" not in plain.text(value)
    assert "hunter22xx" not in plain.bytes(value.encode()).decode()


def test_a_line_with_a_field_or_trigger_in_any_case_is_still_searched() -> None:
    """The one-pass check that lets most lines through unsearched looks at the lowered line:
    a credential field written in capitals, a mixed-case bearer scheme, a literal secret
    with capitals, each still found."""
    r = Redactor(RedactionConfig(secrets=("MiXeD-Secret-9",)), key=b"k" * 32)
    line = b'{"API_KEY":"abcDEF123456","h":"Bearer zzzzzzzz1234","n":"MiXeD-Secret-9"}'
    out = r.bytes(line)
    assert b"abcDEF123456" not in out
    assert b"zzzzzzzz1234" not in out
    assert b"MiXeD-Secret-9" not in out


def test_the_process_fields_are_redacted_with_each_runs_secrets(tmp_path: Path) -> None:
    """What is the same for every run of a process (its command line, package list ...) is
    redacted once per set of secrets and store, not once per process: a run that declares a
    secret its command line holds, a run in another store, and a run that learns the secret
    from a header while it runs each have it replaced, with their own store's placeholder."""
    from sandbox.snapshot.manifest import Entrypoint

    token = "tok-PROC-9a8b7c6d5e"
    entry = Entrypoint(kind="command", command=["python", "agent.py", "--token", token])
    first, second = DirectoryStore(tmp_path / "a"), DirectoryStore(tmp_path / "b")
    with capture.run("plain", store=first, services="none", entrypoint=entry) as rec:
        pass
    assert token in first.load_manifest(rec.run_id).entrypoint.command  # nothing says it is one
    declared = RedactionConfig(secrets=(token,))
    for store in (first, second):
        with capture.run(
            "declared", store=store, services="none", entrypoint=entry, redaction=declared
        ) as rec:
            pass
        command = store.load_manifest(rec.run_id).entrypoint.command
        assert token not in command
        assert Redactor(declared, key=store.placeholder_key()).placeholder(token) in command
    with capture.run("learned", store=first, services="none", entrypoint=entry) as rec:
        rec.redact_headers([("authorization", f"Bearer {token}")])
    assert token not in first.load_manifest(rec.run_id).entrypoint.command


def test_headers_seen_again_are_redacted_with_the_secrets_known_now(
    store: DirectoryStore,
) -> None:
    """A run's recorder remembers headers it redacted (a client sends the same ones again
    and again), but not across a secret learned in between: the same headers are then
    redacted again, the new secret replaced."""
    headers = [("accept", "*/*"), ("x-trace", "tok-HDR-55aa66bb77")]
    with capture.run("headers", store=store, services="none") as rec:
        assert rec.redact_headers(headers)["x-trace"] == "tok-HDR-55aa66bb77"
        rec.redact_headers([("authorization", "Bearer tok-HDR-55aa66bb77")])  # learned
        assert "tok-HDR-55aa66bb77" not in rec.redact_headers(headers)["x-trace"]
