"""Screening of insight text before it is stored.

Why: every stored insight is later pasted verbatim into the prompt of a future
coding agent, so storing one is a trust boundary.  Two kinds of text must never
cross it: secrets (API keys, tokens, passwords, private keys, credentialed
URLs), which would be replayed into every prompt, log and transcript that
retrieves the insight; and prompt-injection phrasing ("ignore previous
instructions", chat role tags, "you are now ...", commands that ship secrets to
a remote host), which would let one poisoned insight steer every later agent.

Design:

* `find_problem` is pure and returns a short reason or None.  It never raises;
  an internal failure returns a reason (fail closed).  Text with unpaired
  surrogates or invisible Unicode tag characters (used to smuggle hidden
  instructions to models) is refused outright.
* Normalisation first: NFKC (fullwidth letters, ligatures), zero-width/BOM/bidi
  format characters removed, other control characters turned into spaces,
  whitespace runs collapsed with line breaks kept (role prefixes are
  line-anchored).  Injection checks also fold Cyrillic/Greek look-alikes,
  lower-case and drop combining accents.
* Secrets: mentioning a password, token or env var is fine; a literal value is
  not.  References (`$VAR`, `${VAR}`, `os.environ[...]`, `{{ var }}`) and
  placeholders (`<your-password>`, `...`, `****`, `YOUR_API_KEY`) pass.
* Injection: imperative phrasing, not topics.  "ignore all previous
  instructions" is refused; "ruff: ignore all rules in migrations/" passes
  (bare rules/prompts/context need a qualifier such as previous/above/your);
  "act as" is allowed.  A network tool (curl, wget, nc, ...) in the same
  sentence as a secret source (a secret-named $VAR, .env, ~/.ssh, `env |`) is
  refused whatever the host, since a legitimate host cannot be told apart.
* Patterns are compiled once, start with a literal where possible and use
  bounded repetition, so screening stays linear (no catastrophic backtracking).
"""

from __future__ import annotations

import re
import unicodedata

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


def _normalize(text: str) -> str:
    text = unicodedata.normalize("NFKC", text)
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
        (r"gh[pousr]_(?<![A-Za-z0-9_]....)[A-Za-z0-9]{20,}"
         r"|github_pat_(?<![A-Za-z0-9_]...........)[A-Za-z0-9_]{20,}",
         "looks like a GitHub token", False),
        (r"sk-ant-(?<![A-Za-z0-9_-].......)[A-Za-z0-9_-]{16,}", "looks like an Anthropic API key", False),
        (r"sk-(?<![A-Za-z0-9_-]...)[A-Za-z0-9_-]{20,}", "looks like an OpenAI-style API key", True),
        (r"xox[abposre]-(?<![A-Za-z0-9].....)[A-Za-z0-9-]{10,}", "looks like a Slack token", True),
        (r"AIza[0-9A-Za-z_-]{35}", "looks like a Google API key", False),
        (r"k_(?:live|test)_(?<=[sr]k_...._)[0-9A-Za-z]{16,}", "looks like a Stripe secret key", False),
        (r"glpat-(?<![A-Za-z0-9_]......)[A-Za-z0-9_-]{20,}", "looks like a GitLab token", False),
        (r"npm_(?<![A-Za-z0-9_]....)[A-Za-z0-9]{36}", "looks like an npm token", False),
        (r"pypi-AgE[A-Za-z0-9_-]{50,}", "looks like a PyPI token", False),
        (r"hf_(?<![A-Za-z0-9_]...)[A-Za-z0-9]{30,}", "looks like a Hugging Face token", False),
        (r"eyJ(?<![A-Za-z0-9_-]...)[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*",
         "looks like a JWT", False),
        (r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----", "contains a private key block", False),
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
    return None


# --- prompt injection (all patterns run on folded, lower-cased text) --------

# fmt: off
_W = r"[\s_*`~-]+"  # word separator, tolerant of markdown emphasis and snake_case
_VERB = r"(?:i(?<![a-z]i)gnor(?:e|ing)|d(?<![a-z]d)isregard(?:ing)?|f(?<![a-z]f)orget(?:ting)?)"
_OVERRIDE = re.compile(
    _VERB + r"((?:" + _W + r"(?:all|any|the|every|everything|in|of|these|those|this|that|my"
    r"|your|previous|prior|above|earlier|preceding|former|original|initial|old|system"
    r"|developer|safety|existing|current|other)){1,5})" + _W +
    r"(instructions?|directives?|guidelines|prompts?|rules|context|messages|constraints)\b"
)
_STRONG_NOUN = re.compile(r"^(?:instructions?|directives?|guidelines)$")
_QUALIFIER = re.compile(
    r"\b(?:previous|prior|above|earlier|preceding|former|original|initial|system|developer"
    r"|safety|your|my)\b"
)
_INJECTION_PATTERNS = tuple(
    (re.compile(p, re.M), reason)
    for p, reason in (
        (_VERB + _W + r"(?:all" + _W + r")?(?:of" + _W + r")?(?:the" + _W + r")?above"
         r"(?=\s*(?:[.,;:!)]|$)|" + _W + r"(?:and|instead|then|text|prompt|content)\b)"
         r"|" + _VERB + _W + r"everything" + _W + r"(?:above|before|prior|previously|you)\b",
         "contains an instruction-override phrase"),
        (r"you(?<![a-z]you)(?:\s+are|'re|\u2019re)\s+now\b"
         r"|from(?<![a-z]from)\s+now\s+on,?\s+you\s+are\b",
         "contains a role-reassignment phrase (\"you are now ...\")"),
        (r"(?:new|updated|revised|real|actual|override)" + _W + r"(?:system" + _W +
         r")?instructions?\s*:", "contains a \"new instructions:\" phrase"),
        (r"<\s*/\s*(?:system|assistant|user|human|developer)\b[^<>\n]{0,80}>"
         r"|<\s*system(?:[-_ ]?(?:prompt|message|reminder|instructions?))?(?:\s[^<>\n]{0,80})?\s*>"
         r"|<(?<![a-z0-9_]<)\s*(?:assistant|user|human|developer)(?:\s[^<>\n]{0,80})?\s*>"
         r"|<\|\s*[a-z_][\w.-]{0,30}\s*\|>|\[/?inst\]|<</?sys>>",
         "contains a chat role tag"),
        (r"^[ >*#_]*(?:system|assistant|human)[ *_]*:", "starts a line with a chat role prefix"),
    )
)

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
    r"|\.aws/(?:credentials|config)|\.netrc|\.pgpass|\.npmrc|\.pypirc|\.git-credentials"
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


def _exfiltration(folded: str) -> bool:
    return _has_net_tool(folded) and any(
        _has_net_tool(c) and _SENSITIVE.search(c) for c in _CLAUSE_BREAK.split(folded)
    )


def _injection_problem(folded: str) -> str | None:
    for m in _OVERRIDE.finditer(folded):
        if _STRONG_NOUN.match(m.group(2)) or _QUALIFIER.search(m.group(1)):
            return "contains an instruction-override phrase"
    for pattern, reason in _INJECTION_PATTERNS:
        if pattern.search(folded):
            return reason
    if _exfiltration(folded):
        return "looks like a command that sends secrets to a remote host"
    return None


# --- public API -------------------------------------------------------------


def _screen(text: object) -> str | None:
    if not isinstance(text, str):
        return "not a text string"
    if _BAD_UNICODE.search(text):
        return "contains invalid Unicode (unpaired surrogate)"
    if _TAG_CHARS.search(text):
        return "contains invisible Unicode tag characters"
    norm = _normalize(text)
    if not norm:
        return None
    low = norm.lower()
    problem = _secret_problem(norm, low)
    if problem:
        return problem
    # For injection only: fold look-alike letters and strip combining accents.
    folded = norm.translate(_LOOKALIKES).lower()
    if not folded.isascii():
        folded = _COMBINING.sub("", unicodedata.normalize("NFKD", folded))
    return _injection_problem(folded)


def find_problem(text: str) -> str | None:
    """Return a short human reason (e.g. "looks like an AWS access key") if `text`
    must not be stored, else None. Pure, fast (< 1 ms for 4,000 chars), never raises."""
    try:
        return _screen(text)
    except Exception:  # fail closed: text we cannot screen is not stored
        return "could not be screened safely"
