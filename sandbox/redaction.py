"""Secrets and personal data out, before anything is written.

This module stands below every layer that writes or ships text (capture, the seam, the
snapshot store, the services' masking and the scan before export, replay): it imports
nothing of ``sandbox``, so each of them uses the same detectors without reaching into
another's package. (:mod:`sandbox.capture.redact` is its former name.)

A :class:`Redactor` replaces every secret with a stable placeholder ``<redacted:HMAC>`` and
every piece of personal data with ``<email:HMAC>``, ``<phone:HMAC>`` or ``<card:HMAC>``. The
HMAC (12 hex digits of HMAC-SHA256) is keyed with the store's placeholder key
(:meth:`sandbox.snapshot.store.Store.placeholder_key`), which never leaves the store:
the same value gives the same placeholder everywhere in a store (events, manifest, blobs), so
a trace still shows *that* two calls used the same key, but a guessed secret cannot be
confirmed from a bundle.

What counts as a secret:

* text matching the built-in patterns (OpenAI/Anthropic-style ``sk-...`` keys, ``Bearer``
  tokens, AWS access key ids, GitHub and Slack tokens) or the user's own regular expressions;
* the password of any URL (``scheme://user:PASSWORD@host``): the password is replaced, the
  user and host are kept, and the password becomes a literal secret everywhere;
* the values of sensitive headers (``authorization``, ``x-api-key``, ``cookie`` ...);
* the values of environment variables whose name contains ``KEY``, ``TOKEN``, ``SECRET``,
  ``PASSWORD`` (or is in the user's list), and values that look like a credential whatever
  the variable's name (a long high-entropy token): wherever they appear, in every event and
  text blob;
* literal values the user declares secret, and those learned during the run (a header
  value): :meth:`Redactor.add_secret`; :attr:`Redactor.learned` lists them so that what was
  written before can be redacted again (see :mod:`sandbox.capture.scrub`).

Personal data (on by default, each kind configurable): e-mail addresses, phone numbers
written with separators or a leading ``+``, and card numbers that pass the Luhn check.

Redaction works on serialized bytes (at most one regular-expression pass per event line) so
its cost stays flat. Each family of patterns has a cheap necessary condition (``sk-`` for a
key, ``@`` for an e-mail or a URL password, a literal secret found as a substring,
three digits, a separator and four more for a phone number ...): a line is searched only
with the families whose condition holds, in the same order as the full alternation, so the
result is the same as one pass with every pattern, and a line with none of them is not
searched at all. The conditions are checked in one pass of an Aho-Corasick automaton over
the line mapped byte by byte (letters lowered, digits, separators and quotes to their shape),
and what a set of secrets compiles to is made once per process and shared by every redactor
that has them.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import math
import re
import secrets as _secrets
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

_START = r"(?<![A-Za-z0-9_])"
"""A key starts a token: ``sk-`` inside ``task-``/``desk-``/``risk-`` or ``ghs_`` inside
``weighs_`` is part of an ordinary word, not a key."""
DEFAULT_PATTERNS: tuple[str, ...] = (
    _START + r"sk-ant-[A-Za-z0-9_\-]{8,}",
    _START + r"sk-(?:proj-|svcacct-|live-|test-)?[A-Za-z0-9_\-]{16,}",
    r"(?<=Bearer )[A-Za-z0-9._~+/\-]{8,}=*",
    r"(?<=bearer )[A-Za-z0-9._~+/\-]{8,}=*",
    _START + r"AKIA[0-9A-Z]{16}",
    _START + r"gh[pousr]_[A-Za-z0-9]{20,}",
    _START + r"xox[abposr]-[A-Za-z0-9\-]{10,}",
)
_DEFAULT_TRIGGERS: tuple[tuple[str, ...], ...] = (
    ("sk-",),
    ("sk-",),
    ("Bearer ",),
    ("bearer ",),
    ("AKIA",),
    ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    ("xox",),
)
"""Substrings without which each default pattern cannot match (same order)."""
URL_PASSWORD = r"(?<=://)(?P<urluser>[^\s:/@\"'<>\\]*):(?P<urlpw>[^\s/@\"'<>\\]+)(?=@)"
"""``user:password`` between ``://`` and ``@``; only the password is replaced."""
PII_PATTERNS: dict[str, str] = {
    "email": r"(?<![\w.%+-])[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63})*"
    r"\.[A-Za-z]{2,24}(?![\w-])",
    "phone": r"(?<![\w+.-])(?:\+\d{1,3}[ .-]?)?(?:\(\d{3}\)[ .-]?|\d{3}[ .-])\d{3}[ .-]\d{4}"
    r"(?![\w.-])|(?<![\w+])\+\d{10,14}(?![\w.])",
    "card": r"(?<![\w.-])\d{4}(?:[ -]\d{4}){2}[ -]\d{1,7}(?![\w.-])"
    r"|(?<=[\"'=\s>])\d{13,19}(?=[\"'&<\s])",
}
"""Personal data found by default; :attr:`RedactionConfig.pii` chooses which kinds."""


def _shape_of(c: int) -> int:
    if 48 <= c <= 57:
        return ord("0")
    if c in b" -":
        return ord("-")
    if c in b".+()":
        return c
    if c in b"\"'=<>&\t\n\r\f\v":
        return ord("q")
    return ord("_")


_SHAPE = bytes.maketrans(bytes(range(256)), bytes(_shape_of(c) for c in range(256)))
"""Bytes to their shape: an ASCII digit becomes ``0``, a space or ``-`` becomes ``-``, ``.``
``+`` ``(`` ``)`` stay, a quote, ``=``, ``<``, ``>``, ``&`` or other white space becomes ``q``,
anything else ``_``."""
_QUOTE = 1
"""Where :data:`_SCAN` puts a quote, ``=``, ``<``, ``>``, ``&`` or white space other than a
space (``q`` in a shape): a byte no trigger or word holds but a raw control character."""


def _scan_of(c: int) -> int:
    shape = _shape_of(c)
    if shape == ord("q"):
        return _QUOTE
    if shape != ord("_"):
        return shape
    return c + 32 if 65 <= c <= 90 else c  # ASCII letters lowered, the rest as it is


_SCAN = bytes.maketrans(bytes(range(256)), bytes(_scan_of(c) for c in range(256)))
"""What one pass looks for triggers, field words and shapes in: ASCII letters lowered, the
bytes a shape keeps as they are in it (a digit ``0``, a space ``-``, a quote and the like
:data:`_QUOTE`), any other byte as it is. A byte string found in a line is found, mapped so,
in the mapped line (the mapping is byte by byte); so is a shape found in the line's shape."""
_SEP = (b"-", b".")
_PII_SHAPES: dict[str, tuple[bytes, ...]] = {
    # 415-555-0132, 415.555.0132 ...; (415) 555-0132, (415)555-0132 ...; +14155550132
    "phone": tuple(b"000" + a + b"000" + b + b"0000" for a in _SEP for b in _SEP)
    + tuple(b")" + a + b"000" + b + b"0000" for a in (b"", *_SEP) for b in _SEP)
    + (b"+0000000000",),
    # 4111 1111 1111 1111, 4111-1111-...; "4111111111111111" after a quote, = or space
    "card": (b"0000-0000-0000-0", b"q" + b"0" * 13, b"-" + b"0" * 13),
}
"""Shapes every match of a built-in personal-data kind has (see :data:`PII_PATTERNS`); a
line whose shape holds none of a kind's is not searched for that kind: a timestamp such as
``1709294400.123456`` has none."""
SENSITIVE_HEADERS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "x-api-key",
        "x-goog-api-key",
        "api-key",
        "cookie",
        "set-cookie",
        "x-auth-token",
    }
)
SENSITIVE_ENV_PARTS: tuple[str, ...] = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CRED")
FIELD_WORDS = frozenset(
    {
        "secret",
        "secrets",
        "password",
        "passwords",
        "passwd",
        "passphrase",
        "authorization",
        "credential",
        "credentials",
        "cookie",
        "apikey",
        "apitoken",
        "accesstoken",
        "refreshtoken",
        "authtoken",
        "bearertoken",
        "idtoken",
        "sessiontoken",
        "oauthtoken",
        "csrftoken",
        "xsrftoken",
        "bottoken",
        "clienttoken",
        "securitytoken",
        "privatetoken",
        "privatekey",
        "secretkey",
        "accesskey",
        "signingkey",
        "encryptionkey",
        "masterkey",
        "sessionkey",
    }
)
"""Field names that mean a credential (``OPENAI_API_KEY``, ``apiKey``, ``x-auth-token``,
``client_secret``, ``db.password`` ...): a name is sensitive when its last word, or its last
two words written together, is one of these. Counts and settings that merely contain such a
word (``max_tokens``, ``prompt_tokens``, ``token_count``, ``secret_name``, ``next_page_token``,
a bare ``key`` or ``token``) are not."""
_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def field_words(name: str) -> list[str]:
    """The words of a field name, lower case: ``apiKey``, ``API_KEY`` and ``api-key`` all
    give ``["api", "key"]``; trailing numbers are dropped (``password2``)."""
    words = [w.lower() for w in _WORDS.findall(name)]
    while words and words[-1].isdigit():
        words.pop()
    return words


@functools.lru_cache(maxsize=4096)
def sensitive_field(name: str) -> bool:
    """Whether a field (a JSON key, a parameter, a header, ``name=`` in text) of this name
    holds a credential (see :data:`FIELD_WORDS`)."""
    words = field_words(name)
    return bool(words) and (words[-1] in FIELD_WORDS or "".join(words[-2:]) in FIELD_WORDS)


def _stem(word: str) -> str:
    for last in ("key", "token"):
        if word.endswith(last) and word != last:
            return f"{word[: -len(last)]}[-_.]?{last}"
    return word


FIELD_STEMS: tuple[str, ...] = tuple(sorted(map(_stem, FIELD_WORDS), key=lambda s: (-len(s), s)))
"""How every sensitive field name ends (in any case, not followed by a letter): the words
of :data:`FIELD_WORDS`, two of them with an optional ``-``, ``_`` or ``.`` between
(``api_key``, ``accessToken``); where :data:`FIELD_PATTERN` starts. A bare ``key`` or
``token`` is none, so most text (``"max_tokens"``, a memory ``"key"``) holds no stem."""
FIELD_PATTERN = (
    r"(?P<fname>(?i:" + "|".join(FIELD_STEMS) + r")[A-Za-z0-9_.\-]{0,32})"
    r"(?P<fq>\\*[\"'])?[ \t]*[:=][ \t]*"
    r"(?P<fscheme>(?:[Bb]earer|[Bb]asic|[Tt]oken|[Dd]igest) )?"
    r"(?:(?P<fvq>\\*[\"'])(?P<fqval>(?:\\.|[^\\\n\r])*?)(?P=fvq)"
    r"|(?(fq)(?!)|(?P<fval>[^\s\"'&,;<>\\=][^\s\"'&,;<>\\]*)))"
)
"""A field and its string value, from a stem of its name on (the start of the name is read
before the match: :func:`field_name`): ``"api_key": "V"`` and ``'api_key': 'V'`` (JSON or a
Python repr, at any depth of escaping, such as ``\\"api_key\\":\\"V\\"`` inside a JSON
string), ``password=V`` and ``password: V`` in text (a form body, a query string, an
exception message, a header line; the value ends at white space, a quote, ``&``, ``,`` or
``;``), with an optional ``Bearer``/``Basic`` scheme kept before the value. A quoted name
takes a quoted value only: ``"api_key": null`` or a number is never touched."""
_NAME_BEFORE = re.compile(r"[A-Za-z0-9_.\-]{0,64}$")
_PLACEHOLDER = re.compile(r"<[a-z]+:[0-9a-f]{12}>")
_PLAIN_WORDS = re.compile(r"[A-Za-z]+(?:[-_ ][A-Za-z]+)*")
"""A field value of plain words (``include``, ``same-origin``) is redacted where it is, but
not learned as a secret to find everywhere."""


def field_name(before: str, tail: str) -> str:
    """The whole name of a field: the part of it in the text ``before`` its stem, and
    ``tail`` (the stem and the rest)."""
    found = _NAME_BEFORE.search(before)
    return (found[0] if found else "") + tail


_SCHEME = re.compile(r"(?:[Bb]earer|[Bb]asic|[Tt]oken|[Dd]igest) ")


def split_scheme(value: str) -> tuple[str, str]:
    """``("Bearer ", "abc")`` for ``"Bearer abc"``; ``("", value)`` without a scheme."""
    found = _SCHEME.match(value)
    return (found[0], value[found.end() :]) if found else ("", value)


def is_placeholder(value: str) -> bool:
    """Whether ``value`` is a placeholder written by redaction."""
    return _PLACEHOLDER.fullmatch(value) is not None


def unescape_field(value: str, quote: str) -> str:
    """A quoted field value as its program saw it: JSON escapes undone once per level of
    nesting (``quote`` is ``"``, ``\\"`` ...); a value that is not such JSON stays."""
    if "\\" not in value or not quote.endswith('"'):
        return value
    for _ in range(len(quote)):
        try:
            decoded = json.loads(f'"{value}"')
        except ValueError:
            break
        value = decoded
        if "\\" not in value:
            break
    return value


def secret_fields(text: str) -> Iterator[tuple[str, str]]:
    """Each sensitive field in ``text`` whose value is not a placeholder: ``(name, value)``
    (what :mod:`sandbox.services.sharescan` reports; the redactor replaces the same)."""
    at = 0
    for pos in stem_positions(text):
        match = _FIELD.match(text, pos) if pos >= at else None
        if match is None:
            continue
        at = match.end()
        value = match["fqval"] if match["fqval"] is not None else match["fval"]
        if value and not is_placeholder(split_scheme(value)[1] or value):
            name = field_name(text[max(0, match.start() - 64) : match.start()], match["fname"])
            if sensitive_field(name):
                yield name, value
            else:
                yield from secret_fields(value)


_FIELD = re.compile(FIELD_PATTERN)
_STEMS = re.compile("(?:" + "|".join(FIELD_STEMS) + ")(?![a-z])")
_STEMS_BYTES = re.compile(_STEMS.pattern.encode())
_LAST_WORDS: tuple[bytes, ...] = (
    b"key",
    b"token",
    b"secret",
    b"passw",
    b"passphrase",
    b"authorization",
    b"credential",
    b"cookie",
)
"""What every stem ends with: cheaper to look for, and most lines hold none of them."""
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


@functools.cache
def stem_spellings() -> tuple[str, ...]:
    """Every spelling of every stem of :data:`FIELD_STEMS` (``api_key``, ``api-key``,
    ``api.key``, ``apikey`` ...), in lower case: a text holding none holds no field."""
    spellings: list[str] = []
    for stem in FIELD_STEMS:
        head, sep, last = stem.partition("[-_.]?")
        spellings.extend(
            head + between + last for between in ("", "-", "_", ".")[: 4 if sep else 1]
        )
    return tuple(spellings)


@functools.cache
def _stem_automaton() -> Any:
    """:func:`stem_spellings`, each with its length, for a search of all of them in one
    pass (Aho-Corasick)."""
    import ahocorasick

    automaton = ahocorasick.Automaton()
    for spelling in stem_spellings():
        automaton.add_word(spelling, len(spelling))
    automaton.make_automaton()
    return automaton


def stem_positions(text: str) -> list[int]:
    """Where a stem of a field name (:data:`FIELD_STEMS`, any case, not followed by a
    letter) starts in ``text``, in order: the starts of ``_STEMS.finditer`` on the lowered
    text (the longest stem at a position is taken, and the next one is looked for after
    it), found with one Aho-Corasick pass instead (a regular expression of many
    alternatives tries each of them at every position)."""
    low = text.lower() if text.isascii() else text.translate(_ASCII_LOWER)
    longest: dict[int, int] = {}
    for end, length in _stem_automaton().iter(low):
        if end + 1 < len(low) and "a" <= low[end + 1] <= "z":
            continue
        start = end - length + 1
        if longest.get(start, 0) < length:
            longest[start] = length
    starts = []
    after = 0
    for start in sorted(longest):
        if start >= after:
            starts.append(start)
            after = start + longest[start]
    return starts


MIN_LITERAL = 6
"""Shorter values are not treated as literal secrets everywhere (``PASSWORD=1`` would turn
every ``1`` into a placeholder); they are still redacted in the manifest's env."""
_TOKEN = re.compile(r"(?=.*[0-9])(?=.*[A-Za-z])[A-Za-z0-9+_\-][A-Za-z0-9+/=_\-]{15,}")
_ENTROPY_LIMIT = 3.5
"""Bits per character above which a long single token counts as a credential (random
base64/hex keys are well above it; words, paths and versions are below it)."""


@dataclass(frozen=True)
class _Family:
    """Alternatives of the redaction pattern, searched only in a line that holds one of
    the ``triggers`` or whose shape (:data:`_SHAPE`) holds one of the ``shapes``; a family
    with neither is always searched."""

    pattern: str
    triggers: tuple[str, ...] = ()
    shapes: tuple[bytes, ...] = ()

    @property
    def always(self) -> bool:
        return not self.triggers and not self.shapes


@functools.lru_cache(maxsize=1024)
def sensitive_header(name: str) -> bool:
    """A header whose value is secret: :data:`SENSITIVE_HEADERS`, or a credential's name
    (``x-goog-api-key``, ``private-token``, ``x-access-token`` ...)."""
    return name.lower() in SENSITIVE_HEADERS or sensitive_field(name)


def random_key() -> bytes:
    """A key for a redactor that has no store (its placeholders are stable within it)."""
    return _secrets.token_bytes(32)


@functools.lru_cache(maxsize=4096)
def keyed_digest(key: bytes, value: str) -> str:
    """12 hex digits of HMAC-SHA256 of ``value`` keyed with ``key`` (remembered: the same
    header, URL password or placeholder key is redacted request after request)."""
    return hmac.new(key, value.encode("utf-8", "surrogateescape"), hashlib.sha256).hexdigest()[:12]


def credential_like(value: str) -> bool:
    """A single long token of letters and digits with high Shannon entropy (an API key, a
    random password); not a path, a word, a version or a locale."""
    if not _TOKEN.fullmatch(value):
        return False
    counts = Counter(value)
    entropy = -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())
    return entropy >= _ENTROPY_LIMIT


def luhn(digits: str) -> bool:
    """Whether a card number's digits pass the Luhn check."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch) * (2 if i % 2 else 1)
        total += d - 9 if d > 9 else d
    return total % 10 == 0


@dataclass(frozen=True)
class RedactionConfig:
    """What to redact and which environment variables to record, as data (it crosses into
    a captured child process as JSON)."""

    patterns: tuple[str, ...] = ()
    """Extra regular expressions; each match is a secret."""
    env_names: tuple[str, ...] = ()
    """Extra environment variable names whose values are secret."""
    secrets: tuple[str, ...] = ()
    """Literal secret values."""
    default_patterns: bool = True
    pii: tuple[str, ...] = tuple(PII_PATTERNS)
    """Kinds of personal data replaced (``email``, ``phone``, ``card``); ``()`` for none."""
    pii_patterns: tuple[tuple[str, str], ...] = ()
    """Extra personal data: ``(kind, regular expression)``; a match becomes ``<kind:HMAC>``."""
    env_record: tuple[str, ...] = ()
    """Environment variables recorded in the manifest besides those the run read."""
    masks: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """Masking rules for service state, by service name or kind: ``{"postgres":
    {"users.email": "hash"}}`` (see :mod:`sandbox.services.masking`); they reach services
    found at capture too."""

    def to_json(self) -> dict[str, Any]:
        return {
            "patterns": list(self.patterns),
            "env_names": list(self.env_names),
            "secrets": list(self.secrets),
            "default_patterns": self.default_patterns,
            "pii": list(self.pii),
            "pii_patterns": [list(p) for p in self.pii_patterns],
            "env_record": list(self.env_record),
            "masks": {name: dict(rules) for name, rules in self.masks.items()},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RedactionConfig:
        return cls(
            patterns=tuple(data.get("patterns", ())),
            env_names=tuple(data.get("env_names", ())),
            secrets=tuple(data.get("secrets", ())),
            default_patterns=bool(data.get("default_patterns", True)),
            pii=tuple(data.get("pii", tuple(PII_PATTERNS))),
            pii_patterns=tuple((str(k), str(p)) for k, p in data.get("pii_patterns", ())),
            env_record=tuple(data.get("env_record", ())),
            masks={str(k): dict(v) for k, v in dict(data.get("masks", {})).items()},
        )

    def mask_for(self, name: str, kind: str) -> Mapping[str, str]:
        """The masking rules of service ``name`` (else of its ``kind``)."""
        return self.masks.get(name) or self.masks.get(kind) or {}


_FIELD_MARK = -1
"""Marks, in :attr:`_Plan.words`, the words every credential field name ends with."""
_CLEAN_LIMIT = 4096
"""Texts remembered as holding nothing to redact, at most, per plan."""
_CLEAN_LENGTH = 512
"""Only texts up to this length are remembered (header values, manifest fields...)."""


def _automaton(words: Mapping[str, object]) -> Any:
    """An Aho-Corasick automaton of ``words``, each with its value (``None`` when empty)."""
    if not words:
        return None
    import ahocorasick

    automaton = ahocorasick.Automaton()
    for word, value in words.items():
        automaton.add_word(word, value)
    automaton.make_automaton()
    return automaton


@dataclass(eq=False)
class _Plan:
    """What a set of literal secrets and a configuration compile to: the pattern families,
    their cheap conditions as two automata, and the searches compiled so far. A plan is
    immutable once made except for its caches, which only grow, so redactors with the same
    secrets and configuration share one (:func:`_plan`)."""

    families: tuple[_Family, ...]
    pii_kinds: dict[str, str]
    escaped: dict[str, str]
    trigger_index: tuple[tuple[bytes, int], ...]
    shape_index: tuple[tuple[bytes, int], ...]
    always: frozenset[int]
    words: Any
    """Automaton over a line mapped by :data:`_SCAN` (read as Latin-1), holding, mapped the
    same way: each trigger, with the ``(trigger, family)`` pairs it stands for (the family's
    condition holds when the trigger is in the line as it is written); each shape, with
    ``(None, family)``; the last words of field names (:data:`_LAST_WORDS`), with ``(None,
    _FIELD_MARK)``. A line none of these is found in meets no condition and holds no
    field; one where some are found is checked exactly."""
    searches: dict[tuple[int, ...], tuple[re.Pattern[str], re.Pattern[bytes]]] = field(
        default_factory=dict
    )
    clean: set[str] = field(default_factory=set)
    """Texts :meth:`Redactor.text` gave back unchanged under this plan (whatever the
    placeholder key: nothing was replaced, nothing learned)."""


def _make_plan(
    literals: frozenset[str],
    patterns: tuple[str, ...],
    defaults: bool,
    pii: tuple[tuple[str, str], ...],
) -> _Plan:
    families = [_Family(URL_PASSWORD, ("@",))]  # user:password@ after ://
    # Literal secrets, raw and as they appear inside a JSON string, longest first.
    forms: set[str] = set()
    for lit in literals:
        forms.add(lit)
        forms.add(json.dumps(lit, ensure_ascii=False)[1:-1])
    ordered = sorted(forms, key=len, reverse=True)
    if ordered:
        families.append(_Family("|".join(re.escape(f) for f in ordered), tuple(ordered)))
    if defaults:
        families.extend(
            _Family(f"(?:{p})", t) for p, t in zip(DEFAULT_PATTERNS, _DEFAULT_TRIGGERS, strict=True)
        )
    families.extend(_Family(f"(?:{p})") for p in patterns)
    for i, (kind, pattern) in enumerate(pii):
        named = f"(?P<pii{i}>{pattern})"
        if pattern != PII_PATTERNS.get(kind):
            families.append(_Family(named))  # the user's own pattern
        elif kind == "email":
            families.append(_Family(named, ("@",)))
        else:
            families.append(_Family(named, (), _PII_SHAPES[kind]))
    trigger_index = tuple(
        (t.encode("utf-8", "surrogateescape"), i)
        for i, f in enumerate(families)
        for t in f.triggers
    )
    words: dict[str, list[tuple[bytes | None, int]]] = {}
    for trigger, i in trigger_index:
        words.setdefault(trigger.translate(_SCAN).decode("latin-1"), []).append((trigger, i))
    for word in _LAST_WORDS:
        words.setdefault(word.decode("latin-1"), []).append((None, _FIELD_MARK))
    shape_index = tuple((t, i) for i, f in enumerate(families) for t in f.shapes)
    for shape, i in shape_index:
        mapped = shape.replace(b"q", bytes([_QUOTE])).decode("latin-1")
        words.setdefault(mapped, []).append((None, i))
    return _Plan(
        families=tuple(families),
        pii_kinds={f"pii{i}": kind for i, (kind, _) in enumerate(pii)},
        escaped={json.dumps(lit, ensure_ascii=False)[1:-1]: lit for lit in literals},
        trigger_index=trigger_index,
        shape_index=shape_index,
        always=frozenset(i for i, f in enumerate(families) if f.always),
        words=_automaton({w: tuple(dict.fromkeys(pairs)) for w, pairs in words.items()}),
    )


_PlanKey = tuple[frozenset[str], tuple[str, ...], bool, tuple[tuple[str, str], ...]]
_PLANS: dict[_PlanKey, _Plan] = {}
_PLANS_LIMIT = 64


def _plan(key: _PlanKey) -> _Plan:
    """The plan of these secrets and this configuration, made once per process (the last
    few dozen are kept: every run of a service starts with the same ones)."""
    found = _PLANS.get(key)
    if found is None:
        found = _make_plan(*key)
        if len(_PLANS) >= _PLANS_LIMIT:
            _PLANS.clear()
        _PLANS[key] = found
    return found


def sensitive_env_name(name: str, env_names: Iterable[str] = ()) -> bool:
    """A variable whose value is secret by its name: one of ``env_names`` (any case), or a
    name holding ``KEY``, ``TOKEN``, ``SECRET``, ``PASSWORD`` ... (:data:`SENSITIVE_ENV_PARTS`)."""
    upper = name.upper()
    return upper in {n.upper() for n in env_names} or any(
        part in upper for part in SENSITIVE_ENV_PARTS
    )


def url_passwords(text: str) -> set[str]:
    """The passwords of the URLs in ``text`` (``scheme://user:PASSWORD@host``) longer than
    two characters."""
    if "://" not in text or "@" not in text:
        return set()
    return {m["urlpw"] for m in re.finditer(URL_PASSWORD, text) if len(m["urlpw"]) > 2}


_ENV_LITERALS: dict[tuple[object, ...], frozenset[str]] = {}


def _env_literals(env: Mapping[str, str], env_names: tuple[str, ...]) -> frozenset[str]:
    """The literal secrets an environment holds (values of variables secret by their name
    or credential-like, at least :data:`MIN_LITERAL` long, and URL passwords), worked out
    once per process for the same environment (every run of a service starts with it)."""
    key = (env_names, *env.items())
    found = _ENV_LITERALS.get(key)
    if found is None:
        literals: set[str] = set()
        for name, value in env.items():
            secret = sensitive_env_name(name, env_names) or credential_like(value)
            if secret and len(value) >= MIN_LITERAL:
                literals.add(value)
            literals.update(url_passwords(value))
        found = frozenset(literals)
        if len(_ENV_LITERALS) >= 16:
            _ENV_LITERALS.clear()
        _ENV_LITERALS[key] = found
    return found


@dataclass
class Redactor:
    config: RedactionConfig = field(default_factory=RedactionConfig)
    env: Mapping[str, str] = field(default_factory=dict)
    """The environment the run starts with: secret-looking values become literal secrets."""
    key: bytes = field(default_factory=random_key, repr=False)
    """The placeholder key (the store's); never written into a run."""

    def __post_init__(self) -> None:
        self._literals: set[str] = set(s for s in self.config.secrets if s)
        self.learned: set[str] = set()
        """Secrets added after the redactor was made (the log may hold them already)."""
        self._literals |= _env_literals(self.env, self.config.env_names)
        self._pii: dict[str, str] = {
            kind: PII_PATTERNS[kind] for kind in self.config.pii if kind in PII_PATTERNS
        }
        self._pii.update(dict(self.config.pii_patterns))
        self._compile()

    # --- configuration -------------------------------------------------------------------

    def placeholder(self, secret: str, kind: str = "redacted") -> str:
        return f"<{kind}:{keyed_digest(self.key, secret)}>"

    def is_sensitive_env(self, name: str) -> bool:
        return sensitive_env_name(name, self.config.env_names)

    def env_is_secret(self, name: str, value: str) -> bool:
        return self.is_sensitive_env(name) or credential_like(value)

    def add_secret(self, value: str) -> None:
        """Treat ``value`` as secret from now on (for example a header value)."""
        if value and value not in self._literals and len(value) >= MIN_LITERAL:
            self._literals.add(value)
            self.learned.add(value)
            self._compile()

    def _compile(self) -> None:
        self._plan = _plan(
            (
                frozenset(self._literals),
                self.config.patterns,
                self.config.default_patterns,
                tuple(self._pii.items()),
            )
        )

    @property
    def state(self) -> object:
        """What this redactor replaces (its secrets and configuration), as an object: two
        redactors with the same state and key redact every text alike."""
        return self._plan

    @property
    def _families(self) -> tuple[_Family, ...]:
        return self._plan.families

    def _search(self, active: tuple[int, ...]) -> tuple[re.Pattern[str], re.Pattern[bytes]]:
        """One pattern of the ``active`` families, in their order (compiled once)."""
        searches = self._plan.searches
        found = searches.get(active)
        if found is None:
            text = "|".join(self._plan.families[i].pattern for i in active)
            found = (re.compile(text), re.compile(text.encode()))
            searches[active] = found
        return found

    # --- applying it ---------------------------------------------------------------------

    def _replace(self, groups: Mapping[str, str | None], found: str) -> str:
        password = groups.get("urlpw")
        if password is not None:
            return f"{groups.get('urluser') or ''}:{self.placeholder(password)}"
        for group, kind in self._plan.pii_kinds.items():
            if groups.get(group) is not None:
                if kind == "card":
                    digits = re.sub(r"\D", "", found)
                    return self.placeholder(digits, kind) if luhn(digits) else found
                return self.placeholder(found, kind)
        return self.placeholder(self._plan.escaped.get(found, found))

    def fields(self, text: str) -> str:
        """``text`` with the value of every credential field (:data:`FIELD_PATTERN`,
        :func:`sensitive_field`) replaced by its placeholder; the value of another field is
        searched for fields too (``key="password=..."``)."""
        out: list[str] = []
        done = at = 0
        for pos in stem_positions(text):
            match = _FIELD.match(text, pos) if pos >= at else None
            if match is None:
                continue
            group = "fqval" if match["fqval"] is not None else "fval"
            start, end = match.span(group)
            before = text[max(0, match.start() - 64) : match.start()]
            if sensitive_field(field_name(before, match["fname"])):
                value = unescape_field(match[group], match["fvq"] or "")
                out += (text[done:start], self.field_value(value))
                done = at = end
            else:
                at = start
        return "".join(out) + text[done:] if out else text

    def field_value(self, value: str) -> str:
        """The value of a credential field, as written: its placeholder (after a ``Bearer``
        scheme, kept); a placeholder stays. Values that are not plain words (nor bare
        numbers) are then secrets everywhere (:meth:`add_secret`)."""
        scheme, secret = split_scheme(value)
        if not secret or is_placeholder(secret):
            return value
        if not _PLAIN_WORDS.fullmatch(secret) and any(c.isalpha() for c in secret):
            self.add_secret(secret)
        return scheme + self.placeholder(secret)

    def _sub(self, match: re.Match[str]) -> str:
        return self._replace(match.groupdict(), match.group(0))

    def _bsub(self, match: re.Match[bytes]) -> bytes:
        def text(b: bytes | None) -> str | None:
            return None if b is None else b.decode("utf-8", "surrogateescape")

        groups = {k: text(v) for k, v in match.groupdict().items()}
        found = match.group(0).decode("utf-8", "surrogateescape")
        return self._replace(groups, found).encode("utf-8", "surrogateescape")

    def _scan(self, data: bytes) -> tuple[bool, tuple[int, ...]]:
        """Whether ``data`` may hold a credential field (it holds the last word of one,
        lowered), and the families whose condition it meets, in order: one pass of the
        plan's automaton over the line, instead of one search per trigger, word and shape."""
        plan = self._plan
        found: set[int] = set()
        field = False
        if plan.words is not None:
            for _, pairs in plan.words.iter(data.translate(_SCAN).decode("latin-1")):
                for trigger, i in pairs:
                    if i == _FIELD_MARK:
                        field = True
                    elif i not in found and (trigger is None or trigger in data):
                        found.add(i)  # a shape, or the trigger as it is written
        if plan.always:
            found |= plan.always
        return field, tuple(sorted(found)) if found else ()

    def _active(self, data: bytes) -> tuple[int, ...]:
        """The families whose condition ``data`` meets, in order."""
        return self._scan(data)[1]

    def text(self, value: str) -> str:
        clean = self._plan.clean
        if value in clean:
            return value
        out = self._text(value)
        if out == value and len(value) <= _CLEAN_LENGTH:
            clean = self._plan.clean  # the plan of the secrets known now
            if len(clean) < _CLEAN_LIMIT:
                clean.add(value)
        return out

    def _text(self, value: str) -> str:
        self._learn_urls(value)
        value = self.fields(value)
        if value.isascii():
            active = self._active(value.encode("ascii"))
        else:  # ``\d`` in a text pattern matches any script's digits: no shapes for these
            active = tuple(
                i
                for i, f in enumerate(self._plan.families)
                if f.shapes or f.always or any(t in value for t in f.triggers)
            )
        if not active:
            return value
        return self._search(active)[0].sub(self._sub, value)

    def bytes(self, data: bytes) -> bytes:
        """Redact serialized text (an event line, a JSON or text blob)."""
        if b"://" in data and b"@" in data:
            self._learn_urls(data.decode("utf-8", "surrogateescape"))
        plan = self._plan
        field, active = self._scan(data)
        if field and _STEMS_BYTES.search(data.lower()) is not None:
            text = data.decode("utf-8", "surrogateescape")
            out = self.fields(text)
            if out is not text:
                data = out.encode("utf-8", "surrogateescape")
            if out is not text or self._plan is not plan:  # changed, or a secret learned
                active = self._active(data)
        if not active:
            return data
        pattern = self._search(active)[1]
        if pattern.search(data) is None:
            return data
        return pattern.sub(self._bsub, data)

    def _learn_urls(self, text: str) -> None:
        for password in url_passwords(text):
            self.add_secret(password)

    def headers(self, headers: Iterable[tuple[str, str]]) -> dict[str, str]:
        """Headers as a dict with lower-case names; sensitive values become placeholders."""
        out: dict[str, str] = {}
        for name, value in headers:
            key = name.lower()
            if sensitive_header(key):
                scheme, sep, rest = value.partition(" ")
                if key.endswith("authorization") and sep and rest:
                    out[key] = f"{scheme} {self.placeholder(rest)}"
                else:
                    out[key] = self.placeholder(value)
            else:
                out[key] = self.text(value)
        return out

    def environ(self, env: Mapping[str, str], names: Iterable[str] | None = None) -> dict[str, str]:
        """The environment for the manifest: only ``names`` (all when ``None``) that are set;
        secret values become placeholders, the rest is redacted as text."""
        chosen = env.keys() if names is None else set(names) & env.keys()
        return {
            name: self.placeholder(env[name])
            if self.env_is_secret(name, env[name])
            else self.text(env[name])
            for name in sorted(chosen)
        }

    def value(self, value: Any) -> Any:
        """Redact every string inside a JSON-like value (keys included); the string value
        of a credential field (:func:`sensitive_field`) becomes its placeholder."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {
                self.text(str(k)): self.field_value(v)
                if isinstance(v, str) and sensitive_field(str(k))
                else self.value(v)
                for k, v in value.items()
            }
        if isinstance(value, list | tuple):
            return [self.value(v) for v in value]
        return value
