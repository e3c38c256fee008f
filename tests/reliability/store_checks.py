"""Checks on a repository's store with plain git, shared by the reliability tests.

A test's own assumptions about the tool stay out of these: what is read here is
read with `git`, the way a person or another tool would look at the repository.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from conftest import git
from helpers import BIN_DIR

import git_agentckpt
from git_agentckpt.crashpoint import ENV

# -- running the real command ---------------------------------------------------------------


def run_ckpt(
    cwd: Path, argv: tuple[str, ...], stdin: str | None = None, crash: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PATH"] = BIN_DIR + os.pathsep + env.get("PATH", "")
    if crash:
        env[ENV] = crash
    return subprocess.run(
        ["git", "ckpt", *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        input=stdin,
        timeout=300,
    )


def killed(proc: subprocess.CompletedProcess[str]) -> bool:
    """git reports a dashed command that died of a signal as 128 + signal, and says so."""
    return proc.returncode == 137 and "died of signal 9" in proc.stderr


# -- reading the store with plain git -------------------------------------------------------


def tasks_of(repo: Path) -> list[str]:
    out = git(repo, "for-each-ref", "--format=%(refname)", "refs/agent/checkpoints/")
    return [r[len("refs/agent/checkpoints/") :] for r in out.splitlines()]


def logged_events(repo: Path, task: str) -> list[dict[str, object]]:
    """Every event line of every commit reachable from the task's log (plain git)."""
    ref = f"refs/agent/events/{task}"
    if not git(repo, "for-each-ref", ref):
        return []
    out = git(repo, "log", "--format=%B", ref)
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def check_chain_complete(repo: Path, task: str) -> list[str]:
    """Every checkpoint of the task's chain is complete; the chain, newest first."""
    ref = f"refs/agent/checkpoints/{task}"
    chain = git(repo, "rev-list", "--first-parent", ref).splitlines()
    noted = {
        line.split()[1] for line in git(repo, "notes", "--ref=agent/state", "list").splitlines()
    }
    prepared = {
        e["links"]["checkpoint"]  # type: ignore[index]
        for e in logged_events(repo, task)
        if e["type"] == "checkpoint.prepare"
    }
    checkpoints = []
    for commit in chain:
        msg = git(repo, "log", "-1", "--format=%B", commit)
        if "Checkpoint-Id: " not in msg:
            break  # the task's baseline (a user commit) below its first checkpoint
        checkpoints.append(commit)
        assert f"Task: {task}\n" in msg + "\n", f"{commit} is not a checkpoint of {task}"
        assert commit in noted, f"checkpoint {commit} of {task} has no state note"
        assert commit in prepared, f"checkpoint {commit} of {task} has no checkpoint.prepare"
        git(repo, "cat-file", "-e", f"{commit}^{{tree}}")
    assert checkpoints, f"{ref} points at no checkpoint"
    tip_note = json.loads(git(repo, "notes", "--ref=agent/state", "show", checkpoints[0]))
    assert tip_note["v"] == 1 and tip_note["task"] == task
    return checkpoints


def check_fsck(repo: Path) -> None:
    fsck = subprocess.run(
        ["git", "fsck", "--no-dangling", "--no-progress"], cwd=repo, capture_output=True, text=True
    )
    assert fsck.returncode == 0, fsck.stderr + fsck.stdout
    assert "error" not in fsck.stderr.lower() and "missing" not in fsck.stdout.lower()


@dataclass
class Written:
    """What a repository holds: event ids and checkpoints, per task."""

    events: dict[str, set[str]] = field(default_factory=dict)
    checkpoints: dict[str, set[str]] = field(default_factory=dict)


def check_store(repo: Path) -> Written:
    """The invariants that hold in any repository at any time: complete chains, fsck."""
    check_fsck(repo)
    seen = Written()
    tasks = set(tasks_of(repo))
    out = git(repo, "for-each-ref", "--format=%(refname)", "refs/agent/events/")
    tasks |= {r[len("refs/agent/events/") :] for r in out.splitlines()}
    for task in sorted(tasks):
        if git(repo, "for-each-ref", f"refs/agent/checkpoints/{task}"):
            seen.checkpoints[task] = set(check_chain_complete(repo, task))
        ids = [str(e["id"]) for e in logged_events(repo, task)]
        seen.events[task] = set(ids)
    if git(repo, "rev-parse", "--is-bare-repository") == "false":
        ck = git_agentckpt.open(str(repo))  # and the tool itself still reads all of it
        ck.checkpoints()
        for task in tasks:
            ck.events(task)
    return seen


def check_kept(before: Written, after: Written) -> None:
    for task, ids in before.events.items():
        lost = ids - after.events.get(task, set())
        assert not lost, f"{len(lost)} acknowledged event(s) of {task} lost"
    for task, commits in before.checkpoints.items():
        lost = commits - after.checkpoints.get(task, set())
        assert not lost, f"acknowledged checkpoint(s) of {task} lost: {sorted(lost)}"
