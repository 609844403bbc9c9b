"""``sandbox export`` refuses a run whose database holds an unmasked credential in a row, and
names the table and column (real Postgres in a container, dump read by pg_restore)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from test_services_containers import create_database, postgres_server

from cli.main import main
from sandbox import capture
from sandbox.snapshot.store import DirectoryStore

AWS_KEY = "AKIAIOSFODNN7EXAMPLE"

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with postgres_server() as url:
        yield url


def test_export_refuses_a_credential_in_a_row_and_names_table_and_column(
    server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    endpoint = create_database(server, "keys")
    with psycopg.connect(endpoint, autocommit=True) as conn:
        conn.execute("CREATE TABLE api_keys (id int PRIMARY KEY, owner text, value text)")
        conn.execute("INSERT INTO api_keys VALUES (1, 'billing', %s)", (AWS_KEY,))
    store = DirectoryStore(tmp_path / "store")
    spec = capture.ServiceSpec("db", "postgres", endpoint, env="DATABASE_URL")
    with capture.run("keys", store=store, seed=1, services=[spec], cwd=str(tmp_path)) as rec:
        pass
    out = tmp_path / "bug.tar.gz"
    args = ["export", rec.run_id, "-o", str(out), "--store", str(store.root)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "AWS Access Key in blob" in err
    assert "table public.api_keys column value (row 1)" in err
    assert AWS_KEY not in err  # named, never shown
    assert not out.exists()
    assert main([*args, "--allow", "AWS Access Key in *table public.api_keys column value*"]) == 0
    assert out.is_file()
