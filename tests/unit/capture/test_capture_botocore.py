"""boto3 captured at botocore's HTTP session against a real local AWS endpoint (moto's
server): S3 and DynamoDB calls recorded (a streamed S3 object teed as it is read, the
signature and the session token on disk nowhere) and replayed as botocore responses with
the endpoint stopped; DynamoDB's operation part of each call's name; the sandbox's own
S3 requests not the run's."""

from __future__ import annotations

import io
import json
import os
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import EndpointConnectionError
from moto.server import ThreadedMotoServer

from sandbox import capture
from sandbox.capture import http
from sandbox.replay import replay
from sandbox.snapshot.events import HTTPExchange
from sandbox.snapshot.manifest import Entrypoint
from sandbox.snapshot.store import DirectoryStore
from tests.replayed import bytes_on_disk, reproduced_then_gone

URL_ENV = "BOTOCORE_TEST_URL"
KEY_ID = "AKIAZ7EXAMPLE4TESTKEY"
SECRET_KEY = "wJalrXUtnFEMI/K7MDENG/bPxRfiCY4plantedKEY"
SESSION_TOKEN = "FwoGZXIvYXdzEPlanted//////////wEaDSessionToken9988"
FIXED = {"on": False}


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[ThreadedMotoServer]:
    for name, value in {
        "AWS_ACCESS_KEY_ID": KEY_ID,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_SESSION_TOKEN": SESSION_TOKEN,
        "AWS_DEFAULT_REGION": "eu-west-1",
    }.items():
        monkeypatch.setenv(name, value)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    monkeypatch.setenv(URL_ENV, f"http://{host}:{port}")
    reset = urllib.request.Request(f"http://{host}:{port}/moto-api/reset", method="POST")
    urllib.request.urlopen(reset, timeout=10).close()  # its state is the process's
    s3, ddb = _clients()
    s3.create_bucket(
        Bucket="catalog", CreateBucketConfiguration={"LocationConstraint": "eu-west-1"}
    )
    s3.put_object(Bucket="catalog", Key="mug.json", Body=json.dumps({"price": 12}).encode())
    ddb.create_table(
        TableName="stock",
        KeySchema=[{"AttributeName": "sku", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "sku", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    ddb.put_item(TableName="stock", Item={"sku": {"S": "mug"}, "qty": {"N": "-2"}})
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(autouse=True)
def _unwarned(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http._PATCH, "warned", set())


def _clients() -> tuple[Any, Any]:
    url = os.environ[URL_ENV]
    return boto3.client("s3", endpoint_url=url), boto3.client("dynamodb", endpoint_url=url)


def restock(sku: str) -> dict[str, Any]:
    """The agent: a price from S3 (a streamed body), the stock from DynamoDB, an order
    written back; it fails on negative stock until fixed."""
    s3, ddb = _clients()
    price = json.loads(s3.get_object(Bucket="catalog", Key=f"{sku}.json")["Body"].read())
    item = ddb.get_item(TableName="stock", Key={"sku": {"S": sku}})["Item"]
    qty = int(item["qty"]["N"])
    s3.put_object(Bucket="catalog", Key=f"orders/{sku}", Body=io.BytesIO(b"order: 10"))
    ddb.delete_item(TableName="stock", Key={"sku": {"S": sku}})
    if qty < 0 and not FIXED["on"]:
        raise ValueError(f"negative stock for {sku}: {qty}")
    return {"sku": sku, "price": price["price"], "qty": qty}


def test_boto3_calls_are_recorded_and_replay_with_the_endpoint_stopped(
    tmp_path: Path, endpoint: ThreadedMotoServer
) -> None:
    """Four calls recorded, a DynamoDB call named by its operation, the S3 object's body as
    read and the upload's from its file; the key id, secret key and
    session token on disk nowhere; with the endpoint stopped the failure reproduces 2/2
    with no divergence and is gone once fixed."""
    store = DirectoryStore(tmp_path / "store")
    entry = Entrypoint(kind="callable", target=f"{__name__}:restock", args=["mug"])
    with (
        pytest.raises(ValueError, match="negative stock"),
        capture.run("restock", store=store, entrypoint=entry, packages=False) as rec,
    ):
        restock("mug")
    endpoint.stop()
    exchanges = [e for e in store.load_events(rec.run_id) if isinstance(e, HTTPExchange)]
    base = os.environ[URL_ENV]
    assert [e.name for e in exchanges] == [
        f"GET {base}/catalog/mug.json",
        f"POST {base}/ DynamoDB_20120810.GetItem",
        f"PUT {base}/catalog/orders/mug",
        f"POST {base}/ DynamoDB_20120810.DeleteItem",
    ]
    assert json.loads(str(exchanges[0].response_body)) == {"price": 12}
    assert exchanges[1].response_body == {"Item": {"sku": {"S": "mug"}, "qty": {"N": "-2"}}}
    assert exchanges[2].request_body == "order: 10"
    on_disk = bytes_on_disk(tmp_path / "store")
    for planted in (KEY_ID, SECRET_KEY, SESSION_TOKEN):
        assert planted.encode() not in on_disk, planted
    reproduced_then_gone(rec.run_id, store, FIXED)


def test_a_streamed_body_left_unread_is_recorded_as_incomplete(
    tmp_path: Path, endpoint: ThreadedMotoServer
) -> None:
    """An S3 object's body half read, then the run over: its exchange holds what was read
    and an error saying the body was not read to the end; read in chunks, all of it."""
    store = DirectoryStore(tmp_path / "store")
    s3, _ = _clients()
    with capture.run("partial", store=store, packages=False) as rec:
        body = s3.get_object(Bucket="catalog", Key="mug.json")["Body"]
        assert body.read(5) == b'{"pri'
        whole = b"".join(s3.get_object(Bucket="catalog", Key="mug.json")["Body"].iter_chunks(4))
        assert json.loads(whole) == {"price": 12}
    exchanges = [e for e in store.load_events(rec.run_id) if isinstance(e, HTTPExchange)]
    whole, partial = exchanges  # written as each body ends: the half-read one at the run's
    assert whole.error is None and whole.response_body == '{"price": 12}'
    assert partial.response_body == '{"pri'
    assert partial.error is not None and partial.error.type == "IncompleteRead"


def test_the_sandboxs_own_s3_requests_are_not_the_runs(
    tmp_path: Path, endpoint: ThreadedMotoServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """A boto3 call made by code of the sandbox's (its S3 store's) inside a run is neither
    recorded nor named on stderr."""
    own: dict[str, object] = {"__name__": "sandbox.snapshot.own", "clients": _clients}
    exec("def listed():\n    return clients()[0].list_buckets()['Buckets']\n", own)
    store = DirectoryStore(tmp_path / "store")
    with capture.run("own", store=store, packages=False) as rec:
        assert own["listed"]()  # type: ignore[operator]
    assert not [e for e in store.load_events(rec.run_id) if isinstance(e, HTTPExchange)]
    assert "not captured" not in capsys.readouterr().err


def unreachable() -> str:
    """The agent: a DynamoDB call to an endpoint nothing listens on, retried once by
    botocore, its error handled."""
    ddb = boto3.client(
        "dynamodb",
        endpoint_url=os.environ[URL_ENV],
        config=Config(retries={"total_max_attempts": 2, "mode": "standard"}),
    )
    try:
        ddb.get_item(TableName="stock", Key={"sku": {"S": "mug"}})
    except EndpointConnectionError as exc:
        capture.mark_failed(f"stock down: {type(exc).__name__}")
        return "down"
    return "up"


def test_a_failed_connection_retried_by_botocore_is_raised_again_on_replay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both attempts recorded as botocore's own error; the replay raises it again for each
    (the agent's ``except`` catches it): reproduced, no divergence."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "any")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    monkeypatch.setenv(URL_ENV, "http://127.0.0.1:9")  # discard: nothing listens
    store = DirectoryStore(tmp_path / "store")
    entry = Entrypoint(kind="callable", target=f"{__name__}:unreachable")
    with capture.run("unreachable", store=store, entrypoint=entry, packages=False) as rec:
        rec.offer_result(unreachable())
    errors = [e.error for e in store.load_events(rec.run_id) if isinstance(e, HTTPExchange)]
    assert [e.type if e else None for e in errors] == [
        "botocore.exceptions.EndpointConnectionError"
    ] * 2
    report = replay(rec.run_id, store=store, times=1)
    assert report.verdict.reproduced == 1, report.describe()
    assert report.divergences == [None], report.describe()
    assert not [n for n in report.notes if "stand-in" in n], report.describe()


def upload(path: str) -> int:
    """The agent: uploads a file with s3transfer (a chunk of the file as the body, read in a
    worker thread, reporting its progress), then fails on what it counted."""
    s3, _ = _clients()
    sent: list[int] = []
    s3.upload_file(path, "catalog", "reports/r1.json", Callback=sent.append)
    if sum(sent) != Path(path).stat().st_size:
        raise AssertionError(f"progress {sum(sent)} for {Path(path).stat().st_size} bytes")
    raise ValueError(f"uploaded {sum(sent)} bytes")


def test_an_upload_from_a_file_is_sent_whole_recorded_and_replayed(
    tmp_path: Path, endpoint: ThreadedMotoServer
) -> None:
    """``upload_file``: the object arrives whole and its progress adds up to its size (the
    capture read the chunk and put it back, its progress quiet meanwhile; before, the chunk
    was left read to its end and the upload hung); the PUT holds the file's bytes; with the
    endpoint stopped the replay reproduces, no divergence."""
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"rows": list(range(40))}))
    store = DirectoryStore(tmp_path / "store")
    entry = Entrypoint(kind="callable", target=f"{__name__}:upload", args=[str(report)])
    with (
        pytest.raises(ValueError, match=f"uploaded {report.stat().st_size} bytes"),
        capture.run("upload", store=store, entrypoint=entry, packages=False) as rec,
    ):
        upload(str(report))
    s3, _ = _clients()
    arrived = s3.get_object(Bucket="catalog", Key="reports/r1.json")["Body"].read()
    assert arrived == report.read_bytes()
    endpoint.stop()
    (put,) = [e for e in store.load_events(rec.run_id) if isinstance(e, HTTPExchange)]
    assert put.method == "PUT" and put.request_body == report.read_text()
    replayed = replay(rec.run_id, store=store, times=1)
    assert replayed.verdict.reproduced == 1, replayed.describe()
    assert replayed.divergences == [None], replayed.describe()
