"""Checkpoints: full and light snapshots, trailers, parents, notes, task resolution."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import git
from helpers import ckpt, ckpt_json, write


def start(repo: Path, task: str = "exp") -> dict[str, Any]:
    """`task start TASK`: its baseline checkpoint (a checkpoint needs a task)."""
    made: dict[str, Any] = ckpt_json(repo, "task", "start", task, "--goal", "g")
    return made


def test_full_checkpoint_snapshots_tracked_and_untracked_not_ignored(repo: Path) -> None:
    write(repo / "src" / "app.py", "print('changed')\n")
    write(repo / "notes.txt", "untracked\n")
    write(repo / "run.log", "ignored\n")
    start(repo)
    ck = ckpt_json(repo, "create", "-t", "exp", "-m", "first")
    tree = ck["tree"]
    files = git(repo, "ls-tree", "-r", "--name-only", tree).splitlines()
    assert "notes.txt" in files
    assert "src/app.py" in files
    assert "run.log" not in files
    assert git(repo, "cat-file", "-p", f"{tree}:src/app.py") == "print('changed')"
    assert git(repo, "rev-parse", "refs/agent/checkpoints/exp") == ck["commit"]


def test_commit_message_parents_and_trailers(repo: Path) -> None:
    head = git(repo, "rev-parse", "HEAD")
    base = start(repo)
    assert git(repo, "rev-list", "--parents", "-n1", str(base["commit"])).split()[1:] == [head]
    first = ckpt_json(repo, "create", "-t", "exp", "-m", "before run 3", "--trigger", "manual")
    msg = git(repo, "log", "-1", "--format=%B", first["commit"])
    assert msg.splitlines()[0] == "checkpoint 2 of exp: before run 3"
    for key in (
        "Checkpoint-Id",
        "Task: exp",
        "Kind: full",
        "Trigger: manual",
        "Step: none",
        f"Baseline: {head}",
    ):
        assert key in msg
    assert git(repo, "rev-parse", f"{first['commit']}^1") == base["commit"]
    second = ckpt_json(repo, "create", "-t", "exp", "--light")
    parents = git(repo, "rev-list", "--parents", "-n1", second["commit"]).split()[1:]
    assert parents == [first["commit"]]
    assert second["tree"] == first["tree"]
    assert second["kind"] == "light"
    # the user commits: the next checkpoint links their HEAD as a second parent
    write(repo / "README.md", "new\n")
    git(repo, "commit", "-qam", "user work")
    new_head = git(repo, "rev-parse", "HEAD")
    third = ckpt_json(repo, "create", "-t", "exp")
    parents = git(repo, "rev-list", "--parents", "-n1", third["commit"]).split()[1:]
    assert parents == [second["commit"], new_head]
    assert third["baseline"] == head
    chain = git(repo, "log", "--first-parent", "--format=%s", "refs/agent/checkpoints/exp")
    assert chain.splitlines()[:4] == [
        "checkpoint 4 of exp",
        "checkpoint 3 of exp",
        "checkpoint 2 of exp: before run 3",
        "checkpoint 1 of exp: task start",
    ]


def test_create_prints_id_and_writes_state_note_and_events(repo: Path) -> None:
    start(repo)
    out = ckpt(repo, "create", "-t", "exp").stdout.strip()
    assert len(out) == 26
    shown = ckpt_json(repo, "show", out)
    commit = shown["checkpoint"]["commit"]
    note = json.loads(git(repo, "notes", "--ref=agent/state", "show", commit))
    assert note["v"] == 1 and note["task"] == "exp"
    assert note["summary"]["authoritative"] is False
    assert "git" in note["env"]["tools"]
    types = [
        json.loads(line)["type"] for line in ckpt(repo, "log", "exp", "--json").stdout.splitlines()
    ]
    assert types[-2:] == ["checkpoint.prepare", "checkpoint.commit"]
    # one event commit holds both (the checkpoint is one transaction)
    subjects = git(repo, "log", "--format=%s", "refs/agent/events/exp").splitlines()
    assert subjects[0].startswith("#") and "checkpoint.commit" in subjects[0]
    assert "checkpoint.prepare" in subjects[0]


def test_unchanged_tree_reuses_objects(repo: Path) -> None:
    start(repo)
    a = ckpt_json(repo, "create", "-t", "exp")
    b = ckpt_json(repo, "create", "-t", "exp")
    assert a["tree"] == b["tree"]


@pytest.mark.parametrize("task", ["notes", "locks/notes"])
def test_a_task_named_like_a_lock_of_the_repository_is_checkpointed(repo: Path, task: str) -> None:
    """Each task's lock file is named after the task: the repository's own lock on the
    notes refs must never be one of them (a task called "notes" waited on itself)."""
    start(repo, task)
    ck = ckpt_json(repo, "create", "-t", task, "-m", "second")
    assert ck["task"] == task and ck["number"] == 2, ck


def test_a_checkpoint_of_a_task_nobody_started_is_refused(repo: Path) -> None:
    """A typo is never a new task (issue 25, item 4): `create -t TYPO` used to start one,
    which could not be deleted, was pushed, and made `create` without `-t` ambiguous."""
    none = ckpt(repo, "create", "-t", "exp", ok=False)
    assert none.exit_code == 3
    assert "no task 'exp'" in none.stderr and "git ckpt task start exp" in none.stderr
    start(repo, "ablation")
    typo = ckpt(repo, "create", "-t", "ablaton", ok=False)
    assert typo.exit_code == 3 and "did you mean 'ablation'?" in typo.stderr
    assert git(repo, "for-each-ref", "--format=%(refname)", "refs/agent/checkpoints/") == (
        "refs/agent/checkpoints/ablation"
    )
    assert ckpt_json(repo, "create")["task"] == "ablation"  # still the single active task


def test_secret_files_never_snapshotted(repo: Path) -> None:
    write(repo / ".env", "API_TOKEN=abc\n")
    write(repo / "keys" / "server.pem", "-----BEGIN PRIVATE KEY-----\n")
    ck = start(repo)
    files = git(repo, "ls-tree", "-r", "--name-only", ck["tree"]).splitlines()
    assert ".env" not in files and "keys/server.pem" not in files


def test_unborn_head_repository(tmp_path: Path) -> None:
    root = tmp_path / "empty"
    root.mkdir()
    git(root, "init", "-q")
    write(root / "a.txt", "a\n")
    ck = start(root, "t1")
    assert ck["baseline"] is None
    assert git(root, "rev-list", "--parents", "-n1", ck["commit"]).split()[1:] == []
    assert "a.txt" in git(root, "ls-tree", "-r", "--name-only", ck["tree"])


def test_task_resolution(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ckpt(repo, "task", "start", "alpha", "--goal", "g")
    ck = ckpt_json(repo, "create")  # the single active task
    assert ck["task"] == "alpha"
    ckpt(repo, "task", "start", "beta", "--goal", "g")
    result = ckpt(repo, "create", ok=False)
    assert result.exit_code == 2
    assert "2 active tasks" in result.stderr and "-t TASK" in result.stderr
    monkeypatch.setenv("GIT_CKPT_TASK", "beta")
    assert ckpt_json(repo, "create")["task"] == "beta"


def test_nested_repository_is_a_gitlink(repo: Path) -> None:
    nested = repo / "vendor" / "lib"
    nested.mkdir(parents=True)
    git(nested, "init", "-q")
    write(nested / "x.txt", "x\n")
    git(nested, "add", "-A")
    git(nested, "commit", "-qm", "n")
    ck = start(repo)
    entry = git(repo, "ls-tree", ck["tree"], "vendor/lib")
    assert entry.startswith("160000 commit")


def test_private_index_keeps_assume_unchanged_files_rehashed(repo: Path) -> None:
    git(repo, "update-index", "--assume-unchanged", "README.md")
    write(repo / "README.md", "edited behind assume-unchanged\n")
    ck = start(repo)
    assert (
        git(repo, "cat-file", "-p", f"{ck['tree']}:README.md") == "edited behind assume-unchanged"
    )


def test_linked_worktree_has_its_own_private_index(repo: Path, tmp_path: Path) -> None:
    other = tmp_path / "wt"
    git(repo, "worktree", "add", "-q", "-b", "side", str(other))
    write(other / "only-here.txt", "wt\n")
    made = start(other, "wt-task")
    files = git(repo, "ls-tree", "-r", "--name-only", made["tree"]).splitlines()
    assert "only-here.txt" in files
    # refs are shared with the main worktree; runtime files are per worktree
    assert git(repo, "rev-parse", "refs/agent/checkpoints/wt-task") == made["commit"]
    gitdir = Path(git(other, "rev-parse", "--absolute-git-dir"))
    assert (gitdir / "agent" / "index").exists()
    assert not (repo / ".git" / "agent" / "index").exists()


def test_nested_repository_without_a_commit_is_left_out(repo: Path) -> None:
    (repo / "scratch").mkdir()
    git(repo / "scratch", "init", "-q")
    write(repo / "scratch" / "notes.txt", "n\n")
    write(repo / "kept.txt", "k\n")
    made = start(repo, "t")
    files = git(repo, "ls-tree", "-r", "--name-only", made["tree"]).splitlines()
    assert "kept.txt" in files
    assert not [f for f in files if f.startswith("scratch")]


def test_private_index_naming_a_pruned_blob_is_rebuilt(repo: Path) -> None:
    """`git gc` may prune a blob that only the private index knew (a `check` snapshot)."""
    from git_agentckpt.git.repo import GitRepo
    from git_agentckpt.git.worktree import snapshot_tree

    write(repo / "draft.txt", "only ever seen by a check\n")
    g = GitRepo.discover(str(repo))
    snapshot_tree(g, ())  # the blob is written; no checkpoint keeps it
    blob = git(repo, "hash-object", "draft.txt")
    (repo / ".git" / "objects" / blob[:2] / blob[2:]).unlink()  # what a prune does
    made = start(repo, "t")
    assert git(repo, "cat-file", "-p", f"{made['tree']}:draft.txt") == "only ever seen by a check"
    assert subprocess.run(["git", "fsck", "--no-dangling"], cwd=repo).returncode == 0
