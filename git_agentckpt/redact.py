"""Secret rules (pure): redact secrets before anything reaches the object store.

Two kinds of secret are recognised in text:

* **known values**: the values of environment variables whose *name* looks
  secret (see `SECRET_NAME_RE`) and that are at least 8 characters long, plus
  any `extra_values` given to `Redactor`. They are replaced wherever they
  occur as literal substrings, longest first.
* **shapes**: vendor token formats (AWS, GitHub, Anthropic, OpenAI, Slack,
  Google, Hugging Face, ...), PEM private key blocks, credentials in
  `Authorization` headers and `Bearer` tokens, passwords in URLs, JWTs, and
  values assigned to secret-looking names (`DB_PASSWORD=...`).

Each one is replaced by `[REDACTED:<kind>]`, where `kind` names the rule that
fired (`github-token`, `env:GITHUB_TOKEN`, `key:api_key`, ...). Markers are
never redacted again, so redaction is idempotent. In `Redactor.value`, a
dict key that looks secret (`"password"`, `"api_key"`, `"Authorization"`)
has its string value replaced entirely.

The module is on the hot path of every event append: all patterns are
compiled once, into two combined regular expressions per `Redactor` (one for
known values and PEM blocks, one for shapes), so a string costs two C-level
scans. Git object ids, UUIDs, ULIDs, hex digests, paths and numbers match no
rule.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable, Mapping
from typing import TypeAlias

__all__ = [
    "DEFAULT_SECRET_PATHS",
    "SECRET_NAME_RE",
    "JSONValue",
    "Redactor",
    "default_redactor",
    "redact_text",
    "redact_value",
]

JSONValue: TypeAlias = bool | int | float | str | list["JSONValue"] | dict[str, "JSONValue"] | None

#: gitignore-style globs never stored in a snapshot (written to the private
#: excludes file; like any exclude they only keep *untracked* files out).
#: Patterns without a slash match at any depth.
DEFAULT_SECRET_PATHS: tuple[str, ...] = (
    ".env",  # dotenv files: API keys, database passwords
    ".env.*",  # .env.local, .env.production, ... (a tracked .env.example stays)
    "*.pem",  # PEM keys and certificates with their keys
    "*.key",  # TLS / SSH / signing private keys
    "id_rsa",  # SSH private keys (the .pub halves are excluded too: harmless)
    "id_rsa.*",
    "id_dsa",
    "id_dsa.*",
    "id_ecdsa*",
    "id_ed25519*",
    "*.p12",  # PKCS#12 key bundles
    "*.pfx",
    "*.keystore",  # Java / Android keystores
    "*.jks",
    ".netrc",  # machine/login/password for curl, git, ftp
    "_netrc",
    ".git-credentials",  # git credential-store plain-text tokens
    ".pypirc",  # PyPI upload tokens
    ".npmrc",  # npm auth tokens
    ".pgpass",  # PostgreSQL passwords
    ".htpasswd",  # web server password hashes
    ".vault-token",  # HashiCorp Vault token
    "**/.aws/credentials",  # AWS access keys
    "**/.docker/config.json",  # registry auth tokens
    "credentials.json",  # Google OAuth client / service credentials
    "service-account*.json",  # Google Cloud service account keys
    "*.tfstate",  # Terraform state: holds every secret it manages
    "*.tfstate.backup",
    "secrets.json",  # conventional secret stores (not secrets.py: source code)
    "secrets.yaml",
    "secrets.yml",
    "secrets.toml",
    "secrets.env",
)

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
#: (PGPASSWORD); words may take trailing digits and are matched
#: case-insensitively, part boundaries are not. And the last part is
#: not a word such as URL, FILE, PATH, SOCK, TYPE, COUNT, NAME or USER
#: (TOKEN_URL, PASSWORD_FILE, SSH_AUTH_SOCK, token_count are not secret).
#: KEY alone, KEYBOARD, MONKEY, AUTHOR, TOKENIZERS_PARALLELISM, max_tokens,
#: PATH, HOME and PWD do not match.
SECRET_NAME_RE: re.Pattern[str] = re.compile(
    rf"\A(?!.*{_LB}(?i:{_NOT_SECRET_SUFFIX}){_RB}\Z)"
    rf".*?(?:{_LB}(?i:{_NAME_WORDS}){_RB}|(?i:{_NAME_SUFFIX_WORDS}){_RB}|{_PWD})",
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
                f"(?<=(?i:{'|'.join(ws)}){gap}{sep})" for _, ws in sorted(by_len.items())
            )
            out.append(f"{sep}(?<=(?i:{tails}){gap}{sep})(?:{words}){value}")
    return tuple(out)


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
    # AWS access key ids: a 4-character type prefix and 16 base32 characters.
    (
        "aws-key",
        (
            _lit(
                "A",
                r"(?:KIA|SIA|GPA|IDA|ROA|IPA|NPA|NVA|BIA|CCA|3T[A-Z0-9])"
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
            _lit("g", r"h[pousr]_[A-Za-z0-9]{36,}(?![A-Za-z0-9])"),
            _lit("g", r"ithub_pat_[A-Za-z0-9_]{22,}(?![A-Za-z0-9_])"),
        ),
    ),
    ("gitlab-token", (_lit("g", r"lpat-[A-Za-z0-9_\-]{20,}"),)),
    # Anthropic: sk-ant-api03-..., sk-ant-admin01-..., sk-ant-oat01-...
    ("anthropic-key", (_lit("s", r"k-ant-[A-Za-z0-9_\-]{20,}", r"[A-Za-z0-9_\-]"),)),
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
        ),
    ),
    (
        "stripe-key",
        tuple(_lit(c, r"k_(?:live|test)_[A-Za-z0-9]{16,}") for c in "sr"),
    ),
    # Slack: xoxb bot, xoxp user, xoxa/xoxo/xoxr/xoxs, xoxe refresh, xapp app tokens.
    (
        "slack-token",
        (
            _lit("x", r"ox(?:e\.xox)?[abposre]-[A-Za-z0-9\-]{10,}"),
            _lit("x", r"app-[0-9]+-[A-Za-z0-9\-]{10,}"),
        ),
    ),
    (
        "google-api-key",
        (_lit("A", r"Iza[0-9A-Za-z_\-]{35}(?![A-Za-z0-9_\-])", r"[A-Za-z0-9_\-]"),),
    ),
    # OAuth access tokens (ya29.) and OAuth client secrets (GOCSPX-).
    (
        "google-oauth",
        (
            _lit("y", r"a29\.[0-9A-Za-z_\-]{20,}", r"[A-Za-z0-9_.\-]"),
            _lit("G", r"OCSPX-[A-Za-z0-9_\-]{24,}"),
        ),
    ),
    ("huggingface-token", (_lit("h", r"f_[A-Za-z0-9]{30,}(?![A-Za-z0-9_])", _WORDCH),)),
    ("npm-token", (_lit("n", r"pm_[A-Za-z0-9]{36}(?![A-Za-z0-9])", _WORDCH),)),
    ("pypi-token", (_lit("p", r"ypi-AgEIcHlwaS5vcmc[A-Za-z0-9_\-]{50,}"),)),
    # JWT: base64url JSON header and payload (both start `{"`, i.e. `eyJ`), signature.
    (
        "jwt",
        (
            _lit(
                "e",
                r"yJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*",
                r"[A-Za-z0-9_\-]",
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


@functools.cache
def _rules() -> tuple[re.Pattern[str], dict[str, tuple[str, str | None]]]:
    """Compiled on first use: reading commands that never redact do not pay for it."""
    return _build_rules()


_PREPASS_NO_VALUES_RE = re.compile(f"{_MARKER}|{_PEM}")
_KIND_UNSAFE_RE = re.compile(r"[^A-Za-z0-9_.\-]")
_CACHE_MAX = 4096
_SECRET_NAMES: dict[str, bool] = {}


def _is_secret_name(name: str) -> bool:
    """`SECRET_NAME_RE.search(name)`, memoised (keys repeat from event to event)."""
    hit = _SECRET_NAMES.get(name)
    if hit is None:
        # A key of more than 200 characters is text, not a name.
        hit = len(name) <= 200 and SECRET_NAME_RE.search(name) is not None
        if len(_SECRET_NAMES) < _CACHE_MAX:
            _SECRET_NAMES[name] = hit
    return hit


def _kind_part(name: str) -> str:
    """`name` made safe for a marker (so markers stay recognisable)."""
    return _KIND_UNSAFE_RE.sub("_", name)[:64] or "_"


def _name_before(s: str, sep: int) -> str:
    """The name (`[A-Za-z0-9_.-]` run, at most 64) before separator `sep`, past one quote/blank."""
    end = sep - 1 if sep > 0 and s[sep - 1] in "\"' \t" else sep
    lo = end
    while lo > 0 and end - lo < 64 and s[lo - 1] in _NAME_CHARS:
        lo -= 1
    return s[lo:end]


class Redactor:
    """Redacts secrets in strings and JSON values. Build once, reuse.

    `env` (default `os.environ`): the values of its secret-named variables
    (`SECRET_NAME_RE`) of 8+ characters are redacted as `env:<NAME>`;
    `extra_values` (8+ characters) are redacted as `value`.
    """

    def __init__(
        self, env: Mapping[str, str] | None = None, extra_values: Iterable[str] = ()
    ) -> None:
        source = os.environ if env is None else env
        known: dict[str, str] = {}  # secret value -> marker kind
        for name in sorted(source):
            value = source[name]
            if len(value) >= _MIN_VALUE_LEN and _is_secret_name(name):
                known.setdefault(value, "env:" + _kind_part(name))
        for value in extra_values:
            if len(value) >= _MIN_VALUE_LEN:
                known.setdefault(value, "value")
        self._known = known
        if known:
            literals = "|".join(re.escape(v) for v in sorted(known, key=lambda v: (-len(v), v)))
            self._prepass = re.compile(f"{_MARKER}|{literals}|{_PEM}")
        else:
            self._prepass = _PREPASS_NO_VALUES_RE
        self._count = 0
        self._keys: dict[str, tuple[str, bool]] = {}

    @property
    def secret_names(self) -> tuple[str, ...]:
        """The kinds of the known values (`env:NAME`), for diagnostics; never the values."""
        return tuple(sorted(set(self._known.values())))

    def count(self) -> int:
        """How many redactions this instance has made so far."""
        return self._count

    def _prepass_sub(self, m: re.Match[str]) -> str:
        found = m.group()
        if _MARKER_FULL_RE.match(found):
            return found
        self._count += 1
        kind = self._known.get(found, "private-key")
        return f"[REDACTED:{kind}]"

    def _rule_sub(self, m: re.Match[str]) -> str:
        group = m.lastgroup
        if group is None:  # an existing marker
            return m.group()
        kind, v = _rules()[1][group]
        if kind == "assign":
            kind = "assign:" + _kind_part(_name_before(m.string, m.start()))
        self._count += 1
        marker = f"[REDACTED:{kind}]"
        if v is None:
            return marker
        start, end = m.span()
        vs, ve = m.span(v)
        s = m.string
        return s[start:vs] + marker + s[ve:end]

    def text(self, s: str) -> str:
        """`s` with every secret replaced by a `[REDACTED:<kind>]` marker."""
        return _rules()[0].sub(self._rule_sub, self._prepass.sub(self._prepass_sub, s))

    def _key(self, key: str) -> tuple[str, bool]:
        """(redacted key, whether its value is secret), cached.

        The name test looks at the redacted key without its markers, so that a
        second pass (which sees `[REDACTED:github-token]`) decides the same.
        """
        done = self._keys.get(key)
        if done is None:
            red = self.text(key)
            name = _MARKER_RE.sub("", red) if "[REDACTED:" in red else red
            done = (red, _is_secret_name(name))
            if len(self._keys) < _CACHE_MAX:
                self._keys[key] = done
        return done

    def _secret_leaf(self, key: str, v: JSONValue) -> JSONValue:
        """The value of a secret-named key: its strings (also in lists) go entirely."""
        if isinstance(v, str):
            if not v or _MARKER_FULL_RE.match(v):
                return v
            self._count += 1
            return f"[REDACTED:key:{_kind_part(key)}]"
        if isinstance(v, list):
            return [self._secret_leaf(key, x) for x in v]
        return self.value(v)

    def value(self, v: JSONValue) -> JSONValue:
        """A redacted copy of a JSON value (dicts and lists are rebuilt, never mutated).

        Strings go through `text`; a dict key that looks secret
        (`SECRET_NAME_RE`: "password", "api_key", "Authorization") has its
        string value, or the strings of its list value, replaced entirely;
        dict values under such keys are searched like any other. Keys are
        redacted like text too. Other values are returned as they are.
        """
        if isinstance(v, str):
            return self.text(v)
        if isinstance(v, dict):
            out: dict[str, JSONValue] = {}
            for k, x in v.items():
                key, secret = self._key(k)
                if secret and isinstance(x, str | list):
                    out[key] = self._secret_leaf(key, x)
                else:
                    out[key] = self.value(x)
            return out
        if isinstance(v, list):
            return [self.value(x) for x in v]
        return v


_default: Redactor | None = None
_default_fp: tuple[int, tuple[str | None, ...]] = (-1, ())
_default_names: tuple[str, ...] = ()


def _env_fingerprint(names: Iterable[str]) -> tuple[int, tuple[str | None, ...]]:
    env = os.environ
    return len(env), tuple(env.get(n) for n in names)


def default_redactor() -> Redactor:
    """A cached `Redactor` over `os.environ`.

    It is rebuilt when the number of environment variables changes or the
    value of a secret-named one does. That check costs one or two
    microseconds; it misses one case: between two calls, one variable removed and a new
    secret-named one added. Build a `Redactor()` yourself after such surgery.
    """
    global _default, _default_fp, _default_names
    if _default is not None and _env_fingerprint(_default_names) == _default_fp:
        return _default
    env = dict(os.environ)
    names = tuple(sorted(n for n in env if _is_secret_name(n)))
    _default = Redactor(env)
    _default_names = names
    _default_fp = _env_fingerprint(names)
    return _default


def redact_text(s: str) -> str:
    """`default_redactor().text(s)`."""
    return default_redactor().text(s)


def redact_value(v: JSONValue) -> JSONValue:
    """`default_redactor().value(v)`."""
    return default_redactor().value(v)
