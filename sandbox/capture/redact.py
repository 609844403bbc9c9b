"""Redaction, under the name the capture first gave it: everything is in
:mod:`sandbox.redaction` (below capture, services and the snapshot store, which all use it)."""

from __future__ import annotations

from sandbox.redaction import (
    DEFAULT_PATTERNS,
    FIELD_PATTERN,
    FIELD_STEMS,
    FIELD_WORDS,
    MIN_LITERAL,
    PII_PATTERNS,
    SENSITIVE_ENV_PARTS,
    SENSITIVE_HEADERS,
    URL_PASSWORD,
    RedactionConfig,
    Redactor,
    credential_like,
    field_words,
    is_placeholder,
    keyed_digest,
    luhn,
    random_key,
    secret_fields,
    sensitive_field,
    sensitive_header,
)

__all__ = [
    "DEFAULT_PATTERNS",
    "FIELD_PATTERN",
    "FIELD_STEMS",
    "FIELD_WORDS",
    "MIN_LITERAL",
    "PII_PATTERNS",
    "SENSITIVE_ENV_PARTS",
    "SENSITIVE_HEADERS",
    "URL_PASSWORD",
    "RedactionConfig",
    "Redactor",
    "credential_like",
    "field_words",
    "is_placeholder",
    "keyed_digest",
    "luhn",
    "random_key",
    "secret_fields",
    "sensitive_field",
    "sensitive_header",
]
