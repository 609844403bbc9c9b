"""What the MySQL kind does besides the contract: a capture says the text it holds (for the
scan before sharing), masks a column, and a what-if trial removes a table's rows."""

from __future__ import annotations

from collections.abc import Iterator

import pymysql
import pytest

from sandbox.containers import RestoreSpec, bring_up
from sandbox.explain.parts import parts_of, remove
from sandbox.services import get_kind
from sandbox.services.dumptext import dump_places
from sandbox.services.masking import capture_masked
from sandbox.services.mysql.endpoint import Endpoint

pytestmark = pytest.mark.docker

EMAIL = "ada@example.com"


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with bring_up([RestoreSpec("db", "mysql", database="crm")]) as env:
        yield env.services["db"].url


@pytest.fixture
def users(url: str) -> str:
    ep = Endpoint.parse(url)
    conn = pymysql.connect(host=ep.host, port=ep.port, user=ep.user, database=ep.database)
    with conn.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS users")
        cur.execute("CREATE TABLE users (id int PRIMARY KEY, email varchar(80), note blob)")
        cur.execute("INSERT INTO users VALUES (1, %s, %s), (2, NULL, NULL)", (EMAIL, b"vip"))
        cur.execute("DROP TABLE IF EXISTS empty_t")
        cur.execute("CREATE TABLE empty_t (x int)")
    conn.commit()
    conn.close()
    return url


def test_a_capture_says_the_text_it_holds(users: str) -> None:
    captured = get_kind("mysql").capture(users)
    found = list(dump_places(captured.media_type, captured.data))
    assert ("table users column email (row 1)", EMAIL) in found
    assert ("table users column note (row 1)", "vip") in found


def test_a_masked_column_is_stored_masked_and_the_rest_kept(users: str) -> None:
    masked = capture_masked("mysql", users, {"users.email": "hash"}, b"k" * 32)
    assert masked.meta["masked"] == ["users.email"] and masked.meta["database"] == "crm"
    texts = [text for _, text in dump_places(masked.media_type, masked.data)]
    assert EMAIL not in texts and "vip" in texts
    assert any(t.startswith("mask_") for t in texts)
    described = get_kind("mysql").describe(users)
    assert described["tables"]["users"][0]["email"] == EMAIL  # type: ignore[index,call-overload]


def test_a_trial_removes_a_tables_rows(users: str) -> None:
    assert parts_of("mysql", users) == ["table users"]
    remove("mysql", users, ["table users"])
    assert parts_of("mysql", users) == []
