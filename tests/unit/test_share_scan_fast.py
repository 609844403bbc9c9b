"""The scan's gates (searched over many places at once) find exactly what scanning every
place alone with detect-secrets and the personal-data patterns finds, and a million-line run
is scanned in linear time."""

from __future__ import annotations

import re
from collections.abc import Iterator

from hypothesis import given, settings
from hypothesis import strategies as st

from sandbox.redaction import PII_PATTERNS, luhn, secret_fields
from sandbox.services import sharescan
from sandbox.services.dumptext import Place
from sandbox.services.sharescan import SECRET_DETECTORS, Finding, scan_places

SAMPLES = [
    "token AKCp5budTFpbypBqQbGJPz3pGCi28pPivfWczqjfYb9drAmd9LbRZbj6UpKFxJXA8ksWGc9fM here",
    " AP6xxxxxxxxxxx ",
    "aws key AKIAZ3MSJV4WWNKWW5FG in config",
    'aws_secret_access_key = "wJalrXUtnFEMIK7MDENGbPxRfiCYzEXAMPLEKEYx"',
    "AccountKey=lJzRc1YdHaAA2KCNJJ1tkYwF/+mKK6Ygw0NGe170Xu592euJv2wYUtBlV8z+qnlcNQSnIYVTkLWntUO1"
    "F8j8rQ==",
    "url https://admin:hunter2pass@db.internal.test/x",
    'cloudant_password = "e7dbef3f7a8b8d4f5e6c7b8a9d0e1f2a3b4c5d6e7f8a9b0c1d2e3f4a5b6c7d8e"',
    "https://user:e7dbef3f7a8b8d4f5e6c7b8a9d0e1f2a3b4c5d6e7f8a9b0c1d2e3f4a5b6c7d8e@a.cloudant.com",
    "MTk4NjIyNDgzNDcxOTI1MjQ4.Cl2FMQ.ZnCjm1XVW7vRze4b7Cq4se7kKWs",
    "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",
    "glpat-xEhPsCiAXzRnBnRw9ZQt",
    'IBM_CLOUD_IAM_API_KEY = "Xk9fQ2mL7pR4tV8wZ1bN6cJ3hD5gS0aE2yU7iO4qW9xT"',
    'ibm_password = "Xk9fQ2mL7pR4tV8wZ1bN6cJ3hD5gS0aE2yU7iO4qW9xT"',
    'cl_pwd: "e7dbef3f7a8b8d4f5e6c7b8a9d0e1f2a3b4c5d6e7f8a9b0c1d2e3f4a5b6c7d8e"',
    "sl_password = abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz0123",
    "AP\u0663xxxxxxxxxxx (an Artifactory token with an Arabic digit)",
    'ibm_cos_secret_access_key = "1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f"',
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwi"
    "aWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
    'password = "correct-horse-battery-staple"',
    '{"db_password": "s3cr3t-value-here"}',
    'PaSsWoRd = "Correct-Horse-1"',
    'contraseña = "abcdef123"',
    "343ea45721923ed956e2b38c31db76aa-us2",
    "//registry.npmjs.org/:_authToken=npm_abcdefghijklmnopqrstuvwxyz0123456789",
    "sk-abcdefghijklmnopqrstT3BlbkFJabcdefghijklmnopqrst",
    "-----BEGIN RSA PRIVATE KEY-----",
    "pypi-AgEIcHlwaS5vcmcCJGFiY2RlZmdoLWlqa2wtbW5vcC1xcnN0LXV2d3h5ejAxMjM0NTY3AAIqWzMsImFiY2Rl"
    "ZmdoaWprbG1ub3BxcnN0dXZ3eHl6MDEyMzQ1Njc4OSJdAAAGIAab",
    "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",
    "xoxb-123456789012-1234567890123-abcdefghijklmnopqrstuvwx",
    "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
    'softlayer_api_key = "abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz0123"',
    "https://api.softlayer.com/soap/v3/abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopq"
    "rstuvwxyz0123",
    "sq0csp-ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopq",
    "rk_live_abcdefghijklmnopqrstuvwx",
    "bot 1234567890:AAFakeTokenAbcdefghijklmnopqrstuvwx12",
    "AC0123456789abcdef0123456789abcdef",
    "SK0123456789abcdef0123456789abcdef",
    "mail ops.lead@example.com now",
    "call 415-555-0132 or (415) 555-0132 or +14155550132",
    'card 4111 1111 1111 1111 and "4111111111111111"',
    # case folds the lowercased copy must not hide: dotless i, long s, Kelvin sign
    'ap\u0131_key = "unicode-fold-1234"',
    'pa\u017fsword = "long-s-fold-1234"',
    'api_\u212aey = "kelvin-fold-1234"',
    "\u0664\u0661\u0665-\u0665\u0665\u0665-\u0660\u0661\u0663\u0662 (a phone in Arabic digits)",
]
NOISE = [
    '{"kind":"llm","seq":0,"wall":1700000000.0,"usage":{"prompt_tokens":120},"key":"k4"}\n',
    '{"kind":"random","seq":3,"source":"uuid4","value":"00000000000000000000000000000003"}\n',
    '{"kind":"http","seq":5,"url":"http://svc.test/orders","status":201}\n',
    "plain text with ümlauts and 1700000000.123456 and a sha "
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n",
]
_ALL_PII = re.compile("|".join(f"(?P<{k}>{p})" for k, p in PII_PATTERNS.items()))


def one_by_one(places: list[Place]) -> Iterator[Finding]:
    """The reference: every place scanned alone, by every detector and the whole pattern."""
    from detect_secrets.core.scan import scan_line
    from detect_secrets.settings import transient_settings

    with transient_settings({"plugins_used": [{"name": n} for n in SECRET_DETECTORS]}):
        for where, text in places:
            seen = {
                s.type
                for s in scan_line(text)
                if not sharescan._PLACEHOLDER.match(s.secret_value or "")
                and "<redacted:" not in (s.secret_value or "")
            }
            for m in _ALL_PII.finditer(text):
                kind = m.lastgroup or ""
                if kind != "card" or luhn(re.sub(r"\D", "", m[0])):
                    seen.add(sharescan.PII_NAMES[kind])
            seen.update(f"credential field ({name})" for name, _ in secret_fields(text))
            for kind in sorted(seen):
                yield Finding(kind, where)


def test_every_sample_is_found_by_some_detector() -> None:
    """The corpus exercises every detector (so the comparisons below can fail)."""
    found = {f.kind for f in one_by_one([(str(i), s) for i, s in enumerate(SAMPLES)])}
    names = {
        "Artifactory Credentials", "AWS Access Key", "Azure Storage Account access key",
        "Basic Auth Credentials", "Cloudant Credentials", "Discord Bot Token", "GitHub Token",
        "GitLab Token", "IBM Cloud IAM Key", "IBM COS HMAC Credentials", "JSON Web Token",
        "Secret Keyword", "Mailchimp Access Key", "NPM tokens", "OpenAI Token", "Private Key",
        "PyPI Token", "SendGrid API Key", "Slack Token", "SoftLayer Credentials",
        "Square OAuth Secret", "Stripe Access Key", "Telegram Bot Token", "Twilio API Key",
        "e-mail address", "phone number", "card number",
    }  # fmt: skip
    assert names <= found


def test_each_sample_alone_among_noise_is_found_as_one_by_one() -> None:
    for sample in SAMPLES:
        for shaped in (sample, sample.upper(), f'{{"v": "{sample}"}}\n'):
            places = [(f"line {i}", t) for i, t in enumerate([*NOISE, shaped, *NOISE])]
            assert list(scan_places(places)) == list(one_by_one(places)), shaped


def test_places_over_many_chunks_are_all_scanned() -> None:
    lines = NOISE * (sharescan._CHUNK_CHARS // 100)
    places = [(f"line {i}", t) for i, t in enumerate(lines)]
    at = [5, len(places) // 2, len(places) - 1]
    for i, sample in zip(at, SAMPLES, strict=False):
        places[i] = (places[i][0], sample)
    found = list(scan_places(places))
    assert {f.where for f in found} == {f"line {i}" for i in at}
    assert found == list(one_by_one([places[i] for i in at]))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.sampled_from(SAMPLES + NOISE),
            st.text(
                alphabet=st.sampled_from(list("aK:=\"' @-.0123456789_\u0131\u017f\n")), max_size=40
            ),
            st.builds(lambda a, b: a + b, st.sampled_from(SAMPLES), st.sampled_from(NOISE)),
        ),
        max_size=30,
    )
)
def test_gated_scan_equals_one_by_one(texts: list[str]) -> None:
    places = [(f"place {i}", t) for i, t in enumerate(texts)]
    assert list(scan_places(places)) == list(one_by_one(places))
