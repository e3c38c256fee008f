"""Shared by the transcript import tests: the fixtures and a few helpers.

Fixtures (tests/fixtures/agents/): `claude_handwritten.jsonl` and
`codex_handwritten.jsonl` are hand-written in the documented shapes (../shared
agents.md, codex-rs `RolloutLine`); `@SECRET@` in them is replaced by a token made at
run time where a test needs a secret. `claude_recorded.jsonl`, `codex_recorded.jsonl`,
`claude_recorded_e2e.jsonl` and `codex_recorded_e2e.jsonl` (the last two with hooks =
`git ckpt hook claude-code|codex`, h13d's end-to-end tests) were recorded by h13d
from the real Claude Code 2.1.328 and Codex 0.169.0 against scripted model servers, and
are kept as they are (their /tmp paths are data).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from helpers import ckpt

import git_agentckpt
from git_agentckpt.model import Event, is_tool_only

FIXTURES = Path(__file__).parent / "fixtures" / "agents"
CLAUDE = FIXTURES / "claude_handwritten.jsonl"
CODEX = FIXTURES / "codex_handwritten.jsonl"
CLAUDE_SESSION = "6f1c2b9e-3a4d-4c5e-9f10-0a1b2c3d4e5f"
RECORDED_CLAUDE = FIXTURES / "claude_recorded.jsonl"
RECORDED_CODEX = FIXTURES / "codex_recorded.jsonl"
RECORDED_CLAUDE_E2E = FIXTURES / "claude_recorded_e2e.jsonl"
RECORDED_CODEX_E2E = FIXTURES / "codex_recorded_e2e.jsonl"
CODEX_SESSION = "019abcde-0123-7456-89ab-cdef01234567"


def token() -> str:
    """A GitHub-token-shaped secret, made here so no fixture holds one."""
    return "ghp_" + "".join("aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5"[i] for i in range(36))


def imported(repo: Path, task: str = "t") -> list[Event]:
    return [e for e in git_agentckpt.open(str(repo)).events(task) if not is_tool_only(e.type)]


def import_json(repo: Path, agent: str, path: Path, *args: str) -> dict[str, Any]:
    out = ckpt(repo, "import", agent, str(path), "-t", "t", "--json", *args)
    return dict(json.loads(out.stdout))


def copy(src: Path, dest: Path, secret: str = "@SECRET@", lines: int | None = None) -> Path:
    text = src.read_text().replace("@SECRET@", secret)
    if lines is not None:
        text = "".join(text.splitlines(keepends=True)[:lines])
    dest.write_text(text)
    return dest
