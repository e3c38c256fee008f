"""The install helper of the real-agent tests: where the cache is, and the one case in
which those tests are skipped (node or npm missing)."""

from __future__ import annotations

import os
from pathlib import Path

import agent_install
import pytest
from agent_install import CLAUDE, CODEX, cache_root, require


def test_the_cache_is_outside_the_sealed_home() -> None:
    sealed = Path(os.environ["HOME"])  # conftest.py's temporary HOME
    root = cache_root()
    assert sealed not in root.parents
    if agent_install.CACHE_OVERRIDE is None:
        assert root == agent_install.REAL_HOME / ".cache" / "git-agentckpt" / "agents"
    assert CLAUDE.dirname == "@anthropic-ai+claude-code@2.1.328"
    assert CODEX.dirname == "@openai+codex@0.169.0"


def test_skipped_with_the_reason_only_without_node_or_npm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # neither node nor npm here
    with pytest.raises(pytest.skip.Exception, match="node and npm not on PATH"):
        require(CODEX)
