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

import os
import re
from collections.abc import Iterable, Mapping
from typing import TypeAlias

from git_agentckpt.redact_rules import (
    _KIND_UNSAFE_RE,
    _MARKER,
    _MARKER_FULL_RE,
    _MARKER_RE,
    _MIN_VALUE_LEN,
    _NAME_CHARS,
    _PEM,
    _PREPASS_NO_VALUES_RE,
    _RULE_HEADS,
    SECRET_NAME_RE,
    _rules,
)

__all__ = [
    "DEFAULT_SECRET_PATHS",
    "SECRET_NAME_RE",
    "JSONValue",
    "Redactor",
    "default_redactor",
    "precompile",
    "redact_text",
    "redact_value",
]

JSONValue: TypeAlias = bool | int | float | str | list["JSONValue"] | dict[str, "JSONValue"] | None

#: gitignore-style globs whose content never reaches a snapshot: an untracked
#: match is left out (private excludes file), a tracked one keeps the blob of
#: the user's HEAD (`git/secret_files.py`). Patterns without a slash match at
#: any depth; `!pattern` re-includes (e.g. `!.env.example` to snapshot a template).
DEFAULT_SECRET_PATHS: tuple[str, ...] = (
    ".env",  # dotenv files: API keys, database passwords
    ".env.*",  # .env.local, .env.production, ... (a tracked .env.example keeps HEAD's blob)
    ".env-*",  # .env-prod, .env-staging
    "*.env",  # prod.env, docker.env, secrets.env: env files named by their use
    ".envrc",  # direnv: exports API keys into the shell
    ".envrc.*",  # .envrc.local, .envrc.private
    ".dev.vars",  # Cloudflare Workers (wrangler): local secrets
    "*.pem",  # PEM keys and certificates with their keys
    "*.key",  # TLS / SSH / signing private keys
    "id_rsa",  # SSH private keys (the .pub halves are excluded too: harmless)
    "id_rsa.*",
    "id_dsa",
    "id_dsa.*",
    "id_ecdsa*",
    "id_ed25519*",
    "*.ppk",  # PuTTY private keys
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
    ".s3cfg",  # s3cmd: access and secret keys
    ".boto",  # boto / gsutil: cloud storage keys
    ".terraformrc",  # Terraform CLI: registry tokens (`terraform.rc` on Windows)
    "terraform.rc",
    "**/.config/gh/hosts.yml",  # GitHub CLI: OAuth tokens
    "**/.cargo/credentials.toml",  # crates.io tokens (`credentials` before Cargo 1.46)
    "**/.cargo/credentials",
    "**/.gem/credentials",  # RubyGems API keys
    "**/.aws/credentials",  # AWS access keys
    "**/.kube/config",  # Kubernetes cluster credentials and tokens
    "application_default_credentials.json",  # gcloud application-default login
    "**/.docker/config.json",  # registry auth tokens
    "credentials.json",  # Google OAuth client / service credentials
    "service-account*.json",  # Google Cloud service account keys
    "*.tfstate",  # Terraform state: holds every secret it manages
    "*.tfstate.backup",
    "*.tfvars",  # Terraform variables: provider keys, passwords
    "*.tfvars.json",
    "secrets.json",  # conventional secret stores (not secrets.py: source code)
    "secrets.yaml",
    "secrets.yml",
    "secrets.toml",
    "secret.json",
    "secret.yaml",
    "secret.yml",
    "secret.toml",
)


_CACHE_MAX = 4096
_HEX_ONLY = re.compile(r"[0-9a-f]*\Z")
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
        """`s` with every secret replaced by a `[REDACTED:<kind>]` marker.

        Redacting can make another rule match (a quoted value whose closing quote
        was escaped ends at a marker on the next pass), so a text that changed is
        redacted again until it does not: redacting twice gives the same text."""
        for _ in range(4):
            out = self._text_once(s)
            if out == s:
                break
            s = out
        return s

    def _text_once(self, s: str) -> str:
        s = self._prepass.sub(self._prepass_sub, s)
        # Every rule head holds a character that is no lower-case hex digit, so object
        # ids and digests (event links) skip the head scan, which costs ~0.13 µs a character.
        if _HEX_ONLY.match(s) or _RULE_HEADS.search(s) is None:
            return s  # no rule can match: skip (and never compile) them
        return _rules()[0].sub(self._rule_sub, s)

    def findings(self, s: str) -> list[tuple[str, int]]:
        """(rule kind, offset) of each secret in `s`, left as it is: what `text` would
        replace, for a scan that names what it found (the pre-push hook)."""
        out: list[tuple[str, int]] = []
        for m in self._prepass.finditer(s):
            if not _MARKER_FULL_RE.match(m.group()):
                out.append((self._known.get(m.group(), "private-key"), m.start()))
        # the head prefilter pays off on short strings; on a long text it costs as much as
        # the rules themselves (its case-insensitive words are tried at every position)
        if len(s) < 4096 and (_HEX_ONLY.match(s) or _RULE_HEADS.search(s) is None):
            return out
        pattern, table = _rules()
        for m in pattern.finditer(s):
            if m.lastgroup is None:  # an existing marker
                continue
            kind = table[m.lastgroup][0]
            if kind == "assign":
                kind = "assign:" + _kind_part(_name_before(s, m.start()))
            out.append((kind, m.start()))
        return sorted(out, key=lambda f: f[1])

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


def precompile() -> None:
    """Compile the rule regex now (the warm server does, so its calls never pay)."""
    _rules()


def redact_text(s: str) -> str:
    """`default_redactor().text(s)`."""
    return default_redactor().text(s)


def redact_value(v: JSONValue) -> JSONValue:
    """`default_redactor().value(v)`."""
    return default_redactor().value(v)
