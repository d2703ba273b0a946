"""The secret gate: a memory whose text looks like a credential is never stored.

Rule ids are upstream's (upstream-facts.md section 10, "Secret gate"); the regexes are
our own. A write that matches any rule is refused with

    Write blocked: content matched <n> secret pattern(s) (<ids>).

where ``<n>`` counts distinct rules and ``<ids>`` lists them comma-separated in rule
order. Each violation carries a preview (first 3 characters + ``…`` + last character),
so the message never echoes the secret itself.
"""

from __future__ import annotations

import base64
import binascii
import re
import unicodedata
from dataclasses import dataclass
from urllib.parse import unquote

from memofs.files.records import InvalidInputError

# Values that are plainly placeholders or references, not secrets ("${TOKEN}", "<key>",
# "os.environ[...]") are not treated as assignments of a secret.
_PLACEHOLDER = r"(?![\"']?(?:\$|<|\{|%|os\.environ|process\.env|env\(|getenv))"

# Paths and prose, not secrets: "pwd: /workspace/api", "private_key: config/keys/server.pem";
# for keys that are never words (api_key, tokens), also "api_key: required on every request"
# (one plain lower-case word). A password may be plain words ("correcthorsebattery").
_PATH = r"[\"']?(?:[/~.]/|/)|[\"']?(?:[\w.-]+/)+[\w.-]+\.[A-Za-z]{1,5}(?![^\s\"',;])"
_NOT_A_PATH = rf"(?!{_PATH})"
_NOT_A_VALUE = rf"(?!{_PATH}|[\"']?(?-i:[a-z]+)(?![^\s\"',;]))"

SECRET_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("aws_access_key_id", re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{16}\b")),
    ("github_token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b")),
    # random keys hold a digit and an upper-case letter; "sk-learn-compatible-..." does not
    ("openai_api_key", re.compile(
        r"\bsk-(?:proj-|svcacct-|admin-)?(?=[A-Za-z0-9_-]{0,300}?[0-9])(?=[A-Za-z0-9_-]{0,300}?[A-Z])"
        r"[A-Za-z0-9_-]{20,300}")),
    ("google_api_key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}")),
    ("slack_token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}|\bxapp-\d-[A-Za-z0-9-]{10,}"
                               r"|hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/-]{16,}")),
    ("stripe_key", re.compile(r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}|\bwhsec_[A-Za-z0-9]{24,}")),
    (
        "aws_secret_access_key",
        re.compile(r"(?i)\baws_?secret_?(?:access_?)?key\b[\"']?\s*[:=]\s*[\"']?[A-Za-z0-9/+=]{40}(?![A-Za-z0-9/+=])"
                   # unlabelled: exactly 40 base64 characters with both cases, a digit and a "/" or "+"
                   r"|(?-i:(?<![A-Za-z0-9/+=])(?=[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=]))(?=[A-Za-z0-9/+]{0,39}[/+])(?=[A-Za-z0-9/+]{0,39}[0-9])"
                   r"(?=[A-Za-z0-9/+]{0,39}[a-z])(?=[A-Za-z0-9/+]{0,39}[A-Z])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=]))"),
    ),
    ("private_key_block", re.compile(
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"  # PEM, OpenSSH, PGP
        r"|---- BEGIN SSH2 (?:ENCRYPTED )?PRIVATE KEY ----"  # RFC 4716-style (ssh.com)
        r"|\bPuTTY-User-Key-File-\d+: *[A-Za-z0-9@.-]+"  # PuTTY .ppk
        # a key's body without its header: base64 DER (a key or certificate starts "MII") in
        # a 64-character PEM line, or OpenSSH's "openssh-key-v1" magic
        r"|\bMII[A-Za-z0-9+/]{61}(?:\s|$)|\bb3BlbnNzaC1rZXktdjE[A-Za-z0-9+/]")),
    # possessive segments ("{8,}+": the class excludes ".", so backtracking could never help):
    # linear time on a long run of "eyJ-eyJ-..." (quadratic without)
    ("jwt_token", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}+\.eyJ[A-Za-z0-9_-]{8,}+\.[A-Za-z0-9_-]{8,}")),
    (
        # scheme://[user]:password@host; the user may be empty (redis://:pw@host), the
        # password may hold "/" and "+" (base64); "host:5432/path@x" is a port, not a password
        "connection_string_credentials",
        re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]{1,30}://[^\s:/@\"']{0,256}:(?!\d+/)"
                   r"(?!(?i:password|passwd|pass|pwd|secret|changeme|x+|\*+|<[^>@]*>|\$\{[^}@]*\}|\{[^}@]*\}|%[A-Za-z_]+%?)@)"
                   r"[^\s@\"']{1,256}@[^\s\"'@]+"),
    ),
    (
        # KEY = value, the key optionally prefixed (DB_PASSWORD, JWT_SECRET). The bare word
        # "secret" is also prose ("secret: rotate-quarterly-through-vault"), so its value
        # must hold a digit, an upper-case letter or a symbol to count as a secret
        "secret_assignment",
        re.compile(
            r"(?i)\b(?:[a-z0-9]+[_.-]){0,4}(?:"
            r"(?:password|passwd|pwd|passphrase)\b[\"']?\s*[:=]\s*" + _PLACEHOLDER + _NOT_A_PATH
            + r"|(?:client[_-]?secret|secret[_-]?key|api[_-]?key|apikey"
            r"|access[_-]?token|auth[_-]?token|bearer[_-]?token|private[_-]?key)\b[\"']?\s*[:=]\s*"
            + _PLACEHOLDER + _NOT_A_VALUE
            + r"|(?:secret|(?<=[_.-])token)\b[\"']?\s*[:=]\s*" + _PLACEHOLDER + _NOT_A_VALUE
            + r"(?=[\"']?[^\s\"',;]{0,256}?(?-i:[0-9A-Z!#%&*+/=?@^_~$]))"
            r")[\"']?[^\s\"',;]{8,}"
        ),
    ),
    # beyond upstream's rules (their ids come after upstream's, so its order is kept)
    ("npm_token", re.compile(r"\bnpm_[A-Za-z0-9]{36}\b")),
    ("huggingface_token", re.compile(r"\bhf_[A-Za-z0-9]{30,}\b")),
)
"""``(rule id, pattern)`` in upstream order; the order decides the order of ``<ids>``."""

RULE_IDS: tuple[str, ...] = tuple(rule for rule, _ in SECRET_RULES)

# Every write runs the gate, and most texts hold none of the literals any rule needs: each
# rule's trigger is a piece of that rule's own pattern that every match contains, written
# with the rule's flags (so the regex engine's case folding, "ſ" for "s" included, is the
# same as the rule's), and a rule is searched only where its trigger occurs. One search of
# all triggers answers most texts. On the store bench's texts secret_assignment alone cost
# ~20 us a text and the whole gate ~55 us; with the triggers the gate costs ~13 us.
# tests/test_memofs/files/test_secrets.py checks each trigger against the ungated rules.
_TRIGGERS: dict[str, str] = {
    "aws_access_key_id": r"AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA",
    "github_token": r"gh[pousr]_|github_pat_",
    "openai_api_key": r"sk-",
    "google_api_key": r"AIza",
    "slack_token": r"xox[abposr]-|xapp-|hooks\.slack\.com/",
    "stripe_key": r"_live_|_test_|whsec_",
    "aws_secret_access_key": r"(?i:aws_?secret)|[/+]",
    "private_key_block": r"BEGIN |PuTTY-User-Key-File-|MII|b3BlbnNzaC1rZXktdjE",
    "jwt_token": r"eyJ",
    "connection_string_credentials": r"://",
    "secret_assignment": r"(?i:pass|pwd|secret|api|token|private)",
    "npm_token": r"npm_",
    "huggingface_token": r"hf_",
}
TRIGGERS: tuple[re.Pattern[str], ...] = tuple(re.compile(_TRIGGERS[rule]) for rule in RULE_IDS)
"""Per rule (in :data:`SECRET_RULES` order), a pattern every match of the rule contains."""
_ANY_TRIGGER = re.compile("|".join(f"(?:{_TRIGGERS[rule]})" for rule in RULE_IDS))


@dataclass(frozen=True)
class Violation:
    """One match: the rule and a preview that does not reveal the secret."""

    rule: str
    preview: str


class WriteBlockedError(InvalidInputError):
    """A write refused by the secret gate (upstream code ``MEMOFS_WRITE_BLOCKED``)."""

    code = "MEMOFS_WRITE_BLOCKED"

    def __init__(self, violations: list[Violation]) -> None:
        self.violations = violations
        self.rules = list(dict.fromkeys(v.rule for v in violations))
        super().__init__(
            f"Write blocked: content matched {len(self.rules)} secret pattern(s) ({', '.join(self.rules)})."
        )


def preview(secret: str) -> str:
    """First 3 characters + ``…`` + last character (upstream violation preview)."""
    return f"{secret[:3]}…{secret[-1:]}"


def scan(text: str) -> list[Violation]:
    """Every rule match in ``text``, in rule order then position order."""
    if not isinstance(text, str):
        raise TypeError(f"text must be str, got {type(text).__name__}")
    return [Violation(rule, preview(m.group(0))) for (rule, pattern) in _rules_to_run(text) for m in pattern.finditer(text)]


def _rules_to_run(text: str) -> list[tuple[str, re.Pattern[str]]]:
    """The rules whose trigger occurs in ``text`` (the others cannot match it), in rule order."""
    if _ANY_TRIGGER.search(text) is None:
        return []
    return [rule for rule, trigger in zip(SECRET_RULES, TRIGGERS) if trigger.search(text)]


_INVISIBLE = dict.fromkeys(map(ord, "\u00ad\u180e\u200b\u200c\u200d\u2060\ufeff"))
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/]{24,}={0,2}|[A-Za-z0-9_-]{24,}={0,2}")
_URL_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")


def decoded_forms(text: str) -> list[str]:
    """The other spellings of ``text`` the gate also scans (see :func:`check`): its NFKC
    form without invisible characters (fullwidth letters, zero-width joiners), its
    URL-decoded form, and every base64 run of 24 or more characters that decodes to
    printable UTF-8. Empty for plain ASCII prose (one regex search)."""
    forms: list[str] = []
    if not text.isascii():
        plain = unicodedata.normalize("NFKC", text).translate(_INVISIBLE)
        if plain != text:
            forms.append(plain)
    if "%" in text and _URL_ESCAPE.search(text):
        forms.append(unquote(text))
    for m in _BASE64_RUN.finditer(text):
        run = m.group(0)
        try:
            raw = base64.b64decode(run + "=" * (-len(run) % 4), altchars=b"-_" if "-" in run or "_" in run else None,
                                   validate=True)
            decoded = raw.decode("utf-8")
        except (binascii.Error, ValueError):
            continue
        if decoded.isprintable() or all(c.isprintable() or c in "\n\r\t" for c in decoded):
            forms.append(decoded)
    return forms


def check(*texts: str) -> None:
    """Raise :class:`WriteBlockedError` if any of ``texts`` matches a secret rule.

    What the gate promises: a secret is refused as written, in fullwidth or with
    zero-width characters inside it, URL-encoded, or base64-encoded (one level;
    :func:`decoded_forms`). Not promised: a secret split across lines or fields, nested or
    other encodings (hex, rot13, compression), or encryption: rejoining lines would refuse
    ordinary text, and the gate guards against accidents, not against a writer who hides
    a secret on purpose."""
    found = [v for t in texts for form in (t, *decoded_forms(t)) for v in scan(form)]
    if found:
        raise WriteBlockedError(found)


REDACTED = "[REDACTED]"
SHOWN_CHARS = 40


def shown(value: object) -> str:
    """``value`` as an error message may show it: its ``repr`` cut to :data:`SHOWN_CHARS`
    characters, or ``(value withheld)`` when the gate would refuse it, so a secret typed
    into the wrong option never comes back on stderr or in an MCP reply."""
    text = value if isinstance(value, str) else repr(value)
    try:
        check(text)
    except WriteBlockedError:
        return "(value withheld: it matches a secret pattern)"
    r = repr(value)
    return r if len(r) <= SHOWN_CHARS else r[:SHOWN_CHARS - 1] + "…"


def redact(text: str) -> str:
    """``text`` with every span a rule matches replaced by ``[REDACTED]`` (for caches
    and logs that must never hold what :func:`check` would refuse)."""
    spans = sorted((m.start(), m.end()) for _, pattern in _rules_to_run(text) for m in pattern.finditer(text))
    if not spans:
        return text
    out, pos = [], 0
    for start, end in spans:
        if end <= pos:
            continue
        out.append(text[pos:max(pos, start)])
        out.append(REDACTED)
        pos = end
    out.append(text[pos:])
    return "".join(out)
