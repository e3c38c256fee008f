"""The patterns behind redact.py: secret-looking names and the token rules.

Kept apart from the Redactor so each file stays readable; the combined rule
regex is compiled on first use (`_rules()`), not at import.
"""

from __future__ import annotations

import functools
import re

# --------------------------------------------------------------------------
# Secret-looking names (environment variables, JSON keys)
# --------------------------------------------------------------------------
# A name is split into word parts at non-alphanumerics ("_", "-", ".", " ")
# and at camelCase humps ("accessToken" -> access|Token); an ALLCAPS run is
# one part ("TOKENIZERS" is not "TOKEN"). Matching of words is
# case-insensitive, part boundaries are not.
_LB = r"(?:(?<![A-Za-z0-9])|(?<=[a-z0-9])(?=[A-Z]))"  # start of a word part
_RB = r"[0-9]*(?:(?![A-Za-z0-9])|(?<=[a-z0-9])(?=[A-Z]))"  # end of a word part
_SEP = r"[_.\- ]?"
_KEY_QUALIFIERS = (
    "api|access|private|secret|session|signing|encryption|master|account|app|service"
    "|admin|deploy|ssh|license|client|storage|shared|consumer|webhook|auth"
)
# Words that make a name secret when they are a whole part of it.
_NAME_WORDS = (
    "token"  # a whole part: TOKEN, not TOKENS (max_tokens) or TOKENIZERS
    "|secrets?|passwords?|passwd|passphrase|pass|credentials?|creds"
    "|auth|authorization|cookie|jwt|bearer"
    rf"|(?:{_KEY_QUALIFIERS}){_SEP}keys?"  # API_KEY, apiKey, x-api-key, ...
    rf"|(?:gh|github){_SEP}pat"
)
# Long words that also count at the end of a glued part: PGPASSWORD,
# GITHUBTOKEN, CLIENTSECRET (short ones would catch BYPASS, OAUTH, OLDPWD).
_NAME_SUFFIX_WORDS = "token|secret|password|passwd|passphrase|credentials?"
# `OPENAI_KEY`, `SENDGRID_KEY2`: an upper-case name whose last part is KEY (not `sort_key`).
_ENV_KEY = r"(?<=[A-Z0-9]_)KEY[0-9]*\Z"
# `PWD` alone is the working directory; `DB_PWD` is a password.
_PWD = r"(?<=[_.\-])(?i:pwd)" + _RB
# A name whose last part is one of these names something *about* a secret
# (where it lives, how long it lasts), not the secret itself.
_NOT_SECRET_SUFFIX = (
    "url|uri|urls|endpoint|host|hostname|domain|port|path|paths|file|filename|dir"
    "|directory|sock|socket|type|method|mode|kind|scheme|enabled|disabled|required"
    "|expiry|expires|expiration|at|ttl|timeout|length|len|size|count|limit|max|min"
    "|name|user|username|email|helper|format|version|provider|prefix|cmd|command"
    "|policy|scope|scopes|region|audience|issuer"
)

#: Names (env vars, JSON keys) whose values are secrets. Use `.search(name)`
#: (the pattern is anchored at the start, so `.match` is the same).
#: Rule: some word part of the name is TOKEN, SECRET(S), PASSWORD(S), PASSWD,
#: PASSPHRASE, PASS, CREDENTIAL(S), CREDS, AUTH, AUTHORIZATION, COOKIE, JWT,
#: BEARER, GH_PAT/GITHUB_PAT, <qualifier>_KEY (API_KEY, APIKEY, ACCESS_KEY,
#: PRIVATE_KEY, SESSION_KEY, SIGNING_KEY, ...) or a non-initial PWD, or a
#: part ends in TOKEN, SECRET, PASSWORD, PASSWD, PASSPHRASE or CREDENTIAL(S)
#: (PGPASSWORD), or the name is an upper-case `<PART>_KEY` (OPENAI_KEY, SENDGRID_KEY:
#: an environment variable); words may take trailing digits and are matched
#: case-insensitively, part boundaries are not. And the last part is
#: not a word such as URL, FILE, PATH, SOCK, TYPE, COUNT, NAME or USER
#: (TOKEN_URL, PASSWORD_FILE, SSH_AUTH_SOCK, token_count are not secret).
#: KEY alone, sort_key, KEYBOARD, MONKEY, AUTHOR, TOKENIZERS_PARALLELISM, max_tokens,
#: PATH, HOME and PWD do not match.
SECRET_NAME_RE: re.Pattern[str] = re.compile(
    rf"\A(?!.*{_LB}(?i:{_NOT_SECRET_SUFFIX}){_RB}\Z)"
    rf".*?(?:{_LB}(?i:{_NAME_WORDS}){_RB}|(?i:{_NAME_SUFFIX_WORDS}){_RB}|{_PWD}|{_ENV_KEY})",
    re.DOTALL,
)

# --------------------------------------------------------------------------
# Text rules
# --------------------------------------------------------------------------
#
# Speed: every alternative of the combined patterns starts with a literal
# character, so `re` skips positions by a first-character bitmap and tries
# only the few alternatives whose first literal is there. Left boundaries are
# therefore lookbehinds placed *after* that first literal, the part to
# redact is the group `v` (the whole match when a rule has none), and an
# empty group at the end of each alternative tells which rule matched.

_MARKER = r"\[REDACTED:[A-Za-z0-9_.:\-]{1,200}\]"
_MARKER_RE = re.compile(_MARKER)
_MARKER_FULL_RE = re.compile(_MARKER + r"\Z")
_NOT_MARKER = r"(?!\[REDACTED:)"
_MIN_VALUE_LEN = 8
_WORDCH = "[A-Za-z0-9_]"
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")


def _lit(first: str, rest: str, before: str | None = "[A-Za-z0-9]") -> str:
    """`first` (one literal character) and `rest`; `first` must not follow a `before` char."""
    f = re.escape(first)
    guard = f"(?<!{before}{f})" if before else ""
    return f + guard + rest


def _ci(word: str, rest: str, before: str | None = _WORDCH) -> tuple[str, ...]:
    """`word` (a regex starting with a letter) matched case-insensitively, then `rest`."""
    head, tail = word[0], word[1:]
    return tuple(_lit(c, f"(?i:{tail}){rest}", before) for c in (head.upper(), head.lower()))


_AUTH_NAMES = ("authorization", "proxy-authorization")
_AUTH_QUOTED = (
    r"[\"']?[ \t]*[:=][ \t]*(?P<q>[\"'])"
    rf"(?P<v>{_NOT_MARKER}(?:(?!(?P=q))[^\\\r\n]|\\.)+)(?P=q)"
)
# Credentials: `name=value` parameters (Digest, AWS4-HMAC-SHA256) or a token.
_AUTH_PARAM = r"[A-Za-z][A-Za-z0-9_\-]*=(?:\"(?:[^\"\\\r\n]|\\.)*\"|[^\s\"'\\,]*)"
_AUTH_BARE = (
    rf"[ \t]*:[ \t]*(?P<v>(?:[A-Za-z][A-Za-z0-9._~+\-]*[ \t]+)?{_NOT_MARKER}"
    rf"(?:{_AUTH_PARAM}(?:[ \t]*,[ \t]*{_AUTH_PARAM}|[ \t]+{_AUTH_PARAM})*|[^\s\"'\\]+))"
)

# Names ending in one of these words make an assignment `NAME=value` /
# `NAME: value` secret (narrower than SECRET_NAME_RE: `auth: required` is no
# secret). The word need not start a part (`MYPASSWORD=`, `apitoken=`); it
# must end the name, which keeps `TOKENIZERS_PARALLELISM=` and `max_tokens:` out.
# So does an upper-case `_KEY` (`OPENAI_KEY=`, `SENDGRID_KEY=`: `.env` lines).
_ASSIGN_WORDS: tuple[str, ...] = (
    "token",
    "secret",
    "password",
    "passwd",
    "passphrase",
    "credential",
    "credentials",
    *(q + sep + "key" for q in _KEY_QUALIFIERS.split("|") for sep in ("", "_", "-", ".")),
)


def _assign_alternatives() -> tuple[str, ...]:
    """Alternatives for `NAME["']?[:=]value`, starting at the `:` or `=`.

    Anchoring on the separator keeps the rule off the hot path of ordinary
    words; the name is checked by fixed-width lookbehinds (one per word
    length, directly before the separator or one quote/blank before it).
    """
    by_len: dict[int, list[str]] = {}
    for w in _ASSIGN_WORDS:
        by_len.setdefault(len(w), []).append(re.escape(w))
    tails = "|".join(sorted({re.escape(w[-3:]) for w in _ASSIGN_WORDS}))
    # A bare value stops at blanks, quotes, `,;&` and brackets, and must not be
    # followed by `(`, `[` or `{`: `token = tokens[i]`, `key = b64(x)` are code.
    bare = r"[^\s\"'`,;&()\[\]{}]"
    value = (
        r"[ \t]*(?P<q>[\"'])?"
        rf"(?P<v>{_NOT_MARKER}(?![<\[{{$%])(?(q)[^\s\"'\\]{{{_MIN_VALUE_LEN},}}"
        rf"|(?={bare}{{0,200}}[0-9]){bare}{{{_MIN_VALUE_LEN},}}+(?![(\[{{])))(?(q)(?P=q))"
    )
    out: list[str] = []
    for sep in ":=":
        for gap in ("", "[\"' \t]"):
            # A cheap test of the word's last three letters first, then the words.
            words = "|".join(
                [f"(?<=(?i:{'|'.join(ws)}){gap}{sep})" for _, ws in sorted(by_len.items())]
                + [f"(?<=[A-Z0-9]_KEY{gap}{sep})"]
            )
            out.append(f"{sep}(?<=(?i:{tails}){gap}{sep})(?:{words}){value}")
    return tuple(out)


# A token glued to the text before or after it (`keyghp_…`, `idAKIA…`, `AIza…xyz`) is
# still a token where its prefix cannot end a word: those rules have no guard. Prefixes
# that do end words (`task-`, `disk-`, `shelf_`) keep theirs, and a glued token of that
# kind must mix cases (and digits) as random keys do, or carry its vendor's marker.
def _mixed(digit: bool = True, chars: str = "[A-Za-z0-9_\\-]") -> str:
    """Lookaheads: the token ahead holds upper and lower case letters (and a digit)."""
    need = ("[0-9]", "[A-Z]", "[a-z]") if digit else ("[A-Z]", "[a-z]")
    return "".join(f"(?={chars}{{0,200}}{c})" for c in need)


# (kind, alternatives). Where alternatives of two rules can start at the same
# position, the first listed wins.
_RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    # A header line `Authorization: <anything to the end of the line>`.
    (
        "authorization",
        tuple(
            alt
            for name in _AUTH_NAMES
            for alt in _ci(name, rf"[ \t]*:[ \t]*(?P<v>{_NOT_MARKER}[^\s][^\r\n]*)", before="[^\n]")
        ),
    ),
    # `"Authorization": "Bearer x"`, `'authorization': '...'`, `authorization="..."`.
    ("authorization", tuple(a for n in _AUTH_NAMES for a in _ci(n, _AUTH_QUOTED))),
    # `-H 'Authorization: token abc'`: an optional scheme, the credential and any
    # `name=value` parameters (`AWS4-HMAC-SHA256 Credential=..., Signature=...`).
    ("authorization", tuple(a for n in _AUTH_NAMES for a in _ci(n, _AUTH_BARE))),
    # `Bearer <token>` anywhere; the token must hold a digit (prose survives).
    (
        "bearer",
        _ci(
            "bearer",
            rf"[ \t]+(?P<v>{_NOT_MARKER}(?=[A-Za-z0-9._~+/\-]{{0,200}}[0-9])"
            r"[A-Za-z0-9._~+/\-]{8,}=*)",
        ),
    ),
    # Slack webhooks: keep the host, drop the secret path.
    (
        "slack-webhook",
        (
            _lit(
                "h",
                r"ttps?://hooks\.slack\.com/(?:services|workflows|triggers)/"
                r"(?P<v>[A-Za-z0-9_/+\-]+)",
                _WORDCH,
            ),
        ),
    ),
    # `scheme://user:password@host`, `https://TOKEN@github.com` (not `git@`).
    (
        "url-userinfo",
        (
            r":(?<=[A-Za-z0-9+.\-]:)//"
            rf"(?P<v>{_NOT_MARKER}(?!(?:git|hg|anonymous)@)"
            r"[^\s/?#@\"'<>\[\]{}|\\^`]+)@",
        ),
    ),
    # AWS access key ids: a 4-character type prefix and 16 base32 characters. Only AKIA
    # and ASIA (long-term and session keys) may be glued to text: the others can occur
    # inside a ULID (`…ANPA…`), which holds no I.
    (
        "aws-key",
        (
            _lit("A", r"(?:KIA|SIA)[A-Z0-9]{16}(?![A-Z0-9])", None),
            _lit(
                "A",
                r"(?:GPA|IDA|ROA|IPA|NPA|NVA|BIA|CCA|3T[A-Z0-9])"
                r"[A-Z0-9]{16}(?![A-Za-z0-9])",
            ),
        ),
    ),
    # AWS secret access keys: 40 base64 characters next to their name.
    (
        "aws-secret-key",
        tuple(
            alt
            for name in (r"aws_?secret_?access_?key", r"secret_?access_?key")
            for alt in _ci(
                name,
                r"[\"']?[ \t]*[:=][ \t]*[\"']?(?P<v>[A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])",
                before="[A-Za-z0-9]",
            )
        ),
    ),
    # GitHub: classic tokens (ghp_ personal, gho_ OAuth, ghu_ user-to-server,
    # ghs_ server-to-server, ghr_ refresh) and fine-grained personal tokens.
    (
        "github-token",
        (
            _lit("g", r"h[pousr]_[A-Za-z0-9]{36,}", None),
            _lit("g", r"ithub_pat_[A-Za-z0-9_]{22,}", None),
        ),
    ),
    ("gitlab-token", (_lit("g", r"lpat-[A-Za-z0-9_\-]{20,}", None),)),
    # Anthropic: sk-ant-api03-..., sk-ant-admin01-..., sk-ant-oat01-...
    (
        "anthropic-key",
        (
            _lit("s", r"k-ant-(?:api|admin|oat)[0-9]{2}-[A-Za-z0-9_\-]{20,}", None),
            _lit("s", r"k-ant-[A-Za-z0-9_\-]{20,}", r"[A-Za-z0-9_\-]"),
        ),
    ),
    # OpenAI: sk-<48>, sk-proj-..., sk-svcacct-..., sk-admin-...; the body must
    # hold a digit so kebab-case words (sk-learn-compatible-...) survive.
    (
        "openai-key",
        (
            _lit(
                "s",
                r"k-(?:proj-|svcacct-|admin-|None-)?"
                r"(?=[A-Za-z0-9_\-]{0,200}[0-9])[A-Za-z0-9_\-]{20,}",
                r"[A-Za-z0-9_\-]",
            ),
            _lit("s", rf"k-(?:proj-|svcacct-|admin-|None-)?{_mixed()}[A-Za-z0-9_\-]{{40,}}", None),
        ),
    ),
    (
        "stripe-key",
        tuple(
            alt
            for c in "sr"
            for alt in (
                _lit(c, r"k_(?:live|test)_[A-Za-z0-9]{16,}"),
                _lit(c, rf"k_(?:live|test)_{_mixed(chars='[A-Za-z0-9]')}[A-Za-z0-9]{{16,}}", None),
            )
        ),
    ),
    # Slack: xoxb bot, xoxp user, xoxa/xoxo/xoxr/xoxs, xoxe refresh, xapp app tokens.
    (
        "slack-token",
        (
            _lit("x", r"ox(?:e\.xox)?[abposre]-[A-Za-z0-9\-]{10,}", None),
            _lit("x", r"app-[0-9]+-[A-Za-z0-9\-]{10,}", None),
        ),
    ),
    (
        "google-api-key",
        (_lit("A", r"Iza[0-9A-Za-z_\-]{35}", None),),
    ),
    # OAuth access tokens (ya29.) and OAuth client secrets (GOCSPX-).
    (
        "google-oauth",
        (
            _lit("y", r"a29\.[0-9A-Za-z_\-]{20,}", None),
            _lit("G", r"OCSPX-[A-Za-z0-9_\-]{24,}", None),
        ),
    ),
    (
        "huggingface-token",
        (
            _lit("h", r"f_[A-Za-z0-9]{30,}", _WORDCH),
            _lit("h", rf"f_{_mixed(False, '[A-Za-z0-9]')}[A-Za-z0-9]{{30,}}", None),
        ),
    ),
    ("npm-token", (_lit("n", r"pm_[A-Za-z0-9]{36}", None),)),
    ("pypi-token", (_lit("p", r"ypi-AgEIcHlwaS5vcmc[A-Za-z0-9_\-]{50,}", None),)),
    # JWT: base64url JSON header and payload (both start `{"`, i.e. `eyJ`), signature.
    (
        "jwt",
        (
            _lit(
                "e",
                r"yJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*",
                None,
            ),
        ),
    ),
    # `DB_PASSWORD=...`, `"client_secret": "..."`, `--password=...`, `?token=...`:
    # a value assigned to a name that ends in a secret word. Quoted values need
    # 8+ characters; bare ones 8+ characters including a digit and no call or
    # subscript (so that `token = get_token()`, `token = toks[0]` and
    # `password: str` survive).
    ("assign", _assign_alternatives()),
)

# Known values and PEM blocks are replaced first, in a pass of their own, so
# that no shape rule can consume part of them and leave the rest behind.
_PEM = (
    r"-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----"
    r"[\s\S]*?(?:-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----|\Z)"
)


def _build_rules() -> tuple[re.Pattern[str], dict[str, tuple[str, str | None]]]:
    """The combined shape pattern and, per end group, (kind, value group name).

    Alternatives are grouped by their first literal (`a(?:...|...)`), keeping
    their order, so that `re` walks one short branch list per position.
    """
    by_first: dict[str, list[str]] = {r"\[": [_MARKER[2:]]}
    table: dict[str, tuple[str, str | None]] = {}
    for i, (kind, alternatives) in enumerate(_RULES):
        for j, alt in enumerate(alternatives):
            g = f"r{i}_{j}"
            for inner in ("v", "q"):
                alt = (
                    alt.replace(f"(?P<{inner}>", f"(?P<{g}{inner}>")
                    .replace(f"(?P={inner})", f"(?P={g}{inner})")
                    .replace(f"({inner})", f"({g}{inner})")
                )
            first = alt[:2] if alt.startswith("\\") else alt[:1]
            by_first.setdefault(first, []).append(f"{alt[len(first) :]}(?P<{g}>)")
            table[g] = (kind, g + "v" if f"(?P<{g}v>" in alt else None)
    pattern = "|".join(f"{first}(?:{'|'.join(rests)})" for first, rests in by_first.items())
    return re.compile(pattern), table


# Where any rule could start: a superset of the rules' heads, small enough to compile
# at import. Text without one of these cannot match a rule, so `Redactor.text` skips
# the (costly to compile) combined rule regex. Keep it in step with _RULES: a test
# checks that every fake secret of every kind matches it.
_RULE_HEADS = re.compile(
    r"(?i:authorization|bearer)"
    r"|(?i:token|secret|passw|credential|key)[A-Za-z0-9_.\-]*[\"']?[ \t]*[:=]"  # assignments
    r"|://"
    r"|A(?:KIA|SIA|GPA|IDA|ROA|IPA|NPA|NVA|BIA|CCA|3T)"
    r"|gh[pousr]_|github_pat_|glpat-|sk-|[sr]k_(?:live|test)_|xox|xapp-"
    r"|AIza|ya29\.|GOCSPX-|hf_|npm_|pypi-|eyJ"
)


@functools.cache
def _rules() -> tuple[re.Pattern[str], dict[str, tuple[str, str | None]]]:
    """Compiled on first use: reading commands that never redact do not pay for it."""
    return _build_rules()


_PREPASS_NO_VALUES_RE = re.compile(f"{_MARKER}|{_PEM}")
_KIND_UNSAFE_RE = re.compile(r"[^A-Za-z0-9_.\-]")
