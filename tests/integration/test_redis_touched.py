"""Redis state in production (``keep="failed"``, touched state) against a real Redis
container: a kept run holds exactly the keys it touched, each with its value and remaining
TTL at first touch, recorded through the redis-py client hooks; its replay restores those
keys only and reproduces; a replay reaching a key that was not kept is inconclusive with the
key named; runs sharing one client each keep their own keys."""

from __future__ import annotations

import asyncio
import importlib
import json
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
import redis
from test_services_containers import redis_server

from cli.main import main
from sandbox import capture
from sandbox.services.redis import RedisKind, keys_capture
from sandbox.services.redis.touched import COUNT_META, DOC_KEY, KEYS_META, STATE_META, pin_for
from sandbox.snapshot.manifest import Manifest
from sandbox.snapshot.store import DirectoryStore

pytestmark = pytest.mark.docker

AGENT = """
import asyncio, os
import redis, redis.asyncio
from sandbox import capture

EXTRA: list[str] = []
SHARED: list[object] = []
CLIENT = redis.Redis.from_url(os.environ["REDIS_URL"])  # made at import, as a service does


@capture.run("cart", store={store!r}, keep="failed")
def cart():
    price = int(CLIENT.get("price:7"))
    CLIENT.set("order:1", price * 2)
    raise AssertionError(f"charged twice: {{price * 2}}")


@capture.run("coupon", store={store!r}, keep="failed")
def coupon():
    r = redis.Redis.from_url(os.environ["REDIS_URL"])
    price = int(r.get("price:7"))
    code = r.get("coupon:SAVE10")
    for key in EXTRA:
        r.get(key)
    total = price - 10 if code else price
    total = total - 10 if code else total  # the bug: the coupon applies twice
    r.set("order:1", total)
    if total != price - 10:
        raise AssertionError(f"coupon applied twice: {{total}}")


@capture.run("fine", store={store!r}, keep="failed")
def fine():
    r = redis.Redis.from_url(os.environ["REDIS_URL"])
    r.get("price:7")
    r.set("order:1", 90)


@capture.run(
    "masked",
    store={store!r},
    keep="failed",
    services=[
        capture.ServiceSpec(
            "cache", "redis", os.environ["REDIS_URL"], env="REDIS_URL", mask={{"session:*": "hash"}}
        )
    ],
)
def masked():
    r = redis.Redis.from_url(os.environ["REDIS_URL"])
    r.get("session:1")
    r.get("price:7")
    raise AssertionError("kept")


@capture.run("a", store={store!r}, keep="failed")
async def task_a():
    client = SHARED[0]
    for i in range(3):
        await client.get(f"a:{{i}}")
        await asyncio.sleep(0)
    raise AssertionError("a failed")


@capture.run("b", store={store!r}, keep="failed")
async def task_b():
    client = SHARED[0]
    for i in range(2):
        await client.incr(f"b:{{i}}")
        await asyncio.sleep(0)
    raise AssertionError("b failed")
"""


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with redis_server() as url:
        yield url


@pytest.fixture
def shop(server: str, monkeypatch: pytest.MonkeyPatch) -> str:
    url = f"{server}/0"
    client = redis.Redis.from_url(url)
    client.flushall()
    pipe = client.pipeline(transaction=False)
    for i in range(1000):
        pipe.set(f"filler:{i}", "x" * 20)
    pipe.set("price:7", 100)
    pipe.set("coupon:SAVE10", "yes", px=600_000)
    pipe.set("order:1", "old")
    pipe.set("session:1", "secret-token")
    for i in range(3):
        pipe.set(f"a:{i}", f"va{i}")
    pipe.execute()
    client.close()
    monkeypatch.setenv("REDIS_URL", url)
    return url


def _agent(tmp_path: Path, store: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    (tmp_path / "couponagent.py").write_text(textwrap.dedent(AGENT.format(store=str(store))))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("couponagent", None)
    return importlib.import_module("couponagent")


def _kept(store: DirectoryStore, manifest: Manifest) -> dict[str, int | None]:
    """The key -> PTTL of the state a kept run holds before it (its touched capture)."""
    (service,) = manifest.services
    assert service.before is not None
    doc = json.loads(store.get_blob(service.before.sha256))
    import base64

    return {base64.b64decode(e["key"]).decode(): e["pttl"] for e in doc["keys"]}


def test_a_run_touching_3_of_1000_keys_keeps_those_and_its_replay_reproduces(
    shop: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store = DirectoryStore(tmp_path / "store")
    agent = _agent(tmp_path, store.root, monkeypatch)
    with pytest.raises(AssertionError):
        agent.coupon()
    capture.flush()  # the kept runs are written in the background
    (manifest,) = store.list()
    (service,) = manifest.services
    assert service.kind == "redis"
    assert service.meta[STATE_META] == "touched"
    assert service.meta[COUNT_META] == 3
    assert sorted(service.meta[KEYS_META]) == ["coupon:SAVE10", "order:1", "price:7"]
    kept = _kept(store, manifest)
    assert set(kept) == {"coupon:SAVE10", "order:1", "price:7"}
    assert kept["price:7"] is None and kept["order:1"] is None
    ttl = kept["coupon:SAVE10"]
    assert ttl is not None and 590_000 < ttl <= 600_000, "the TTL left at first touch"
    assert service.after is not None
    after = json.loads(store.get_blob(service.after.sha256))
    assert len(after["keys"]) == 3, "the end state holds the same keys, not the database"

    redis.Redis.from_url(shop).set("price:7", 999)  # the live database moved on since
    capsys.readouterr()
    monkeypatch.delenv("REDIS_URL")  # the replay points it at its own container
    code = main(["replay", manifest.run_id, "--times", "2", "--store", str(store.root)])
    out = capsys.readouterr().out
    assert code == 1, out
    assert "failure reproduced: 2/2 runs" in out


def test_a_client_made_at_import_is_sent_to_the_sandbox_on_replay(
    shop: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The agent's client and pool were made when its module was imported, before the
    replay began (its connection hooks could not see them): its first command sends the
    pool to the sandbox's Redis, and the failure reproduces in every run, the live server
    (still up, its price changed) never reached."""
    store = DirectoryStore(tmp_path / "store")
    agent = _agent(tmp_path, store.root, monkeypatch)
    with pytest.raises(AssertionError, match="charged twice: 200"):
        agent.cart()
    capture.flush()  # the kept runs are written in the background
    (manifest,) = store.list()
    redis.Redis.from_url(shop).set("price:7", 999)
    capsys.readouterr()
    code = main(["replay", manifest.run_id, "--times", "2", "--store", str(store.root)])
    out = capsys.readouterr().out
    assert code == 1, out
    assert "failure reproduced: 2/2 runs" in out
    assert redis.Redis.from_url(shop).get("order:1") == b"200"  # as the capture left it


def test_a_replay_reaching_a_key_that_was_not_kept_is_inconclusive_naming_it(
    shop: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store = DirectoryStore(tmp_path / "store")
    agent = _agent(tmp_path, store.root, monkeypatch)
    with pytest.raises(AssertionError):
        agent.coupon()
    capture.flush()  # the kept runs are written in the background
    (manifest,) = store.list()
    agent.EXTRA.append("filler:512")  # the changed agent reads a key the run never touched
    monkeypatch.delenv("REDIS_URL")
    monkeypatch.setenv("COLUMNS", "300")  # one reason, one line
    capsys.readouterr()
    code = main(["replay", manifest.run_id, "--store", str(store.root)])
    seen = capsys.readouterr()
    out = seen.out + seen.err
    assert code == 2, out
    assert "reached key 'filler:512', which the capture did not keep" in out


def test_two_tasks_sharing_one_client_each_keep_only_their_own_keys(
    shop: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = DirectoryStore(tmp_path / "store")
    agent = _agent(tmp_path, store.root, monkeypatch)

    async def both() -> list[object]:
        import redis.asyncio

        client = redis.asyncio.Redis.from_url(shop)  # one client and pool, made outside the runs
        agent.SHARED[:] = [client]
        try:
            return await asyncio.gather(agent.task_a(), agent.task_b(), return_exceptions=True)
        finally:
            await client.aclose()

    results = asyncio.run(both())
    assert all(isinstance(r, AssertionError) for r in results)
    capture.flush()  # the kept runs are written in the background
    runs = {m.name: m for m in store.list()}
    assert set(runs) == {"a", "b"}
    assert sorted(_kept(store, runs["a"])) == ["a:0", "a:1", "a:2"]
    assert _kept(store, runs["b"]) == {}, "b's keys did not exist before it"
    assert sorted(runs["b"].services[0].meta[KEYS_META]) == ["b:0", "b:1"]
    assert sorted(runs["a"].services[0].meta[KEYS_META]) == ["a:0", "a:1", "a:2"]


def test_a_run_that_ends_well_keeps_nothing_and_leaves_no_pin(
    shop: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = DirectoryStore(tmp_path / "store")
    agent = _agent(tmp_path, store.root, monkeypatch)
    agent.fine()
    capture.flush()  # the kept runs are written in the background
    assert store.list() == []
    assert list(store.iter_blobs()) == []
    from sandbox.services.redis import touched

    assert touched._pins == {}
    assert pin_for(None, "127.0.0.1:0/0") is None


def test_a_restored_touched_capture_confines_the_server_to_its_keys(shop: str) -> None:
    """Kept keys (glob characters matched literally) answer; any other key, and SCAN, are
    refused and named; the kind's own connections still reach everything."""
    import base64

    kept = [b"cart:[1]*", b"gone"]
    entry = {"key": base64.b64encode(kept[0]).decode(), "dump": None, "pttl": None}
    client = redis.Redis.from_url(shop)
    client.set(kept[0], "v")
    entry["dump"] = base64.b64encode(client.dump(kept[0])).decode()  # type: ignore[arg-type]
    extra = {DOC_KEY: {"keys": [base64.b64encode(k).decode() for k in kept], "wide": []}}
    state = keys_capture([entry], 0, 0, "7", {}, extra=extra)
    kind = RedisKind()
    kind.restore(shop, state.data)
    try:
        agent = redis.Redis.from_url(shop)
        assert agent.get(kept[0]) == b"v"
        assert agent.get("gone") is None
        with pytest.raises(redis.exceptions.NoPermissionError):
            agent.get("cart:[1]x")
        with pytest.raises(redis.exceptions.NoPermissionError):
            agent.scan()
        found = kind.outside_capture(shop, [])
        assert found == [
            "reached key 'cart:[1]x', which the capture did not keep",
            "sent SCAN, which reads keys the capture did not keep",
        ]
        assert kind.describe(shop)["keys"] == {
            "cart:[1]*": {"type": "string", "value": "v", "has_ttl": False}
        }
        assert kind.state_hash(shop) == state.state_hash
    finally:
        client.execute_command("ACL", "SETUSER", "default", "~*", "+@all")


def test_a_masked_touched_capture_keeps_its_keys_masked_and_leaves_the_live_server_open(
    shop: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = DirectoryStore(tmp_path / "store")
    agent = _agent(tmp_path, store.root, monkeypatch)
    with pytest.raises(AssertionError):
        agent.masked()
    capture.flush()  # the kept runs are written in the background
    (manifest,) = store.list()
    (service,) = manifest.services
    assert service.meta["masked"] == ["session:*"]
    assert sorted(service.meta[KEYS_META]) == ["price:7", "session:1"]
    assert service.before is not None
    data = store.get_blob(service.before.sha256)
    assert DOC_KEY in json.loads(data), "still the keys a replay confines to"
    keys = RedisKind().describe_data(shop, data)["keys"]
    assert isinstance(keys, dict) and set(keys) == {"price:7", "session:1"}
    assert keys["session:1"]["value"] != "secret-token"  # type: ignore[index,call-overload]
    assert b"secret-token" not in data
    live = redis.Redis.from_url(shop)
    assert live.get("session:1") == b"secret-token"
    assert live.dbsize() > 1000, "the live server's default user is not confined"


PRICED = """
import os
import redis
from sandbox import capture


@capture.tool
def listed_price():
    return 90  # a price list that went stale


@capture.run("priced", store={store!r}, keep="failed")
def priced():
    r = redis.Redis.from_url(os.environ["REDIS_URL"])
{body}
"""
BUG = """\
    price = listed_price()
    r.set("order:1", price)
    if price != int(r.get("price:7")):
        raise AssertionError(f"charged {price}")"""
FIX = """\
    r.set("order:1", int(r.get("price:7")))"""
BROKEN_FIX = """\
    try:
        r.hget("price:7", "eur")  # a string, not a hash: the server answers an error
    except redis.ResponseError:
        return"""


@pytest.mark.parametrize(
    ("fix", "code", "said"),
    [
        (FIX, 0, "(0/1 recorded calls made; the restored state used: 2 Redis commands answered"),
        (BROKEN_FIX, 2, "exercised nothing of the recorded run (0/1 recorded calls made)"),
    ],
    ids=["reads-redis", "its-command-fails"],
)
def test_a_fix_that_makes_no_recorded_call_is_gone_only_if_redis_answered_its_commands(
    shop: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    fix: str,
    code: int,
    said: str,
) -> None:
    """The recorded run charged a stale listed price (a recorded tool call). A fix that
    reads the price from Redis never makes that call: its two commands, answered by the
    restored server, exercised the run ("gone"). A fix whose only command the server
    answered with an error (caught by the agent) exercised nothing: inconclusive."""
    monkeypatch.setenv("COLUMNS", "300")
    store = DirectoryStore(tmp_path / "store")
    (tmp_path / "pricedagent.py").write_text(PRICED.format(store=str(store.root), body=BUG))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("pricedagent", None)
    agent = importlib.import_module("pricedagent")
    with pytest.raises(AssertionError, match="charged 90"):
        agent.priced()
    capture.flush()  # the kept runs are written in the background
    (manifest,) = store.list()
    (tmp_path / "pricedagent.py").write_text(PRICED.format(store=str(store.root), body=fix))
    del sys.modules["pricedagent"]  # the fixed module is imported by the replay
    capsys.readouterr()
    replayed = main(["replay", manifest.run_id, "--store", str(store.root)])
    out = capsys.readouterr().out
    assert replayed == code, out
    assert said in out
