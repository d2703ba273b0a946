"""The secret gate's triggers (memofs/files/secrets.py): a rule is searched only where its
trigger occurs, which is exact only if every match of the rule contains the trigger.

The reference is the ungated gate: every rule's ``finditer`` over the whole text. Texts
are built from pieces of real secrets, the rules' keywords in mixed case, the characters
Python's case-insensitive matching folds onto ASCII letters ("ſ" for "s", the Kelvin sign
for "k", dotless and dotted i), separators and prose.
"""

from __future__ import annotations

import re
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memofs.files import secrets

# assembled at run time so this file holds no token-shaped string
PIECES = [
    "AKIA", "ASIA", "IOSFODNN7EXAMPLE", "ghp" + "_", "gho_", "github_pat_", "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
    "sk" + "-", "sk-proj-", "Xy12Ab34Cd56Ef78Gh90Ij12Kl34Mn56", "AIza", "SyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY",
    "xoxb-", "xoxp-", "123456789012-AbCdEfGhIjKl", "sk" + "_live_", "rk_test_", "4eC39HqLyjWDarjtT1zdp7dc",
    "aws_secret_access_key", "AWS_SECRET_KEY", "awssecretkey", "Aws_Secret_Access_Key", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "-----BEGIN ", "RSA ", "PRIVATE KEY-----", "---- BEGIN SSH2 PRIVATE KEY ----", "PuTTY-User-Key-File-2: ssh-rsa",
    "eyJ", "hbGciOiJIUzI1NiJ9", ".", "postgres://", "redis://", "admin", ":", "s3cr3tPass", "@db.internal:5432/app",
    "password", "PASSWORD", "Passwd", "pwd", "passphrase", "client_secret", "secret-key", "api_key", "apikey",
    "access-token", "auth_token", "bearer_token", "private_key", "secret", "DB_", "JWT_",
    "paſsword", "ſecret", "api_\u212aey", "prıvate", "PRİVATE", "toKen",
    " = ", "=", ": ", "\"", "'", " ", "\n", "${TOKEN}", "os.environ['X']", "Sup3r$ecret!", "correct-horse-battery",
    "The deploy window is Tuesday", "tokens and passwords are never stored",
]
texts = st.lists(st.sampled_from(PIECES), max_size=12).map("".join)


def ungated_scan(text: str) -> list[secrets.Violation]:
    return [secrets.Violation(rule, secrets.preview(m.group(0)))
            for rule, pattern in secrets.SECRET_RULES for m in pattern.finditer(text)]


def test_one_trigger_per_rule_in_rule_order() -> None:
    assert len(secrets.TRIGGERS) == len(secrets.SECRET_RULES)
    for trigger in secrets.TRIGGERS:
        assert isinstance(trigger, re.Pattern)


@settings(max_examples=600, deadline=None)
@given(texts)
def test_every_match_holds_its_rules_trigger(text: str) -> None:
    for (rule, pattern), trigger in zip(secrets.SECRET_RULES, secrets.TRIGGERS):
        for m in pattern.finditer(text):
            assert trigger.search(m.group(0)), (rule, m.group(0))


@settings(max_examples=600, deadline=None)
@given(texts)
def test_gated_scan_and_redact_equal_the_ungated_gate(text: str) -> None:
    assert secrets.scan(text) == ungated_scan(text)
    gated = secrets.redact(text)
    # redact with every rule run (no trigger consulted): the same spans, so the same text
    with mock.patch.object(secrets, "_rules_to_run", lambda _text: list(secrets.SECRET_RULES)):
        assert gated == secrets.redact(text)
    spans = sorted((m.start(), m.end()) for _, p in secrets.SECRET_RULES for m in p.finditer(text))
    assert (gated == text) == (not spans)


@pytest.mark.parametrize("text, rule", [
    ("pa\u017fsword = Sup3rS3cretValue!", "secret_assignment"),  # "ſ" folds onto "s" under (?i)
    ("API_\u212aEY=a8f5f167f44f4964e6c998dee827110c", "secret_assignment"),  # the Kelvin sign onto "k"
    ("pwd=" + "Zq9xW2vB7n", "secret_assignment"),
    ("Aws_Secret_Key = " + "wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "EXAMPLEKEY", "aws_secret_access_key"),
    ("---- BEGIN SSH2 " + "PRIVATE KEY ----", "private_key_block"),
    ("rk" + "_test_" + "4eC39HqLyjWDarjtT1zdp7dc", "stripe_key"),
])
def test_case_folded_and_rare_spellings_still_blocked(text: str, rule: str) -> None:
    assert rule in {v.rule for v in ungated_scan(text)}  # the rule itself matches
    assert rule in {v.rule for v in secrets.scan(text)}  # and the gate still runs it
