"""A scan before a run leaves the machine: likely secrets and personal data in what a bundle
would hold.

:func:`scan_run` reads the manifest, every event line, every blob the run references and,
through :mod:`sandbox.services.dumptext`, the rows, keys and files inside service dumps. It
looks for secrets with detect-secrets' detectors (cloud and API key formats, private keys,
tokens, credentials in URLs, ``password = "..."`` assignments; its entropy detectors are left
out: hashes fill every run), for the fields redaction replaces by name (``api_secret=...``,
``"password": "..."``, in any text: an exception message, a tool argument, a Redis value;
:func:`sandbox.redaction.secret_fields`) and for personal data with the redactor's
patterns (e-mail, phone, card numbers). A placeholder written by redaction is not a finding.

:func:`export_shareable` refuses to write a bundle while findings remain that ``allow`` does
not accept, and names where they are (``table public.api_keys column value (row 1)``).
"""

from __future__ import annotations

import fnmatch
import io
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from sandbox.errors import ExportRefusedError
from sandbox.redaction import PII_PATTERNS, luhn, secret_fields
from sandbox.services.dumptext import Place, dump_places, text_places
from sandbox.snapshot.bundle import export_bundle
from sandbox.snapshot.integrity import check_store_run
from sandbox.snapshot.store import EVENTS, MANIFEST, Store

SECRET_DETECTORS: tuple[str, ...] = (
    "ArtifactoryDetector",
    "AWSKeyDetector",
    "AzureStorageKeyDetector",
    "BasicAuthDetector",
    "CloudantDetector",
    "DiscordBotTokenDetector",
    "GitHubTokenDetector",
    "GitLabTokenDetector",
    "IbmCloudIamDetector",
    "IbmCosHmacDetector",
    "JwtTokenDetector",
    "KeywordDetector",
    "MailchimpDetector",
    "NpmDetector",
    "OpenAIDetector",
    "PrivateKeyDetector",
    "PypiTokenDetector",
    "SendGridDetector",
    "SlackDetector",
    "SoftlayerDetector",
    "SquareOAuthDetector",
    "StripeDetector",
    "TelegramBotTokenDetector",
    "TwilioKeyDetector",
)
"""detect-secrets plugins used (its high-entropy ones are not: digests are everywhere)."""
PII_NAMES = {"email": "e-mail address", "phone": "phone number", "card": "card number"}
_PLACEHOLDER = re.compile(r"^<[a-z]+:[0-9a-f]{12}>$")
_PII = re.compile("|".join(f"(?P<{k}>{p})" for k, p in PII_PATTERNS.items()))
MAX_SHOWN = 3


@dataclass(frozen=True)
class Finding:
    """A likely secret or piece of personal data, and where it is (never its value)."""

    kind: str
    where: str

    def __str__(self) -> str:
        return f"{self.kind} in {self.where}"

    def allowed_by(self, patterns: Iterable[str]) -> bool:
        """Whether one of the ``--allow`` globs matches ``"<kind> in <where>"``."""
        return any(fnmatch.fnmatchcase(str(self), p) for p in patterns)


def _pii(text: str) -> Iterator[str]:
    for match in _PII.finditer(text):
        kind = match.lastgroup or ""
        if kind == "card" and not luhn(re.sub(r"\D", "", match[0])):
            continue
        yield PII_NAMES.get(kind, kind)


def scan_places(places: Iterable[Place]) -> Iterator[Finding]:
    """Findings in these pieces of text, each at most once per place and kind."""
    from detect_secrets.core.scan import scan_line
    from detect_secrets.settings import transient_settings

    plugins = [{"name": name} for name in SECRET_DETECTORS]
    with transient_settings({"plugins_used": plugins}):
        for where, text in places:
            seen: set[str] = set()
            for secret in scan_line(text):
                value = secret.secret_value or ""
                if _PLACEHOLDER.match(value) or "<redacted:" in value:
                    continue
                seen.add(secret.type)
            seen.update(_pii(text))
            seen.update(f"credential field ({name})" for name, _ in secret_fields(text))
            for kind in sorted(seen):
                yield Finding(kind, where)


def run_places(store: Store, run_id: str) -> Iterator[Place]:
    """Every piece of text a bundle of the run would hold, with where it is."""
    check = check_store_run(store, run_id)
    yield from text_places(MANIFEST, store.read_manifest_bytes(run_id))
    stream = store.open_events(run_id)
    with stream if stream is not None else io.BytesIO() as events:
        for number, line in enumerate(events, 1):
            yield f"{EVENTS} line {number}", line.decode("utf-8", "replace")
    media: dict[str, str] = {}
    if check.manifest is not None:
        for service in check.manifest.services:
            for ref in (service.before, service.after):
                if ref is not None:
                    media[ref.sha256] = ref.media_type
    for key in sorted(check.blob_keys):
        data = store.get_verified_blob(key)
        where = f"blob {key[:12]}"
        if key in media:
            for place, text in dump_places(media[key], data):
                yield f"{where} ({place})", text
        else:
            yield from text_places(where, data)


def scan_run(store: Store, run_id: str) -> list[Finding]:
    """What :func:`export_shareable` would refuse (before ``--allow``)."""
    return list(dict.fromkeys(scan_places(run_places(store, run_id))))


def export_shareable(
    store: Store,
    run_id: str,
    out_path: str | os.PathLike[str],
    *,
    allow: Sequence[str] = (),
) -> Path:
    """Scan the run, then export it (see :func:`~sandbox.snapshot.bundle.export_bundle`);
    raise :class:`ExportRefusedError` naming where findings are that ``allow`` (globs over
    ``"<kind> in <where>"``) does not accept. Nothing is written then."""
    findings = [f for f in scan_run(store, run_id) if not f.allowed_by(allow)]
    if findings:
        shown = "; ".join(str(f) for f in findings[:MAX_SHOWN])
        more = len(findings) - MAX_SHOWN
        raise ExportRefusedError(
            f"run {run_id!r} not exported: {len(findings)} likely secret(s) or personal "
            f"data: {shown}{f'; and {more} more' if more > 0 else ''} "
            f"(mask it, or accept with --allow '{findings[0].kind} in *')"
        )
    return export_bundle(store, run_id, out_path)
