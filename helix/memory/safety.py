"""Screening of insight text before it is stored.

Why: every stored insight is later pasted verbatim into the prompt of a future
coding agent, so storing one is a trust boundary.  Two kinds of text must never
cross it: secrets (API keys, tokens, passwords, private keys, credentialed
URLs), which would be replayed into every prompt, log and transcript that
retrieves the insight; and hostile instructions ("ignore previous
instructions", chat role tags, "you are now ...", "curl ... | sh", "send .env to
...", "set VERIFY to `true`"), which would let one poisoned insight steer every
later agent.

Design: one verdict, two layers.

* `find_problem(text)` is the single verdict function: pure, returns a short
  reason or None, never raises (an internal failure returns a reason: fail
  closed). It is the pattern layer, cheap enough for every caller, including
  the learning queue's propose-time check and hooks. At store time
  (`helix.memory.writes`: `store`, `store_many`, hence import and
  `learning.store`) the text's vector, computed for deduplication anyway, is
  also compared with a bank of hostile exemplar sentences
  (`helix.memory.exemplars`); that semantic layer is skipped under an
  embedder other than the one the bank was made with.
* Views. Obfuscation is undone before matching, and every view is screened:
  NFKC (fullwidth letters, ligatures), zero-width/BOM/bidi/soft-hyphen
  characters removed, control characters to spaces, whitespace collapsed with
  line breaks kept (role prefixes are line-anchored); for behaviour rules also
  Cyrillic/Greek look-alikes folded, accents dropped, lower-cased. Further
  views: lines joined (a key or `password=` split over lines), letters spaced
  apart joined ("I g n o r e"), words hyphenated apart rejoined ("ig-nore").
  Base64 and hex blobs (at most 16, 8 KB each) are decoded and screened again
  one level deep; a blob that decodes to a command or a sentence is refused.
  Text over `MAX_SCREENED` characters is refused, unscreened.
* Secrets: mentioning a password, token or env var is fine; a literal value is
  not. Vendor formats (AWS, GitHub, GitLab, Slack, Stripe, OpenAI, Anthropic,
  Google, npm, PyPI, Azure, SendGrid, Twilio...) match on a prefix and a short
  tail, so half a token is still refused; `password=`/`api_key:` assignments,
  prose ("log in with the password hunter2", "the unseal key is 3f9a..."),
  header form ("X-Api-Key: ...", "Authorization: Token ..."), user/password
  pairs, credentialed URLs and incoming-webhook URLs with their secret path are
  refused, and so is a key without a vendor prefix right after its name ("api
  key -> 9f8e...", "--token QmFz...": 32+ hex digits, or base64 of mixed case);
  a commit sha or a colour with no such name before it passes. A value must look like a secret (letters and digits, or symbols);
  references (`$VAR`, `${VAR}`, `os.environ[...]`, `{{ var }}`), placeholders
  (`<your-password>`, `...`, `YOUR_API_KEY`), words, paths and versions pass.
  detect-secrets' regex plugins run beside these (more vendors, maintained
  elsewhere), imported on first use only: its import costs ~0.15 s, which
  hooks that never screen (SessionStart, PreToolUse) do not pay. Its keyword
  and entropy plugins stay off: on prose they flag nearly every sentence.
* Behaviour (`helix.memory.behaviour`): orders aimed at the agent, not topics.
  A rule pairs an action with its object in one clause: run remote or decoded
  code, send secrets or data to a destination, fake or bypass verification,
  drop or override instructions, take on another role, hide things from the
  user. "ruff: ignore all rules in migrations/", "act as a reviewer" and
  negated advice ("never mark a task complete without running its tests")
  pass. Chat role tags and prefixes are refused wherever they stand. A network
  tool in the same clause as a secret source ($SECRET_VAR, .env, ~/.ssh,
  `env |`) is refused whatever the host: a legitimate host cannot be told
  apart.
* Linear time: patterns are compiled once, start with a literal or a small
  alternation where possible and use bounded repetition and bounded gaps, so
  there is no catastrophic backtracking; the views and decoded blobs are
  bounded in number. A typical insight screens in well under a millisecond.
* Measured on `tests/data/poisoning` (dev and held-out splits, per category):
  `benchmarks/safety/poisoning.py`; every entry path is tested to give the same
  verdict in `tests/test_poisoning.py`.
"""

from __future__ import annotations

import html
import math
import re
import unicodedata
import urllib.parse
from typing import Any

from helix.memory.behaviour import behaviour_problem

SCREEN_VERSION = 1

# --- normalisation ----------------------------------------------------------

_BAD_UNICODE = re.compile("[\ud800-\udfff]")
_TAG_CHARS = re.compile("[\U000e0000-\U000e007f]")
_INVISIBLE = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180e\u200b-\u200f"
    "\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff9-\ufffb]"
)
_CONTROL = re.compile("[\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f]")
_LINEBREAK = re.compile("\r\n|[\r\x0b\x0c\x1c-\x1f\x85\u2028\u2029]")
_HSPACE = re.compile(r"[^\S\n]+")
_NEWLINES = re.compile(r" ?\n[\n ]*")
_LOOKALIKES = str.maketrans(
    "аеорсухіјѕԁһАВЕКМНОРСТУХІЈЅαεικνορτυχΑΒΕΖΗΙΚΜΝΟΡΤΥΧ",
    "aeopcyxijsdhABEKMHOPCTYXIJSaeikvoptuxABEZHIKMNOPTYX",
)


_CONTINUATION = re.compile(r"\\[ \t]*(?:\r\n|\n)")


def _normalize(text: str) -> str:
    text = unicodedata.normalize("NFKC", text)
    text = _CONTINUATION.sub(" ", text)  # a shell command continued over lines is one line
    text = _INVISIBLE.sub("", text)
    text = _CONTROL.sub(" ", text)
    text = _LINEBREAK.sub("\n", text)
    text = _HSPACE.sub(" ", text)
    return _NEWLINES.sub("\n", text).strip()


# --- secrets ----------------------------------------------------------------
# Patterns start with a literal (left boundaries are look-behinds after it) and
# avoid re.I (a lower-cased copy is searched instead): both keep the scan fast.
# fmt: off
# (pattern, reason, match must contain a digit, run on the lower-cased text)
_TOKEN_PATTERNS = tuple(
    (re.compile(p), reason, needs_digit, bool(lower))
    for p, reason, needs_digit, *lower in (
        (r"A[KS]IA(?<![A-Z0-9]....)[A-Z0-9]{16}(?![A-Z0-9])", "looks like an AWS access key id", False),
        # Vendor prefixes are matched on short tails too: a token split across
        # lines or spaces still leaks its first part, and the rest is nearby.
        (r"gh[pousr]_(?<![A-Za-z0-9_]....)[A-Za-z0-9]{8,}"
         r"|github_pat_(?<![A-Za-z0-9_]...........)[A-Za-z0-9_]{8,}",
         "looks like a GitHub token", True),
        (r"sk-ant-(?<![A-Za-z0-9_-].......)(?:[A-Za-z0-9_-]{8,}|(?:api|admin)[0-9]{2}-)",
         "looks like an Anthropic API key", True),
        (r"sk-(?<![A-Za-z0-9_-]...)[A-Za-z0-9_-]{20,}", "looks like an OpenAI-style API key", True),
        (r"xox[abposre]-(?<![A-Za-z0-9].....)[A-Za-z0-9-]{10,}", "looks like a Slack token", True),
        (r"AIza[0-9A-Za-z_-]{35}", "looks like a Google API key", False),
        (r"k_(?:live|test)_(?<=[sr]k_...._)[0-9A-Za-z]{8,}", "looks like a Stripe secret key", False),
        (r"glpat-(?<![A-Za-z0-9_]......)[A-Za-z0-9_-]{10,}", "looks like a GitLab token", True),
        (r"npm_(?<![A-Za-z0-9_]....)[A-Za-z0-9]{36}", "looks like an npm token", False),
        (r"pypi-AgE[A-Za-z0-9_-]{50,}", "looks like a PyPI token", False),
        (r"hf_(?<![A-Za-z0-9_]...)[A-Za-z0-9]{30,}", "looks like a Hugging Face token", False),
        (r"eyJ(?<![A-Za-z0-9_-]...)[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*",
         "looks like a JWT", False),
        (r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----", "contains a private key block", False),
        (r"AccountKey=[A-Za-z0-9+/]{20,}", "looks like an Azure storage key", False),
        (r"SG\.(?<![A-Za-z0-9_]...)[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}", "looks like a SendGrid key", False),
        (r"SK(?<![A-Za-z0-9_]..)[0-9a-f]{32}(?![0-9a-fA-F])", "looks like a Twilio API key", False),
        (r"do[opr]_v1_[a-f0-9]{40,}", "looks like a DigitalOcean token", False),
        (r"shp(?:at|ss|ca|pa)_(?<![A-Za-z0-9_]......)[a-fA-F0-9]{16,}", "looks like a Shopify token", True),
        (r"hv[sbr]\.(?<![A-Za-z0-9_.]....)[A-Za-z0-9_-]{16,}", "looks like a Vault token", False),
        (r"dapi(?<![A-Za-z0-9_]....)[a-f0-9]{32}", "looks like a Databricks token", True),
        (r"lin_(?:api|oauth)_(?<![A-Za-z0-9_]........)[A-Za-z0-9]{20,}", "looks like a Linear key", False),
        (r"[?&]sig=[A-Za-z0-9%+/=]{16,}", "contains a signed URL's signature", True),
        (r"key-(?<![A-Za-z0-9_]....)[0-9a-z]{32}(?![0-9a-z])", "looks like a Mailgun key", True),
        (r"\"private_key(?:_id)?\"\s*:\s*\"[^\"]{12,}", "contains a service-account private key", False),
        (r"A[KS]IA(?<![A-Z0-9]....)[A-Z0-9]{8,15}(?![a-z])", "looks like part of an AWS access key id", True),
        (r"bearer\s+[a-z0-9._~+/-]{20,}", "contains a literal bearer token", True, True),
        (r"authorization[\"']?\s*[:=]\s*[\"']?basic\s+[a-z0-9+/]{8,}",
         "contains literal basic-auth credentials", False, True),
    )
)
_ASSIGN = re.compile(
    r"(?:pass(?:word|wd|phrase)|secret(?:[_-]?key)?|token|api[_-]?key|apikey|access[_-]?key"
    r"|private[_-]?key)(?![a-z0-9])[\"'`]?[ \t]*(=(?![=>~])|:(?![:=/]))[ \t]*"
)
_VALUE = re.compile(r"[fbru]{0,2}([\"'`])([^\n]{0,300}?)\1|([^\s,;\"'`]{1,300})")
_URL_CREDS = re.compile(r"://([^\s/:@?#]{0,128}):([^\s/@?#]{1,256})@[^\s/@]")
_REFERENCE = re.compile(
    r"^[$%{<!&*]|\$\{|\{\{|\{[A-Za-z_]\w*\}|%\(\w+\)s|%s\b|process\.env|os\.environ|getenv", re.I
)
_PLACEHOLDER = re.compile(
    r"^(?:[x*.#?_•-]+|redacted|placeholder|change[_-]?me|dummy|example|sample|fake|test|todo"
    r"|tbd|none|null|nil|undefined|true|false|required|optional|empty|unset|default|str"
    r"|string|bytes|int|bool|any|number|secretstr|secret|password|pass|token|key)$"
    r"|your[-_ ]|[-_ ]here$|example|placeholder|redacted|dummy",
    re.I,
)
_DOTTED = re.compile(r"^[A-Za-z_]\w+(?:\.[A-Za-z_]\w+)+$")
_SECRET_NAME = re.compile(r"^[A-Za-z_][\w-]*$")
_SECRET_WORD = re.compile(r"password|passwd|secret|token|key|pass|pwd|cred", re.I)
_NUMBER_UNIT = re.compile(r"^\d{1,5}(?:[-.]?[a-z]+)?$")
# A word of the surrounding sentence, not a value: "replaces whatever follows
# password=, token= or api_key= with ***" names the keys of a redaction helper.
_PROSE_WORD = re.compile(
    r"^(?:with|and|or|to|into|from|for|of|on|in|is|are|as|by|the|then|when|if|so|but|via"
    r"|becomes?|gets?|followed|parameters?|params?|fields?|keys?|pairs?|values?|prefix(?:es)?)$"
)
# A keyword argument in code ("shell=False", "check=True", "timeout=30",
# "timeout=(3, 30)", "samesite=lax": a number, a tuple of numbers or one plain
# lower-case word), not a password; one that turns off TLS checks (verify=False) stays suspect.
_KWARG = re.compile(
    r"^(?!(?:verify|ssl|check_hostname|validate_certs|verify_ssl|secure)\w*=(?:False|false|0)$)"
    r"[A-Za-z_]\w*=(?:True|False|None|true|false|none|\d+|[A-Za-z][a-z]{1,11}|\(\d+(?:\.\d+)?"
    r"(?:,\s*\d+(?:\.\d+)?){1,3}\)?)$"
)
# fmt: on


def _is_placeholder(value: str) -> bool:
    """True if `value` is a reference to a secret or a placeholder, not a secret."""
    return bool(_REFERENCE.search(value) or _PLACEHOLDER.search(value))


def _literal_assignment(low: str) -> bool:
    for m in _ASSIGN.finditer(low):
        v = _VALUE.match(low, m.end())
        if v is None:
            continue
        quoted = v.group(3) is None
        value = (v.group(2) if quoted else v.group(3).rstrip(".,:)]}>")).strip()
        if not value or _is_placeholder(value):
            continue
        if not quoted and _PROSE_WORD.match(value):
            continue  # a list of key names in prose: "password=, token= or api_key= with ***"
        if quoted:
            if len(value) >= 3:
                return True
            continue
        if "(" in value or "[" in value or _DOTTED.match(value):
            continue  # code expression: os.environ["X"], get_token(), settings.API_KEY
        if _SECRET_NAME.match(value) and _SECRET_WORD.search(value):
            continue  # a variable or env var name: password=db_password, key=API_KEY
        if m.group(1) == "=":
            if len(value) >= 4:
                return True
        elif len(value) >= 6 and not value.isalpha() and not _NUMBER_UNIT.match(value):
            return True  # "passwd: hunter2"; prose like "token: expires hourly" passes
    return False


# Credentials in prose and headers: "log in with the password hunter2",
# "X-Api-Key: 4c9e...", "the unseal key is 3f9a...". The value must look like a
# secret (letters and digits, or symbols), not a word, a reference or a path.
_PROSE_SECRET = re.compile(
    r"(?<![\w$.-])(?:[a-z0-9]{1,20}[_-]){0,3}(?:pass(?:word|wd|phrase|code)?s?|pwd?|pin code"
    r"|secret|token|api[ _-]?key|key|cookie|credentials?|login)(?![a-z_])[\"'`]?"
    r"(?:[ \t]+(?:header|value|field|variable|env var|setting))?"
    r"(?:[ \t]+(?:for|of|on|to|in|at)(?:[ \t]+[^\s]{1,40}){1,4})?"
    r"(?:[ \t]*(?:\n[ \t]*)?(?:is|was|=|:|are|reads|would be)(?![a-z]))?"
    r"[ \t]*(?:\n[ \t]*)?(?:(?:set|changed)[ \t]+to[ \t]+)?[\"'`]?([^\s\"'`,;()<>{}$@\[\]_.][^\s\"'`,;()<>]{5,200})"
)
_HEADER = re.compile(
    r"(?<![\w-])(?:authorization|x-[a-z0-9-]{0,30}|api-?key|private-token|[a-z-]{0,30}subscription-key"
    r"|session(?:id)?|sid|cookie)[\"'`]?[ \t]*[:=][ \t]*[\"'`]?"
    r"(?:(?:token|bearer|basic|digest|apikey|api-key|key)[ \t]+)?([^\s\"'`,;()<>]{8,200})"
)
_COMMON_WORD = re.compile(r"^[a-z]+(?:[-'][a-z]+)*[.!]?$")
_PATHLIKE = re.compile(
    r"^(?:~|\.{0,2}/|[a-z]:\\)|://|^[\w.-]+\.(?:py|md|toml|ya?ml|json|txt"
    r"|cfg|ini|env|pem|key|sh|js|ts|rs|go)$|^[\w-]+/[\w./-]+$"
)
_VERSION = re.compile(r"^v?\d+(?:\.\d+)+[a-z0-9-]*$|^\d+(?:[.,]\d+)?[a-z%]{0,3}$")
_DIGITS_CODE = re.compile(r"^\d[\d -]{4,30}\d$")  # a passcode or PIN written as digits
_SECRETISH_MIXED = re.compile(r"(?=.*[a-z])(?=.*\d)|(?=.*[a-z])(?=.*[A-Z])(?=.*[^A-Za-z0-9_])")


_RANDOM_RUN = re.compile(r"(?<![A-Za-z0-9_+/=-])[A-Za-z0-9_+/-]{30,400}={0,2}(?![A-Za-z0-9_+/=-])")
_RANDOM_PARTS = (str.isupper, str.islower, str.isdigit)


def _random_token(value: str) -> bool:
    """A long run of upper- and lower-case letters and digits with high entropy:
    the shape of a generated key (a hash is lower-case hex, a word has no digits)."""
    if len(value) < 30 or any(sum(map(part, value)) < 2 for part in _RANDOM_PARTS):
        return False
    counts = [value.count(c) for c in set(value)]
    entropy = -sum(n / len(value) * math.log2(n / len(value)) for n in counts)
    return entropy >= 4.2


def _secretish(value: str, min_len: int) -> bool:
    """Whether a word found after a password/key/header name is a literal secret."""
    value = value.rstrip(".,:!?)]}>")
    if len(value) < min_len or _is_placeholder(value):
        return False
    if _random_token(value):
        return True  # 30+ characters of mixed case and digits: no path or word is like that
    if _COMMON_WORD.match(value.lower()) or _PATHLIKE.search(value) or _VERSION.match(value):
        return False
    if _KWARG.match(value) and not _SECRET_WORD.search(value.split("=")[0]):
        return False  # code: subprocess.run(args, shell=False)
    if "(" in value or _DOTTED.match(value) or value.isupper():
        return False  # code (get_token()), settings.SECRET_KEY, or an env var name
    if _SECRET_NAME.match(value) and _SECRET_WORD.search(value) and "_" in value:
        return False  # db_password, api_key_name
    return bool(_SECRETISH_MIXED.match(value))


# "type admin / letmein123": a user name and a password written as a pair.
_PAIR = re.compile(
    r"\b(?:type|enter|use|with|login|log in|sign in|signin|credentials?|creds|account)\b"
    r"[^.;\n]{0,30}?\s[a-z][\w.@-]{1,30}[ \t]?(?:/|:|and)[ \t]?(?:pass(?:word)?[ \t]+)?"
    r"([a-z0-9!#%&*+?^~][^\s/\"'`,;()<>]{5,100})"
)


def _prose_secret(text: str) -> str | None:
    low = text.lower()
    for m in _PAIR.finditer(low):
        if _secretish(text[m.start(1) : m.end(1)], 6):
            return "contains a user name and password"
    for m in _PROSE_SECRET.finditer(low):
        raw = text[m.start(1) : m.end(1)]
        if _secretish(raw, 6) or ("pass" in m.group(0)[:30] and _DIGITS_CODE.match(raw)):
            return "contains a literal password or key"
    for m in _HEADER.finditer(low):
        raw = text[m.start(1) : m.end(1)]
        if _secretish(raw, 8):
            return "contains a literal API key or token in a header"
    return None


# Incoming-webhook URLs carry their secret in the path: posting to one needs nothing else.
_WEBHOOK = re.compile(
    r"https?://(?:hooks\.slack\.com/(?:services|workflows|triggers)/|(?:[\w-]+\.)?discord(?:app)?\.com"
    r"/api/webhooks/|[\w-]+\.webhook\.office\.com/|outlook\.office(?:365)?\.com/webhook"
    r"|hooks\.zapier\.com/hooks/|maker\.ifttt\.com/trigger/|chat\.googleapis\.com/v1/spaces/"
    r"|[^\s/]{1,100}/(?:[^\s/?#]{1,60}/){0,4}(?:web)?hooks?/)([^\s\"'`<>]{8,400})"
)
_SECRET_SEGMENT = re.compile(r"(?=[\w-]{0,200}\d)(?=[\w-]{0,200}[a-zA-Z])[\w-]{16,}")


_KNOWN_HOOK = re.compile(r"slack|discord|office|zapier|ifttt|googleapis")
_HOOK_SEGMENT = re.compile(r"(?=[\w-]{0,100}\d)[\w-]{6,}")


def _webhook(text: str) -> bool:
    for m in _WEBHOOK.finditer(text):
        path = m.group(1)
        if "..." in path or "{" in path or _is_placeholder(path.split("/")[0]):
            continue
        segments = path.split("/")
        known = _KNOWN_HOOK.search(text[m.start() : m.start(1)].lower())
        if any((_HOOK_SEGMENT if known else _SECRET_SEGMENT).fullmatch(s) for s in segments):
            return True
    return False


# A key without a vendor prefix ("api key: 9f8e7d6c...", "token=QmFzZTY0...",
# "KEY=9F8E...", "hmac key (c2VjcmV0...)"): a secret's name, at most a few filler
# words or marks, then a long hex or base64 run. The name must come first, so a
# commit sha or a colour in ordinary advice (no such name before it) still passes.
# fmt: off
_KEYED_BLOB = re.compile(
    r"(?<![a-z0-9])(?:pass(?:word|wd|phrase|code)?|pwd|secret|token|(?:api|access|private|secret"
    r"|signing|hmac|auth|client|master|encryption)?[ _-]?key|apikey|credentials?|auth)(?![a-z])"
    r"(?:[ \t]*[-:=>\"'`(\[]{0,3}[ \t]*(?:is|was|are|reads|to|set|value|of|for|the|our|my|its"
    r"|this|would|be|should|must|id|header|string|hex|base64|here|now|\d{1,2})?(?![a-z0-9])){0,4}"
    r"[ \t]*[-:=>\"'`(\[]{0,3}[ \t]*"
    r"([a-z0-9+/_-]{20,400}={0,2})(?![a-z0-9+/_=-])"
)
# fmt: on
_HEX = re.compile(r"[0-9a-fA-F]+")


def _keyed_blob(text: str, low: str) -> bool:
    for m in _KEYED_BLOB.finditer(low):
        value = text[m.start(1) : m.end(1)].rstrip("=")
        if not any(c.isdigit() for c in value) or not any(c.isalpha() for c in value):
            continue  # a word or a number, not a key
        if _HEX.fullmatch(value):
            if len(value) >= 32:  # 128 bits and more: a key's length, not a short id
                return True
            continue
        if not (any(c.isupper() for c in value) and any(c.islower() for c in value)):
            continue  # base64 of a key mixes cases; an identifier (kid-2024-01-rotation) does not
        if "/" in value and _PATHLIKE.search(value):
            continue
        counts = [value.count(c) for c in set(value)]
        entropy = -sum(n / len(value) * math.log2(n / len(value)) for n in counts)
        if entropy >= 3.5 and not _is_placeholder(value):
            return True
    return False


def _secret_problem(text: str, low: str) -> str | None:
    for pattern, reason, needs_digit, lower in _TOKEN_PATTERNS:
        for m in pattern.finditer(low if lower else text):
            if not needs_digit or any(c.isdigit() for c in m.group(0)):
                return reason
    for m in _URL_CREDS.finditer(text):
        if not _is_placeholder(m.group(2)):
            return "contains a URL or connection string with an inline password"
    if _literal_assignment(low):
        return "assigns a literal password, token or key"
    if _webhook(text):
        return "contains a webhook URL with its secret"
    if any(_random_token(m.group(0)) for m in _RANDOM_RUN.finditer(text)):
        return "contains a long random string that looks like a key"
    if _keyed_blob(text, low):
        return "contains a literal key or token after its name"
    return _prose_secret(text)


def _maintained_detector(text: str) -> str | None:
    """detect-secrets' regex plugins, beside ours (they know more vendors). Its
    keyword and entropy plugins stay off: on prose they flag nearly every word."""
    plugins = _detectors()
    for line in text.splitlines() or [text]:
        for plugin in plugins:
            for _ in plugin.analyze_string(line):
                return f"looks like a secret ({plugin.secret_type})"
    return None


_DETECTORS: list[Any] = []
_DETECTOR_MODULES = (
    "artifactory", "aws", "azure_storage_key", "cloudant", "discord", "github_token",
    "gitlab_token", "ibm_cloud_iam", "ibm_cos_hmac", "jwt", "mailchimp", "npm", "openai",
    "private_key", "pypi_token", "sendgrid", "slack", "softlayer", "square_oauth", "stripe",
    "telegram_token", "twilio",
)  # fmt: skip


def _detectors() -> list[Any]:
    """The plugin objects, imported on first use: detect-secrets takes ~0.15 s to
    import, which only storing (never SessionStart or PreToolUse) should pay."""
    if not _DETECTORS:
        import importlib

        from detect_secrets.plugins.base import RegexBasedDetector

        for name in _DETECTOR_MODULES:
            module = importlib.import_module(f"detect_secrets.plugins.{name}")
            for value in vars(module).values():
                if (
                    isinstance(value, type)
                    and issubclass(value, RegexBasedDetector)
                    and value.__module__ == module.__name__
                ):
                    _DETECTORS.append(value())
    return _DETECTORS


# --- chat markup and old-style injection (run on folded, lower-cased text) --

# fmt: off
_ROLE_TAG = (
    r"<\s*/\s*(?:system|assistant|user|human|developer)\b[^<>\n]{0,80}>"
    r"|<\s*system(?:[-_ ]?(?:prompt|message|reminder|instructions?))?(?:\s[^<>\n]{0,80})?\s*>"
    r"|<(?<![a-z0-9_]<)\s*(?:assistant|user|human|developer)(?:\s[^<>\n]{0,80})?\s*>"
    r"|<\|\s*[a-z_][\w.-]{0,30}\s*\|>|\[/?inst\]|<</?sys>>"
)
_TAG_REASON = "contains a chat role tag"
_MARKUP = tuple(
    (re.compile(p, re.M), reason)
    for p, reason in (
        (r"(?:new|updated|revised|real|actual|override|hidden|secret)[\s_*`~-]+(?:system[\s_*`~-]+)?"
         r"(?:instructions?|orders|directives?|task)\s*:", "contains a \"new instructions:\" phrase"),
        (_ROLE_TAG, _TAG_REASON),
        (r"^[ >*#_]*(?:system|assistant|human)[ *_]*:", "starts a line with a chat role prefix"),
        (r"(?:^|\n)[ >*#_]*(?:system|assistant|human)[ *_]*:", "starts a line with a chat role prefix"),
    )
)

# A tag named as a thing ("let apply_chat_template insert the <|im_start|> and
# <|im_end|> markers", "the special token `<|endoftext|>`") rather than used to
# open a turn: followed, alone or in a list of tags, by a noun for markers, or
# preceded by one, or alone in a code span that no role name follows.
_MARKER_NOUN = r"(?:special[ -])?(?:markers?|tokens?|tags?|delimiters?|sequences?|strings?)\b"
_TAG_NAMED_AFTER = re.compile(
    r"[`'\"]?(?:\s*(?:,|and|or|/|,\s*and)\s*[`'\"]?(?:" + _ROLE_TAG + r")[`'\"]?)*"
    r"\s+(?:chat[ -]template\s+|role\s+|turn\s+|control\s+)?" + _MARKER_NOUN
)
_TAG_NAMED_BEFORE = re.compile(
    _MARKER_NOUN + r"\s*(?:like|such as|e\.g\.,?|named|called)?\s*[`'\"]?$"
)
_ROLE_AFTER = re.compile(r"`?\s*(?:system|user|assistant|developer|tool|human|ipython)\b")
_TAG_PATTERN = re.compile(_ROLE_TAG)


def _tag_named(folded: str, m: re.Match[str]) -> bool:
    if _TAG_NAMED_AFTER.match(folded, m.end()):
        return True
    if _TAG_NAMED_BEFORE.search(folded[max(0, m.start() - 40) : m.start()]):
        return True
    in_span = folded[m.start() - 1 : m.start()] == "`" and folded[m.end() : m.end() + 1] == "`"
    return in_span and not _ROLE_AFTER.match(folded, m.end())


def _tags_only_named(folded: str) -> bool:
    """True if every chat tag in the text is talked about, none used to open a turn."""
    return all(_tag_named(folded, m) for m in _TAG_PATTERN.finditer(folded))


_NET_TOOL = re.compile(
    r"(?:curl|wget|n(?:c|cat|etcat)|s(?:ocat|cp|ftp)|telnet|rsync|ftp"
    r"|i(?:nvoke-webrequest|nvoke-restmethod|wr|rm))(?![\w-])"
)
_TOOL_START = re.compile(r"[\w.-]")
_CLAUSE_BREAK = re.compile(r"\n|[.!?](?=\s|$)")
_SENSITIVE = re.compile(
    r"(?<![\w-])\.env(?:rc)?(?!\.(?:example|sample|template|dist))(?![\w-])"
    r"|\.ssh/(?![\w.-]*\.pub\b|known_hosts|config\b|authorized_keys)"
    r"|id_(?:rsa|dsa|ecdsa|ed25519)(?![\w.])"
    r"|\.aws/(?:credentials|config)|\.aws\b|\.netrc|\.pgpass|\.npmrc|\.pypirc|\.git-credentials"
    r"|\.docker/config\.json|\.kube/config|\.gnupg/|/etc/(?:shadow|passwd)|/proc/\w+/environ"
    r"|\.(?:bash|zsh)_history|credentials\.json"
    r"|(?:\$\{?|\$env:|%)\w*(?:key|secret|token|pass|cred|auth|session|cookie|private)"
    r"|(?:^|[\s;&|(`])(?:env|printenv|set|export\s+-p|declare\s+-x)\s*[|)`]"
)
_COMBINING = re.compile("[\u0300-\u036f]")
# fmt: on


def _has_net_tool(clause: str) -> bool:
    for m in _NET_TOOL.finditer(clause):
        if m.start() == 0 or not _TOOL_START.match(clause, m.start() - 1):
            return True
    return False


def _net_exfiltration(folded: str) -> bool:
    """A network tool in the same clause as a secret source, whatever the host:
    a legitimate host cannot be told apart."""
    return _has_net_tool(folded) and any(
        _has_net_tool(c) and _SENSITIVE.search(c) for c in _CLAUSE_BREAK.split(folded)
    )


def _injection_problem(folded: str) -> str | None:
    for pattern, reason in _MARKUP:
        if pattern.search(folded):
            if reason == _TAG_REASON and _tags_only_named(folded):
                continue
            return reason
    if _net_exfiltration(folded):
        return "looks like a command that sends secrets to a remote host"
    return behaviour_problem(folded)


# --- views of the text -------------------------------------------------------
# An attacker splits words ("I g n o r e", "ig-nore"), lines ("ghp_abc\ndef") or
# wraps a command in base64. Each view undoes one trick; every view is screened.

_SPACED = re.compile(r"(?<![^\W_])(?:[^\W_] ){2,}[^\W_](?![^\W_])")
_SOFT_HYPHEN = re.compile(r"(?<=[a-z])-(?=[a-z]{2,})")
_LINE_JOIN = re.compile(r"[ \t]*(?:\\[ \t]*)?\n[ \t]*")
_BLOB = re.compile(r"(?<![A-Za-z0-9+/=_-])[A-Za-z0-9+/_-]{16,}={0,2}(?![A-Za-z0-9+/=_-])")
_HEX_BLOB = re.compile(r"(?<![0-9A-Fa-f])(?:[0-9A-Fa-f]{2}[ :]?){12,}(?![0-9A-Fa-f])")
MAX_BLOBS = 16
MAX_BLOB = 8192
_HIDDEN_COMMAND = re.compile(
    r"https?://|\|\s*(?:ba|z)?sh\b|\brm\s+-rf\b|\bcurl\b|\bwget\b|\biex\b|\beval\b|\bexec\("
)


# Letters spaced apart whose squashed form holds a hostile word: once whitespace
# is collapsed, word gaps are lost ("y o u a r e n o w"), so words are sought inside.
_SQUASHED_WORDS = re.compile(
    "ignore|disregard|forget|override|bypass|youarenow|yourenow|jailbreak|unrestricted|pretend"
    "|exfiltrat|sendthe|uploadthe|curl|wget|bash|password|secret|token|apikey|instruction"
    "|markthetask|skipthe|verify|deleteall|systemprompt|developermode"
)
_MIN_SQUASHED = 8


def _squashed_problem(folded: str) -> bool:
    for m in _SPACED.finditer(folded):
        squashed = m.group(0).replace(" ", "")
        if len(squashed) >= _MIN_SQUASHED and _SQUASHED_WORDS.search(squashed):
            return True
    return False


def _unspaced(raw: str) -> str:
    """Join letters spaced apart ("I g n o r e" -> "Ignore"), before whitespace collapses."""
    return _SPACED.sub(lambda m: m.group(0).replace(" ", ""), raw)


def _decoded_blobs(text: str) -> list[str]:
    """Readable text hidden in base64 or hex blobs (bounded in number and size)."""
    import base64
    import binascii

    found: list[str] = []
    candidates = [m.group(0) for m in _BLOB.finditer(text)][:MAX_BLOBS]
    hexes = [re.sub("[ :]", "", m.group(0)) for m in _HEX_BLOB.finditer(text)][:MAX_BLOBS]
    for blob in candidates + hexes:
        blob = blob[:MAX_BLOB]
        raws: list[bytes] = []
        if all(c in "0123456789abcdefABCDEF" for c in blob) and len(blob) % 2 == 0:
            raws.append(binascii.unhexlify(blob))
        try:
            padded = blob + "=" * (-len(blob) % 4)
            alt = "-_" if ("-" in blob or "_" in blob) else None
            raws.append(base64.b64decode(padded, altchars=alt.encode() if alt else None))
        except (binascii.Error, ValueError):
            pass
        for data in raws:
            for encoding in ("utf-8", "utf-16-le"):
                try:
                    decoded = data.decode(encoding)
                except UnicodeDecodeError:
                    continue
                printable = sum(c.isprintable() or c in "\n\t" for c in decoded)
                if decoded and printable / len(decoded) > 0.95 and " " in decoded.strip():
                    found.append(decoded)
                elif decoded and printable == len(decoded) and len(decoded) >= 16:
                    found.append(decoded)  # a token without spaces: still screened
                    break
    return found


# --- public API -------------------------------------------------------------

_ESCAPED = re.compile(r"%[0-9A-Fa-f]{2}|&#x?[0-9A-Fa-f]{1,6};")
MAX_SCREENED = 32_000  # an insight is at most 4,000 characters; its fields together less


def _screen(text: object, depth: int = 0) -> str | None:
    if not isinstance(text, str):
        return "not a text string"
    if len(text) > MAX_SCREENED:
        return f"too long to screen (over {MAX_SCREENED} characters)"
    if _BAD_UNICODE.search(text):
        return "contains invalid Unicode (unpaired surrogate)"
    if _TAG_CHARS.search(text):
        return "contains invisible Unicode tag characters"
    if _ESCAPED.search(text):  # %69gnore, &#105;gnore: screen the unescaped text too
        problem = _screen(html.unescape(urllib.parse.unquote(text)), depth)
        if problem:
            return problem
    norm = _normalize(text)
    if not norm:
        return None
    joined = _LINE_JOIN.sub("", norm)
    for view in dict.fromkeys((norm, joined)):
        problem = _secret_problem(view, view.lower())
        if problem:
            return problem
    # For behaviour: fold look-alike letters and strip combining accents, and
    # undo letter spacing and hyphenation.
    folded = norm.translate(_LOOKALIKES).lower()
    if not folded.isascii():
        folded = _COMBINING.sub("", unicodedata.normalize("NFKD", folded))
    spaced = _normalize(_unspaced(_INVISIBLE.sub("", unicodedata.normalize("NFKC", text))))
    spaced = spaced.translate(_LOOKALIKES).lower()
    for view in dict.fromkeys((folded, spaced, _SOFT_HYPHEN.sub("", folded))):
        problem = _injection_problem(view)
        if problem:
            return problem
    if _squashed_problem(folded):
        return "spells out a hostile instruction letter by letter"
    if depth == 0:
        for decoded in _decoded_blobs(norm):
            problem = _screen(decoded, depth + 1)
            if problem:
                return f"hides text that {problem} in an encoded blob"
            if _HIDDEN_COMMAND.search(decoded.lower()) or len(decoded.split()) >= 5:
                return "hides a command or instruction in an encoded blob"
        for view in dict.fromkeys((norm, joined)):
            problem = _maintained_detector(view)
            if problem:
                return problem
    return None


def find_problem(text: str) -> str | None:
    """Return a short human reason (e.g. "looks like an AWS access key") if `text`
    must not be stored, else None. Pure, never raises; linear time (under a millisecond
    for a typical insight, tens of milliseconds for 4,000 adversarial characters)."""
    try:
        return _screen(text)
    except Exception:  # fail closed: text we cannot screen is not stored
        return "could not be screened safely"
