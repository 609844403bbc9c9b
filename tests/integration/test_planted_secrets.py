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
