"""Redaction by field name: the string value of a field whose name means a credential is
replaced wherever the field is written (JSON at any depth of escaping, a Python repr,
``name=value`` in text), and counts and settings that merely contain such a word are never
touched."""

from __future__ import annotations

import contextlib
import json
import string
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sandbox import capture
from sandbox.redaction import (
    RedactionConfig,
    Redactor,
    field_words,
    secret_fields,
    sensitive_field,
)
from sandbox.snapshot.events import HTTPExchange, ToolCall
from sandbox.snapshot.store import DirectoryStore

CREDENTIAL_NAMES = [
    "secret",
    "api_secret",
    "client_secret",
    "clientSecret",
    "WEBHOOK_SECRET",
    "password",
    "db_password",
    "Password",
    "password2",
    "passwd",
    "passphrase",
    "api_key",
    "apiKey",
    "APIKey",
    "apikey",
    "API_KEY",
    "OPENAI_API_KEY",
    "x-api-key",
    "x-goog-api-key",
    "access_token",
    "accessToken",
    "refresh_token",
    "auth_token",
    "x-auth-token",
    "id_token",
    "authorization",
    "Proxy-Authorization",
    "private_key",
    "privateKey",
    "secret_key",
    "SECRET_KEY",
    "aws_secret_access_key",
    "credentials",
    "set-cookie",
    "db.password",
]
NOT_CREDENTIALS = [
    "max_tokens",
    "max_completion_tokens",
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
    "input_tokens",
    "cache_read_input_tokens",
    "token_count",
    "tokenCount",
    "token",
    "token_type",
    "tokenizer",
    "next_page_token",
    "page_token",
    "key",
    "keys",
    "keyboard",
    "monkey",
    "cache_key",
    "idempotency_key",
    "access_key_id",
    "private_key_id",
    "secret_name",
    "secretArn",
    "password_hint",
    "passwords_changed_at",
    "author",
]


@pytest.mark.parametrize("name", CREDENTIAL_NAMES)
def test_credential_names_are_sensitive(name: str) -> None:
    assert sensitive_field(name)


@pytest.mark.parametrize("name", NOT_CREDENTIALS)
def test_counts_and_settings_are_not(name: str) -> None:
    assert not sensitive_field(name)


def test_field_words() -> None:
    assert (
        field_words("apiKey")
        == field_words("API_KEY")
        == field_words("api-key")
        == [
            "api",
            "key",
        ]
    )
    assert field_words("password2") == ["password"]
    assert field_words("HTTPAuthorization") == ["http", "authorization"]


SECRET = "Qv8-opaque.value_77"
TEMPLATES = [
    '{{"{name}":"{value}"}}',
    '{{"{name}": "{value}", "n": 1}}',
    "{{'{name}': '{value}'}}",
    "{name}={value}",
    "login failed: {name}={value}; retry",
    "{name}: {value}\n",
    "https://api.test/v1?{name}={value}&page=2",
    '{{"body":"{{\\"{name}\\": \\"{value}\\"}}"}}',
    '{{"outer":"{{\\\\\\"{name}\\\\\\":\\\\\\"{value}\\\\\\"}}"}}',
]
"""A field in a JSON object, a Python dict's repr, text (a form body, an exception message, a
header line, a query string), and a JSON object inside a JSON string, once and twice."""


@pytest.mark.parametrize("template", TEMPLATES)
@pytest.mark.parametrize("name", ["api_secret", "password", "apiKey", "access_token"])
def test_a_credential_field_is_redacted_in_every_form(template: str, name: str) -> None:
    r = Redactor(key=b"k" * 32)
    text = template.format(name=name, value=SECRET)
    expected = template.format(name=name, value=r.placeholder(SECRET))
    assert r.text(text) == expected
    assert r.bytes(text.encode()) == expected.encode()
    assert [found for found, _ in secret_fields(text)] == [name]
    assert list(secret_fields(expected)) == []  # a placeholder is not a finding


@pytest.mark.parametrize("template", TEMPLATES)
@pytest.mark.parametrize("name", NOT_CREDENTIALS)
def test_other_fields_are_never_touched(template: str, name: str) -> None:
    r = Redactor(key=b"k" * 32)
    text = template.format(name=name, value=SECRET)
    assert r.text(text) == text
    assert r.bytes(text.encode()) == text.encode()
    assert list(secret_fields(text)) == []


@pytest.mark.parametrize(
    "line",
    [
        b'{"api_key":null,"password":12345,"secret":true,"token_count":"12"}',
        b'{"usage":{"prompt_tokens":11,"completion_tokens":5,"total_tokens":16}}',
        b'{"properties":{"api_key":{"type":"string"}},"required":["api_key"]}',
        b'{"password":"<redacted:0123456789ab>","authorization":"Bearer <redacted:abcdef012345>"}',
        b"password == other and key=value",
    ],
)
def test_what_is_not_a_credential_string_stays(line: bytes) -> None:
    assert Redactor().bytes(line) == line


def test_a_field_secret_is_then_a_secret_everywhere() -> None:
    r = Redactor(key=b"k" * 32)
    assert (
        r.text('{"api_secret":"Zx-91-opaque"}')
        == f'{{"api_secret":"{r.placeholder("Zx-91-opaque")}"}}'
    )
    assert r.text("echoed: Zx-91-opaque") == f"echoed: {r.placeholder('Zx-91-opaque')}"
    assert "Zx-91-opaque" in r.learned  # sealing redacts what was written before
    # Plain words and bare numbers are replaced in their field only.
    assert r.text('{"credentials":"include","password":"123456"}') != (
        '{"credentials":"include","password":"123456"}'
    )
    assert r.text("include 1234567") == "include 1234567"


def test_the_scheme_of_an_authorization_value_is_kept() -> None:
    r = Redactor(key=b"k" * 32)
    assert r.text('{"Authorization":"Bearer opaque-abc.def"}') == (
        f'{{"Authorization":"Bearer {r.placeholder("opaque-abc.def")}"}}'
    )
    assert r.text("Authorization: Basic dXNlcjpwYXNz") == (
        f"Authorization: Basic {r.placeholder('dXNlcjpwYXNz')}"
    )


def test_structured_values_and_headers_go_by_name() -> None:
    r = Redactor(key=b"k" * 32)
    p = r.placeholder
    value = {"user": {"password": "pw-9", "max_tokens": "100", "keys": ["a"]}, "api_key": 7}
    assert r.value(value) == {
        "user": {"password": p("pw-9"), "max_tokens": "100", "keys": ["a"]},
        "api_key": 7,
    }
    headers = r.headers([("X-Goog-Api-Key", "goog-123"), ("Private-Token", "glpat-1"), ("A", "b")])
    assert headers == {"x-goog-api-key": p("goog-123"), "private-token": p("glpat-1"), "a": "b"}


_VALUE = st.text(string.ascii_letters + string.digits + "-_.~!+/", min_size=6, max_size=40)
_OTHER = st.sampled_from(NOT_CREDENTIALS)


@settings(max_examples=200, deadline=None)
@given(
    name=st.sampled_from(CREDENTIAL_NAMES),
    other=_OTHER,
    value=_VALUE,
    count=st.integers(0, 10**9),
    nested=st.booleans(),
)
def test_json_stays_json_with_only_the_credential_replaced(
    name: str, other: str, value: str, count: int, nested: bool
) -> None:
    """Any credential field beside a count or setting, in a JSON line (or in a JSON string
    inside one, as a tool call's arguments are): the result parses to the same document
    with the credential's value, and only it, replaced by its placeholder."""
    secret = "Qz" + value
    doc = {name: secret, other: count, "note": f"{other} is {count}", "s": other}
    inner: object = json.dumps(doc) if nested else doc
    line = json.dumps({"kind": "tool", "args": inner}, separators=(",", ":")).encode()
    r = Redactor(RedactionConfig(pii=()), key=b"k" * 32)
    out = r.bytes(line)
    assert secret.encode() not in out
    parsed = json.loads(out)["args"]
    got = json.loads(parsed) if nested else parsed
    assert got == {**doc, name: r.placeholder(secret)}


def test_a_capture_writes_no_credential_field_value(store: DirectoryStore, fake_api: Any) -> None:
    """A JSON body field ``api_secret`` (and its echo), a tool argument, a tool output, a
    large output (a blob), an exception a tool raised and the one that ended the run: none
    of the values is anywhere in the store; each reads as its stable placeholder."""
    body_secret, arg_secret, out_secret = "body-opaque-7f1", "arg-opaque-7f2", "out-opaque-7f3"
    exc_secret, end_secret, blob_secret = "exc-opaque-7f4", "end-opaque-7f5", "blob-opaque-7f6"

    @capture.tool
    def login(user: str, api_key: str) -> dict[str, object]:
        return {"access_token": out_secret, "max_tokens": 300}

    @capture.tool
    def connect(dsn: str) -> None:
        raise ConnectionError(f"rejected: password={exc_secret}")

    @capture.tool
    def config() -> str:
        return "x" * 600 + json.dumps({"private_key": blob_secret})

    with (
        pytest.raises(RuntimeError),
        capture.run("fields", store=store, seed=1, blob_threshold=512) as rec,
    ):
        with httpx.Client() as client:
            client.post(f"{fake_api.url}/echo", json={"api_secret": body_secret, "n": 1})
        login("bob", api_key=arg_secret)
        with contextlib.suppress(ConnectionError):
            connect("db")
        config()
        raise RuntimeError(f"gave up, auth_token={end_secret}")
    planted = [body_secret, arg_secret, out_secret, exc_secret, end_secret, blob_secret]
    files = [p for p in store.root.rglob("*") if p.is_file()]
    assert any("blobs" in p.parts for p in files)
    for path in files:
        data = path.read_bytes()
        for secret in planted:
            assert secret.encode() not in data, f"{secret} in {path}"
    p = Redactor(key=store.placeholder_key()).placeholder
    events = store.load_events(rec.run_id)
    http = next(e for e in events if isinstance(e, HTTPExchange))
    assert http.request_body == {"api_secret": p(body_secret), "n": 1}
    tools = [e for e in events if isinstance(e, ToolCall)]
    assert tools[0].args == {"user": "bob", "api_key": p(arg_secret)}
    assert tools[0].output == {"access_token": p(out_secret), "max_tokens": 300}
    assert (
        tools[1].error is not None
        and tools[1].error.message == f"rejected: password={p(exc_secret)}"
    )
    failure = store.load_manifest(rec.run_id).failure
    assert failure is not None and failure.error is not None
    assert failure.error.message == f"gave up, auth_token={p(end_secret)}"


_PARTS = [
    "api", "key", "keys", "token", "tokens", "access", "refresh", "auth", "secret", "password",
    "passwd", "private", "client", "max", "count", "id", "x", "session", "page", "next",
    "credentials", "authorization", "cookie", "prompt", "name", "2",
]  # fmt: skip


def _style(words: list[str], style: str) -> str:
    if style == "camel":
        return words[0] + "".join(w.capitalize() for w in words[1:])
    if style == "upper":
        return "_".join(words).upper()
    return {"snake": "_", "kebab": "-", "dot": "."}[style].join(words)


@settings(max_examples=300, deadline=None)
@given(
    words=st.lists(st.sampled_from(_PARTS), min_size=1, max_size=4),
    style=st.sampled_from(["snake", "camel", "upper", "kebab", "dot"]),
    template=st.sampled_from(TEMPLATES),
)
def test_a_value_is_redacted_exactly_when_its_name_is_a_credential(
    words: list[str], style: str, template: str
) -> None:
    """Whatever the name (words of credentials and of counts, in any casing and with any
    separator), in any form: the value is replaced if and only if the name is sensitive."""
    name = _style(words, style)
    text = template.format(name=name, value=SECRET)
    out = Redactor(key=b"k" * 32).text(text)
    assert (SECRET not in out) == sensitive_field(name), (name, out)
    assert bool(list(secret_fields(text))) == sensitive_field(name)
