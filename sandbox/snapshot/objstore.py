"""Runs and blobs in an S3-compatible object store (AWS S3, MinIO, Google Cloud Storage).

The layout under ``s3://BUCKET/PREFIX`` mirrors a folder store::

    PREFIX/blobs/sha256/<ab>/<sha256>
    PREFIX/runs/<run_id>/events.jsonl
    PREFIX/runs/<run_id>/manifest.json

A run is published blobs first, then its event log, then its manifest: a run exists when its
``manifest.json`` does, so a reader sees it whole or not at all. A blob already present is
never sent again (one ``HEAD`` first). Listing reads the manifests only, never the event logs.

The client is boto3: the reference S3 client, the one MinIO and Google Cloud Storage (its
XML API with HMAC keys) document, and the one moto serves in tests. Credentials, region and
endpoint come from boto3's usual environment (``AWS_ACCESS_KEY_ID``, ``AWS_PROFILE``,
``AWS_ENDPOINT_URL_S3``, ...), never from a manifest or a store URL. The endpoint is read
once, when the store is opened: with its bucket and prefix it is the store's
:attr:`ObjectStore.destination`, which the spool records for every run it holds.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sandbox.errors import StoreError, UnknownRunError
from sandbox.snapshot.manifest import Manifest
from sandbox.snapshot.store import (
    CLAIM_GRACE,
    EVENTS,
    MANIFEST,
    MAX_MANIFEST_BYTES,
    check_blob_key,
    check_run_id,
    dump_manifest,
    parse_manifest,
)

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

SCHEME = "s3"
ENDPOINT_ENV = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
"""boto3's variables naming the endpoint, the first one set wins (as in boto3)."""
CLAIM_REFRESH = CLAIM_GRACE / 6
"""Seconds after which a blob claimed is marked in use again (a copy of it onto itself):
well within a pruning's grace, at most one request per blob and period."""


@dataclass(frozen=True)
class S3Location:
    bucket: str
    prefix: str

    @classmethod
    def parse(cls, url: str) -> S3Location:
        scheme, sep, rest = url.partition("://")
        bucket, _, prefix = rest.partition("/")
        if scheme != SCHEME or not sep or not bucket:
            raise StoreError(f"not an object store URL: {url!r} (expected s3://BUCKET[/PREFIX])")
        return cls(bucket, prefix.strip("/"))

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}".rstrip("/")

    def key(self, *parts: str) -> str:
        return "/".join(p for p in (self.prefix, *parts) if p)


def configured_endpoint() -> str | None:
    """The endpoint boto3's environment names, ``None`` for boto3's own (AWS, or the
    profile's ``endpoint_url``)."""
    return next((os.environ[name] for name in ENDPOINT_ENV if os.environ.get(name)), None)


def _client(endpoint: str | None) -> S3Client:
    try:
        import boto3
        from botocore.config import Config
    except ImportError:
        raise StoreError("s3:// stores need boto3: pip install 'sandbox-replayer[s3]'") from None

    # Short connect timeout, few retries: an unreachable store is reported (and the spool
    # keeps the run) rather than waited on for minutes.
    config = Config(connect_timeout=5, read_timeout=60, retries={"max_attempts": 3})
    return boto3.session.Session().client("s3", endpoint_url=endpoint, config=config)


def _status(exc: Exception) -> int:
    response: Any = getattr(exc, "response", None) or {}
    return int(response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))


class ObjectStore:
    """The runs and blobs under one ``s3://`` location, through a boto3 client."""

    def __init__(self, url: str, client: S3Client | None = None) -> None:
        self.location = S3Location.parse(url)
        self._client = client
        self.endpoint = client.meta.endpoint_url if client is not None else configured_endpoint()

    @property
    def destination(self) -> str:
        """Where runs go: the endpoint, the bucket and the prefix, as one line."""
        profile = os.environ.get("AWS_PROFILE") or "default"
        endpoint = self.endpoint or f"boto3's endpoint of profile {profile}"
        return f"{self.location} at {endpoint}"

    def __repr__(self) -> str:
        return f"ObjectStore({str(self.location)!r})"

    @property
    def client(self) -> S3Client:
        if self._client is None:
            self._client = _client(self.endpoint)
        return self._client

    # --- objects -------------------------------------------------------------------------

    def _call(self, what: str, fn: Callable[[], Any]) -> Any:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return fn()
        except ClientError as exc:
            raise StoreError(f"{self.location}: cannot {what}: {exc}") from None
        except BotoCoreError as exc:
            raise StoreError(f"{self.location}: cannot {what}: {exc}") from None

    def _get(self, key: str, limit: int | None = None) -> bytes | None:
        from botocore.exceptions import ClientError

        def get() -> bytes | None:
            try:
                body = self.client.get_object(Bucket=self.location.bucket, Key=key)["Body"]
            except ClientError as exc:
                if _status(exc) == 404:
                    return None
                raise
            with body:
                data: bytes = body.read() if limit is None else body.read(limit + 1)
            return data

        data: bytes | None = self._call(f"read {key}", get)
        if data is not None and limit is not None and len(data) > limit:
            raise StoreError(f"{self.location}/{key}: larger than {limit} bytes, not read")
        return data

    def _put(self, key: str, data: bytes) -> None:
        self._call(
            f"write {key}",
            lambda: self.client.put_object(Bucket=self.location.bucket, Key=key, Body=data),
        )

    def _has(self, key: str) -> bool:
        return self._modified(key) is not None

    def _modified(self, key: str) -> float | None:
        """When the object last changed (seconds since the epoch), ``None`` when absent."""
        from botocore.exceptions import ClientError

        def head() -> float | None:
            try:
                found = self.client.head_object(Bucket=self.location.bucket, Key=key)
            except ClientError as exc:
                if _status(exc) == 404:
                    return None
                raise
            return found["LastModified"].timestamp()

        modified: float | None = self._call(f"look up {key}", head)
        return modified

    def check_bucket(self) -> None:
        """Raise :class:`StoreError` when the store answers that the bucket does not exist
        (one ``HEAD``); any other answer (an outage, no permission to look) is left to the
        writes that follow."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self.client.head_bucket(Bucket=self.location.bucket)
        except ClientError as exc:
            if _status(exc) == 404:
                where = self.endpoint or "boto3's endpoint"
                raise StoreError(
                    f"{self.location}: there is no bucket {self.location.bucket!r} at {where}"
                ) from None
        except BotoCoreError:
            pass

    def _keys(self, prefix: str) -> Iterator[str]:
        paginator = self.client.get_paginator("list_objects_v2")
        pages = self._call(
            f"list {prefix}",
            lambda: list(paginator.paginate(Bucket=self.location.bucket, Prefix=prefix)),
        )
        for page in pages:
            for item in page.get("Contents", ()):
                yield item["Key"]

    # --- blobs ---------------------------------------------------------------------------

    def blob_key(self, key: str) -> str:
        check_blob_key(key)
        return self.location.key("blobs", "sha256", key[:2], key)

    def has_blob(self, key: str) -> bool:
        return self._has(self.blob_key(key))

    def claim_blob(self, key: str) -> bool:
        """Whether the blob is there, marked in use (see :meth:`Store.claim_blob`): copied
        onto itself, which sets its time of change to now, when that time is more than
        :data:`CLAIM_REFRESH` seconds old (a pruning leaves a blob changed within its grace,
        which is longer)."""
        name = self.blob_key(key)
        modified = self._modified(name)
        if modified is None:
            return False
        if time.time() - modified > CLAIM_REFRESH:
            source = {"Bucket": self.location.bucket, "Key": name}
            self._call(
                f"mark {name} in use",
                lambda: self.client.copy_object(
                    Bucket=self.location.bucket,
                    Key=name,
                    CopySource=source,  # type: ignore[arg-type]
                    MetadataDirective="REPLACE",
                ),
            )
        return True

    def put_blob(self, key: str, data: bytes) -> bool:
        """Upload a blob unless it is there already (then claimed); return whether it was
        sent."""
        if self.claim_blob(key):
            return False
        self._put(self.blob_key(key), data)
        return True

    def delete_blob_unclaimed(self, key: str, since: float) -> bool:
        """Remove a blob unless it changed at or after ``since`` (see
        :meth:`Store.delete_blob_unclaimed`). The object store's times are whole seconds of
        its own clock; one claimed between this look and the removal is still removed (a
        window of one request, where a folder store has none)."""
        name = self.blob_key(key)
        modified = self._modified(name)
        if modified is None:
            return True
        if modified + 1 > since:
            return False
        self._delete(name)
        return True

    def get_blob(self, key: str) -> bytes | None:
        return self._get(self.blob_key(key))

    # --- runs ----------------------------------------------------------------------------

    def run_key(self, run_id: str, name: str) -> str:
        return self.location.key("runs", check_run_id(run_id), name)

    def publish(
        self,
        manifest: Manifest,
        events: bytes,
        blobs: Iterable[str],
        read_blob: Callable[[str], bytes],
    ) -> int:
        """Upload a run: the blobs it references that are missing, its event log, and its
        manifest last (the run appears with it). Return how many blobs were sent."""
        sent = sum(self.put_blob(key, read_blob(key)) for key in sorted(blobs) if key)
        self._put(self.run_key(manifest.run_id, EVENTS), events)
        self._put(self.run_key(manifest.run_id, MANIFEST), dump_manifest(manifest))
        return sent

    def exists(self, run_id: str) -> bool:
        return self._has(self.run_key(run_id, MANIFEST))

    def published_manifest(self, run_id: str) -> bytes | None:
        """The run's manifest as published, ``None`` when the run is not there."""
        return self._get(self.run_key(run_id, MANIFEST), MAX_MANIFEST_BYTES)

    def manifest_bytes(self, run_id: str) -> bytes:
        data = self.published_manifest(run_id)
        if data is None:
            raise UnknownRunError(f"no run {run_id!r} in store {self.location}")
        return data

    def manifest(self, run_id: str) -> Manifest:
        return parse_manifest(self.manifest_bytes(run_id), f"{run_id}/{MANIFEST}")

    def events(self, run_id: str) -> bytes:
        data = self._get(self.run_key(run_id, EVENTS))
        return b"" if data is None else data

    def run_ids(self) -> list[str]:
        """The published runs (those with a manifest), sorted; nothing is read inside them."""
        runs = self.location.key("runs") + "/"
        found = []
        for key in self._keys(runs):
            run_id, _, name = key[len(runs) :].partition("/")
            if name == MANIFEST:
                found.append(run_id)
        return sorted(found)

    def delete(self, run_id: str) -> None:
        """Remove a run: its manifest first (it disappears at once), then its event log."""
        if not self.exists(run_id):
            raise UnknownRunError(f"no run {run_id!r} in store {self.location}")
        for name in (MANIFEST, EVENTS):
            self._delete(self.run_key(run_id, name))

    def delete_blob(self, key: str) -> None:
        """Remove a blob (nothing happens when it is absent)."""
        self._delete(self.blob_key(key))

    def _delete(self, key: str) -> None:
        self._call(
            f"delete {key}",
            lambda: self.client.delete_object(Bucket=self.location.bucket, Key=key),
        )
