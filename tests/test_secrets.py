"""Seeded fake secrets never reach the object store."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from helpers import ckpt, write

# built by concatenation so this file does not itself look like it holds secrets
GH = "ghp_" + "R8s1Xk2Qw9Lm4Np7Tz3Vb6Yc0Ju5Hd" + "Ae1FgH"
AWS = "AKIA" + "QX7ZT4LM2PB9KD3W"
ANT = "sk-ant-api03-" + "x7Yq2Lm9Pz4Kw8Rt3Vn6Bs1Hd5Jf0Gc" * 2
OPENAI = "sk-proj-" + "Ab3Cd5Ef7Gh9Ij1Kl3Mn5Op7Qr9St1Uv3Wx5Yz7"
HF = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYzAbCdEfGh"
ENV_SECRET = "s3cr3t-v4lu3-" + "that-is-long"


def all_objects(repo: Path) -> bytes:
    return subprocess.run(
        ["git", "cat-file", "--batch-all-objects", "--batch"],
        cwd=repo,
        capture_output=True,
        check=True,
    ).stdout


def test_seeded_secrets_never_stored(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_SERVICE_TOKEN", ENV_SECRET)
    write(repo / ".env", f"GITHUB_TOKEN={GH}\n")
    write(repo / "deploy" / "id_rsa", "-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n")
    ckpt(repo, "task", "start", "t", "--goal", f"use {AWS} carefully")
    payload = json.dumps(
        {
            "input": {
                "cmd": f"curl -H 'Authorization: Bearer {OPENAI}' https://bob:hunter2pass@x.org/"
            },
            "output": f"key {ANT} and {HF}",
            "note": f"env {ENV_SECRET}",
            "api_key": "plainvalue123",
        }
    )
    ckpt(repo, "event", "t", "--type", "tool.call", "--json", payload)
    ckpt(repo, "create", "-t", "t", "-m", f"token {GH}")
    blob = all_objects(repo)
    for secret in (
        GH,
        AWS,
        ANT,
        OPENAI,
        HF,
        ENV_SECRET,
        "hunter2pass",
        "plainvalue123",
        "BEGIN OPENSSH PRIVATE KEY",
    ):
        assert secret.encode() not in blob, f"{secret[:8]}… reached the object store"
    assert b"[REDACTED" in blob
