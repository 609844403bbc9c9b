"""Masking inside service state: rules applied to what is captured, before it is stored.

A service declares its rules as ``ServiceSpec(..., mask={TARGET: METHOD})``, or by service
name or kind in ``RedactionConfig(masks={"postgres": {TARGET: METHOD}})`` (which also reaches
services found at capture), on the command line (``sandbox capture --mask
postgres:users.email=hash``) or in a TOML file (``--mask-file masks.toml``)::

    [mask.postgres]
    "users.email" = "hash"
    "api_keys.value" = "null"


A target is what the service's kind masks (its :class:`Maskable`): a column in a SQL
database (``"table.column"``, ``"schema.table.column"``), a key glob in a key-value store
(``"session:*"``, string values and hash fields), a path glob in a folder (``"notes/*.md"``).

Methods, after PostgreSQL Anonymizer's masking functions:

* ``hash``: the value becomes ``mask_<16 hex>``, a keyed SHA-256 of it (key: the store's
  placeholder key). Equal values give equal masks, so joins and lookups still match;
* ``null``: the value is removed (SQL ``NULL``, the Redis key deleted, the file emptied);
* ``redact``: secrets and personal data inside the value are replaced by the redactor's
  placeholders, the rest is kept.

The state is masked where it can be restored and captured again with the service kind's own
``restore`` and ``capture``, in a scratch place the kind chooses: a scratch database beside
the captured one, a spare database number, a temporary folder or file. So a masked dump is an
ordinary dump of the masked state: it restores, replays and hashes like any other.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import os
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from pydantic import JsonValue

from sandbox.errors import MaskRuleError, UnknownNameError
from sandbox.redaction import Redactor, sensitive_field
from sandbox.services.base import CapturedState
from sandbox.services.registry import get_kind, kinds

Method = Literal["hash", "null", "redact"]
METHODS: tuple[Method, ...] = ("hash", "null", "redact")


@dataclass(frozen=True)
class MaskRule:
    target: str
    method: Method


@dataclass(frozen=True)
class Masker:
    """How one rule's method changes one value."""

    key: bytes

    def hashed(self, value: str) -> str:
        digest = hmac.new(self.key, value.encode("utf-8", "surrogateescape"), hashlib.sha256)
        return "mask_" + digest.hexdigest()[:16]

    def redacted(self, value: str) -> str:
        return Redactor(key=self.key).text(value)

    def apply(self, method: Method, value: str) -> str | None:
        if method == "null":
            return None
        return self.hashed(value) if method == "hash" else self.redacted(value)

    def apply_bytes(self, method: Method, value: object) -> bytes:
        """:meth:`apply` to a stored value (``b""`` for ``null``)."""
        text = value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else str(value)
        return (self.apply(method, text) or "").encode("utf-8", "surrogateescape")

    def apply_field(self, method: Method, field: bytes | str, value: object) -> bytes:
        """:meth:`apply_bytes` to a hash's value; with ``redact``, the value of a credential
        field (known by its name: ``password``, ``api_key`` ...) becomes its placeholder."""
        name = field.decode("utf-8", "surrogateescape") if isinstance(field, bytes) else field
        if method != "redact" or not sensitive_field(name):
            return self.apply_bytes(method, value)
        text = value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else str(value)
        return Redactor(key=self.key).field_value(text).encode("utf-8", "surrogateescape")


@runtime_checkable
class Maskable(Protocol):
    """A kind whose captures can be masked: its ``mask`` applies the rules to a capture in a
    scratch copy (never ``endpoint`` itself) and returns the capture of the masked state
    (:func:`masked_state`)."""

    def mask(
        self, endpoint: str, state: CapturedState, rules: list[MaskRule], masker: Masker
    ) -> CapturedState: ...


def parse_mask_options(values: Iterable[str]) -> dict[str, dict[str, str]]:
    """``--mask SERVICE:TARGET=METHOD`` options as rules by service name or kind."""
    out: dict[str, dict[str, str]] = {}
    for value in values:
        service, sep, rule = value.partition(":")
        target, eq, method = rule.rpartition("=")
        if not (sep and eq and service and target and method):
            raise MaskRuleError(
                f"--mask {value!r}: expected SERVICE:TARGET=METHOD, as db:users.email=hash"
            )
        parse_rules({target: method})
        out.setdefault(service, {})[target] = method
    return out


def load_mask_file(path: str | os.PathLike[str]) -> dict[str, dict[str, str]]:
    """Masking rules from a TOML file: a ``[mask.SERVICE]`` table per service name or kind,
    ``"TARGET" = "METHOD"`` in it."""
    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except OSError as exc:
        raise MaskRuleError(
            f"cannot read the mask file {os.fspath(path)}: {exc.strerror}"
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise MaskRuleError(f"{os.fspath(path)}: not valid TOML ({exc})") from None
    tables = doc.get("mask", {})
    if not isinstance(tables, dict) or not all(isinstance(t, dict) for t in tables.values()):
        raise MaskRuleError(f"{os.fspath(path)}: expected [mask.SERVICE] tables")
    out: dict[str, dict[str, str]] = {}
    for service, rules in tables.items():
        checked = {str(t): str(m) for t, m in rules.items()}
        parse_rules(checked)
        out[str(service)] = checked
    return out


def parse_rules(mask: Mapping[str, str]) -> list[MaskRule]:
    rules = []
    for target, name in mask.items():
        method = next((m for m in METHODS if m == name), None)
        if method is None:
            raise UnknownNameError("masking method", name, list(METHODS))
        rules.append(MaskRule(target, method))
    return rules


def capture_masked(
    kind_name: str, endpoint: str, mask: Mapping[str, str], key: bytes
) -> CapturedState:
    """Capture the service behind ``endpoint``, with ``mask`` applied to what is captured."""
    return mask_captured(kind_name, endpoint, get_kind(kind_name).capture(endpoint), mask, key)


def mask_captured(
    kind_name: str, endpoint: str, state: CapturedState, mask: Mapping[str, str], key: bytes
) -> CapturedState:
    """``state``, captured from ``endpoint``, with ``mask`` applied (the kind's own meta
    kept)."""
    if not mask:
        return state
    kind = get_kind(kind_name)
    rules = parse_rules(mask)
    if not isinstance(kind, Maskable):
        names = sorted(n for n, k in kinds().items() if isinstance(k, Maskable))
        raise UnknownNameError("service kind with masking", kind_name, names)
    masked = kind.mask(endpoint, state, rules, Masker(key))
    return dataclasses.replace(masked, meta={**state.meta, **masked.meta})


def masked_state(
    masked: CapturedState, rules: list[MaskRule], data: bytes | None = None, **meta: JsonValue
) -> CapturedState:
    """The capture of the masked state, saying which targets were masked."""
    targets: list[JsonValue] = [r.target for r in sorted(rules, key=lambda r: r.target)]
    return CapturedState(
        data=masked.data if data is None else data,
        state_hash=masked.state_hash,
        version=masked.version,
        media_type=masked.media_type,
        meta={**masked.meta, **meta, "masked": targets},
    )
