"""The reference-transaction hook guards agent refs for writers that are not git ckpt."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from conftest import git
from helpers import BIN_DIR, ckpt, ckpt_json, write

from git_agentckpt.hooks import SHIM

ROOT = Path(__file__).resolve().parent.parent


def run_git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PATH"] = BIN_DIR + os.pathsep + env.get("PATH", "")
    return subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True)


def test_shim_in_hooks_dir_is_the_packaged_one() -> None:
    assert (ROOT / "hooks" / "reference-transaction").read_text() == SHIM
    assert os.access(ROOT / "hooks" / "reference-transaction", os.X_OK)


def test_install_is_idempotent_chains_and_uninstalls(repo: Path) -> None:
    user_hook = repo / ".git" / "hooks" / "reference-transaction"
    user_hook.write_text('#!/bin/sh\necho "$1" >> "$(git rev-parse --git-dir)/user-hook-ran"\n')
    user_hook.chmod(0o755)
    out = ckpt(repo, "hooks", "install").stdout
    assert "kept your reference-transaction hook" in out
    ckpt(repo, "hooks", "install")  # again: no change, the user's hook is not lost
    assert (repo / ".git" / "hooks" / "reference-transaction.ckpt-user").exists()
    assert ckpt_json(repo, "hooks", "status")["reference-transaction"] == "installed"
    # the user's own commit still works and their hook still runs
    write(repo / "README.md", "more\n")
    assert run_git(repo, "commit", "-qam", "user commit").returncode == 0
    assert "prepared" in (repo / ".git" / "user-hook-ran").read_text()
    ckpt(repo, "hooks", "uninstall")
    assert "echo" in user_hook.read_text()
    assert not (repo / ".git" / "hooks" / "reference-transaction.ckpt-user").exists()


def test_refuses_with_core_hooks_path(repo: Path) -> None:
    git(repo, "config", "core.hooksPath", ".githooks")
    result = ckpt(repo, "hooks", "install", ok=False)
    assert result.exit_code == 2 and "core.hooksPath" in result.stderr
    assert "git config --unset core.hooksPath" in result.stderr


def test_guard_refuses_unprepared_and_backward_moves(repo: Path) -> None:
    ckpt(repo, "hooks", "install")
    ckpt(repo, "task", "start", "t", "--goal", "g")
    good = ckpt_json(repo, "create", "-t", "t")  # our own writes pass the same guard
    # a commit nobody prepared cannot become a checkpoint
    rogue = git(
        repo,
        "commit-tree",
        "-p",
        good["commit"],
        "-m",
        "checkpoint 9 of t\n\nCheckpoint-Id: X\nTask: t",
        "HEAD^{tree}",
    )
    moved = run_git(repo, "update-ref", "refs/agent/checkpoints/t", rogue)
    assert moved.returncode != 0 and "no checkpoint.prepare event" in moved.stderr
    assert git(repo, "rev-parse", "refs/agent/checkpoints/t") == good["commit"]
    # the event log only moves forward and is never deleted
    back = run_git(repo, "update-ref", "refs/agent/events/t", "refs/agent/events/t~1")
    assert back.returncode != 0 and "only move forward" in back.stderr
    gone = run_git(repo, "update-ref", "-d", "refs/notes/agent/state")
    assert gone.returncode != 0 and "never deleted" in gone.stderr
    # an administrator can rewrite on purpose
    env = dict(os.environ, GIT_CKPT_HOOK_BYPASS="1", PATH=BIN_DIR + os.pathsep + os.environ["PATH"])
    forced = subprocess.run(
        ["git", "update-ref", "refs/agent/events/t", "refs/agent/events/t~1"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
    )
    assert forced.returncode == 0


def test_push_to_a_guarded_bare_remote(repo: Path, tmp_path: Path) -> None:
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    ckpt(remote, "hooks", "install")
    ckpt(repo, "task", "start", "t", "--goal", "g")
    ckpt(repo, "create", "-t", "t")
    refspecs = [
        "HEAD:refs/heads/main",
        "refs/agent/*:refs/agent/*",
        "refs/notes/agent/*:refs/notes/agent/*",
    ]
    plain = run_git(repo, "push", str(remote), *refspecs)
    assert plain.returncode != 0 and "--atomic" in plain.stderr  # one ref per transaction
    pushed = run_git(repo, "push", "--atomic", str(remote), *refspecs)
    assert pushed.returncode == 0, pushed.stderr
    assert git(remote, "rev-parse", "refs/agent/checkpoints/t") == git(
        repo, "rev-parse", "refs/agent/checkpoints/t"
    )
    # a rogue checkpoint pushed without its prepare event is refused by the server
    rogue = git(
        repo,
        "commit-tree",
        "-p",
        "refs/agent/checkpoints/t",
        "-m",
        "c\n\nCheckpoint-Id: X\nTask: t",
        "HEAD^{tree}",
    )
    bad = run_git(repo, "push", "--atomic", str(remote), f"{rogue}:refs/agent/checkpoints/t")
    assert bad.returncode != 0 and "no checkpoint.prepare event" in bad.stderr
