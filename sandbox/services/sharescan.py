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

import bisect
import fnmatch
import functools
import io
import json
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from sandbox.errors import ExportRefusedError
from sandbox.redaction import (
    _PII_SHAPES,
    _SHAPE,
    PII_PATTERNS,
    luhn,
    secret_fields,
    stem_spellings,
)
from sandbox.services.dumptext import Place, dump_places, text_places
from sandbox.snapshot.bundle import export_bundle
from sandbox.snapshot.integrity import Integrity, check_store_run
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


def _pii_kinds(text: str) -> tuple[str, ...]:
    """The kinds of personal data ``text`` may hold, in the order of :data:`PII_PATTERNS`:
    an e-mail address needs an ``@``, a phone or card number a shape of
    :mod:`sandbox.redaction` (when ``text`` is ASCII: ``\\d`` matches any script's
    digits)."""
    shape = text.encode("ascii").translate(_SHAPE) if text.isascii() else None
    kinds = []
    for kind in PII_PATTERNS:
        if kind == "email":
            possible = "@" in text
        elif shape is None or kind not in _PII_SHAPES:
            possible = True
        else:
            possible = any(s in shape for s in _PII_SHAPES[kind])
        if possible:
            kinds.append(kind)
    return tuple(kinds)


@functools.cache
def _pii_pattern(kinds: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile("|".join(f"(?P<{k}>{PII_PATTERNS[k]})" for k in kinds))


def _pii(text: str, kinds: tuple[str, ...] | None = None) -> Iterator[str]:
    """Personal data in ``text``. Only the ``kinds`` it may hold (all that
    :func:`_pii_kinds` allows when ``None``) are searched: the others match nowhere in it,
    so the matches are those of the whole pattern, at a fraction of its cost."""
    if kinds is None:
        kinds = _pii_kinds(text)
    if not kinds:
        return
    for match in _pii_pattern(kinds).finditer(text):
        kind = match.lastgroup or ""
        if kind == "card" and not luhn(re.sub(r"\D", "", match[0])):
            continue
        yield PII_NAMES.get(kind, kind)


_CHUNK_CHARS = 256 * 1024
"""Text gathered before the gates are searched (places are joined with newlines)."""
_FOLDS_TO_ASCII = re.compile("[\u0130\u0131\u017f\u212a]")
"""The characters that ``re.IGNORECASE`` matches with an ASCII letter (dotted and dotless i, long s,
Kelvin sign): in a text
holding none, a lowercased copy is searched for case-blind patterns with case-blind results."""


@dataclass(frozen=True)
class _Followed:
    """One of ``words`` followed by a match of ``tail``."""

    words: tuple[str, ...]
    tail: re.Pattern[str]


_ASSIGNED = _Followed(
    ("key", "pw", "pwd", "pass", "password", "token"),  # each keyword, as it ends
    re.compile(r"""["']?\]? *(?:=|:|:=|=>| +|::) *["']?[\w-]{24}"""),
)
"""What every match of detect-secrets' assignment patterns (``ibm_api_key = "…"``) holds:
one of their keywords, an assignment, and a value of 24 characters at least."""
_URL_PART = r"[^:/\?\#\[\]@!\$\&'\(\)\*\+,;=\s]"
"""A character of a URL's user or password, as detect-secrets' basic-auth pattern has it."""
_Quick = str | re.Pattern[str] | _Followed
"""A substring, a pattern or a word and what follows, searched in the lowercased text."""
_QUICK: dict[str, tuple[_Quick, ...]] = {
    # For each detector, parts one of which every match of its own patterns holds, far
    # cheaper to search: a substring is found at memory speed, and the detector's patterns
    # often start with optional groups tried at every character.
    "ArtifactoryDetector": ("akc", re.compile(r"ap[\da-f][a-z0-9]{8}")),
    "AWSKeyDetector": ("a3t", "abia", "acca", "akia", "asia", "aws"),
    "AzureStorageKeyDetector": ("accountkey=",),
    "BasicAuthDetector": (_Followed(("://",), re.compile(rf"{_URL_PART}+:{_URL_PART}+@")),),
    "CloudantDetector": (_ASSIGNED, "cloudant"),
    "DiscordBotTokenDetector": (re.compile(r"\.[a-z\d_-]{6}\.[a-z\d_-]{27}"),),
    "GitHubTokenDetector": ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    "GitLabTokenDetector": (
        *("glpat-", "gldt-", "glft-", "glsoat-", "glrt-", "gr1348941", "glcbt-", "glimt-"),
        *("glptt-", "glagent-", "gloas-"),
    ),
    "IbmCloudIamDetector": (_ASSIGNED,),
    "IbmCosHmacDetector": (_ASSIGNED,),
    "JwtTokenDetector": ("eyj",),
    "MailchimpDetector": ("-us",),
    "NpmDetector": (":_authtoken=",),
    "OpenAIDetector": ("t3blbkfj",),
    "PrivateKeyDetector": ("private key", "putty-user-key-file-2"),
    "PypiTokenDetector": ("pypi-ag",),
    "SendGridDetector": ("sg.",),
    "SlackDetector": ("xox", "hooks.slack.com"),
    "SoftlayerDetector": (_ASSIGNED, "softlayer"),
    "SquareOAuthDetector": ("sq0csp-",),
    "StripeDetector": ("k_live_",),
    "TelegramBotTokenDetector": (re.compile(r":[0-9a-z_-]{35}"),),
}


@dataclass(frozen=True)
class _Gate:
    """A condition every text a detector finds something in meets, cheap to test on a
    long text: ``exact`` are the detector's own patterns (with ``^`` and ``$`` at each line:
    text is joined by newlines), searched after ``quick`` (parts of them, searched in the
    lowercased text) when the text allows it (see :data:`_FOLDS_TO_ASCII`)."""

    exact: tuple[re.Pattern[str], ...]
    quick: tuple[_Quick, ...] = ()

    def places(
        self, joined: str, lowered: str | None, starts: list[int], seen: dict[_Quick, bool]
    ) -> set[int]:
        """The places of ``joined`` (starting at ``starts``) the detector may find
        something in; ``seen`` holds what the quick parts gave (every substring's, found in
        one pass, and each pattern's once searched: several detectors share one)."""
        if (
            self.quick
            and lowered is not None
            and not any(_holds(q, lowered, seen) for q in self.quick)
        ):
            return set()
        found: set[int] = set()
        for pattern in self.exact:
            found |= _places_of(pattern, joined, starts)
        return found


def _holds(quick: _Quick, lowered: str, seen: dict[_Quick, bool]) -> bool:
    held = seen.get(quick)
    if held is None:
        held = seen[quick] = isinstance(quick, re.Pattern) and quick.search(lowered) is not None
    return held


class _Substrings:
    """Which of many substrings a text holds, in one pass (Aho-Corasick)."""

    def __init__(self, quick: Iterable[str | _Followed]) -> None:
        import ahocorasick

        self.quick: list[str | _Followed] = sorted(set(quick), key=str)
        index = {q: i for i, q in enumerate(self.quick)}
        followers: dict[str, list[tuple[int, re.Pattern[str]]]] = {}
        for q in self.quick:
            for word in (q,) if isinstance(q, str) else q.words:
                followers.setdefault(word, [])
                if isinstance(q, _Followed):
                    followers[word].append((index[q], q.tail))
        self._automaton = ahocorasick.Automaton()
        for word, after in followers.items():  # (the word's index if wanted, what may follow)
            self._automaton.add_word(word, (index.get(word, -1), tuple(after)))
        if followers:
            self._automaton.make_automaton()

    def found(self, text: str) -> dict[_Quick, bool]:
        held = [False] * len(self.quick)  # by index: a _Followed hashes in Python, slowly
        if self.quick:
            for end, (wanted, after) in self._automaton.iter(text):
                if wanted >= 0:
                    held[wanted] = True
                for i, tail in after:
                    if not held[i] and tail.match(text, end + 1):
                        held[i] = True
        return dict(zip(self.quick, held, strict=True))
        for end, (word, wanted, after) in self._automaton.iter(text):
            if wanted:
                held[word] = True
            for followed in after:
                if not held[followed] and followed.tail.match(text, end + 1):
                    held[followed] = True
        return held


def _places_of(pattern: re.Pattern[str] | str, text: str, starts: list[int]) -> set[int]:
    """The places holding a match of ``pattern`` (a substring when it is a ``str``): each
    search starts at the next place after the one the last match began in, so a place is
    never skipped (a match a place holds on its own is found from its start on)."""
    found: set[int] = set()
    pos = 0
    while True:
        if isinstance(pattern, str):
            at = text.find(pattern, pos)
        else:
            match = pattern.search(text, pos)
            at = -1 if match is None else match.start()
        if at < 0:
            return found
        place = bisect.bisect_right(starts, at) - 1
        found.add(place)
        if place + 1 >= len(starts):
            return found
        pos = starts[place + 1]


def _multiline(pattern: re.Pattern[str]) -> re.Pattern[str]:
    return re.compile(pattern.pattern, pattern.flags | re.MULTILINE)


def _gates(plugins: Iterable[object]) -> tuple[list[_Gate], _Substrings] | None:
    """A gate per detector, ``None`` when one of them has no known gate (then every place
    is scanned whole)."""
    from detect_secrets.plugins import keyword
    from detect_secrets.plugins.base import RegexBasedDetector
    from detect_secrets.util.filetype import determine_file_type

    gates = []
    for plugin in plugins:
        name = type(plugin).__name__
        if isinstance(plugin, RegexBasedDetector):
            exact = tuple(_multiline(p) for p in plugin.denylist)
        elif isinstance(plugin, keyword.KeywordDetector) and plugin.keyword_exclude is None:
            table = keyword.REGEX_BY_FILETYPE.get(
                determine_file_type(_ADHOC), keyword.QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP
            )
            exact = tuple(_multiline(p) for p in table)
            words = [w.replace("_?", sep) for w in keyword.DENYLIST for sep in ("_", "")]
            gates.append(_Gate(exact, tuple(sorted(set(words)))))
            continue
        else:
            return None
        gates.append(_Gate(exact, _QUICK.get(name, ())))
    quick = [q for g in gates for q in g.quick if not isinstance(q, re.Pattern)]
    return gates, _Substrings([*quick, *stem_spellings()])


_ADHOC = "adhoc-string-scan"
"""The file name detect-secrets' ``scan_line`` scans under (it picks the keyword patterns)."""


def _scan_one(
    where: str, text: str, *, secrets: bool = True, pii: tuple[str, ...] | None = None
) -> Iterator[Finding]:
    """Findings in one place: by detect-secrets (unless a gate ruled secrets out), the
    credential fields redaction replaces by name, and the personal-data patterns (of the
    ``pii`` kinds, or those :func:`_pii_kinds` allows)."""
    from detect_secrets.core.scan import scan_line

    seen: set[str] = set()
    for secret in scan_line(text) if secrets else ():
        value = secret.secret_value or ""
        if _PLACEHOLDER.match(value) or "<redacted:" in value:
            continue
        seen.add(secret.type)
    seen.update(_pii(text, pii))
    seen.update(f"credential field ({name})" for name, _ in secret_fields(text))
    for kind in sorted(seen):
        yield Finding(kind, where)


def _scan_chunk(
    chunk: list[Place], gates: tuple[list[_Gate], _Substrings] | None
) -> Iterator[Finding]:
    """Findings in a run of places: the gates are searched in all of them at once, and only
    the places where one holds are scanned by detect-secrets (its cost is per line)."""
    if gates is None:
        for where, text in chunk:
            yield from _scan_one(where, text)
        return
    starts = []
    at = 0
    for _, text in chunk:
        starts.append(at)
        at += len(text) + 1
    joined = "\n".join(text for _, text in chunk)
    lowered = None if _FOLDS_TO_ASCII.search(joined) else joined.lower()
    detectors, substrings = gates
    seen = {} if lowered is None else substrings.found(lowered)
    secret = set().union(*(g.places(joined, lowered, starts, seen) for g in detectors))
    fields = (
        _field_places(chunk, joined)
        if lowered is None or any(seen[s] for s in stem_spellings())
        else set()
    )
    pii = _pii_places(joined, starts)
    for i in sorted(secret | fields | set(pii)):
        where, text = chunk[i]
        kinds = tuple(k for k in PII_PATTERNS if k in pii.get(i, ()))
        yield from _scan_one(where, text, secrets=i in secret, pii=kinds)


def _field_places(chunk: list[Place], joined: str) -> set[int]:
    """The places holding a credential field (:func:`sandbox.redaction.secret_fields`):
    none when the whole chunk holds none (one search), else each place's own."""
    if next(secret_fields(joined), None) is None:
        return set()
    return {i for i, (_, text) in enumerate(chunk) if next(secret_fields(text), None)}


def _pii_places(joined: str, starts: list[int]) -> dict[int, set[str]]:
    """The places of ``joined`` that may hold personal data, and the kinds each may hold
    (see :func:`_pii_kinds`)."""
    found: dict[int, set[str]] = {}

    def mark(kind: str, pattern: re.Pattern[str] | str, text: str = joined) -> None:
        for place in _places_of(pattern, text, starts):
            found.setdefault(place, set()).add(kind)

    mark("email", "@")
    if not joined.isascii():  # ``\d`` matches any script's digits: no shapes
        for kind in PII_PATTERNS:
            if kind != "email":
                mark(kind, _pii_pattern((kind,)))
        return found
    shape = joined.encode("ascii").translate(_SHAPE).decode("ascii")
    for kind in PII_PATTERNS:
        if kind == "card":
            for place in _card_places(shape, starts):
                found.setdefault(place, set()).add(kind)
        elif kind in _PII_SHAPES:
            held: dict[str, bool] = {}  # a form's last five characters, found at all
            for form in _PII_SHAPES[kind]:
                tail = form[-5:].decode("ascii")
                if held.setdefault(tail, tail in shape):  # one cheap search for many forms
                    mark(kind, form.decode("ascii"), shape)
        elif kind != "email":
            mark(kind, _pii_pattern((kind,)))
    return found


_CARD_GROUPS = "0000-0000-0000-0"
_CARD_RUNS = tuple(re.compile(lead + "0" * 13 + "0{0,6}[q-]") for lead in ("q", "-"))
"""The shapes (see :mod:`sandbox.redaction`) of every card number match: four groups of
digits, or 13 to 19 digits between quotes, ``=``, ``>``, ``&``, ``<`` or white space (tighter
than the redactor's shapes, which take a long run of digits such as a random id's)."""


def _card_places(shape: str, starts: list[int]) -> set[int]:
    """The places whose shape holds :data:`_CARD_GROUPS` or a match of one of
    :data:`_CARD_RUNS` (``[q-]0{13,19}[q-]`` as two patterns with a literal start of
    fourteen characters, which the regular expression engine finds by a substring search:
    the one pattern is tried at every quote and space of the text)."""
    found = _places_of(_CARD_GROUPS, shape, starts)
    for run in _CARD_RUNS:
        found |= _places_of(run, shape, starts)
    return found


def scan_places(places: Iterable[Place]) -> Iterator[Finding]:
    """Findings in these pieces of text, each at most once per place and kind."""
    from detect_secrets.settings import get_plugins, transient_settings

    plugins = [{"name": name} for name in SECRET_DETECTORS]
    with transient_settings({"plugins_used": plugins}):
        gates = _gates(get_plugins())
        chunk: list[Place] = []
        size = 0
        for place in places:
            chunk.append(place)
            size += len(place[1]) + 1
            if size >= _CHUNK_CHARS:
                yield from _scan_chunk(chunk, gates)
                chunk, size = [], 0
        yield from _scan_chunk(chunk, gates)


def manifest_places(data: bytes) -> Iterator[Place]:
    """The lines of a run's ``manifest.json`` (:func:`text_places`), the runtime's package
    list but each of its lines as the package's name and version in plain text: those are
    the names of distributions, not of fields (``detect-secrets`` is a package, its version
    no credential), so the credential-field rule has nothing to read there, while a secret
    in a name or a version is still found."""
    top = ""
    """The top-level key the line is under (the manifest is indented by two spaces)."""
    listed = False
    for where, line in text_places(MANIFEST, data):
        if listed:
            pair = _package(line.strip()) if line.startswith('      "') else None
            if pair is not None:
                yield where, " ".join(pair)
                continue
            listed = False
        if line.startswith('  "'):
            top = line.strip().partition('"')[2].partition('"')[0]
        listed = top == "runtime" and line == '    "packages": {'
        yield where, line


def _package(line: str) -> tuple[str, str] | None:
    """``(name, version)`` of one line of a package list (``"name": "version",``)."""
    try:
        pair = json.loads("{" + line.removesuffix(",") + "}")
    except ValueError:
        return None
    if not isinstance(pair, dict) or len(pair) != 1:
        return None
    ((name, version),) = pair.items()
    return (name, version) if isinstance(version, str) else None


def run_places(store: Store, run_id: str, check: Integrity | None = None) -> Iterator[Place]:
    """Every piece of text a bundle of the run would hold, with where it is (``check``: the
    run's check, when the caller made it already)."""
    if check is None:
        check = check_store_run(store, run_id)
    yield from manifest_places(store.read_manifest_bytes(run_id))
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


def scan_run(store: Store, run_id: str, check: Integrity | None = None) -> list[Finding]:
    """What :func:`export_shareable` would refuse (before ``--allow``)."""
    return list(dict.fromkeys(scan_places(run_places(store, run_id, check))))


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
    check = check_store_run(store, run_id)  # once: the scan and the export both need it
    findings = [f for f in scan_run(store, run_id, check) if not f.allowed_by(allow)]
    if findings:
        shown = "; ".join(str(f) for f in findings[:MAX_SHOWN])
        more = len(findings) - MAX_SHOWN
        raise ExportRefusedError(
            f"run {run_id!r} not exported: {len(findings)} likely secret(s) or personal "
            f"data: {shown}{f'; and {more} more' if more > 0 else ''} "
            f"(mask it, or accept with --allow '{findings[0].kind} in *')"
        )
    return export_bundle(store, run_id, out_path, check=check)
