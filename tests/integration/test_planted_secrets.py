"""The planted-secrets matrix, with real services: after capture and export, a byte scan of
the store and of the bundle (dumps decompressed: Postgres rows through pg_restore, Redis
values, workspace files) finds none of what was planted, and the masked run still
reproduces its failure in frozen containers.

Rows covered here: env var of any name, URL password, e-mail, Postgres row, Redis value,
workspace file, and the model client's API key header. The HTTP body kinds (JSON, form, XML,
vendor JSON), the tool output seen before its secret was learned and sensitive headers are
the rows of ``tests/unit/capture/test_capture_redact.py::test_planted_secrets_are_nowhere_on_disk``.
"""

from __future__ import annotations

import io
import os
import tarfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import redis
from test_services_containers import redis_server

from sandbox import capture
from sandbox.redaction import Redactor
from sandbox.replay import replay
from sandbox.services.dumptext import dump_places
from sandbox.services.registry import get_kind
from sandbox.services.sharescan import export_shareable
from sandbox.snapshot.manifest import Entrypoint
from sandbox.snapshot.store import PLACEHOLDER_KEY, DirectoryStore

pytestmark = pytest.mark.docker

DB_PASSWORD = "Hunter2-db-pass"
AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
ROW_EMAIL = "row.owner@example.com"
REDIS_TOKEN = "ghp_" + "R3d1" * 9
REDIS_EMAIL = "session.user@example.net"
FILE_TOKEN = "xoxb-workspace-file-0123456789"
FILE_EMAIL = "policy.author@example.org"
ODD_VAR = "Qm9vdHN0cmFwS2V5LTIwMjQtWFlaLTk4NzY"  # a credential in a variable named anyhow
MODEL_KEY = "sk-local-scripted-model-key"
PLANTED = [
    f":{DB_PASSWORD}@",
    DB_PASSWORD,
    AWS_KEY,
    ROW_EMAIL,
    REDIS_TOKEN,
    REDIS_EMAIL,
    FILE_TOKEN,
    FILE_EMAIL,
    ODD_VAR,
    MODEL_KEY,
]


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    with redis_server() as url:
        yield url


def _plant(db: str, cache: str, docs: Path) -> None:
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("CREATE TABLE customers (id int PRIMARY KEY, email text, api_key text)")
        conn.execute("INSERT INTO customers VALUES (1, %s, %s)", (ROW_EMAIL, AWS_KEY))
    client = redis.Redis.from_url(cache)
    client.flushdb()
    client.set("session:acme", f"user={REDIS_EMAIL};token={REDIS_TOKEN}")
    docs.mkdir()
    (docs / "policy.md").write_text(f"# Policy\nowner {FILE_EMAIL}\nbot token {FILE_TOKEN}\n")


def _capture(store: DirectoryStore, tmp_path: Path, cache: str) -> str:
    from examples import _model, orders
    from examples.capture_demo import environ, production_db

    calls = {"n": 0}

    def gateway(path: str, body: dict[str, object]) -> tuple[int, dict[str, object]]:
        calls["n"] += 1
        if calls["n"] == 1:
            import time

            time.sleep(orders.GATEWAY_TIMEOUT * 2)  # the charge commits after the timeout
        return 200, {"status": "charged"}

    base, stop = _model.serve_http(gateway, "payments-gateway")
    docs = tmp_path / "docs"
    try:
        with production_db() as url:
            secret_url = url.replace(
                "postgresql://postgres@", f"postgresql://postgres:{DB_PASSWORD}@"
            )
            assert secret_url != url
            _plant(url, cache, docs)
            orders.setup(url)
            services = [
                capture.ServiceSpec(
                    "db",
                    "postgres",
                    secret_url,
                    env="DATABASE_URL",
                    mask={"customers.email": "hash", "customers.api_key": "null"},
                ),
                capture.ServiceSpec("cache", "redis", cache, mask={"session:*": "redact"}),
                capture.ServiceSpec("docs", "files", str(docs), mask={"*.md": "redact"}),
            ]
            settings = capture.run(
                "planted",
                store=store,
                seed=7,
                services=services,
                entrypoint=Entrypoint(kind="callable", target="examples.orders:main"),
                packages=False,
                cwd=str(tmp_path),
            )
            env = environ(DATABASE_URL=secret_url, PAYMENTS_URL=base, ACME_SETTING=ODD_VAR)
            with env, settings as rec:
                orders.main()
                with psycopg.connect(url) as conn:
                    assert conn.execute(orders.DUPLICATES.query).fetchall()
                rec.mark_failed("the same order was inserted twice", orders.DUPLICATES)
    finally:
        stop()
    return rec.run_id


def _texts(media_type: str, data: bytes) -> Iterator[bytes]:
    yield data
    for _, text in dump_places(media_type, data):
        yield text.encode("utf-8", "surrogateescape")


def _bundle_texts(bundle: Path, media: dict[str, str]) -> Iterator[tuple[str, bytes]]:
    import gzip

    raw = gzip.decompress(bundle.read_bytes())
    yield "bundle (decompressed)", raw
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        for member in tar:
            handle = tar.extractfile(member)
            if handle is None:
                continue
            data = handle.read()
            key = member.name.rsplit("/", 1)[-1]
            for text in _texts(media.get(key, "text/plain"), data):
                yield member.name, text


def test_planted_secrets_are_nowhere_and_the_masked_run_reproduces(
    tmp_path: Path, redis_url: str
) -> None:
    store = DirectoryStore(tmp_path / "store")
    run_id = _capture(store, tmp_path, f"{redis_url}/0")
    manifest = store.load_manifest(run_id)
    media = {
        ref.sha256: ref.media_type
        for s in manifest.services
        for ref in (s.before, s.after)
        if ref is not None
    }
    assert set(media.values()) >= {
        "application/vnd.sandbox-replayer.postgres-dump",
        "application/vnd.sandbox-replayer.redis-dump+json",
        "application/x-tar",
    }
    assert "ACME_SETTING" not in manifest.env  # the agent never read it: not recorded

    bundle = export_shareable(store, run_id, tmp_path / "bug.tar.gz")  # the scan finds none
    places: list[tuple[str, bytes]] = []
    for path in sorted(p for p in store.root.rglob("*") if p.is_file()):
        if path.name == PLACEHOLDER_KEY:
            continue
        for text in _texts(media.get(path.name, "text/plain"), path.read_bytes()):
            places.append((str(path.relative_to(store.root)), text))
    places.extend(_bundle_texts(bundle, media))
    assert any("table" in w or "blobs" in w for w, _ in places)
    for where, text in places:
        for secret in PLANTED:
            assert secret.encode() not in text, f"{secret} found in {where}"

    # Restored, too: every Redis dump of the run, read back value by value from a real Redis.
    restored = f"{redis_url}/5"
    for state in manifest.services:
        for ref in (state.before, state.after):
            if state.kind == "redis" and ref is not None:
                get_kind("redis").restore(restored, store.get_blob(ref.sha256))
                client = redis.Redis.from_url(restored)
                keys = list(client.scan_iter())
                assert keys
                for value in [client.get(k) or b"" for k in keys]:
                    for secret in PLANTED:
                        assert secret.encode() not in value
                client.flushdb()

    # The masked run still reproduces its failure in frozen containers.
    os.environ.pop("ACME_SETTING", None)
    report = replay(run_id, store=store, times=2)
    assert report.verdict.reproduced == 2, report.describe()
    assert report.exit_code == 1


# --- credential fields: planted in each place an event holds text, and every artifact -------

BODY_SECRET = "body-opaque-Kx71"  # a JSON body field named api_secret
ARG_SECRET = "arg-opaque-Kx72"  # a tool argument named api_key
OUT_SECRET = "out-opaque-Kx73"  # a tool output field named access_token
EXC_SECRET = "exc-opaque-Kx74"  # an exception message: password=...
REDIS_SECRET = "redis-opaque-Kx75"  # a Redis value (JSON) and a hash field, for the scan
FIELD_SECRETS = [BODY_SECRET, ARG_SECRET, OUT_SECRET, EXC_SECRET, REDIS_SECRET]
FIELD_AGENT = f'''
import os

import httpx

from sandbox import capture


@capture.tool
def login(user: str, api_key: str) -> dict[str, object]:
    return {{"access_token": "{OUT_SECRET}", "expires_in": 3600, "max_tokens": 300}}


@capture.tool
def charge(order: str) -> None:
    raise RuntimeError("payment gateway refused: password={EXC_SECRET}")


def main() -> None:
    with httpx.Client() as client:
        client.post(
            os.environ["SETTINGS_URL"] + "/settings",
            json={{"api_secret": "{BODY_SECRET}", "region": "eu"}},
        )
    login("bob", api_key="{ARG_SECRET}")
    charge("A-1")
'''


def _field_capture(store: DirectoryStore, tmp_path: Path, cache: str, *, masked: bool) -> str:
    from examples import _model
    from examples.capture_demo import environ

    fieldagent = __import__("fieldagent")
    client = redis.Redis.from_url(cache)
    client.flushdb()
    client.set("session:acme", f'{{"user": "bob", "api_secret": "{REDIS_SECRET}"}}')
    client.hset("session:bob", mapping={"name": "bob", "password": REDIS_SECRET})
    base, stop = _model.serve_http(lambda path, body: (200, {"saved": True}), "settings")
    mask = {"session:*": "redact"} if masked else {}
    spec = capture.ServiceSpec("cache", "redis", cache, env="REDIS_URL", mask=mask)
    settings = capture.run(
        "fields",
        store=store,
        seed=3,
        services=[spec],
        entrypoint=Entrypoint(kind="callable", target="fieldagent:main"),
        packages=False,
        cwd=str(tmp_path),
    )
    try:
        with (
            environ(SETTINGS_URL=base, REDIS_URL=cache),
            pytest.raises(RuntimeError),
            settings as rec,
        ):
            fieldagent.main()
    finally:
        stop()
    return rec.run_id


def test_credential_fields_are_in_no_artifact_and_the_scan_finds_them_in_redis(
    tmp_path: Path,
    redis_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A secret in a JSON body field ``api_secret``, a tool argument, a tool output and an
    exception message is in none of: the store's files (manifest, events, blobs, dumps read
    back), the bundle, the replay's HTML report, the diff page, the OTel export, a generated
    regression test, ``show --json``, ``list``. Planted in Redis (a JSON value and a hash
    field) without a masking rule, the scan names both and refuses the export; with one,
    the run exports, and its replay still reproduces the failure (the exception's message
    holds the same placeholder at capture and on replay)."""
    from cli.main import main

    agent_dir = tmp_path / "agent"
    agent_dir.mkdir()
    (agent_dir / "fieldagent.py").write_text(FIELD_AGENT)
    monkeypatch.syspath_prepend(str(agent_dir))
    monkeypatch.setenv("PYTHONPATH", str(agent_dir))
    store = DirectoryStore(tmp_path / "store")
    root = ["--store", str(store.root)]

    # Without a masking rule, the scan finds the Redis secret (a value, a hash field).
    other = DirectoryStore(tmp_path / "unmasked")
    leaky = _field_capture(other, tmp_path, f"{redis_url}/2", masked=False)
    refused = tmp_path / "leaky.tar.gz"
    at = ["--store", str(other.root)]
    assert main(["export", leaky, "-o", str(refused), *at, "--allow", "*api_secret*"]) == 2
    err = capsys.readouterr().err
    assert "credential field (password) in blob" in err and "'session:bob'" in err
    assert not refused.exists()
    assert main(["export", leaky, "-o", str(refused), *at, "--allow", "*password*"]) == 2
    assert "credential field (api_secret) in blob" in capsys.readouterr().err
    assert not refused.exists()

    run_id = _field_capture(store, tmp_path, f"{redis_url}/2", masked=True)
    p = Redactor(key=store.placeholder_key()).placeholder
    manifest = store.load_manifest(run_id)
    assert manifest.failure is not None and manifest.failure.predicate is not None
    assert f"password={p(EXC_SECRET)}" in manifest.failure.predicate.model_dump_json()

    artifacts: list[tuple[str, bytes]] = []
    bundle = tmp_path / "fields.tar.gz"
    assert main(["export", run_id, "-o", str(bundle), *root]) == 0  # the scan finds none
    html, diff_page = tmp_path / "report.html", tmp_path / "diff.html"
    assert main(["replay", run_id, *root, "--report", str(html)]) == 1, capsys.readouterr().out
    replayed = next(m.run_id for m in store.list() if m.replay_of == run_id)
    main(["diff", run_id, replayed, *root, "--report", str(diff_page)])
    otel = tmp_path / "trace.json"
    assert main(["otel", "export", run_id, "--file", str(otel), *root]) == 0
    regression = tmp_path / "regress" / "test_fields.py"
    assert main(["pytest", run_id, "-o", str(regression), *root]) == 0
    capsys.readouterr()
    for args in (["show", run_id, "--json"], ["show", replayed], ["list"], ["list", "--json"]):
        assert main([*args, *root]) == 0
        artifacts.append((" ".join(args), capsys.readouterr().out.encode()))
    assert b"<redacted:" in artifacts[0][1]
    for path in (html, diff_page, otel, regression):
        artifacts.append((path.name, path.read_bytes()))
        assert b"redacted:" in artifacts[-1][1], path  # it shows the fields, as placeholders

    media = {
        ref.sha256: ref.media_type
        for m in (manifest, store.load_manifest(replayed))
        for s in m.services
        for ref in (s.before, s.after)
        if ref is not None
    }
    for path in sorted(p for p in store.root.rglob("*") if p.is_file()):
        if path.name != PLACEHOLDER_KEY:
            for text in _texts(media.get(path.name, "text/plain"), path.read_bytes()):
                artifacts.append((str(path.relative_to(store.root)), text))
    artifacts.extend(_bundle_texts(bundle, media))
    assert any(
        "redis key 'session:bob' field 'password'" in w for w, _ in _redis_places(store, media)
    )
    for where, data in artifacts:
        for secret in FIELD_SECRETS:
            assert secret.encode() not in data, f"{secret} found in {where}"


def _redis_places(store: DirectoryStore, media: dict[str, str]) -> list[tuple[str, str]]:
    return [
        place
        for key, kind in media.items()
        if "redis" in kind
        for place in dump_places(kind, store.get_blob(key))
    ]
