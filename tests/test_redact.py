"""Secret redaction (git_agentckpt.redact): shapes, known values, JSON keys, properties.

Fake secrets are assembled from pieces so that this file never holds a
string that looks like a live credential to a scanner.
"""

from __future__ import annotations

import copy
import os
import subprocess
import uuid
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from git_agentckpt.redact import (
    DEFAULT_SECRET_PATHS,
    SECRET_NAME_RE,
    JSONValue,
    Redactor,
    default_redactor,
    redact_text,
    redact_value,
)

# --------------------------------------------------------------------------
# Fake secrets, one or more per rule: (kind, secret, distinctive core)
# --------------------------------------------------------------------------

AWS_KEY = "AK" + "IA" + "IOSFODNN7" + "EXAMPLE"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCY" + "EXAMPLEKEY"
GH_CLASSIC = "gh" + "p_" + "x9Y8w7V6" * 4 + "u5T4"
GH_OAUTH = "gh" + "o_" + "Q1w2E3r4" * 4 + "t5Y6"
GH_SERVER = "gh" + "s_" + "Z0z0Z0z0" * 4 + "k9K9"
GH_FINE = "github" + "_pat_" + "11ABCDEFG0" + "a1B2c3D4e5F6" + "_" + "g7H8i9J0k1" * 5 + "LmNoPqRsT"
ANTHROPIC = "sk-" + "ant-" + "api03-" + "Ab9_cD8-" * 11 + "AA"
OPENAI_PROJ = "sk-" + "proj-" + "Zx81_Yw72-" * 8
OPENAI_LEGACY = "sk-" + "T3Blbk" + "FJq9r8S7" * 5 + "p6"
OPENAI_SVC = "sk-" + "svcacct-" + "M3n4B5v6" * 6
SLACK_BOT = "xox" + "b-" + "1234567890" + "-" + "1234567890123" + "-" + "AbCdEfGh" * 3
SLACK_APP = "xa" + "pp-" + "1-" + "A0B1C2D3E4F" + "-" + "1234567890" + "-" + "f00d" * 8
SLACK_HOOK_PATH = "T" + "0A1B2C3D4" + "/B" + "5E6F7G8H9" + "/" + "wXyZ" * 6
SLACK_HOOK = "https://hooks.slack.com/" + "services/" + SLACK_HOOK_PATH
GOOGLE_KEY = "AI" + "za" + "Sy" + "A1b2C3d4" * 4 + "e"
GOOGLE_OAUTH = "ya" + "29." + "a0AfH6SM" + "bQ3r-Xy_" * 5
HF = "h" + "f_" + "aBcDeFgHiJ" * 3 + "kLmN"
NPM = "np" + "m_" + "Aa1Bb2Cc3D" * 3 + "d4Ee5F"
STRIPE = "sk" + "_live_" + "51HzQ2x" * 4
GITLAB = "gl" + "pat-" + "Xy1_Zw2-Vu3T" * 2
JWT = (
    "ey" + "JhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    ".ey" + "JzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ"
    ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
PEM_BODY = "MIIEowIBAAKCAQEA" + "q7Zr" * 16
PEM = (
    "-----BEGIN " + "RSA PRIVATE KEY-----\n" + PEM_BODY + "\n" + PEM_BODY[::-1] + "\n"
    "-----END RSA PRIVATE KEY-----"
)
PEM_OPENSSH = (
    "-----BEGIN " + "OPENSSH PRIVATE KEY-----\r\n" + PEM_BODY + "\r\n"
    "-----END OPENSSH PRIVATE KEY-----"
)

TOKENS: list[tuple[str, str]] = [
    ("aws-key", AWS_KEY),
    ("github-token", GH_CLASSIC),
    ("github-token", GH_OAUTH),
    ("github-token", GH_SERVER),
    ("github-token", GH_FINE),
    ("anthropic-key", ANTHROPIC),
    ("openai-key", OPENAI_PROJ),
    ("openai-key", OPENAI_LEGACY),
    ("openai-key", OPENAI_SVC),
    ("slack-token", SLACK_BOT),
    ("slack-token", SLACK_APP),
    ("google-api-key", GOOGLE_KEY),
    ("google-oauth", GOOGLE_OAUTH),
    ("huggingface-token", HF),
    ("npm-token", NPM),
    ("stripe-key", STRIPE),
    ("gitlab-token", GITLAB),
    ("jwt", JWT),
    ("private-key", PEM),
    ("private-key", PEM_OPENSSH),
]

OID = "9f2c1e0d4b7a6f5e3c2d1b0a9f8e7d6c5b4a3f2e"
OID256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
ULID = "01ARZ3NDEKTSV4RRFFQ69G5FAV"
UUID = "123e4567-e89b-12d3-a456-426614174000"


@pytest.fixture
def r() -> Redactor:
    """A redactor that knows no environment values: only shapes fire."""
    return Redactor(env={})


# --------------------------------------------------------------------------
# Shapes
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "secret"), TOKENS, ids=[f"{k}-{i}" for i, (k, _) in enumerate(TOKENS)]
)
def test_each_token_format_is_redacted_with_its_kind(r: Redactor, kind: str, secret: str) -> None:
    out = r.text(f"before {secret} after")
    assert out == f"before [REDACTED:{kind}] after"
    assert secret not in out


@pytest.mark.parametrize(("kind", "secret"), TOKENS[:-2])
def test_tokens_glued_to_text_are_redacted(r: Redactor, kind: str, secret: str) -> None:
    """A token with letters right before or after it (issue 26, item 13)."""
    out = r.text(f"id=tok{secret}end, x{secret}_y")
    assert secret not in out, out
    assert out.count(f"[REDACTED:{kind}]") == 2, out


@pytest.mark.parametrize(("kind", "secret"), TOKENS[:-2])
def test_tokens_inside_json_and_shell_are_redacted(r: Redactor, kind: str, secret: str) -> None:
    out = r.text(f'{{"note": "{secret}", "cmd": "curl -d x={secret[:4]} /{secret}/"}}')
    assert secret not in out
    assert out.count(f"[REDACTED:{kind}]") == 2


def test_aws_secret_access_key_next_to_its_name(r: Redactor) -> None:
    for text in (
        f"aws_secret_access_key = {AWS_SECRET}",
        f"AWS_SECRET_ACCESS_KEY={AWS_SECRET}",
        f'"SecretAccessKey": "{AWS_SECRET}"',
        f"aws_secret_access_key: '{AWS_SECRET}'",
    ):
        out = r.text(text)
        assert AWS_SECRET not in out, text
        assert "[REDACTED:aws-secret-key]" in out, text
    # The same 40 characters with no name beside them are not a recognisable secret.
    assert r.text(f"blob {AWS_SECRET}") == f"blob {AWS_SECRET}"


def test_pem_block_unterminated_runs_to_the_end(r: Redactor) -> None:
    text = "key follows:\n-----BEGIN " + "EC PRIVATE KEY-----\n" + PEM_BODY + "\nmore\n"
    assert r.text(text) == "key follows:\n[REDACTED:private-key]"


def test_pem_block_keeps_text_after_end_and_other_pem(r: Redactor) -> None:
    cert = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----"
    out = r.text(f"{cert}\n{PEM}\ntail")
    assert out == f"{cert}\n[REDACTED:private-key]\ntail"
    pgp = (
        "-----BEGIN PGP " + "PRIVATE KEY BLOCK-----\n\nlQOYBF\n-----END PGP PRIVATE KEY BLOCK-----"
    )
    assert r.text(pgp) == "[REDACTED:private-key]"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Authorization: Bearer " + "abc.def-123", "Authorization: [REDACTED:authorization]"),
        (
            "GET / HTTP/1.1\r\nHost: x\r\nauthorization: Basic dXNlcjpwYXNz\r\nAccept: */*",
            "GET / HTTP/1.1\r\nHost: x\r\nauthorization: [REDACTED:authorization]\r\nAccept: */*",
        ),
        (
            "curl -H 'Authorization: token " + "s3cr3tvalue' https://api.example.com/x",
            "curl -H 'Authorization: [REDACTED:authorization]' https://api.example.com/x",
        ),
        (
            '{"Authorization": "Bearer ' + 'opaque-token-1", "Accept": "json"}',
            '{"Authorization": "[REDACTED:authorization]", "Accept": "json"}',
        ),
        (
            "{'authorization': 'Negotiate " + "YIIGhgYJKoZIhvcS'}",
            "{'authorization': '[REDACTED:authorization]'}",
        ),
        (
            "Proxy-Authorization: Basic " + "cHJveHk6cGFzcw==",
            "Proxy-Authorization: [REDACTED:authorization]",
        ),
        (
            '  Authorization: Digest username="ann", realm="r", response="6629fae4"',
            "  Authorization: [REDACTED:authorization]",
        ),
        (
            "x Authorization: AWS4-HMAC-SHA256 Credential=" + AWS_KEY + "/20130524/us-east-1/s3,"
            " SignedHeaders=host;range, Signature=fe5f80f77d5fa3beca038a248ff027d0445342fe",
            "x Authorization: [REDACTED:authorization]",
        ),
        ("use Bearer " + "a1b2c3d4e5f6 for calls", "use Bearer [REDACTED:bearer] for calls"),
        ("bearer " + JWT, "bearer [REDACTED:bearer]"),
    ],
)
def test_authorization_credentials_go_header_name_stays(
    r: Redactor, text: str, expected: str
) -> None:
    assert r.text(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "git clone https://ann:" + "hunter2@github.com/o/r.git",
            "git clone https://[REDACTED:url-userinfo]@github.com/o/r.git",
        ),
        (
            "https://" + GH_CLASSIC + "@github.com/o/r",
            "https://[REDACTED:url-userinfo]@github.com/o/r",
        ),
        (
            "DATABASE_URL=postgres://app:" + "pw%40x1@db:5432/app",
            "DATABASE_URL=postgres://[REDACTED:url-userinfo]@db:5432/app",
        ),
        ("redis://:" + "s3cret@cache:6379/0", "redis://[REDACTED:url-userinfo]@cache:6379/0"),
        ("git+ssh://deploy:" + "k3y@h/x", "git+ssh://[REDACTED:url-userinfo]@h/x"),
        (SLACK_HOOK, "https://hooks.slack.com/services/[REDACTED:slack-webhook]"),
    ],
)
def test_url_credentials_are_redacted_host_kept(r: Redactor, text: str, expected: str) -> None:
    assert r.text(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "export DB_PASSWORD=" + "hunter2hunter2",
            "export DB_PASSWORD=[REDACTED:assign:DB_PASSWORD]",
        ),
        (
            'client_secret = "' + 'correcthorse"',
            'client_secret = "[REDACTED:assign:client_secret]"',
        ),
        ("mysql --password=" + "p4ssw0rd!x", "mysql --password=[REDACTED:assign:--password]"),
        (
            "https://x.test/cb?access_token=" + "abcd1234efgh&page=2",
            "https://x.test/cb?access_token=[REDACTED:assign:access_token]&page=2",
        ),
        ('{"apiKey": "' + 'Q9x8W7v6U5"}', '{"apiKey": "[REDACTED:assign:apiKey]"}'),
        # upper-case names ending in _KEY (issue 26, item 13)
        ("OPENAI_KEY=" + "Zx81Yw72Vu63", "OPENAI_KEY=[REDACTED:assign:OPENAI_KEY]"),
        (
            "export SENDGRID_KEY=" + "SG.aB3dE5fG7h.iJ9kL1mN3o",
            "export SENDGRID_KEY=[REDACTED:assign:SENDGRID_KEY]",
        ),
        ('MAILGUN_KEY: "' + 'key-0a1b2c3d"', 'MAILGUN_KEY: "[REDACTED:assign:MAILGUN_KEY]"'),
        ("sort_key=" + "created_at_2024", "sort_key=created_at_2024"),
    ],
)
def test_values_assigned_to_secret_names_are_redacted(
    r: Redactor, text: str, expected: str
) -> None:
    assert r.text(text) == expected


KEEP = [
    OID,
    OID256,
    f"commit {OID}\ntree {OID256}\nparent {OID}",
    f"sha256:{OID256}",
    ULID,
    UUID,
    f"event {ULID} in task {UUID}",
    "1234567890123456789012345678901234567890",
    "3.14159 -42 1e10 0x1F",
    "src/git_agentckpt/redact.py:120: in text",
    "/home/ann/.cache/huggingface/hub/models--gpt2",
    "C:\\Users\\ann\\project\\main.py",
    "The token limit is 4096; keys, secrets and passwords are discussed below.",
    "Bearer authentication is configured in the gateway",
    "Authorization headers are stripped by the proxy",
    "sk-learn-compatible-estimator-wrapper",
    "task-ant-colony-optimisation-experiment-run",
    "password: str = Field(...)",
    "token = get_token()",
    "token = tokens[i][0]",
    "password = base64.b16encode(random_bytes[8:])",
    "max_tokens: 4096000, input_tokens=12345678",
    "TOKENIZERS_PARALLELISM=false",
    "ssh://git@github.com/org/repo.git",
    "git@github.com:org/repo.git",
    "mailto:ann@example.com",
    "ann@example.com wrote: see https://example.com/a?b=c#d",
    'eos_token: "<|endoftext|>", pad_token: "[PAD]"',
    "password=${DB_PASSWORD}",
    "hf_hub_download(repo_id='gpt2')",
    "AKIA is a prefix; AKIASHORT too",
    "01ARZ3ANPAQX7ZT4LM2PB9KD3W",  # a ULID holding an AWS prefix (ANPA) and 16 more
    "disk-usage-report-for-all-the-cluster-nodes",
    "shelf_lifeofthegoodsinthewarehouseisshortandsweet",
    "task_live_updates_for_the_dashboard_view",
    "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----",
]


@pytest.mark.parametrize("text", KEEP)
def test_ordinary_text_is_kept(r: Redactor, text: str) -> None:
    assert r.text(text) == text


def test_existing_markers_are_left_alone(r: Redactor) -> None:
    text = "[REDACTED:github-token] and Authorization: [REDACTED:authorization]"
    assert r.text(text) == text
    assert r.count() == 0


# --------------------------------------------------------------------------
# Known values from the environment
# --------------------------------------------------------------------------


def test_env_secret_values_are_redacted_by_name_non_secret_are_not() -> None:
    env = {
        "GITHUB_TOKEN": "plainvalue-0001",
        "MY_SERVICE_PASSWORD": "hunter2 with spaces",
        "DB_PASS": "abcdefgh",
        "SHORT_TOKEN": "abc1234",  # under 8 characters: too common to redact
        "HOME": "/home/ann",
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "TOKEN_URL": "https://auth.example.com/token",
        "SSH_AUTH_SOCK": "/tmp/ssh-XXXX/agent.1234",
        "PWD": "/home/ann/project",
    }
    r = Redactor(env=env)
    text = (
        "cwd /home/ann/project via /usr/local/bin:/usr/bin:/bin, "
        "sock /tmp/ssh-XXXX/agent.1234, url https://auth.example.com/token; "
        "got plainvalue-0001 and 'hunter2 with spaces' and abcdefgh, short abc1234"
    )
    out = r.text(text)
    assert out == (
        "cwd /home/ann/project via /usr/local/bin:/usr/bin:/bin, "
        "sock /tmp/ssh-XXXX/agent.1234, url https://auth.example.com/token; "
        "got [REDACTED:env:GITHUB_TOKEN] and '[REDACTED:env:MY_SERVICE_PASSWORD]' and "
        "[REDACTED:env:DB_PASS], short abc1234"
    )
    assert r.secret_names == ("env:DB_PASS", "env:GITHUB_TOKEN", "env:MY_SERVICE_PASSWORD")


def test_longest_known_value_wins() -> None:
    r = Redactor(env={"A_TOKEN": "abcdefgh", "B_TOKEN": "abcdefgh-longer"})
    assert r.text("x abcdefgh-longer y abcdefgh") == (
        "x [REDACTED:env:B_TOKEN] y [REDACTED:env:A_TOKEN]"
    )


def test_known_value_inside_a_shape_is_not_half_redacted() -> None:
    secret = "s3cr3t value with spaces"
    r = Redactor(env={"APP_SECRET": secret})
    out = r.text(f"password=x1{secret} and {secret}")
    assert "s3cr3t" not in out
    assert "spaces" not in out


def test_extra_values_are_redacted() -> None:
    r = Redactor(env={}, extra_values=["per-task-secret-42", "short"])
    assert r.text("a per-task-secret-42 b short") == "a [REDACTED:value] b short"


def test_env_defaults_to_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CKPT_TEST_API_KEY", "from-os-environ-1")
    assert Redactor().text("v=from-os-environ-1") == "v=[REDACTED:env:CKPT_TEST_API_KEY]"


def test_default_redactor_follows_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CKPT_TEST_TOKEN", "first-value-0001")
    assert redact_text("a first-value-0001") == "a [REDACTED:env:CKPT_TEST_TOKEN]"
    first = default_redactor()
    assert default_redactor() is first  # cached while nothing changes
    monkeypatch.setenv("CKPT_TEST_TOKEN", "second-value-0002")
    assert default_redactor() is not first
    assert redact_text("b second-value-0002 first-value-0001") == (
        "b [REDACTED:env:CKPT_TEST_TOKEN] first-value-0001"
    )
    monkeypatch.setenv("CKPT_TEST_OTHER_SECRET", "third-value-0003")
    assert redact_value({"x": "third-value-0003"}) == {"x": "[REDACTED:env:CKPT_TEST_OTHER_SECRET]"}
    monkeypatch.delenv("CKPT_TEST_TOKEN")
    assert redact_text("c second-value-0002") == "c second-value-0002"


# --------------------------------------------------------------------------
# Secret-looking names
# --------------------------------------------------------------------------

SECRET_NAMES = [
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "TOKEN",
    "token",
    "HF_TOKEN",
    "AWS_SESSION_TOKEN",
    "AWS_SECRET_ACCESS_KEY",
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "api_key",
    "apiKey",
    "APIKEY",
    "x-api-key",
    "ACCESS_KEY",
    "PRIVATE_KEY",
    "SESSION_KEY",
    "client_secret",
    "clientSecret",
    "password",
    "DB_PASSWORD",
    "MYSQL_PWD",
    "PGPASSWORD",
    "DB_PASSWD",
    "GITHUBTOKEN",
    "DB_PASS",
    "GPG_PASSPHRASE",
    "CREDENTIALS",
    "google_credential",
    "Authorization",
    "Proxy-Authorization",
    "AUTH",
    "auth_token",
    "accessToken",
    "refreshToken",
    "Cookie",
    "Set-Cookie",
    "GITHUB_PAT",
    "SECRET_KEY_BASE",
    "jwt",
    "OPENAI_KEY",
    "SENDGRID_KEY",
]

NOT_SECRET_NAMES = [
    "KEY",
    "key",
    "KEYBOARD",
    "MONKEY",
    "HOTKEY",
    "sort_key",
    "primary_key",
    "PATH",
    "HOME",
    "PWD",
    "OLDPWD",
    "TOKENIZERS_PARALLELISM",
    "max_tokens",
    "input_tokens",
    "token_count",
    "TOKEN_URL",
    "tokenUrl",
    "PASSWORD_FILE",
    "SSH_AUTH_SOCK",
    "auth_type",
    "AUTHOR",
    "GIT_AUTHOR_NAME",
    "author",
    "session",
    "session_id",
    "GIT_ASKPASS",
    "BYPASS",
    "passed",
    "tokenizer",
    "LANG",
    "id",
]


@pytest.mark.parametrize("name", SECRET_NAMES)
def test_secret_names_match(name: str) -> None:
    assert SECRET_NAME_RE.search(name), name


@pytest.mark.parametrize("name", NOT_SECRET_NAMES)
def test_ordinary_names_do_not_match(name: str) -> None:
    assert not SECRET_NAME_RE.search(name), name


# --------------------------------------------------------------------------
# JSON values
# --------------------------------------------------------------------------


def test_secret_json_keys_have_their_string_values_replaced(r: Redactor) -> None:
    value: JSONValue = {
        "api_key": "anything at all",
        "password": "hunter2",
        "Authorization": "Bearer abc",
        "tokens": ["one", 2, "three"],
        "GITHUB_TOKEN": ["abcdefgh", 7],
        "token": "",
        "max_tokens": 4096,
        "token_count": "12",
        "author": "Ann",
        "session": "s-1",
        "credentials": {"user": "ann", "type": "basic"},
        "auth": None,
    }
    assert r.value(value) == {
        "api_key": "[REDACTED:key:api_key]",
        "password": "[REDACTED:key:password]",
        "Authorization": "[REDACTED:key:Authorization]",
        "tokens": ["one", 2, "three"],
        "GITHUB_TOKEN": ["[REDACTED:key:GITHUB_TOKEN]", 7],
        "token": "",
        "max_tokens": 4096,
        "token_count": "12",
        "author": "Ann",
        "session": "s-1",
        "credentials": {"user": "ann", "type": "basic"},
        "auth": None,
    }


def test_nested_values_are_searched_and_input_is_not_mutated(r: Redactor) -> None:
    value: JSONValue = {
        "type": "tool.call",
        "input": {"argv": ["git", "push", f"https://{GH_CLASSIC}@github.com/o/r"], "n": 3},
        "output": [{"text": f"key {ANTHROPIC}"}, None, True, 1.5, [[f"x {JWT}"]]],
        "links": {"checkpoint": OID, "id": ULID, "uuid": UUID},
        f"weird {HF}": 1,
        "config": {"x-api-key": [GOOGLE_KEY]},
    }
    before = copy.deepcopy(value)
    out = r.value(value)
    assert value == before
    assert out == {
        "type": "tool.call",
        "input": {
            "argv": ["git", "push", "https://[REDACTED:url-userinfo]@github.com/o/r"],
            "n": 3,
        },
        "output": [
            {"text": "key [REDACTED:anthropic-key]"},
            None,
            True,
            1.5,
            [["x [REDACTED:jwt]"]],
        ],
        "links": {"checkpoint": OID, "id": ULID, "uuid": UUID},
        "weird [REDACTED:huggingface-token]": 1,
        "config": {"x-api-key": ["[REDACTED:key:x-api-key]"]},
    }


def test_scalars_pass_through(r: Redactor) -> None:
    for v in (None, True, False, 0, -7, 2.5):
        assert r.value(v) == v
        assert type(r.value(v)) is type(v)


def test_marker_kinds_are_sanitised_and_stable(r: Redactor) -> None:
    out = r.value({"my api key!": "v", "db password]": "w"})
    assert out == {
        "my api key!": "[REDACTED:key:my_api_key_]",
        "db password]": "[REDACTED:key:db_password_]",
    }
    assert r.value(out) == out


def test_count_tracks_redactions() -> None:
    r = Redactor(env={"X_TOKEN": "known-value-001"})
    assert r.count() == 0
    r.text(f"{GH_CLASSIC} known-value-001 {PEM}")
    assert r.count() == 3
    r.value({"password": "x", "plain": "nothing here"})
    assert r.count() == 4


# --------------------------------------------------------------------------
# Secret paths
# --------------------------------------------------------------------------

# Issue 26, item 13: secret files the defaults missed (one path of each shape; a nested
# copy where the pattern names a directory). tests/reliability/test_secret_paths.py pushes
# each one.
MISSED_SHAPES = [
    ".config/gh/hosts.yml",
    "home/dev/.config/gh/hosts.yml",
    ".cargo/credentials.toml",
    ".gem/credentials",
    ".s3cfg",
    ".boto",
    ".terraformrc",
    "keys/server.ppk",
    "deploy/prod.env",
    ".env-staging",
    ".envrc.local",
    "worker/.dev.vars",
    "config/secret.json",
]
SECRET_FILES = [
    ".env",
    "app/.env",
    ".env.local",
    ".env.production",
    "certs/server.pem",
    "tls/server.key",
    "id_rsa",
    ".ssh/id_rsa.pub",
    ".ssh/id_ed25519",
    "id_ecdsa",
    "store.p12",
    "cert.pfx",
    "release.keystore",
    ".netrc",
    ".pypirc",
    ".npmrc",
    ".aws/credentials",
    "home/.aws/credentials",
    ".docker/config.json",
    "credentials.json",
    "service-account-prod.json",
    "secrets.json",
    "config/secrets.yaml",
    ".git-credentials",
    "infra/terraform.tfstate",
    *MISSED_SHAPES,
]
SOURCE_FILES = [
    "main.py",
    "secrets.py",
    "src/secrets.ts",
    "key.py",
    "keys.go",
    "README.md",
    "config.json",
    "package.json",
    "pyproject.toml",
    "src/env.py",
    "environment.yml",
    "docs/credentials.md",
    "tests/test_tokens.py",
    "app/.aws-config.py",
    "src/dotenv.py",
    "docs/secret.md",
    "config/gh/hosts.yml",
    "environment.envs",
]


def test_default_secret_paths_as_git_excludes(tmp_path: Path) -> None:
    """The globs do what git makes of them (they become a core.excludesFile)."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    excludes = tmp_path / "excludes"
    excludes.write_text("".join(p + "\n" for p in DEFAULT_SECRET_PATHS))
    proc = subprocess.run(
        ["git", "-c", f"core.excludesFile={excludes}", "check-ignore", "--no-index", "--stdin"],
        cwd=tmp_path,
        input="\n".join(SECRET_FILES + SOURCE_FILES) + "\n",
        capture_output=True,
        text=True,
        check=False,
    )
    ignored = set(proc.stdout.splitlines())
    assert ignored == set(SECRET_FILES)


def test_default_secret_paths_are_plain_globs() -> None:
    assert len(set(DEFAULT_SECRET_PATHS)) == len(DEFAULT_SECRET_PATHS)
    for pattern in DEFAULT_SECRET_PATHS:
        assert pattern and pattern == pattern.strip()
        assert not pattern.startswith("!")
        assert "*.py" not in pattern


# --------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------

SNIPPETS = [s for _, s in TOKENS] + [
    SLACK_HOOK,
    "Authorization: ",
    "Authorization: Bearer ",
    '"Authorization": "',
    "Bearer ",
    "https://",
    "ssh://git@",
    "@host/",
    "password=",
    "token: '",
    "[REDACTED:",
    "[REDACTED:jwt]",
    "-----BEGIN RSA PRIVATE KEY-----\n",
    "-----END RSA PRIVATE KEY-----",
    "known-secret-1",
    OID,
    ULID,
]
FILLER = st.text(alphabet="abcXYZ019 _-.:=/@'\"\n\\[]", max_size=12)
TEXTS = st.lists(st.one_of(FILLER, st.sampled_from(SNIPPETS)), max_size=12).map("".join)
PROPERTY_REDACTOR = Redactor(env={"SOME_TOKEN": "known-secret-1"})


@settings(max_examples=400, deadline=None)
@given(TEXTS)
@example("token: 'password=0000000\\'")  # an escaped closing quote: a marker ends it next time
def test_text_redaction_is_idempotent(text: str) -> None:
    once = PROPERTY_REDACTOR.text(text)
    assert PROPERTY_REDACTOR.text(once) == once


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.sampled_from([s for _, s in TOKENS]), FILLER), max_size=8))
def test_secrets_between_blanks_never_survive(parts: list[str]) -> None:
    text = " ".join(parts)
    out = PROPERTY_REDACTOR.text(text)
    for _, secret in TOKENS:
        if secret in text:
            assert secret not in out
            assert secret[6:30] not in out  # no part of it either


JSON_VALUES: st.SearchStrategy[JSONValue] = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | TEXTS,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(["a", "password", "api_key", "note", "x"]) | TEXTS, children, max_size=4
        )
    ),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(JSON_VALUES)
def test_value_redaction_is_idempotent(value: JSONValue) -> None:
    once = PROPERTY_REDACTOR.value(value)
    assert PROPERTY_REDACTOR.value(once) == once


@given(st.text(alphabet="0123456789abcdef", min_size=40, max_size=40))
def test_random_sha1_oids_survive(oid: str) -> None:
    assert PROPERTY_REDACTOR.text(oid) == oid
    assert PROPERTY_REDACTOR.text(f"commit {oid} (HEAD)") == f"commit {oid} (HEAD)"


@given(st.text(alphabet="0123456789abcdefABCDEF", min_size=64, max_size=64))
def test_random_sha256_digests_survive(digest: str) -> None:
    assert PROPERTY_REDACTOR.text(digest) == digest
    assert PROPERTY_REDACTOR.text(f"sha256:{digest}") == f"sha256:{digest}"


@given(
    st.text(alphabet="01234567", min_size=1, max_size=1),
    st.text(alphabet="0123456789ABCDEFGHJKMNPQRSTVWXYZ", min_size=25, max_size=25),
)
def test_random_ulids_survive(head: str, rest: str) -> None:
    ulid = head + rest
    assert PROPERTY_REDACTOR.text(f"id={ulid}") == f"id={ulid}"


@given(st.uuids())
def test_random_uuids_survive(u: uuid.UUID) -> None:
    assert PROPERTY_REDACTOR.text(str(u)) == str(u)
    assert PROPERTY_REDACTOR.value({"id": str(u)}) == {"id": str(u)}


def test_os_environ_is_not_modified() -> None:
    before = dict(os.environ)
    Redactor()
    default_redactor()
    assert dict(os.environ) == before
