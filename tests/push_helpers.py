"""Helpers of the push tests (tests/test_server_hooks.py, tests/test_pre_push.py)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from helpers import BIN_DIR, ckpt


def run_git(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Real git with the installed `git-ckpt` on PATH (the hooks call it), not raising."""
    env = dict(os.environ, PATH=BIN_DIR + os.pathsep + os.environ.get("PATH", ""))
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True)


def tampered_task(repo: Path, task: str = "u") -> None:
    """Task `task` whose event log had one event's content edited (a rewrite that keeps
    every checkpoint.prepare: the write-ahead rules alone would let it pass)."""
    from verify_attacks import event_lines, find, rebuild_log

    ckpt(repo, "task", "start", task, "--goal", "tampered")
    for n in range(2):
        ckpt(repo, "event", task, "--type", "tool.call", "--json", json.dumps({"n": n}))
    ckpt(repo, "create", "-t", task, "-m", "after the calls")

    def edit(items: list[tuple[str, str]]) -> list[tuple[str, str]]:
        i = find(items, lambda e: e.get("type") == "tool.call")
        tree, message = items[i]
        (event,) = event_lines(message)
        edited = json.dumps(dict(event, data={"n": 42}), separators=(",", ":"))
        items[i] = (tree, message.replace(json.dumps(event, separators=(",", ":")), edited))
        assert items[i][1] != message
        return items

    rebuild_log(repo, f"refs/agent/events/{task}", edit)
